package containerd

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/containerdapi"
	"github.com/waitdaemon/waitdaemon/engine/containerd/ocispec"
)

// layer is a layer's tar of files (name: content; "link:" makes a
// symbolic link), gzipped when zip.
func layer(t *testing.T, zip bool, files ...[2]string) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, f := range files {
		h := &tar.Header{Name: f[0], Mode: 0o644, Size: int64(len(f[1])), Typeflag: tar.TypeReg}
		if strings.HasSuffix(f[0], "/") {
			h.Name, h.Typeflag, h.Mode = strings.TrimSuffix(f[0], "/"), tar.TypeDir, 0o755
		}
		if target, ok := strings.CutPrefix(f[1], "link:"); ok {
			h.Typeflag, h.Linkname, h.Size = tar.TypeSymlink, target, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg && f[1] != "" {
			_, _ = tw.Write([]byte(f[1]))
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if !zip {
		return b.Bytes()
	}
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	_, _ = zw.Write(b.Bytes())
	_ = zw.Close()
	return z.Bytes()
}

// TestUserDB reads an image's /etc/passwd and /etc/group from its layers
// as its file system has them, from the top layer down, gzipped or not:
// the top layer's file wins, a whiteout or an opaque /etc hides what is
// below, reading stops once both are known, and a link is an error.
func TestUserDB(t *testing.T) {
	const gz, plain = "application/vnd.docker.image.rootfs.diff.tar.gzip", "application/vnd.oci.image.layer.v1.tar"
	base := layer(t, true, [2]string{"etc/", ""}, [2]string{"etc/passwd", "root:x:0:0::/:/bin/sh\n"}, [2]string{"./etc/group", "root:x:0:\n"})
	cases := []struct {
		name                  string
		layers                [][]byte // bottom first
		types                 []string
		wantPasswd, wantGroup string
		wantAbsent            string // "passwd", "group", "both"
		wantReads             int
		wantErr               string
	}{
		{name: "one layer", layers: [][]byte{base}, types: []string{gz}, wantPasswd: "root:x:0:0::/:/bin/sh\n", wantGroup: "root:x:0:\n", wantReads: 1},
		{name: "the top layer's passwd, a group below", layers: [][]byte{base, layer(t, false, [2]string{"etc/passwd", "probe:x:1:1::/:/x\n"})}, types: []string{gz, plain},
			wantPasswd: "probe:x:1:1::/:/x\n", wantGroup: "root:x:0:\n", wantReads: 2},
		{name: "the group whited out", layers: [][]byte{base, layer(t, false, [2]string{"etc/.wh.group", ""}, [2]string{"etc/passwd", "p:x:1:1::/:/x\n"})}, types: []string{gz, plain},
			wantPasswd: "p:x:1:1::/:/x\n", wantAbsent: "group", wantReads: 1},
		// Whiteouts hide the layers below alone: a file the same layer
		// adds after its whiteout is the image's.
		{name: "passwd whited out and added again", layers: [][]byte{base, layer(t, false, [2]string{"etc/.wh.passwd", ""}, [2]string{"etc/passwd", "new:x:1:1::/:/x\n"})}, types: []string{gz, plain},
			wantPasswd: "new:x:1:1::/:/x\n", wantGroup: "root:x:0:\n", wantReads: 2},
		{name: "/etc opaque, passwd added again", layers: [][]byte{base, layer(t, false, [2]string{"etc/.wh..wh..opq", ""}, [2]string{"etc/passwd", "new:x:1:1::/:/x\n"})}, types: []string{gz, plain},
			wantPasswd: "new:x:1:1::/:/x\n", wantAbsent: "group", wantReads: 1},
		{name: "/etc opaque", layers: [][]byte{base, layer(t, true, [2]string{"etc/.wh..wh..opq", ""}, [2]string{"etc/hostname", "x"})}, types: []string{gz, gz},
			wantAbsent: "both", wantReads: 1},
		{name: "passwd whited out, another file too", layers: [][]byte{base, layer(t, false, [2]string{"etc/.wh.hostname", ""}, [2]string{"etc/.wh.passwd", ""})}, types: []string{gz, plain},
			wantGroup: "root:x:0:\n", wantAbsent: "passwd", wantReads: 2},
		{name: "read no further once both are known", layers: [][]byte{append(layer(t, false, [2]string{"etc/passwd", "p:x:1:1::/:/x\n"}, [2]string{"etc/group", "g:x:1:\n"})[:2048], bytes.Repeat([]byte{'x'}, 512)...)}, types: []string{plain},
			wantPasswd: "p:x:1:1::/:/x\n", wantGroup: "g:x:1:\n", wantReads: 1},
		{name: "a passwd of the largest size", layers: [][]byte{layer(t, true, [2]string{"etc/passwd", strings.Repeat("#", maxUserFile)}, [2]string{"etc/group", ""})}, types: []string{gz},
			wantPasswd: strings.Repeat("#", maxUserFile), wantReads: 1},
		{name: "a passwd too large", layers: [][]byte{layer(t, true, [2]string{"etc/passwd", strings.Repeat("#", maxUserFile+1)})}, types: []string{gz}, wantErr: "/etc/passwd is larger than 1048576 bytes", wantReads: 1},
		{name: "none", layers: [][]byte{layer(t, false, [2]string{"probe", "#!"})}, types: []string{plain}, wantAbsent: "both", wantReads: 1},
		{name: "a link", layers: [][]byte{layer(t, false, [2]string{"etc/passwd", "link:/x"})}, types: []string{plain}, wantErr: "/etc/passwd is a link", wantReads: 1},
		{name: "zstd", layers: [][]byte{base}, types: []string{"application/vnd.oci.image.layer.v1.tar+zstd"}, wantErr: "only tar and gzip", wantReads: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var reads []reply
			var img containerdapi.ResolvedImage
			img.Image.Name = "docker.io/library/probe:1"
			img.Manifest.Config.Digest = "sha256:c0"
			for i := len(tc.layers) - 1; i >= 0; i-- {
				reads = append(reads, reply{msg: `{"data":{"base64":"` + base64.StdEncoding.EncodeToString(tc.layers[i]) + `"}}`})
			}
			for i := range tc.layers {
				img.Manifest.Layers = append(img.Manifest.Layers, containerdapi.Descriptor{MediaType: tc.types[i], Digest: "sha256:l" + string(rune('0'+i))})
			}
			e, d := newFake(t, map[string][]reply{"Content/Read": reads})
			db, err := e.userDB(testCtx(t), img)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), img.Image.Name) {
					t.Errorf("userDB() = %+v, %v; want an error naming the image, saying %q", db, err, tc.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			} else {
				if got := string(db.Passwd); got != tc.wantPasswd || (db.Passwd == nil) != (tc.wantAbsent == "passwd" || tc.wantAbsent == "both") {
					t.Errorf("passwd %q (nil %v), want %q", got, db.Passwd == nil, tc.wantPasswd)
				}
				if got := string(db.Group); got != tc.wantGroup || (db.Group == nil) != (tc.wantAbsent == "group" || tc.wantAbsent == "both") {
					t.Errorf("group %q (nil %v), want %q", got, db.Group == nil, tc.wantGroup)
				}
				if again, err := e.userDB(testCtx(t), img); err != nil || again != db {
					t.Errorf("userDB() again = %p, %v; want the first read's %p", again, err, db)
				}
			}
			if n := d.count("Content/Read"); n != tc.wantReads {
				t.Errorf("%d layers read, want %d", n, tc.wantReads)
			}
		})
	}
}

