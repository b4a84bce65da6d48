// Command kexec is the field's kexec action, a stand-in for Tinkerbell's
// (quay.io/tinkerbell/actions/kexec) that does what it does: it mounts
// BLOCK_DEVICE (FS_TYPE) at /mountAction, loads the kernel and initrd
// found there with kexec_file_load, and reboots into them with
// LINUX_REBOOT_CMD_KEXEC. KERNEL_PATH, INITRD_PATH and CMD_LINE name them;
// without KERNEL_PATH, the first menu entry of /boot/grub/grub.cfg does.
// It needs the host's pid namespace and privileges, as the real one does.
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

const mnt = "/mountAction"

func main() {
	if err := run(); err != nil {
		fmt.Println("kexec:", err)
		os.Exit(1)
	}
}

func run() error {
	dev, fs := os.Getenv("BLOCK_DEVICE"), os.Getenv("FS_TYPE")
	if dev == "" || fs == "" {
		return fmt.Errorf("BLOCK_DEVICE=%q FS_TYPE=%q: want a block device and its file system type, like /dev/sda1 and ext4", dev, fs)
	}
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		return err
	}
	if err := syscall.Mount(dev, mnt, fs, 0, ""); err != nil {
		return fmt.Errorf("mounting %s (%s) at %s: %w", dev, fs, mnt, err)
	}
	kernel, initrd, cmdline := os.Getenv("KERNEL_PATH"), os.Getenv("INITRD_PATH"), os.Getenv("CMD_LINE")
	if kernel == "" {
		var err error
		if kernel, initrd, cmdline, err = grub(filepath.Join(mnt, "boot/grub/grub.cfg")); err != nil {
			return err
		}
	}
	kf, err := os.Open(filepath.Join(mnt, kernel))
	if err != nil {
		return fmt.Errorf("the kernel: %w", err)
	}
	defer kf.Close()
	initrdFd, flags := uintptr(0), uintptr(0x4) // KEXEC_FILE_NO_INITRAMFS
	if initrd != "" {
		f, err := os.Open(filepath.Join(mnt, initrd))
		if err != nil {
			return fmt.Errorf("the initrd: %w", err)
		}
		defer f.Close()
		initrdFd, flags = f.Fd(), 0
	}
	cl := append([]byte(cmdline), 0)
	fmt.Printf("kexec: loading %s, %s, %q\n", kernel, initrd, cmdline)
	if _, _, e := syscall.Syscall6(sysKexecFileLoad, kf.Fd(), initrdFd, uintptr(len(cl)), uintptr(unsafe.Pointer(&cl[0])), flags, 0); e != 0 {
		return fmt.Errorf("kexec_file_load: %w", e)
	}
	_ = syscall.Unmount(mnt, 0)
	syscall.Sync()
	fmt.Println("kexec: rebooting into it")
	return syscall.Reboot(syscall.LINUX_REBOOT_CMD_KEXEC)
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
