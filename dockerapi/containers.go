package dockerapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/waitdaemon/waitdaemon/internal/socketclient"
)

// ContainerInspect returns the container named or identified by id.
func (c *Client) ContainerInspect(ctx context.Context, id string) (Container, error) {
	var out Container
	err := c.do(ctx, request{method: http.MethodGet, path: "/containers/" + url.PathEscape(id) + "/json", ok: []int{200}, repeat: asFirst}, &out)
	if err != nil {
		return Container{}, fmt.Errorf("inspecting container %q: %w", id, err)
	}
	return out, nil
}

// ContainerCreate creates a container named name (empty: let the engine
// pick one). A named create is safe to retry: when an attempt may have
// reached the engine and the retry meets a name conflict, the container
// already there is ours if it carries every label asked for, and its ID
// is returned. A name the engine says is taken while no container answers
// to it is held by an attempt cut off while the engine was still at it,
// making the container or undoing it: the create is sent again, for
// nameHeld at most, until the engine settles it.
func (c *Client) ContainerCreate(ctx context.Context, name string, body CreateRequest) (CreateResponse, error) {
	q := url.Values{}
	if name != "" {
		q.Set("name", name)
	}
	var out CreateResponse
	tries := &socketclient.Attempts{}
	rep := never
	if name != "" {
		rep = adopted
	}
	req := request{
		method: http.MethodPost, path: "/containers/create", query: q, body: body,
		ok: []int{201}, repeat: rep, tries: tries,
	}
	err := c.do(ctx, req, &out)
	for held := time.Now(); err != nil && name != "" && tries.Ambiguous && errors.Is(err, ErrConflict); {
		there, ierr := c.ContainerInspect(ctx, name)
		if ierr == nil && hasLabels(there.Config.Labels, body.Labels) {
			return CreateResponse{ID: there.ID}, nil
		}
		if !errors.Is(ierr, ErrNotFound) || time.Since(held) >= nameHeld {
			break
		}
		select {
		case <-ctx.Done():
			return CreateResponse{}, fmt.Errorf("creating container %q: %w", name, errors.Join(err, ctx.Err()))
		case <-time.After(nameHeldPause):
		}
		err = c.do(ctx, req, &out)
	}
	if err != nil {
		return CreateResponse{}, fmt.Errorf("creating container %q: %w", name, err)
	}
	return out, nil
}

// nameHeld bounds how long ContainerCreate sends a create again while the
// engine holds its name for an attempt cut off; nameHeldPause is the
// pause between them.
const (
	nameHeld      = 5 * time.Second
	nameHeldPause = 50 * time.Millisecond
)

func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// ContainerStart starts a container. A container that is already running
// gives an error for which errors.Is(err, ErrNotModified) holds, unless
// an earlier attempt of this call started it.
//
// An attempt that may have reached the engine (its answer lost, or a
// 503) is not repeated blindly: a container that exits at once is no
// longer running when the repeat comes, and the repeat would run it
// again. The container is inspected first: if it runs, or started after
// the first attempt was sent, that attempt started it.
func (c *Client) ContainerStart(ctx context.Context, id string) error {
	sent := time.Now()
	var err error
	for n := 0; ; n++ {
		tries := &socketclient.Attempts{}
		err = c.do(ctx, request{method: http.MethodPost, path: "/containers/" + url.PathEscape(id) + "/start", ok: []int{204}, repeat: never, tries: tries}, nil)
		if err == nil || n > 0 && errors.Is(err, ErrNotModified) {
			return nil // a 304 to a repeat: an earlier attempt started it
		}
		if !tries.Ambiguous || n >= socketclient.MaxRetries {
			break
		}
		ctr, ierr := c.ContainerInspect(ctx, id)
		if ierr != nil {
			break
		}
		if since, perr := time.Parse(time.RFC3339Nano, ctr.State.StartedAt); ctr.State.Running || perr == nil && !since.Before(sent) {
			return nil
		}
		if perr := socketclient.Pause(ctx, n); perr != nil {
			return fmt.Errorf("starting container %q: %w", id, err)
		}
	}
	return fmt.Errorf("starting container %q: %w", id, err)
}

// ContainerStop stops a running container at once (SIGKILL, with no
// grace), and returns once the engine has it stopped; one not running
// (304) is stopped already. A repeat's answer means what the first's
// would have.
func (c *Client) ContainerStop(ctx context.Context, id string) error {
	q := url.Values{"t": {"0"}}
	err := c.do(ctx, request{method: http.MethodPost, path: "/containers/" + url.PathEscape(id) + "/stop", query: q, ok: []int{204, 304}, repeat: asFirst}, nil)
	if err != nil {
		return fmt.Errorf("stopping container %q: %w", id, err)
	}
	return nil
}

// Wait conditions for ContainerWait.
const (
	WaitNotRunning = "not-running"
	WaitNextExit   = "next-exit"
	WaitRemoved    = "removed"
)

