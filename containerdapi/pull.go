package containerdapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// DefaultHostDir is where CaptainOS writes a registry's hosts.toml (for
// its insecure_registries= setting), and where tink-agent looks for them.
// The Transfer service has no default of its own: a client names the
// directory in each request, or the daemon reads none.
const DefaultHostDir = "/etc/containerd/certs.d"

// PullRequest is what Pull needs.
type PullRequest struct {
	// Ref is the fully qualified reference, such as
	// docker.io/library/alpine:3.20: the daemon does not expand names.
	Ref string
	// Platform is the one platform fetched and unpacked from an index.
	// Zero means DefaultPlatform().
	Platform Platform
	// Snapshotter is where the image is unpacked. Empty means
	// DefaultSnapshotter.
	Snapshotter string
	// Auth, when set, is asked for credentials each time the registry
	// wants some, with the host the daemon is talking to (host:port as in
	// the reference, or a mirror's) and the reference. It must answer
	// for that host only (StaticAuth does); ok false sends none.
	Auth func(host, ref string) (username, secret string, ok bool)
	// HostDir is a certs.d tree of <host:port>/hosts.toml (DefaultHostDir
	// is CaptainOS's), read by the daemon on its own host: what this
	// process sees says nothing of it. A directory that is not there, or
	// that has no entry for the registry, is no error (containerd 2.2.1
	// pulls as it would without one). Empty means none: plain HTTP only
	// for localhost and loopback addresses, HTTPS with the system's roots
	// for every other registry.
	HostDir string
	// Progress, when set, receives the daemon's progress events.
	Progress func(Progress)
}

// StaticAuth answers Auth with username and secret for host alone.
func StaticAuth(host, username, secret string) func(string, string) (string, string, bool) {
	return func(asked, _ string) (string, string, bool) {
		if asked != host {
			return "", "", false
		}
		return username, secret, true
	}
}

// Progress is containerd.types.transfer.Progress: one event of a pull.
type Progress struct {
	Event    string   // 1: "resolving", "waiting", "downloading", "complete", …
	Name     string   // 2: a reference or a descriptor
	Parents  []string // 3
	Progress int64    // 4: bytes done
	Total    int64    // 5: bytes in all
}

func (m *Progress) fields() []field {
	return []field{
		{1, "event", (*stringValue)(&m.Event)},
		{2, "name", (*stringValue)(&m.Name)},
		{3, "parents", (*stringsValue)(&m.Parents)},
		{4, "progress", uintValue[int64]{&m.Progress}},
		{5, "total", uintValue[int64]{&m.Total}},
	}
}

// The transfer and streaming messages.
type (
	transferRequest struct {
		Source      Any             // 1
		Destination Any             // 2
		Options     transferOptions // 3
	}
	transferOptions struct {
		ProgressStream string // 1
	}
	ociRegistry struct {
		Reference string           // 1
		Resolver  registryResolver // 2
	}
	registryResolver struct {
		AuthStream    string            // 1
		Headers       map[string]string // 2
		HostDir       string            // 3
		DefaultScheme string            // 4
	}
	imageStore struct {
		Name      string                // 1
		Labels    map[string]string     // 2
		Platforms []Platform            // 3
		Unpacks   []unpackConfiguration // 10
	}
	unpackConfiguration struct {
		Platform    Platform // 1
		Snapshotter string   // 2
	}
	streamInit struct {
		ID string // 1
	}
	authRequest struct {
		Host      string // 1
		Reference string // 2
	}
	authResponse struct {
		AuthType uint32 // 1: authCredentials
		Secret   string // 2
		Username string // 3
		// Neither is ever traced nor recorded: the whole credential is
		// hidden, as Docker's X-Registry-Auth is.
	}
)

// authCredentials is AuthType CREDENTIALS: a username and a secret.
const authCredentials = 1

