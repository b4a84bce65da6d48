package containerdapi

import (
	"context"
	"fmt"
	"time"
)

// Container is containerd.services.containers.v1.Container: metadata
// only; a container runs as a task.
type Container struct {
	ID          string            // 1
	Labels      map[string]string // 2
	Image       string            // 3
	Runtime     Runtime           // 4
	Spec        Any               // 5: the OCI runtime spec; see SpecAny
	Snapshotter string            // 6
	SnapshotKey string            // 7
	CreatedAt   time.Time         // 8
	UpdatedAt   time.Time         // 9
}

func (c *Container) fields() []field {
	return []field{
		{1, "id", (*stringValue)(&c.ID)},
		{2, "labels", (*mapValue)(&c.Labels)},
		{3, "image", (*stringValue)(&c.Image)},
		{4, "runtime", msgValue{&c.Runtime}},
		{5, "spec", anyValue{&c.Spec}},
		{6, "snapshotter", (*stringValue)(&c.Snapshotter)},
		{7, "snapshot_key", (*stringValue)(&c.SnapshotKey)},
		{8, "created_at", (*timeValue)(&c.CreatedAt)},
		{9, "updated_at", (*timeValue)(&c.UpdatedAt)},
	}
}

// containerList is a repeated Container (see msgList).
type containerList []Container

func (l *containerList) len() int         { return len(*l) }
func (l *containerList) at(i int) message { return &(*l)[i] }
func (l *containerList) add() message     { *l = append(*l, Container{}); return &(*l)[len(*l)-1] }

// RuncV2 is the runtime of every container waitdaemon creates.
const RuncV2 = "io.containerd.runc.v2"

// Runtime is Container.Runtime {name 1, options 2}.
type Runtime struct {
	Name    string // 1: RuncV2
	Options Any    // 2
}

func (r *Runtime) fields() []field {
	return []field{{1, "name", (*stringValue)(&r.Name)}, {2, "options", anyValue{&r.Options}}}
}

// containers.v1 requests and answers.
type (
	containerID struct {
		ID string // 1
	}
	containerMsg struct {
		Container Container // 1
	}
	listContainersRequest struct {
		Filters []string // 1
	}
	listContainersResponse struct {
		Containers []Container // 1
	}
	updateContainerRequest struct {
		Container  Container // 1
		UpdateMask fieldMask // 2
	}
	// fieldMask is google.protobuf.FieldMask {paths 1}.
	fieldMask struct {
		Paths []string // 1
	}
)

func (m *containerID) fields() []field { return []field{{1, "id", (*stringValue)(&m.ID)}} }
func (m *containerMsg) fields() []field {
	return []field{{1, "container", msgValue{&m.Container}}}
}
func (m *listContainersRequest) fields() []field {
	return []field{{1, "filters", (*stringsValue)(&m.Filters)}}
}
func (m *listContainersResponse) fields() []field {
	return []field{{1, "containers", msgList{(*containerList)(&m.Containers)}}}
}
func (m *updateContainerRequest) fields() []field {
	return []field{{1, "container", msgValue{&m.Container}}, {2, "update_mask", msgValue{&m.UpdateMask}}}
}
func (m *fieldMask) fields() []field { return []field{{1, "paths", (*stringsValue)(&m.Paths)}} }

var (
	containersGet    = newRPC("containerd.services.containers.v1.Containers/Get", &containerID{}, &containerMsg{}, true)
	containersList   = newRPC("containerd.services.containers.v1.Containers/List", &listContainersRequest{}, &listContainersResponse{}, true)
	containersCreate = newRPC("containerd.services.containers.v1.Containers/Create", &containerMsg{}, &containerMsg{}, false)
	containersUpdate = newRPC("containerd.services.containers.v1.Containers/Update", &updateContainerRequest{}, &containerMsg{}, true)
	containersDelete = newRPC("containerd.services.containers.v1.Containers/Delete", &containerID{}, &empty{}, true)
)

// ContainerGet returns the container id.
func (c *Client) ContainerGet(ctx context.Context, id string) (Container, error) {
	var out containerMsg
	if err := c.call(ctx, containersGet, &containerID{ID: id}, &out, callOptions{}); err != nil {
		return Container{}, fmt.Errorf("getting container %q: %w", id, err)
	}
	return out.Container, nil
}

// ContainerList returns the containers that match any of filters (all of
// them when there is none). A filter is containerd's syntax, such as
// LabelFilter gives.
func (c *Client) ContainerList(ctx context.Context, filters ...string) ([]Container, error) {
	var out listContainersResponse
	if err := c.call(ctx, containersList, &listContainersRequest{Filters: filters}, &out, callOptions{}); err != nil {
		return nil, fmt.Errorf("listing containers %q: %w", filters, err)
	}
	return out.Containers, nil
}

// LabelFilter is the filter of the containers whose label key is value:
// labels."key"==value, quoted as containerd's filter syntax needs.
func LabelFilter(key, value string) string {
	return "labels." + quoteFilter(key) + "==" + quoteFilter(value)
}

// quoteFilter quotes s for containerd's filter syntax.
func quoteFilter(s string) string {
	b := []byte{'"'}
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			b = append(b, '\\')
		}
		b = append(b, s[i])
	}
	return string(append(b, '"'))
}

// ContainerCreate creates ctr and returns it as the daemon stored it.
// A container already there fails as AlreadyExists (errors.Is(err,
// ErrAlreadyExists)). It is sent once: a lost answer is the caller's to
// settle.
func (c *Client) ContainerCreate(ctx context.Context, ctr Container) (Container, error) {
	var out containerMsg
	if err := c.call(ctx, containersCreate, &containerMsg{Container: ctr}, &out, callOptions{}); err != nil {
		return Container{}, fmt.Errorf("creating container %q: %w", ctr.ID, err)
	}
	return out.Container, nil
}

// ContainerSetLabels sets the container's labels to labels, all of them
// (a field mask of "labels"), and returns the container as updated.
func (c *Client) ContainerSetLabels(ctx context.Context, id string, labels map[string]string) (Container, error) {
	return c.containerUpdate(ctx, Container{ID: id, Labels: labels}, "labels")
}

// ContainerSetLabel sets or (with value "") removes one label, leaving the
// others alone (a field mask of labels."key").
func (c *Client) ContainerSetLabel(ctx context.Context, id, key, value string) (Container, error) {
	labels := map[string]string{key: value}
	if value == "" {
		labels = nil
	}
	return c.containerUpdate(ctx, Container{ID: id, Labels: labels}, "labels."+key)
}

func (c *Client) containerUpdate(ctx context.Context, ctr Container, paths ...string) (Container, error) {
	var out containerMsg
	req := &updateContainerRequest{Container: ctr, UpdateMask: fieldMask{Paths: paths}}
	if err := c.call(ctx, containersUpdate, req, &out, callOptions{}); err != nil {
		return Container{}, fmt.Errorf("updating %q of container %q: %w", paths, ctr.ID, err)
	}
	return out.Container, nil
}

// ContainerDelete deletes the container's metadata. Beware: it succeeds
// while the container's task runs, and orphans it; delete the task
// first.
func (c *Client) ContainerDelete(ctx context.Context, id string) error {
	if err := c.call(ctx, containersDelete, &containerID{ID: id}, &empty{}, callOptions{}); err != nil {
		return fmt.Errorf("deleting container %q: %w", id, err)
	}
	return nil
}