// ContainerWait blocks until the container meets condition and returns its
// exit code. Only ctx ends the wait early: it has no timeout of its own.
func (c *Client) ContainerWait(ctx context.Context, id, condition string) (WaitResponse, error) {
	q := url.Values{}
	if condition != "" {
		q.Set("condition", condition)
	}
	var out WaitResponse
	err := c.do(ctx, request{method: http.MethodPost, path: "/containers/" + url.PathEscape(id) + "/wait", query: q, ok: []int{200}, repeat: asFirst, stream: true}, &out)
	if err != nil {
		return WaitResponse{}, fmt.Errorf("waiting for container %q: %w", id, err)
	}
	if out.Error != nil && out.Error.Message != "" {
		// The wait began, with 200 sent, and failed in the engine: the
		// message is all there is. A container removed meanwhile
		// (Podman says so here) is still one not found.
		msg := out.Error.Message
		if podmanNotFound(msg) || strings.Contains(msg, "No such container") {
			return out, fmt.Errorf("waiting for container %q: %w", id, &Error{Status: http.StatusNotFound, Method: http.MethodPost, Path: "/containers/" + id + "/wait", Message: msg})
		}
		return out, fmt.Errorf("waiting for container %q: %s", id, msg)
	}
	return out, nil
}

// RemoveOptions are the query of DELETE /containers/{id}.
type RemoveOptions struct {
	Force   bool // kill it first if it runs
	Volumes bool // remove its anonymous volumes too
}

// ContainerRemove removes a container.
func (c *Client) ContainerRemove(ctx context.Context, id string, opts RemoveOptions) error {
	q := url.Values{}
	if opts.Force {
		q.Set("force", "1")
	}
	if opts.Volumes {
		q.Set("v", "1")
	}
	err := c.do(ctx, request{method: http.MethodDelete, path: "/containers/" + url.PathEscape(id), query: q, ok: []int{204}, repeat: removed}, nil)
	if err != nil {
		return fmt.Errorf("removing container %q: %w", id, err)
	}
	return nil
}

// ContainerList lists all containers, running or not, that carry every
// one of labels ("key" or "key=value").
func (c *Client) ContainerList(ctx context.Context, labels ...string) ([]ContainerSummary, error) {
	q := url.Values{"all": {"1"}}
	if len(labels) > 0 {
		f, _ := json.Marshal(map[string][]string{"label": labels})
		q.Set("filters", string(f))
	}
	for n := 1; ; n++ {
		var out []ContainerSummary
		err := c.do(ctx, request{method: http.MethodGet, path: "/containers/json", query: q, ok: []int{200}, repeat: asFirst}, &out)
		if err == nil {
			return out, nil
		}
		// Podman 4.3 answers 500 "read /proc/N/cgroup: no such process"
		// when a container exits while it lists: the list is asked for
		// again, a few times.
		var apiErr *Error
		if n < listRaces && errors.As(err, &apiErr) && apiErr.Status == http.StatusInternalServerError && strings.Contains(apiErr.Message, "no such process") {
			select {
			case <-ctx.Done():
			case <-time.After(listRacePause):
				continue
			}
		}
		return nil, fmt.Errorf("listing containers %v: %w", labels, err)
	}
}

// listRaces bounds the lists asked for while Podman races an exiting
// container; listRacePause is the pause between them.
const (
	listRaces     = 4
	listRacePause = 50 * time.Millisecond
)

// LogsOptions are the query of GET /containers/{id}/logs.
type LogsOptions struct {
	Tail   int    // the last Tail lines; 0 means all
	Follow bool   // keep streaming until the container stops
	Since  string // only output from this RFC 3339 time on
	// TTY says the container has a terminal: its output is then one raw
	// stream, not multiplexed frames.
	TTY bool
}

// ContainerLogs copies a container's output to stdout and stderr. Without
// a TTY the engine multiplexes both streams, and they are separated here;
// with one, everything goes to stdout.
func (c *Client) ContainerLogs(ctx context.Context, id string, opts LogsOptions, stdout, stderr io.Writer) error {
	q := url.Values{"stdout": {"1"}, "stderr": {"1"}}
	if opts.Tail > 0 {
		q.Set("tail", strconv.Itoa(opts.Tail))
	}
	if opts.Follow {
		q.Set("follow", "1")
	}
	if t, err := time.Parse(time.RFC3339Nano, opts.Since); err == nil {
		q.Set("since", fmt.Sprintf("%d.%09d", t.Unix(), t.Nanosecond()))
	}
	resp, err := c.send(ctx, request{method: http.MethodGet, path: "/containers/" + url.PathEscape(id) + "/logs", query: q, ok: []int{200}, repeat: asFirst})
	if err != nil {
		return fmt.Errorf("reading logs of container %q: %w", id, err)
	}
	defer resp.Body.Close()
	if opts.TTY {
		_, err = io.Copy(stdout, resp.Body)
	} else {
		err = Demux(resp.Body, stdout, stderr)
	}
	if err != nil {
		return fmt.Errorf("reading logs of container %q: %w", id, err)
	}
	return nil
}

