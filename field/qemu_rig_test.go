package field

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Machine is how one VM boots: a kernel, its initramfs (the machine's
// root, then the scenario's files appended as a cpio archive of their
// own), the command line, a target disk, and the host's loopback ports
// the guest may reach.
type Machine struct {
	Kernel   string
	Initrd   string
	Extra    []File // appended to Initrd as a gzip cpio: /field/...
	Append   string // the kernel command line
	Disk     string // a raw disk image, the guest's /dev/sda (virtio-scsi); empty for none
	Forwards []Forward
	Log      io.Writer // a copy of the serial console, if set
}

// Forward is one guestfwd: the guest's connections to 10.0.2.100:Guest
// reach 127.0.0.1:Host, through one helper per connection (QEMU's cmd:
// form; the tcp: form connects once, when QEMU starts); Host's loopback
// is that of the network namespace Netns, if set (a file such as
// /proc/PID/ns/net), which the helper enters.
type Forward struct {
	Guest, Host int
	Netns       string
}

// GuestForwardAddr is where the guest reaches the host's forwarded ports.
const GuestForwardAddr = "10.0.2.100"

// Line is one line of the serial console, timed on the host as it came.
type Line struct {
	At   time.Time
	Text string
}

// Down is how the machine went down: QMP's SHUTDOWN event, whose reason
// is "guest-reset" or "guest-shutdown", and when QEMU sent it.
type Down struct {
	Reason string
	At     time.Time
}

// VM is a booted machine.
type VM struct {
	Accel string // "kvm" or "tcg": which one ran
	cmd   *exec.Cmd
	dir   string

	mu      sync.Mutex
	lines   []Line
	down    *Down
	changed chan struct{} // closed and replaced at each line and event
	exited  chan struct{}
	exitErr error
}

// Accel chooses KVM where a normal one exists, else TCG. A /dev/kvm of
// the PVM module (nested_pvm machines) runs only PVM guest kernels, which
// Debian ships none of, so it counts as none.
func Accel() string {
	if exists("/sys/module/kvm_pvm") {
		return "tcg"
	}
	if !exists("/sys/module/kvm_intel") && !exists("/sys/module/kvm_amd") {
		return "tcg"
	}
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		return "tcg"
	}
	f.Close()
	return "kvm"
}

// Boot starts QEMU in a session of its own (Kill ends its whole process
// group, guestfwd helpers included), 2 GiB of RAM, -no-reboot so that a
// reset ends it, QMP on a socket in dir.
func (m Machine) Boot(ctx context.Context, dir string) (*VM, error) {
	initrd := m.Initrd
	if len(m.Extra) > 0 {
		initrd = filepath.Join(dir, "initrd")
		if err := appendCPIO(initrd, m.Initrd, m.Extra); err != nil {
			return nil, err
		}
	}
	qmp := filepath.Join(dir, "qmp.sock")
	net := "user,id=n0,restrict=on"
	for _, f := range m.Forwards {
		helper := fmt.Sprintf("busybox nc 127.0.0.1 %d", f.Host)
		if f.Netns != "" {
			helper = "nsenter --net=" + f.Netns + " " + helper
		}
		net += fmt.Sprintf(",guestfwd=tcp:%s:%d-cmd:%s", GuestForwardAddr, f.Guest, helper)
	}
	vm := &VM{Accel: Accel(), dir: dir, changed: make(chan struct{}), exited: make(chan struct{})}
	args := []string{"-machine", "q35", "-m", "2048", "-no-reboot",
		"-display", "none", "-monitor", "none", "-serial", "stdio",
		"-qmp", "unix:" + qmp + ",server=on,wait=off",
		"-kernel", m.Kernel, "-initrd", initrd, "-append", m.Append,
		"-netdev", net, "-device", "virtio-net-pci,netdev=n0"}
	if vm.Accel == "kvm" {
		args = append(args, "-smp", "2", "-accel", "kvm", "-cpu", "host")
	} else {
		// One vCPU under TCG: with two, the guest kernel's live code
		// patching (an int3, then the new bytes) is not seen at once by
		// the other vCPU's translated code, which then oopses on the int3
		// ("Oops: int3" in __alloc_pages, seen once in about 60 boots).
		args = append(args, "-smp", "1", "-accel", "tcg", "-cpu", "max")
	}
	if m.Disk != "" {
		args = append(args, "-device", "virtio-scsi-pci,id=scsi0",
			"-drive", "file="+m.Disk+",format=raw,if=none,id=d0", "-device", "scsi-hd,drive=d0")
	}
	cmd := exec.Command("qemu-system-x86_64", args...)
	// A session of its own, for Kill; and killed with the test, should
	// it die with no chance to call Kill (a go test timeout).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Stdin = nil
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting qemu-system-x86_64: %w", err)
	}
	vm.cmd = cmd
	live.Store(vm, true)
	go vm.readConsole(out, m.Log)
	go func() {
		err := cmd.Wait()
		vm.mu.Lock()
		if err != nil {
			vm.exitErr = fmt.Errorf("qemu: %v: %s", err, strings.TrimSpace(stderr.String()))
		}
		vm.mu.Unlock()
		live.Delete(vm)
		close(vm.exited)
	}()
	go vm.watchQMP(qmp)
	return vm, nil
}