// TestFinishUserDB: a user image whose USER is a name is planned with the
// user its layers' /etc/passwd and /etc/group give; one whose files
// cannot be read fails the plan, naming the image. The layers are read
// only when the plan depends on them: the user container runs as its
// image's USER, root too, for its groups; a user the action set, which
// travels, reads none.
func TestFinishUserDB(t *testing.T) {
	const gz = "application/vnd.docker.image.rootfs.diff.tar.gzip"
	files := layer(t, true, [2]string{"etc/passwd", "root:x:0:0::/:/x\nprobe:x:1234:1234::/:/x\n"}, [2]string{"etc/group", "extra:x:2000:probe\nwheel:x:10:root\n"})
	confined := []string{"CAP_CHOWN", "CAP_KILL"}
	cases := []struct {
		name, user string
		layer      []byte
		mediaType  string
		caps       []string      // the action's, effective; nil: the recorded privileged action's
		actionUser *ocispec.User // the action's; nil: its image's, root
		wantUser   string
		wantErr    string
		wantReads  int
		wantLog    string
	}{
		{name: "a name", user: "probe", layer: files, mediaType: gz, wantUser: `{"uid":1234,"gid":1234,"additionalGids":[1234,2000]}`, wantReads: 1},
		{name: "uid:gid", user: "1234:6", layer: files, mediaType: gz, wantUser: `{"uid":1234,"gid":6,"additionalGids":[6,2000]}`, wantReads: 1},
		{name: "empty, CAP_DAC_OVERRIDE", layer: files, mediaType: gz, wantUser: `{"uid":0,"gid":0,"additionalGids":[0,10]}`, wantReads: 1},
		{name: "0:0, CAP_DAC_OVERRIDE", user: "0:0", layer: files, mediaType: gz, wantUser: `{"uid":0,"gid":0,"additionalGids":[0,10]}`, wantReads: 1},
		{name: "empty, without CAP_DAC_OVERRIDE", layer: files, mediaType: gz, caps: confined, wantUser: `{"uid":0,"gid":0,"additionalGids":[0,10]}`, wantReads: 1},
		{name: "a name, the action's user set", user: "probe", layer: files, mediaType: gz, actionUser: &ocispec.User{UID: 5, GID: 5, AdditionalGids: []uint32{5}}, wantUser: `{"uid":5,"gid":5,"additionalGids":[5]}`},
		// Not needed to resolve the user: its own group alone, and a note.
		{name: "empty, unreadable", layer: files, mediaType: "application/vnd.oci.image.layer.v1.tar+zstd", caps: confined, wantUser: `{"uid":0,"gid":0,"additionalGids":[0]}`, wantLog: "only tar and gzip layers are read"},
		{name: "unreadable", user: "probe", layer: files, mediaType: "application/vnd.oci.image.layer.v1.tar+zstd", wantErr: "reading /etc/passwd and /etc/group from image docker.io/library/probe:1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, d := newFake(t, map[string][]reply{"Content/Read": {{msg: `{"data":{"base64":"` + base64.StdEncoding.EncodeToString(tc.layer) + `"}}`}}})
			log := &syncLog{}
			e.Log = log
			act := recordedAction(t, "reboot.json")
			spec := act.Detail.(*self).spec
			if tc.caps != nil {
				raw, _ := json.Marshal(map[string][]string{"bounding": tc.caps, "effective": tc.caps, "permitted": tc.caps})
				spec.Process.Rest = ocispec.Rest{"capabilities": raw}
			}
			if tc.actionUser != nil {
				spec.Process.User = *tc.actionUser
			}
			p := &planned{in: &ocispec.Input{
				Spec: spec, Image: ocispec.ImageConfig{Entrypoint: []string{"/waitdaemon", "action", "--"}},
				UserImageRef: "probe:1", Namespace: namespace, ID: "user-1",
			}}
			var img containerdapi.ResolvedImage
			img.Image.Name = "docker.io/library/probe:1"
			img.Config.Config.User, img.Config.Config.Entrypoint = tc.user, []string{"/probe"}
			img.Manifest.Config.Digest = "sha256:c1"
			img.Manifest.Layers = []containerdapi.Descriptor{{MediaType: tc.mediaType, Digest: "sha256:l1"}}
			err := e.finish(testCtx(t), p, img)
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("finish() = %v, want an error saying %q", err, tc.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			default:
				if got, _ := json.Marshal(p.Spec.Process.User); string(got) != tc.wantUser {
					t.Errorf("user %s, want %s", got, tc.wantUser)
				}
			}
			if !strings.Contains(log.String(), tc.wantLog) || tc.wantLog == "" && log.String() != "" {
				t.Errorf("log %q, want it to say %q", log.String(), tc.wantLog)
			}
			if n := d.count("Content/Read"); n != tc.wantReads {
				t.Errorf("%d layers read, want %d", n, tc.wantReads)
			}
		})
	}
}