// NetworkConnect connects a container to a network, with the endpoint
// settings it should have there.
func (c *Client) NetworkConnect(ctx context.Context, network, container string, ep EndpointSettings) error {
	body := struct {
		Container      string
		EndpointConfig EndpointSettings
	}{container, ep}
	err := c.do(ctx, request{method: http.MethodPost, path: "/networks/" + url.PathEscape(network) + "/connect", body: body, ok: []int{200}, repeat: connected}, nil)
	if err != nil {
		return fmt.Errorf("connecting container %q to network %q: %w", container, network, err)
	}
	return nil
}

// ContainerRename gives a container a new name.
func (c *Client) ContainerRename(ctx context.Context, id, name string) error {
	err := c.do(ctx, request{method: http.MethodPost, path: "/containers/" + url.PathEscape(id) + "/rename", query: url.Values{"name": {name}}, ok: []int{204}, repeat: renamed, subject: id}, nil)
	if err != nil {
		return fmt.Errorf("renaming container %q to %q: %w", id, name, err)
	}
	return nil
}

// PathStat is a path's stat in a container's file system, as HEAD and
// GET /containers/{id}/archive give it in their X-Docker-Container-Path-Stat
// header (JSON, in base64).
type PathStat struct {
	Name       string      `json:"name"`
	Size       int64       `json:"size"`
	Mode       os.FileMode `json:"mode"`
	Mtime      string      `json:"mtime"`
	LinkTarget string      `json:"linkTarget"`
}

// pathStatHeader is the header that carries a PathStat.
const pathStatHeader = "X-Docker-Container-Path-Stat"

// pathStat decodes the PathStat in header h; the zero PathStat when it
// has none.
func pathStat(h http.Header) (PathStat, error) {
	var st PathStat
	v := h.Get(pathStatHeader)
	if v == "" {
		return st, nil
	}
	data, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		return st, fmt.Errorf("decoding %s: %w", pathStatHeader, err)
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return st, fmt.Errorf("decoding %s: %w", pathStatHeader, err)
	}
	return st, nil
}

// ContainerStatPath stats path in a container's file system (HEAD
// /containers/{id}/archive). A path that is not there gives an error for
// which errors.Is(err, ErrNotFound) holds, as does a container that is
// not.
func (c *Client) ContainerStatPath(ctx context.Context, id, path string) (PathStat, error) {
	var h http.Header
	err := c.do(ctx, request{method: http.MethodHead, path: "/containers/" + url.PathEscape(id) + "/archive", query: url.Values{"path": {path}}, ok: []int{200}, repeat: asFirst, answered: &h}, nil)
	if err != nil {
		return PathStat{}, fmt.Errorf("looking for %s in container %q: %w", path, id, err)
	}
	st, err := pathStat(h)
	if err != nil {
		return PathStat{}, fmt.Errorf("looking for %s in container %q: %w", path, id, err)
	}
	return st, nil
}

// ContainerArchive copies path out of a container's file system (GET
// /containers/{id}/archive): a tar stream of the file, or of the
// directory and all below it, which the caller reads and closes. A path
// that is not there gives an error for which errors.Is(err, ErrNotFound)
// holds, as does a container that is not.
func (c *Client) ContainerArchive(ctx context.Context, id, path string) (io.ReadCloser, PathStat, error) {
	resp, err := c.send(ctx, request{method: http.MethodGet, path: "/containers/" + url.PathEscape(id) + "/archive", query: url.Values{"path": {path}}, ok: []int{200}, repeat: asFirst})
	if err != nil {
		return nil, PathStat{}, fmt.Errorf("copying %s from container %q: %w", path, id, err)
	}
	st, err := pathStat(resp.Header)
	if err != nil {
		resp.Body.Close()
		return nil, PathStat{}, fmt.Errorf("copying %s from container %q: %w", path, id, err)
	}
	return resp.Body, st, nil
}

// ContainerPutArchive copies archive, a tar stream, into directory dir of
// a container's file system (PUT /containers/{id}/archive), whether the
// container runs or not. Sent again, it writes the same files over the
// same. A container that is not there gives an error for which
// errors.Is(err, ErrNotFound) holds.
func (c *Client) ContainerPutArchive(ctx context.Context, id, dir string, archive []byte) error {
	err := c.do(ctx, request{method: http.MethodPut, path: "/containers/" + url.PathEscape(id) + "/archive", query: url.Values{"path": {dir}}, tar: archive, ok: []int{200}, repeat: asFirst}, nil)
	if err != nil {
		return fmt.Errorf("copying into %s of container %q: %w", dir, id, err)
	}
	return nil
}
