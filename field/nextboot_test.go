package field

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestNextBoot: the next boot's initrd, booted on a target disk that
// holds a result file, mounts the disk and prints the file, on one line,
// and its own boot ID.
func TestNextBoot(t *testing.T) {
	for _, tool := range []string{"qemu-system-x86_64", "debugfs", "mkfs.ext4", "busybox"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("this test needs %s: apt-get install -y qemu-system-x86 e2fsprogs busybox-static (or make field, whose scripts/field-deps.sh installs them)", tool)
		}
	}
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	img, _, err := BuildImage(context.Background(), repo, "captainos")
	if err != nil {
		t.Fatal(err)
	}
	bb, _ := exec.LookPath("busybox")
	dir, err := os.MkdirTemp("", "waitdaemon-field-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	disk := filepath.Join(dir, "disk.img")
	if err := MakeTargetDisk(disk, img.Kernel, bb, img.NextBoot); err != nil {
		t.Fatal(err)
	}
	const name = "/var/lib/waitdaemon/kexec.json"
	result := "{\n  \"state\": \"running\",\n  \"boot_id\": \"0b7e\"\n}\n"
	src := filepath.Join(dir, "result.json")
	if err := os.WriteFile(src, []byte(result), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("debugfs", "-w", "-R", "write "+src+" "+name, fmt.Sprintf("%s?offset=%d", disk, diskOffset)).CombinedOutput(); err != nil {
		t.Fatalf("debugfs write: %v\n%s", err, out)
	}
	var log strings.Builder
	m := Machine{Kernel: img.Kernel, Initrd: NextBootInitrd(disk), Append: cmdline + " field.boot=next", Disk: disk, Log: &log}
	vm, err := m.Boot(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer vm.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := vm.WaitDown(ctx); err != nil {
		t.Fatalf("the next boot did not end: %v\n%s", err, consoleTail(vm, 30))
	}
	id, data, err := NextBootRead(vm.Lines(), name)
	if err != nil {
		t.Fatalf("%v; its console:\n%s", err, consoleTail(vm, 30))
	}
	if want := strings.ReplaceAll(result, "\n", ""); string(data) != want {
		t.Errorf("the next boot read %q; want %q", data, want)
	}
	if len(id) != 36 {
		t.Errorf("the next boot's boot ID %q; want a UUID", id)
	}
}