// TestUserDBBounded: reading the user database stops, with an error that
// says so, once it has read userDBBytes of the image's layers (unpacked)
// without finding both files, or once userDBTime is spent.
func TestUserDBBounded(t *testing.T) {
	big := layer(t, true, [2]string{"usr/big", strings.Repeat("x", 64<<10)})
	var img containerdapi.ResolvedImage
	img.Image.Name = "docker.io/library/big:1"
	img.Manifest.Config.Digest = "sha256:c0"
	img.Manifest.Layers = []containerdapi.Descriptor{
		{MediaType: "application/vnd.oci.image.layer.v1.tar+gzip", Digest: "sha256:l0"},
		{MediaType: "application/vnd.oci.image.layer.v1.tar+gzip", Digest: "sha256:l1"},
	}
	read := reply{msg: `{"data":{"base64":"` + base64.StdEncoding.EncodeToString(big) + `"}}`}
	t.Run("size", func(t *testing.T) {
		defer func(b int64) { userDBBytes = b }(userDBBytes)
		userDBBytes = 100 << 10
		e, d := newFake(t, map[string][]reply{"Content/Read": {read}})
		_, err := e.userDB(testCtx(t), img)
		if err == nil || !strings.Contains(err.Error(), "gave up after reading 100 KiB of its layers") || !strings.Contains(err.Error(), img.Image.Name) {
			t.Errorf("userDB() = %v, want it given up after 100 KiB, naming the image", err)
		}
		if n := d.count("Content/Read"); n != 2 {
			t.Errorf("%d layers read, want 2", n)
		}
	})
	t.Run("time", func(t *testing.T) {
		defer func(d time.Duration) { userDBTime = d }(userDBTime)
		userDBTime = 200 * time.Millisecond
		slow := read
		slow.broken = func() bool { time.Sleep(time.Second); return false }
		e, _ := newFake(t, map[string][]reply{"Content/Read": {slow}})
		began := time.Now()
		_, err := e.userDB(testCtx(t), img)
		if err == nil || !strings.Contains(err.Error(), "layer sha256:l1: gave up after 200ms: ") || time.Since(began) > 900*time.Millisecond {
			t.Errorf("userDB() = %v after %v, want it given up after 200ms, said first", err, time.Since(began))
		}
	})
	t.Run("canceled", func(t *testing.T) {
		slow := read
		slow.broken = func() bool { time.Sleep(time.Second); return false }
		e, _ := newFake(t, map[string][]reply{"Content/Read": {slow}})
		ctx, cancel := context.WithCancel(testCtx(t))
		time.AfterFunc(100*time.Millisecond, cancel)
		_, err := e.userDB(ctx, img)
		if err == nil || strings.Contains(err.Error(), "gave up") || strings.Count(err.Error(), "context canceled") != 1 {
			t.Errorf("userDB() = %v, want it canceled, said once, and not given up", err)
		}
	})
}
