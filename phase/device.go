package phase

import (
	"errors"
	"fmt"
	"os"
	"path"
	"runtime"
	"slices"
	"strings"
	"syscall"

	"github.com/waitdaemon/waitdaemon/engine"
)

// The result on a block device (WAITDAEMON_RESULT_DEVICE): phase 1 finds
// the device as the action sees it and has the waiter given it; the
// waiter mounts it for each write, in a mount namespace of its own, and
// unmounts it after, so that the disk is whole whenever the machine goes
// down. Nothing is made on any root file system.

// findDevice is the block device at p, as this process sees it; tests
// replace it.
var findDevice = func(p string) (engine.Device, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return engine.Device{}, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || fi.Mode()&os.ModeDevice == 0 || fi.Mode()&os.ModeCharDevice != 0 {
		return engine.Device{}, fmt.Errorf("%s is not a block device", p)
	}
	// The kernel's encoding of a device number (sysmacros.h).
	rdev := uint64(st.Rdev)
	major := uint32((rdev>>8)&0xfff) | uint32((rdev>>32)&^0xfff)
	minor := uint32(rdev&0xff) | uint32((rdev>>12)&^0xff)
	return engine.Device{Path: p, Major: major, Minor: minor}, nil
}

// findResultDevice finds the result device, if one is set: one the
// action does not see is bad input.
func (s *Settings) findResultDevice() error {
	if s.ResultDevice == "" {
		return nil
	}
	d, err := findDevice(s.ResultDevice)
	if err != nil {
		return bad("WAITDAEMON_RESULT_DEVICE", s.ResultDevice, "a block device this action sees, like /dev/sda1 ("+err.Error()+"; workers run actions privileged, with the host's devices)")
	}
	s.device = d
	return nil
}

// deviceMount is where the waiter mounts the result device: a directory
// every waiter has, covered in the write's own mount namespace alone.
const deviceMount = "/dev/shm"

// onDevice mounts device, runs fn with the root of its file system, and
// unmounts it, all in a mount namespace of its own that ends with the
// call: the one OS thread that does it is locked to the call's goroutine
// and never unlocked, so it ends with it. Tests replace it.
var onDevice = func(device string, fn func(root string) error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		done <- mounted(device, fn)
	}()
	return <-done
}

// mounted is onDevice on its own thread.
func mounted(device string, fn func(root string) error) error {
	if err := syscall.Unshare(syscall.CLONE_NEWNS); err != nil {
		return fmt.Errorf("a mount namespace of its own, to mount %s: %w", device, err)
	}
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making its mounts private, to mount %s: %w", device, err)
	}
	if err := mountAny(device, deviceMount); err != nil {
		return err
	}
	err := fn(deviceMount)
	if uerr := syscall.Unmount(deviceMount, 0); uerr != nil {
		err = errors.Join(err, fmt.Errorf("unmounting %s: %w", device, uerr))
	}
	return err
}

// commonTypes are tried after those the kernel lists: a module not yet
// loaded is loaded by a mount that names its type.
var commonTypes = []string{"ext4", "xfs", "btrfs", "vfat", "ext3", "ext2"}

// mountAny mounts device at dir, read-write, as mount(8) does without a
// type: trying each type of block file system the kernel knows.
func mountAny(device, dir string) error {
	var types []string
	if data, err := os.ReadFile("/proc/filesystems"); err == nil {
		for line := range strings.Lines(string(data)) {
			if f := strings.Fields(line); len(f) == 1 {
				types = append(types, f[0])
			}
		}
	}
	for _, t := range commonTypes {
		if !slices.Contains(types, t) {
			types = append(types, t)
		}
	}
	for _, t := range types {
		err := syscall.Mount(device, dir, t, syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, "")
		if err == nil {
			return nil
		}
		if slices.Contains(deviceErrors, err) {
			return fmt.Errorf("mounting %s: %w", device, err)
		}
		// Another type's refusal (EINVAL, most often): try the next.
	}
	return fmt.Errorf("mounting %s: no file system this kernel knows is on it (tried %s)", device, strings.Join(types, ", "))
}

// deviceErrors are a mount's failures that are the device's or the
// waiter's, whatever the type: no other type is tried.
var deviceErrors = []error{syscall.ENOENT, syscall.ENOTBLK, syscall.ENXIO, syscall.EPERM, syscall.EACCES, syscall.EROFS, syscall.EIO}

// onResultDevice runs fn with the result file's path on the mounted
// device, and says which device a failure was on, with paths as they
// are on that file system.
func (w *waiter) onResultDevice(fn func(file string) error) error {
	return onDevice(w.ResultDevice, func(root string) error {
		dir := path.Dir(w.ResultFile)
		if fi, err := os.Stat(path.Join(root, dir)); err != nil || !fi.IsDir() {
			return fmt.Errorf("the file system on %s has no directory %s", w.ResultDevice, dir)
		}
		if err := fn(path.Join(root, w.ResultFile)); err != nil {
			return fmt.Errorf("on %s: %s", w.ResultDevice, strings.ReplaceAll(err.Error(), root+"/", "/"))
		}
		return nil
	})
}
