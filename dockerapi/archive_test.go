package dockerapi_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/dockerapi"
)

// TestArchive runs a container whose log driver is none to its exit: its
// log cannot be read back (501), and its files can, through the archive
// endpoints: a file that is there (its stat, then its tar), and one that
// is not (404 for both). Recorded on Docker 20.10 alone: no Docker 29
// ran beside it then.
func TestArchive(t *testing.T) {
	for _, engine := range []string{"docker-20.10"} {
		t.Run(engine, func(t *testing.T) {
			c := client(t, engine, "Archive")
			ctx := ctx(t)
			body := dockerapi.CreateRequest{
				Config: dockerapi.Config{
					Image:  fixtureImage,
					Cmd:    []string{"sh", "-c", "echo told >/said"},
					Labels: map[string]string{"org.waitdaemon.test": "archive"},
				},
				HostConfig: dockerapi.HostConfig{LogConfig: &dockerapi.LogConfig{Type: "none"}},
			}
			created, err := c.ContainerCreate(ctx, "", body)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := c.ContainerRemove(ctx, created.ID, dockerapi.RemoveOptions{Force: true, Volumes: true}); err != nil {
					t.Error(err)
				}
			}()
			if err := c.ContainerStart(ctx, created.ID); err != nil {
				t.Fatal(err)
			}
			if res, err := c.ContainerWait(ctx, created.ID, dockerapi.WaitNotRunning); err != nil || res.StatusCode != 0 {
				t.Fatalf("ContainerWait() = %+v, %v; want exit 0", res, err)
			}

			var out bytes.Buffer
			err = c.ContainerLogs(ctx, created.ID, dockerapi.LogsOptions{Tail: 5}, &out, &out)
			var apiErr *dockerapi.Error
			if !errors.As(err, &apiErr) || apiErr.Status != http.StatusNotImplemented || apiErr.Message == "" {
				t.Errorf("ContainerLogs() with log driver none: error = %v, want 501 with the engine's message", err)
			}

			st, err := c.ContainerStatPath(ctx, created.ID, "/said")
			if err != nil {
				t.Fatal(err)
			}
			if st.Name != "said" || st.Size != 5 || !st.Mode.IsRegular() {
				t.Errorf("ContainerStatPath(/said) = %+v, want a regular file \"said\" of 5 bytes", st)
			}
			rc, st, err := c.ContainerArchive(ctx, created.ID, "/said")
			if err != nil {
				t.Fatal(err)
			}
			tr := tar.NewReader(rc)
			hdr, err := tr.Next()
			if err != nil {
				t.Fatalf("reading the archive: %v", err)
			}
			data, err := io.ReadAll(tr)
			rc.Close()
			if err != nil || hdr.Name != "said" || string(data) != "told\n" || st.Name != "said" {
				t.Errorf("ContainerArchive(/said) = %q holding %q (%v), stat %+v; want \"said\" holding \"told\\n\"", hdr.Name, data, err, st)
			}

			if _, err := c.ContainerStatPath(ctx, created.ID, "/missing"); !errors.Is(err, dockerapi.ErrNotFound) {
				t.Errorf("ContainerStatPath(/missing) error = %v, want not found", err)
			}
			if _, _, err := c.ContainerArchive(ctx, created.ID, "/missing"); !errors.Is(err, dockerapi.ErrNotFound) {
				t.Errorf("ContainerArchive(/missing) error = %v, want not found", err)
			}
		})
	}
}

// TestPutArchive copies a file into a container that runs, as phase 1
// hands the waiter what it learnt: the container then holds it, whole,
// and a second copy writes over the first; a container that is not
// there gives 404. Recorded on Docker 20.10 alone.
func TestPutArchive(t *testing.T) {
	for _, engine := range []string{"docker-20.10"} {
		t.Run(engine, func(t *testing.T) {
			c := client(t, engine, "PutArchive")
			ctx := ctx(t)
			body := dockerapi.CreateRequest{Config: dockerapi.Config{
				Image:  fixtureImage,
				Cmd:    []string{"sleep", "60"},
				Labels: map[string]string{"org.waitdaemon.test": "put-archive"},
			}}
			created, err := c.ContainerCreate(ctx, "", body)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := c.ContainerRemove(ctx, created.ID, dockerapi.RemoveOptions{Force: true, Volumes: true}); err != nil {
					t.Error(err)
				}
			}()
			if err := c.ContainerStart(ctx, created.ID); err != nil {
				t.Fatal(err)
			}
			for _, content := range []string{`{"first":true}`, `{"second":true}`} {
				if err := c.ContainerPutArchive(ctx, created.ID, "/", oneFile(t, "handed", content)); err != nil {
					t.Fatal(err)
				}
				rc, _, err := c.ContainerArchive(ctx, created.ID, "/handed")
				if err != nil {
					t.Fatal(err)
				}
				tr := tar.NewReader(rc)
				hdr, err := tr.Next()
				if err != nil {
					t.Fatalf("reading the archive: %v", err)
				}
				data, err := io.ReadAll(tr)
				rc.Close()
				if err != nil || hdr.Name != "handed" || string(data) != content {
					t.Errorf("after ContainerPutArchive of %q, /handed holds %q (%v); want it whole", content, data, err)
				}
			}
			if err := c.ContainerPutArchive(ctx, "waitdaemon-no-such-container", "/", oneFile(t, "handed", "x")); !errors.Is(err, dockerapi.ErrNotFound) {
				t.Errorf("ContainerPutArchive(no such container) error = %v, want not found", err)
			}
		})
	}
}

// oneFile is a tar stream of one file, name, holding content, with the
// same bytes each time: a recording matches it.
func oneFile(t *testing.T, name, content string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(content)), ModTime: time.Unix(0, 0), Format: tar.FormatPAX}); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(tw, content); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