func (m *transferRequest) fields() []field {
	return []field{
		{1, "source", anyValue{&m.Source}},
		{2, "destination", anyValue{&m.Destination}},
		{3, "options", msgValue{&m.Options}},
	}
}
func (m *transferOptions) fields() []field {
	return []field{{1, "progress_stream", (*stringValue)(&m.ProgressStream)}}
}
func (m *ociRegistry) fields() []field {
	return []field{{1, "reference", (*stringValue)(&m.Reference)}, {2, "resolver", msgValue{&m.Resolver}}}
}
func (m *registryResolver) fields() []field {
	return []field{
		{1, "auth_stream", (*stringValue)(&m.AuthStream)},
		{2, "headers", (*mapValue)(&m.Headers)},
		{3, "host_dir", (*stringValue)(&m.HostDir)},
		{4, "default_scheme", (*stringValue)(&m.DefaultScheme)},
	}
}
func (m *imageStore) fields() []field {
	return []field{
		{1, "name", (*stringValue)(&m.Name)},
		{2, "labels", (*mapValue)(&m.Labels)},
		{3, "platforms", msgList{(*platformList)(&m.Platforms)}},
		{10, "unpacks", msgList{(*unpackList)(&m.Unpacks)}},
	}
}
func (m *unpackConfiguration) fields() []field {
	return []field{
		{1, "platform", msgValue{&m.Platform}},
		{2, "snapshotter", (*stringValue)(&m.Snapshotter)},
	}
}

// unpackList is a repeated unpackConfiguration (see msgList).
type unpackList []unpackConfiguration

func (l *unpackList) len() int         { return len(*l) }
func (l *unpackList) at(i int) message { return &(*l)[i] }
func (l *unpackList) add() message     { *l = append(*l, unpackConfiguration{}); return &(*l)[len(*l)-1] }

func (m *streamInit) fields() []field { return []field{{1, "id", (*stringValue)(&m.ID)}} }
func (m *authRequest) fields() []field {
	return []field{{1, "host", (*stringValue)(&m.Host)}, {2, "reference", (*stringValue)(&m.Reference)}}
}
func (m *authResponse) fields() []field {
	return []field{
		{1, "authType", uintValue[uint32]{&m.AuthType}},
		{2, "secret", (*secretValue)(&m.Secret)},
		{3, "username", (*secretValue)(&m.Username)},
	}
}

var (
	// Not repeated by the client: a repeat names side streams the daemon
	// has forgotten. A pull made again makes new ones.
	transferTransfer = newRPC("containerd.services.transfer.v1.Transfer/Transfer", &transferRequest{}, &empty{}, false)
	streamingStream  = newRPC("containerd.services.streaming.v1.Streaming/Stream", &Any{}, &Any{}, false)
)

