package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/waitdaemon/waitdaemon/engine"
	"github.com/waitdaemon/waitdaemon/internal/tarfile"
)

var _ engine.Hander = (*Engine)(nil)

// handedFile is where phase 1 leaves, in the waiter's root file system,
// what it hands the waiter (Hand): the way back of saidFile.
const handedFile = "/waitdaemon-handed"

// maxHanded bounds what Handed reads.
const maxHanded = 1 << 20

// Hand copies data into the waiter's root file system, as handedFile,
// through the engine: a container cannot be relabelled on Docker, and the
// waiter, FROM scratch and running as root, has a root it can read.
func (e *Engine) Hand(ctx context.Context, waiter string, data []byte) error {
	archive, err := tarfile.One(strings.TrimPrefix(handedFile, "/"), data)
	if err != nil {
		return fmt.Errorf("handing the waiter: %w", err)
	}
	if err := e.C.ContainerPutArchive(ctx, waiter, "/", archive); err != nil {
		return fmt.Errorf("handing the waiter: %w", err)
	}
	return nil
}

// Handed reads handedFile from this process's own root file system.
func (e *Engine) Handed(context.Context) ([]byte, error) {
	f, err := os.Open(filepath.Join(e.rootDir(), handedFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading what phase 1 handed over: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxHanded+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("reading what phase 1 handed over: %w", err)
	case len(data) > maxHanded:
		return nil, fmt.Errorf("reading what phase 1 handed over: %s holds more than %d bytes", handedFile, maxHanded)
	}
	return data, nil
}
