package field

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Image is a machine the field boots: Debian's kernel and the machine's
// whole root as one zstd cpio initramfs.
type Image struct {
	OS     string // "captainos" or "hookos"
	Kernel string
	Initrd string
	// NextBoot: the modules a small initrd needs to mount the target
	// disk, a cpio archive.
	NextBoot string
}

// BuildImage builds os's image with scripts/field-image.sh, or finds it
// in the cache, and says how long that took.
func BuildImage(ctx context.Context, repo, os string) (Image, time.Duration, error) {
	start := time.Now()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, filepath.Join(repo, "scripts", "field-image.sh"), os)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return Image{}, 0, fmt.Errorf("building the %s image: %v\n%s", os, err, tail(stderr.String(), 30))
	}
	dir := strings.TrimSpace(string(out))
	return Image{OS: os, Kernel: filepath.Join(dir, "vmlinuz"), Initrd: filepath.Join(dir, "root.cpio.zst"), NextBoot: filepath.Join(dir, "nextboot.cpio")}, time.Since(start), nil
}

// tail is s's last n lines.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// exists says whether path exists.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
