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
)

// ContainerInspect returns the container named or identified by id.
func (c *Client) ContainerInspect(ctx context.Context, id string) (Container, error) {
	var out Container
	err := c.do(ctx, request{method: http.MethodGet, path: "/containers/" + url.PathEscape(id) + "/json", ok: []int{200}, again: true}, &out)
	if err != nil {
		return Container{}, fmt.Errorf("inspecting container %q: %w", id, err)
	}
	return out, nil
}

// ContainerCreate creates a container named name (empty: let the engine
// pick one). It is sent once: a create whose answer was lost may have
// made the container, which only the caller can tell as its own.
func (c *Client) ContainerCreate(ctx context.Context, name string, body CreateRequest) (CreateResponse, error) {
	q := url.Values{}
	if name != "" {
		q.Set("name", name)
	}
	var out CreateResponse
	err := c.do(ctx, request{method: http.MethodPost, path: "/containers/create", query: q, body: body, ok: []int{201}}, &out)
	if err != nil {
		return CreateResponse{}, fmt.Errorf("creating container %q: %w", name, err)
	}
	return out, nil
}

// ContainerStart starts a container. A container that is already running
// gives an error for which errors.Is(err, ErrNotModified) holds. It is
// sent once: a start whose answer was lost may have run the container,
// which may have exited by the time a repeat came, and run it again.
func (c *Client) ContainerStart(ctx context.Context, id string) error {
	err := c.do(ctx, request{method: http.MethodPost, path: "/containers/" + url.PathEscape(id) + "/start", ok: []int{204}}, nil)
	if err != nil {
		return fmt.Errorf("starting container %q: %w", id, err)
	}
	return nil
}

// ContainerStop stops a running container at once (SIGKILL, with no
// grace), and returns once the engine has it stopped; one not running
// (304) is stopped already. A repeat's answer means what the first's
// would have.
func (c *Client) ContainerStop(ctx context.Context, id string) error {
	q := url.Values{"t": {"0"}}
	err := c.do(ctx, request{method: http.MethodPost, path: "/containers/" + url.PathEscape(id) + "/stop", query: q, ok: []int{204, 304}, again: true}, nil)
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
	err := c.do(ctx, request{method: http.MethodPost, path: "/containers/" + url.PathEscape(id) + "/wait", query: q, ok: []int{200}, again: true, stream: true}, &out)
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

// ContainerRemove removes a container. It is sent once: a repeat of a
// removal whose answer was lost would answer not found.
func (c *Client) ContainerRemove(ctx context.Context, id string, opts RemoveOptions) error {
	q := url.Values{}
	if opts.Force {
		q.Set("force", "1")
	}
	if opts.Volumes {
		q.Set("v", "1")
	}
	err := c.do(ctx, request{method: http.MethodDelete, path: "/containers/" + url.PathEscape(id), query: q, ok: []int{204}}, nil)
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
		err := c.do(ctx, request{method: http.MethodGet, path: "/containers/json", query: q, ok: []int{200}, again: true}, &out)
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
	resp, err := c.send(ctx, request{method: http.MethodGet, path: "/containers/" + url.PathEscape(id) + "/logs", query: q, ok: []int{200}, again: true})
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
	err := c.do(ctx, request{method: http.MethodPost, path: "/networks/" + url.PathEscape(network) + "/connect", body: body, ok: []int{200}}, nil)
	if err != nil {
		return fmt.Errorf("connecting container %q to network %q: %w", container, network, err)
	}
	return nil
}

// ContainerRename gives a container a new name.
func (c *Client) ContainerRename(ctx context.Context, id, name string) error {
	err := c.do(ctx, request{method: http.MethodPost, path: "/containers/" + url.PathEscape(id) + "/rename", query: url.Values{"name": {name}}, ok: []int{204}}, nil)
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
	err := c.do(ctx, request{method: http.MethodHead, path: "/containers/" + url.PathEscape(id) + "/archive", query: url.Values{"path": {path}}, ok: []int{200}, again: true, answered: &h}, nil)
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
	resp, err := c.send(ctx, request{method: http.MethodGet, path: "/containers/" + url.PathEscape(id) + "/archive", query: url.Values{"path": {path}}, ok: []int{200}, again: true})
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
	err := c.do(ctx, request{method: http.MethodPut, path: "/containers/" + url.PathEscape(id) + "/archive", query: url.Values{"path": {dir}}, tar: archive, ok: []int{200}, again: true}, nil)
	if err != nil {
		return fmt.Errorf("copying into %s of container %q: %w", dir, id, err)
	}
	return nil
}
