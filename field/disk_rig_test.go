package field

import (
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

// MakeTargetDisk writes a raw disk image at path: an MBR with one Linux
// partition holding an ext4 file system, which holds kernel as
// /boot/vmlinuz, a small initrd as /boot/initrd.img (kexecInitrd), a
// /boot/grub/grub.cfg whose first entry boots them with
// field.kexec=second-kernel on the command line, and
// /var/log and /var/lib/waitdaemon, for a result file.
func MakeTargetDisk(path, kernel, busybox string) error {
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
	initrd, err := os.Create(filepath.Join(dir, "boot/initrd.img"))
	if err != nil {
		return err
	}
	files, err := kexecInitrd(busybox)
	if err == nil {
		err = WriteCPIO(initrd, files)
	}
	if cerr := initrd.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
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

// ReadTargetFile reads name from the target disk at path, as the next
// boot would.
func ReadTargetFile(path, name string) ([]byte, error) {
	out, err := exec.Command("debugfs", "-R", "cat "+name, fmt.Sprintf("%s?offset=%d", path, diskOffset)).Output()
	if err != nil {
		return nil, fmt.Errorf("debugfs cat %s: %w", name, err)
	}
	if len(out) == 0 {
		// debugfs says a file is missing on stderr, and exits 0.
		if ls, _ := exec.Command("debugfs", "-R", "stat "+name, fmt.Sprintf("%s?offset=%d", path, diskOffset)).CombinedOutput(); strings.Contains(string(ls), "not found") {
			return nil, fmt.Errorf("%s: %w", name, os.ErrNotExist)
		}
	}
	return out, nil
}

// kexecInitrd is the second kernel's initrd: busybox, and an /init that
// prints the command line after KexecMarker and powers off.
func kexecInitrd(busybox string) ([]File, error) {
	bb, err := os.ReadFile(busybox)
	if err != nil {
		return nil, fmt.Errorf("the second kernel's busybox: %w", err)
	}
	init := "#!/bin/busybox sh\n/bin/busybox mount -t proc proc /proc\necho \"" + KexecMarker + " $(/bin/busybox cat /proc/cmdline)\"\n/bin/busybox poweroff -f\n"
	return []File{
		{Name: "bin", Mode: modeDir | 0o755},
		{Name: "dev", Mode: modeDir | 0o755},
		{Name: "proc", Mode: modeDir | 0o755},
		{Name: "dev/console", Mode: modeChar | 0o600, Major: 5, Minor: 1},
		{Name: "bin/busybox", Mode: 0o755, Data: bb},
		{Name: "init", Mode: 0o755, Data: []byte(init)},
	}, nil
}
