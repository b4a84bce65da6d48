package field

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The target disk: one partition (the guest's /dev/sda1, as the
// templates name it), ext4, from diskOffset on.
const (
	diskOffset = 1 << 20
	diskSize   = 96 << 20
)

// KexecMarker is on the second kernel's command line; its initrd prints
// the command line after it, and powers the machine off.
const KexecMarker = "FIELD-KEXEC"

// SecondKernel reports whether a console line holds the second kernel's
// marker line, with its command line. The marker can follow text that the
// first kernel's console was printing when the kexec came: that line's
// newline never got out.
func SecondKernel(text string) bool {
	_, after, found := strings.Cut(text, KexecMarker+" ")
	return found && strings.Contains(after, "field.kexec=second-kernel")
}

// MakeTargetDisk writes a raw disk image at path: an MBR with one Linux
// partition holding an ext4 file system, which holds kernel as
// /boot/vmlinuz, the next boot's initrd as /boot/initrd.img (nextInitrd,
// with the modules of nextBoot, an image's nextboot.cpio), a
// /boot/grub/grub.cfg whose first entry boots them with
// field.kexec=second-kernel on the command line, and
// /var/log and /var/lib/waitdaemon, for a result file. The initrd is
// also at NextBootInitrd(path), for a second boot of the machine.
func MakeTargetDisk(path, kernel, busybox, nextBoot string) error {
	dir, err := os.MkdirTemp(filepath.Dir(path), "disk-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	for _, d := range []string{"boot/grub", "var/log", "var/lib/waitdaemon"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	k, err := os.ReadFile(kernel)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "boot/vmlinuz"), k, 0o644); err != nil {
		return err
	}
	initrd, err := nextInitrd(busybox, nextBoot)
	if err != nil {
		return err
	}
	for _, p := range []string{filepath.Join(dir, "boot/initrd.img"), NextBootInitrd(path)} {
		if err := os.WriteFile(p, initrd, 0o644); err != nil {
			return err
		}
	}
	grub := "menuentry 'installed' {\n\tlinux /boot/vmlinuz console=ttyS0 quiet panic=0 field.kexec=second-kernel\n\tinitrd /boot/initrd.img\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "boot/grub/grub.cfg"), []byte(grub), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		return err
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-E", fmt.Sprintf("offset=%d", diskOffset), "-d", dir, path, fmt.Sprintf("%dk", diskSize>>10)).CombinedOutput(); err != nil {
		return fmt.Errorf("mkfs.ext4: %v\n%s", err, out)
	}
	// The partition table: one entry, type 0x83, from diskOffset.
	mbr := make([]byte, 512)
	e := mbr[446:462]
	e[4] = 0x83
	binary.LittleEndian.PutUint32(e[8:], diskOffset/512)
	binary.LittleEndian.PutUint32(e[12:], diskSize/512)
	mbr[510], mbr[511] = 0x55, 0xaa
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(mbr, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// NextBootInitrd is where MakeTargetDisk leaves the next boot's initrd
// for the disk at path.
func NextBootInitrd(path string) string { return path + ".initrd" }

// nextInitrd is the next boot's initrd, the second kernel's after a
// kexec or the machine's second boot after a reset: busybox, the modules
// of nextBoot (a cpio archive: modules/order names them in load order),
// and an /init that prints the command line after KexecMarker, loads the
// modules, mounts the target disk read-only, prints its boot ID
// (FIELD-NEXT-BOOT) and each result file under /var (FIELD-RESULT, its
// path on the disk, its JSON on one line), and powers off.
func nextInitrd(busybox, nextBoot string) ([]byte, error) {
	bb, err := os.ReadFile(busybox)
	if err != nil {
		return nil, fmt.Errorf("the next boot's busybox: %w", err)
	}
	var modules []byte
	if nextBoot != "" {
		if modules, err = os.ReadFile(nextBoot); err != nil {
			return nil, fmt.Errorf("the next boot's modules: %w", err)
		}
	}
	var b bytes.Buffer
	err = WriteCPIO(&b, []File{
		{Name: "bin", Mode: modeDir | 0o755},
		{Name: "dev", Mode: modeDir | 0o755},
		{Name: "proc", Mode: modeDir | 0o755},
		{Name: "mnt", Mode: modeDir | 0o755},
		{Name: "dev/console", Mode: modeChar | 0o600, Major: 5, Minor: 1},
		{Name: "bin/busybox", Mode: 0o755, Data: bb},
		{Name: "init", Mode: 0o755, Data: []byte(nextInit)},
	})
	if err != nil {
		return nil, err
	}
	// The kernel unpacks archives one after the other, each compressed
	// its own way: an uncompressed one after a compressed one fails.
	if len(modules) > 0 {
		zw := gzip.NewWriter(&b)
		if _, err := zw.Write(modules); err != nil {
			return nil, err
		}
		if err := zw.Close(); err != nil {
			return nil, err
		}
	}
	return b.Bytes(), nil
}

const nextInit = `#!/bin/busybox sh
bb=/bin/busybox
$bb mount -t proc proc /proc
echo "` + KexecMarker + ` $($bb cat /proc/cmdline)"
$bb mount -t devtmpfs devtmpfs /dev
for m in $($bb cat /modules/order 2>/dev/null); do $bb insmod /modules/$m || echo "FIELD-NEXT-BOOT-NO-MODULE $m"; done
n=0
while [ ! -b /dev/sda1 ] && [ $n -lt 200 ]; do $bb sleep 0.1; n=$((n+1)); done
if $bb mount -t ext4 -o ro /dev/sda1 /mnt; then
	echo "` + NextBootLine + ` boot_id=$($bb cat /proc/sys/kernel/random/boot_id)"
	for f in $($bb find /mnt/var -name '*.json' ! -name '.*'); do
		echo "` + ResultLine + ` ${f#/mnt} $($bb tr -d '\n' <"$f")"
	done
else
	echo "FIELD-NEXT-BOOT-NO-DISK $($bb ls /dev)"
fi
$bb poweroff -f
`

// The next boot's lines: its boot ID, and each result file it read.
const (
	NextBootLine = "FIELD-NEXT-BOOT"
	ResultLine   = "FIELD-RESULT"
)

// NextBootRead is what the next boot printed: its boot ID, and the
// result file name (its path on the target disk).
func NextBootRead(lines []Line, name string) (bootID string, data []byte, err error) {
	for _, l := range lines {
		if rest, ok := strings.CutPrefix(l.Text, NextBootLine+" boot_id="); ok {
			bootID = strings.TrimSpace(rest)
		}
		if rest, ok := strings.CutPrefix(l.Text, ResultLine+" "+name+" "); ok {
			data = []byte(rest)
		}
	}
	switch {
	case bootID == "":
		return "", nil, fmt.Errorf("the next boot did not read the target disk (no %s line)", NextBootLine)
	case data == nil:
		return "", nil, fmt.Errorf("the next boot found no %s on the target disk", name)
	}
	return bootID, data, nil
}
