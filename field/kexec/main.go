// Command kexec is the field's kexec action, a stand-in for Tinkerbell's
// (quay.io/tinkerbell/actions/kexec) that does what it does: it makes
// /mountAction with mkdir(2) (so a second run in the same container
// fails), mounts BLOCK_DEVICE (FS_TYPE) there, loads the kernel and
// initrd found there with kexec_file_load, and reboots into them with
// LINUX_REBOOT_CMD_KEXEC, neither syncing nor unmounting first. An error
// before the reboot exits 1; the reboot's own error is said and ignored,
// and it exits 0, the machine still up. KERNEL_PATH, INITRD_PATH and
// CMD_LINE name the kernel; without KERNEL_PATH, the first menu entry of
// /boot/grub/grub.cfg does. FIELD_KEXEC_UNLOAD, the field's own, unloads
// the kernel before the reboot, which then fails (EINVAL, as with no
// kernel loaded): a kexec that exits 0 and leaves the machine up. It needs
// the host's pid namespace and privileges, as the real one does.
package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unsafe"
)

// sysKexecFileLoad is kexec_file_load(2)'s number on amd64.
const sysKexecFileLoad = 320

// kexec_file_load's flags.
const (
	kexecFileUnload      = 0x1
	kexecFileNoInitramfs = 0x4
)

// system is the calls a run makes to the kernel.
type system struct {
	mount  func(dev, dir, fs string) error
	load   func(kernel, initrd *os.File, cmdline string) error
	unload func() error
	reboot func() error
}

var kernel = system{
	mount: func(dev, dir, fs string) error { return syscall.Mount(dev, dir, fs, 0, "") },
	load: func(k, initrd *os.File, cmdline string) error {
		initrdFd, flags := uintptr(0), uintptr(kexecFileNoInitramfs)
		if initrd != nil {
			initrdFd, flags = initrd.Fd(), 0
		}
		cl := append([]byte(cmdline), 0)
		if _, _, e := syscall.Syscall6(sysKexecFileLoad, k.Fd(), initrdFd, uintptr(len(cl)), uintptr(unsafe.Pointer(&cl[0])), flags, 0); e != 0 {
			return fmt.Errorf("kexec_file_load: %w", e)
		}
		return nil
	},
	unload: func() error {
		if _, _, e := syscall.Syscall6(sysKexecFileLoad, ^uintptr(0), ^uintptr(0), 0, 0, kexecFileUnload, 0); e != 0 {
			return fmt.Errorf("kexec_file_load (unload): %w", e)
		}
		return nil
	},
	reboot: func() error { return syscall.Reboot(syscall.LINUX_REBOOT_CMD_KEXEC) },
}

const mountAction = "/mountAction"

func main() {
	if err := run(kernel, mountAction, os.Getenv); err != nil {
		fmt.Println("kexec:", err)
		os.Exit(1)
	}
}

func run(s system, mnt string, getenv func(string) string) error {
	dev, fs := getenv("BLOCK_DEVICE"), getenv("FS_TYPE")
	if dev == "" || fs == "" {
		return fmt.Errorf("BLOCK_DEVICE=%q FS_TYPE=%q: want a block device and its file system type, like /dev/sda1 and ext4", dev, fs)
	}
	if err := os.Mkdir(mnt, 0o755); err != nil {
		return fmt.Errorf("making the mount point: %w", err)
	}
	if err := s.mount(dev, mnt, fs); err != nil {
		return fmt.Errorf("mounting %s (%s) at %s: %w", dev, fs, mnt, err)
	}
	kernelPath, initrd, cmdline := getenv("KERNEL_PATH"), getenv("INITRD_PATH"), getenv("CMD_LINE")
	if kernelPath == "" {
		var err error
		if kernelPath, initrd, cmdline, err = grub(filepath.Join(mnt, "boot/grub/grub.cfg")); err != nil {
			return err
		}
	}
	kf, err := os.Open(filepath.Join(mnt, kernelPath))
	if err != nil {
		return fmt.Errorf("the kernel: %w", err)
	}
	defer kf.Close()
	var inf *os.File
	if initrd != "" {
		if inf, err = os.Open(filepath.Join(mnt, initrd)); err != nil {
			return fmt.Errorf("the initrd: %w", err)
		}
		defer inf.Close()
	}
	fmt.Printf("kexec: loading %s, %s, %q\n", kernelPath, initrd, cmdline)
	if err := s.load(kf, inf, cmdline); err != nil {
		return err
	}
	if getenv("FIELD_KEXEC_UNLOAD") != "" {
		fmt.Println("kexec: unloading it (FIELD_KEXEC_UNLOAD), so that the reboot fails")
		if err := s.unload(); err != nil {
			return err
		}
	}
	fmt.Println("kexec: rebooting into it")
	if err := s.reboot(); err != nil {
		// As Tinkerbell's: the error is ignored, and the action succeeds.
		fmt.Println("kexec: reboot(2):", err)
	}
	return nil
}

// grub reads the first menu entry's linux and initrd lines.
func grub(path string) (kernel, initrd, cmdline string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", "", "", fmt.Errorf("no KERNEL_PATH, and %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case len(fields) >= 2 && fields[0] == "linux" && kernel == "":
			kernel, cmdline = fields[1], strings.Join(fields[2:], " ")
		case len(fields) >= 2 && fields[0] == "initrd" && initrd == "":
			initrd = fields[1]
		}
	}
	if kernel == "" {
		return "", "", "", fmt.Errorf("no linux line in %s", path)
	}
	return kernel, initrd, cmdline, sc.Err()
}
