package containerd

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	"github.com/waitdaemon/waitdaemon/containerdapi"
	"github.com/waitdaemon/waitdaemon/engine/containerd/ocispec"
	"github.com/waitdaemon/waitdaemon/internal/tarfile"
)

// The files of an image that its USER is resolved from.
const (
	etcPasswd = "etc/passwd"
	etcGroup  = "etc/group"
)

// maxUserFile bounds an /etc/passwd or /etc/group read from a layer.
const maxUserFile = 1 << 20

// userDBBytes and userDBTime bound the reading of an image's user
// database: the bytes of its layers read (unpacked), and the time. An
// image with large upper layers that hold no /etc is read through them.
var (
	userDBBytes int64 = 256 << 20
	userDBTime        = 30 * time.Second
)

// userDB reads the image's /etc/passwd and /etc/group from its layers
// in the content store, as the image's file system has them: from the
// top layer down, each file taken from the first layer that has it, or
// gone with the first that whites it out (or makes /etc opaque). Each
// image is read once, within userDBBytes and userDBTime.
func (e *Engine) userDB(ctx context.Context, img containerdapi.ResolvedImage) (*ocispec.UserDB, error) {
	key := img.Manifest.Config.Digest
	e.mu.Lock()
	db, ok := e.userDBs[key]
	e.mu.Unlock()
	if ok {
		return db, nil
	}
	files := map[string][]byte{}
	settled := map[string]bool{}
	ctx, cancel := context.WithTimeoutCause(ctx, userDBTime, fmt.Errorf("gave up after %v", userDBTime))
	defer cancel()
	budget := &budget{left: userDBBytes}
	for i := len(img.Manifest.Layers) - 1; i >= 0 && len(settled) < 2; i-- {
		if err := e.scanLayer(ctx, img.Manifest.Layers[i], files, settled, budget); err != nil {
			if cause := context.Cause(ctx); cause != nil && ctx.Err() == context.DeadlineExceeded {
				err = fmt.Errorf("%w: %w", cause, err)
			}
			return nil, fmt.Errorf("reading /etc/passwd and /etc/group from image %s: layer %s: %w", img.Image.Name, img.Manifest.Layers[i].Digest, err)
		}
	}
	db = &ocispec.UserDB{Passwd: files[etcPasswd], Group: files[etcGroup]}
	e.mu.Lock()
	if e.userDBs == nil {
		e.userDBs = map[string]*ocispec.UserDB{}
	}
	e.userDBs[key] = db
	e.mu.Unlock()
	return db, nil
}

// budget is a reader of layers that fails once left bytes are read.
type budget struct {
	r    io.Reader
	left int64
}

func (b *budget) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, fmt.Errorf("gave up after reading %d KiB of its layers without finding both", userDBBytes>>10)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

// errLink is a file of the user database that a layer has as a link,
// which is not followed.
var errLink = errors.New("is a link, which waitdaemon does not follow")

// scanLayer reads layer d for the files not yet settled: one it holds is
// read into files, one it whites out (and does not hold) is gone; with
// /etc opaque (or whited out), those it does not hold are gone too. It stops reading
// once both are settled.
func (e *Engine) scanLayer(ctx context.Context, d containerdapi.Descriptor, files map[string][]byte, settled map[string]bool, b *budget) error {
	if strings.Contains(d.MediaType, "zstd") {
		return fmt.Errorf("media type %s: only tar and gzip layers are read", d.MediaType)
	}
	blob, err := e.C.ContentReader(ctx, d.Digest)
	if err != nil {
		return err
	}
	defer blob.Close()
	var r io.Reader = blob
	if strings.Contains(d.MediaType, "gzip") {
		zr, err := gzip.NewReader(blob)
		if err != nil {
			return err
		}
		r = zr
	}
	// Whiteouts, and an opaque /etc, hide the layers below alone: a file
	// this layer adds after its whiteout is the image's. They settle
	// what this layer did not hold once it is read.
	opaque := false
	var whiteouts []string
	b.r = r
	tr := tarfile.NewReader(b)
	for len(settled) < 2 {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(path.Clean("/"+h.Name), "/")
		dir, base := path.Split(name)
		switch {
		case name == ".wh.etc", name == "etc/.wh..wh..opq":
			opaque = true
		case dir == "etc/" && strings.HasPrefix(base, ".wh."):
			if f := "etc/" + strings.TrimPrefix(base, ".wh."); f == etcPasswd || f == etcGroup {
				whiteouts = append(whiteouts, f)
			}
		case (name == etcPasswd || name == etcGroup) && !settled[name]:
			if !h.Regular() {
				return fmt.Errorf("/%s %w", name, errLink)
			}
			data, err := io.ReadAll(io.LimitReader(tr, maxUserFile+1))
			if err != nil {
				return err
			}
			if len(data) > maxUserFile {
				return fmt.Errorf("/%s is larger than %d bytes", name, maxUserFile)
			}
			files[name], settled[name] = data, true
		}
	}
	for _, f := range whiteouts {
		settled[f] = true
	}
	if opaque {
		settled[etcPasswd], settled[etcGroup] = true, true
	}
	return nil
}