// appendCPIO writes root followed by files as a cpio archive of their own.
func appendCPIO(path, root string, files []File) error {
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	defer out.Close()
	in, err := os.Open(root)
	if err != nil {
		return err
	}
	defer in.Close()
	if _, err := io.Copy(out, in); err != nil {
		return err
	}
	if err := WriteCPIO(out, files); err != nil {
		return err
	}
	return out.Close()
}

func (vm *VM) notify() {
	close(vm.changed)
	vm.changed = make(chan struct{})
}

func (vm *VM) readConsole(r io.Reader, log io.Writer) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		text := strings.TrimRight(sc.Text(), "\r")
		now := time.Now()
		if log != nil {
			fmt.Fprintf(log, "%s %s\n", now.Format("15:04:05.000"), text)
		}
		vm.mu.Lock()
		vm.lines = append(vm.lines, Line{At: now, Text: text})
		vm.notify()
		vm.mu.Unlock()
	}
}

// watchQMP connects to QEMU's QMP socket and records its SHUTDOWN event.
func (vm *VM) watchQMP(path string) {
	var conn net.Conn
	for {
		c, err := net.Dial("unix", path)
		if err == nil {
			conn = c
			break
		}
		select {
		case <-vm.exited:
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(`{"execute":"qmp_capabilities"}` + "\n")); err != nil {
		return
	}
	dec := json.NewDecoder(conn)
	for {
		var msg struct {
			Event     string
			Data      struct{ Reason string }
			Timestamp struct{ Seconds, Microseconds int64 }
		}
		if err := dec.Decode(&msg); err != nil {
			return
		}
		if msg.Event == "SHUTDOWN" {
			vm.mu.Lock()
			if vm.down == nil {
				vm.down = &Down{Reason: msg.Data.Reason, At: time.Unix(msg.Timestamp.Seconds, msg.Timestamp.Microseconds*1000)}
				vm.notify()
			}
			vm.mu.Unlock()
		}
	}
}

// ErrExited is a wait's answer when QEMU exited first.
var ErrExited = errors.New("qemu exited")

// WaitLine waits for a console line that match accepts, among those from
// the from'th on, and says which line it was.
func (vm *VM) WaitLine(ctx context.Context, from int, match func(string) bool) (Line, int, error) {
	for {
		vm.mu.Lock()
		for i := from; i < len(vm.lines); i++ {
			if match(vm.lines[i].Text) {
				l := vm.lines[i]
				vm.mu.Unlock()
				return l, i, nil
			}
		}
		from = len(vm.lines)
		changed := vm.changed
		vm.mu.Unlock()
		select {
		case <-ctx.Done():
			return Line{}, from, ctx.Err()
		case <-vm.exited:
			// The console's last lines may still be on their way.
			select {
			case <-changed:
				continue
			case <-time.After(200 * time.Millisecond):
			}
			return Line{}, from, fmt.Errorf("%w: %v", ErrExited, vm.Err())
		case <-changed:
		}
	}
}

// WaitDown waits for QMP's SHUTDOWN event. ctx's end means the machine
// stayed up.
func (vm *VM) WaitDown(ctx context.Context) (Down, error) {
	for {
		vm.mu.Lock()
		d, changed := vm.down, vm.changed
		vm.mu.Unlock()
		if d != nil {
			return *d, nil
		}
		select {
		case <-ctx.Done():
			return Down{}, ctx.Err()
		case <-vm.exited:
			vm.mu.Lock()
			d := vm.down
			vm.mu.Unlock()
			if d != nil {
				return *d, nil
			}
			return Down{}, fmt.Errorf("%w with no SHUTDOWN event: %v", ErrExited, vm.Err())
		case <-changed:
		}
	}
}

// Lines is the console so far.
func (vm *VM) Lines() []Line {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	return append([]Line(nil), vm.lines...)
}

// Err is how QEMU exited, if it failed.
func (vm *VM) Err() error {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	return vm.exitErr
}

// live holds the VMs running, for KillAll.
var live sync.Map

// KillAll kills every VM and control plane still running: for a test
// that is interrupted.
func KillAll() {
	live.Range(func(k, _ any) bool {
		k.(*VM).Kill()
		return true
	})
	liveControlPlanes.Range(func(k, _ any) bool {
		k.(*ControlPlane).Stop()
		return true
	})
}

// Kill ends QEMU's whole process group and waits for QEMU's exit.
func (vm *VM) Kill() {
	if vm.cmd == nil || vm.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-vm.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-vm.exited:
	case <-time.After(10 * time.Second):
	}
}
