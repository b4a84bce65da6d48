package tinkagent

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// relay keeps what an action wrote and passes it on as it comes.
type relay struct {
	mu  sync.Mutex
	buf bytes.Buffer
	to  io.Writer
}

func (r *relay) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf.Write(p)
	if r.to != nil {
		_, _ = r.to.Write(p)
	}
	return len(p), nil
}

func (r *relay) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.String()
}

// fifos are a task's stdout and stderr: two FIFOs the shim writes and the
// agent reads (cio.NewCreator with its streams), each copied to a relay
// until the shim closes it.
type fifos struct {
	dir   string
	paths [2]string
	mu    sync.Mutex
	open  [2]*os.File
	ended [2]chan struct{}
}

// newFIFOs makes the two FIFOs in a new directory under parent and starts
// reading them into r.
func newFIFOs(parent string, r *relay) (*fifos, error) {
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(parent, "tinkagent-")
	if err != nil {
		return nil, err
	}
	f := &fifos{dir: dir}
	for i, name := range []string{"stdout", "stderr"} {
		f.paths[i] = filepath.Join(dir, name)
		if err := syscall.Mkfifo(f.paths[i], 0o600); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
		f.ended[i] = make(chan struct{})
	}
	for i := range f.paths {
		go func() {
			defer close(f.ended[i])
			// Blocks until the shim opens its end.
			file, err := os.OpenFile(f.paths[i], os.O_RDONLY, 0)
			if err != nil {
				return
			}
			f.mu.Lock()
			f.open[i] = file
			f.mu.Unlock()
			_, _ = io.Copy(r, file)
		}()
	}
	return f, nil
}

// drain waits, up to limit, until the shim has closed both FIFOs: all the
// output that the action wrote has been read.
func (f *fifos) drain(limit time.Duration) {
	t := time.NewTimer(limit)
	defer t.Stop()
	for _, e := range f.ended {
		select {
		case <-e:
		case <-t.C:
			return
		}
	}
}

// close ends the readers (a FIFO never opened by a writer, or still held
// open by one, ends now) and removes the FIFOs.
func (f *fifos) close() {
	if f == nil {
		return
	}
	for i, p := range f.paths {
		select {
		case <-f.ended[i]:
			continue
		default:
		}
		// A reader still waiting for a writer opens, then reads EOF.
		if w, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			_ = w.Close()
		}
		f.mu.Lock()
		if f.open[i] != nil {
			_ = f.open[i].Close()
		}
		f.mu.Unlock()
	}
	f.drain(time.Second)
	_ = os.RemoveAll(f.dir)
}
