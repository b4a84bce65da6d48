package main

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// fakeSys records the calls a run makes, and fails those it is told to.
type fakeSys struct {
	calls     []string
	rebootErr error
}

func (f *fakeSys) sys() system {
	return system{
		mount: func(dev, dir, fs string) error {
			f.calls = append(f.calls, "mount "+dev)
			return nil
		},
		load: func(kernel, initrd *os.File, cmdline string) error {
			f.calls = append(f.calls, "load")
			return nil
		},
		unload: func() error {
			f.calls = append(f.calls, "unload")
			return nil
		},
		reboot: func() error {
			f.calls = append(f.calls, "reboot")
			return f.rebootErr
		},
	}
}

// disk is a mount point's content as the target disk holds it: a grub.cfg
// and the files its first entry names.
func disk(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "disk/boot/grub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{
		"boot/grub/grub.cfg": "menuentry 'x' {\n\tlinux /boot/vmlinuz quiet\n\tinitrd /boot/initrd.img\n}\n",
		"boot/vmlinuz":       "k",
		"boot/initrd.img":    "i",
	} {
		if err := os.WriteFile(filepath.Join(root, "disk", name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// TestRebootErrorIgnored: as Tinkerbell's kexec, a reboot(2) that fails
// is said and ignored (exit 0), and nothing is unmounted or synced
// before it.
func TestRebootErrorIgnored(t *testing.T) {
	root := disk(t)
	f := &fakeSys{rebootErr: syscall.EINVAL}
	mnt := filepath.Join(root, "mountAction")
	// The fake mount shows the disk at the mount point.
	s := f.sys()
	s.mount = func(dev, dir, fs string) error {
		f.calls = append(f.calls, "mount "+dev)
		if err := os.Remove(dir); err != nil {
			return err
		}
		return os.Symlink(filepath.Join(root, "disk"), dir)
	}
	env := map[string]string{"BLOCK_DEVICE": "/dev/sda1", "FS_TYPE": "ext4"}
	if err := run(s, mnt, func(k string) string { return env[k] }); err != nil {
		t.Fatalf("run with a reboot(2) that fails: %v; want nil (exit 0), as Tinkerbell's kexec", err)
	}
	if want := []string{"mount /dev/sda1", "load", "reboot"}; !slices.Equal(f.calls, want) {
		t.Errorf("calls %v; want %v: no unmount, no sync", f.calls, want)
	}
}

// TestMountPointExists: the mount point is made with mkdir(2), not
// mkdir -p: a second run in the same container fails, as Tinkerbell's
// kexec does.
func TestMountPointExists(t *testing.T) {
	mnt := filepath.Join(t.TempDir(), "mountAction")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	f := &fakeSys{}
	env := map[string]string{"BLOCK_DEVICE": "/dev/sda1", "FS_TYPE": "ext4"}
	err := run(f.sys(), mnt, func(k string) string { return env[k] })
	if !errors.Is(err, os.ErrExist) {
		t.Errorf("run over an existing mount point: %v; want it to fail, exists", err)
	}
	if len(f.calls) != 0 {
		t.Errorf("calls %v; want none", f.calls)
	}
}

// TestUnloadFirst: FIELD_KEXEC_UNLOAD makes the reboot(2) fail as a
// machine's can: the kernel is unloaded before it.
func TestUnloadFirst(t *testing.T) {
	root := disk(t)
	f := &fakeSys{rebootErr: syscall.EINVAL}
	s := f.sys()
	s.mount = func(dev, dir, fs string) error {
		f.calls = append(f.calls, "mount "+dev)
		if err := os.Remove(dir); err != nil {
			return err
		}
		return os.Symlink(filepath.Join(root, "disk"), dir)
	}
	env := map[string]string{"BLOCK_DEVICE": "/dev/sda1", "FS_TYPE": "ext4", "FIELD_KEXEC_UNLOAD": "1"}
	if err := run(s, filepath.Join(root, "mountAction"), func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	if want := []string{"mount /dev/sda1", "load", "unload", "reboot"}; !slices.Equal(f.calls, want) {
		t.Errorf("calls %v; want %v", f.calls, want)
	}
}
