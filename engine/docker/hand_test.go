package docker

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/waitdaemon/waitdaemon/dockerapi"
)

// TestHand: what phase 1 hands the waiter is copied into the waiter's
// root file system, through the engine, and read back whole there by
// Handed; a second hand-off replaces the first, and before any Handed
// reads nothing.
func TestHand(t *testing.T) {
	root := t.TempDir()
	e := fakeDocker(t, map[string]http.HandlerFunc{
		"/containers/act-waitdaemon-waiter/archive": func(w http.ResponseWriter, r *http.Request) {
			// The engine extracts the archive into the waiter's root,
			// here root.
			if r.Method != http.MethodPut || r.URL.Query().Get("path") != "/" || r.Header.Get("Content-Type") != "application/x-tar" {
				refuse(w, http.StatusBadRequest, "want PUT ?path=/ with a tar")
				return
			}
			tr := tar.NewReader(r.Body)
			for {
				hdr, err := tr.Next()
				if errors.Is(err, io.EOF) {
					return
				}
				if err != nil {
					refuse(w, http.StatusBadRequest, err.Error())
					return
				}
				data, _ := io.ReadAll(tr)
				if err := os.WriteFile(filepath.Join(root, hdr.Name), data, os.FileMode(hdr.Mode)); err != nil {
					refuse(w, http.StatusInternalServerError, err.Error())
					return
				}
			}
		},
	})
	e.root = root
	ctx := context.Background()
	if data, err := e.Handed(ctx); data != nil || err != nil {
		t.Errorf("Handed() before any hand-off = %q, %v; want nothing", data, err)
	}
	for _, data := range []string{`{"act-waitdaemon-user":{"image":"alpine:3.20","command":["reboot"]}}`, `{"second":{}}`} {
		if err := e.Hand(ctx, "act-waitdaemon-waiter", []byte(data)); err != nil {
			t.Fatal(err)
		}
		got, err := e.Handed(ctx)
		if err != nil || string(got) != data {
			t.Errorf("Handed() = %q, %v; want %q", got, err, data)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(root, "*")); len(left) != 1 || left[0] != filepath.Join(root, handedFile) {
		t.Errorf("files in the waiter's root: %q, want %s alone", left, handedFile)
	}
}

// TestHandFails: a waiter the engine cannot copy into is the engine's
// error, and a handed file Handed cannot take is an error, not data.
func TestHandFails(t *testing.T) {
	e := fakeDocker(t, map[string]http.HandlerFunc{
		"/containers/gone/archive": func(w http.ResponseWriter, r *http.Request) {
			refuse(w, http.StatusNotFound, "No such container: gone")
		},
	})
	if err := e.Hand(context.Background(), "gone", []byte("{}")); !errors.Is(err, dockerapi.ErrNotFound) || !strings.HasPrefix(err.Error(), "handing the waiter: ") {
		t.Errorf("Hand(gone) = %v; want the engine's not found, saying what failed", err)
	}
	root := t.TempDir()
	e.root = root
	if err := os.WriteFile(filepath.Join(root, handedFile), make([]byte, maxHanded+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if data, err := e.Handed(context.Background()); err == nil || data != nil {
		t.Errorf("Handed() of %d bytes = %d bytes, %v; want an error", maxHanded+1, len(data), err)
	}
}