// Pull has the daemon pull req.Ref for one platform, store it under that
// name and unpack it, and returns when it is done. It works under the
// lease of ctx (WithLease), or under one of its own, deleted at the end. Credentials go to the
// daemon only when it asks for a host, through req.Auth; progress comes
// back through req.Progress. A missing tag fails as NotFound; a refused
// login or a TLS failure as Unknown. A pull that breaks off (its answer
// lost, or UNAVAILABLE) fails as lost; made again, it starts from new
// side streams, and what the daemon fetched stays in its content store.
func (c *Client) Pull(ctx context.Context, req PullRequest) error {
	if err := c.init(); err != nil {
		return err
	}
	platform := req.Platform
	if platform == (Platform{}) {
		platform = DefaultPlatform()
	}
	snapshotter := req.Snapshotter
	if snapshotter == "" {
		snapshotter = DefaultSnapshotter
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if leaseOf(ctx) == "" {
		// The daemon forgets a stream only with its lease: without one,
		// every pull would leave its streams behind.
		id := c.newID()
		if _, err := c.LeaseCreate(ctx, id, c.now().Add(time.Hour)); err != nil {
			return fmt.Errorf("pulling image %s: %w", req.Ref, err)
		}
		defer func() {
			// Even when ctx has ended: a fresh, short context.
			dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer dcancel()
			_ = c.LeaseDelete(dctx, id, false)
		}()
		ctx = WithLease(ctx, id)
	}
	if err := c.transfer(ctx, req, platform, snapshotter); err != nil {
		return fmt.Errorf("pulling image %s: %w", req.Ref, err)
	}
	return nil
}

// transfer is a pull: the side streams it needs, then the Transfer call,
// which the client never repeats on its own.
func (c *Client) transfer(ctx context.Context, req PullRequest, platform Platform, snapshotter string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	src := ociRegistry{Reference: req.Ref, Resolver: registryResolver{HostDir: req.HostDir}}
	var wg sync.WaitGroup
	defer wg.Wait()
	if req.Auth != nil {
		s, id, err := c.openSideStream(ctx)
		if err != nil {
			return fmt.Errorf("opening the credentials stream: %w", err)
		}
		defer s.Close()
		src.Resolver.AuthStream = id
		wg.Go(func() { answerAuth(s, req.Auth) })
	}
	var progressDone chan struct{}
	dst := imageStore{
		Name:      req.Ref,
		Platforms: []Platform{platform},
		Unpacks:   []unpackConfiguration{{Platform: platform, Snapshotter: snapshotter}},
	}
	treq := &transferRequest{Source: anyOf("containerd.types.transfer.OCIRegistry", &src), Destination: anyOf("containerd.types.transfer.ImageStore", &dst)}
	if req.Progress != nil {
		s, id, err := c.openSideStream(ctx)
		if err != nil {
			return fmt.Errorf("opening the progress stream: %w", err)
		}
		defer s.Close()
		treq.Options.ProgressStream = id
		progressDone = make(chan struct{})
		go func() {
			defer close(progressDone)
			readProgress(s, req.Progress)
		}()
	}
	if err := c.call(ctx, transferTransfer, treq, &empty{}, callOptions{long: true}); err != nil {
		return err
	}
	if progressDone != nil {
		// The daemon ends the progress stream once the transfer is done:
		// wait for its last events, a little.
		lastEvents := time.After(2 * time.Second)
		select {
		case <-progressDone:
		case <-lastEvents:
		}
	}
	return nil
}

// openSideStream opens a Streaming/Stream, names it, and waits for the
// daemon's acknowledgement: the transfer can then refer to it by ID.
func (c *Client) openSideStream(ctx context.Context) (*stream, string, error) {
	id := c.newID()
	init := anyOf("containerd.services.streaming.v1.StreamInit", &streamInit{ID: id})
	s, err := c.openStream(ctx, streamingStream, &init, true)
	if err != nil {
		return nil, "", err
	}
	var ack Any
	if err := s.Recv(&ack); err != nil {
		s.Close()
		if errors.Is(err, io.EOF) {
			err = errors.New("the daemon ended the stream before acknowledging it")
		}
		return nil, "", err
	}
	return s, id, nil
}

// answerAuth answers each AuthRequest of the daemon with what auth says
// for the host asked, until the stream ends.
func answerAuth(s *stream, auth func(host, ref string) (string, string, bool)) {
	for {
		var in Any
		if s.Recv(&in) != nil {
			return
		}
		var ar authRequest
		if in.TypeURL != "containerd.types.transfer.AuthRequest" || unmarshal(in.Value, &ar) != nil {
			continue
		}
		var resp authResponse
		if user, secret, ok := auth(ar.Host, ar.Reference); ok {
			resp = authResponse{AuthType: authCredentials, Username: user, Secret: secret}
		}
		out := anyOf("containerd.types.transfer.AuthResponse", &resp)
		if s.Send(&out) != nil {
			return
		}
	}
}

// readProgress hands each Progress event to f until the stream ends.
func readProgress(s *stream, f func(Progress)) {
	for {
		var in Any
		if s.Recv(&in) != nil {
			return
		}
		var p Progress
		if in.TypeURL == "containerd.types.transfer.Progress" && unmarshal(in.Value, &p) == nil {
			f(p)
		}
	}
}

// randomID names a stream: unique across processes, as the daemon wants.
func randomID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "waitdaemon-" + hex.EncodeToString(b)
}

// IsQualified reports whether ref names its registry host (a first
// component with a dot, a colon, or "localhost"), as Pull needs.
func IsQualified(ref string) bool {
	host, _, ok := strings.Cut(ref, "/")
	return ok && (strings.ContainsAny(host, ".:") || host == "localhost")
}
