package containerdapi

import (
	"context"
	"fmt"
	"time"
)

// DefaultSnapshotter is the snapshotter waitdaemon unpacks to and
// prepares root filesystems with.
const DefaultSnapshotter = "overlayfs"

// Mount is containerd.types.Mount: one mount of a root filesystem, as
// Tasks/Create takes them.
type Mount struct {
	Type    string   // 1
	Source  string   // 2
	Target  string   // 3
	Options []string // 4
}

func (m *Mount) fields() []field {
	return []field{
		{1, "type", (*stringValue)(&m.Type)},
		{2, "source", (*stringValue)(&m.Source)},
		{3, "target", (*stringValue)(&m.Target)},
		{4, "options", (*stringsValue)(&m.Options)},
	}
}

// mountList is a repeated Mount (see msgList).
type mountList []Mount

func (l *mountList) len() int         { return len(*l) }
func (l *mountList) at(i int) message { return &(*l)[i] }
func (l *mountList) add() message     { *l = append(*l, Mount{}); return &(*l)[len(*l)-1] }

// SnapshotKind is containerd.services.snapshots.v1.Kind.
type SnapshotKind uint32

// The kinds of snapshots.
const (
	SnapshotUnknown   SnapshotKind = 0
	SnapshotView      SnapshotKind = 1
	SnapshotActive    SnapshotKind = 2
	SnapshotCommitted SnapshotKind = 3
)

// SnapshotInfo is containerd.services.snapshots.v1.Info.
type SnapshotInfo struct {
	Name      string            // 1
	Parent    string            // 2
	Kind      SnapshotKind      // 3
	CreatedAt time.Time         // 4
	UpdatedAt time.Time         // 5
	Labels    map[string]string // 6
}

func (m *SnapshotInfo) fields() []field {
	return []field{
		{1, "name", (*stringValue)(&m.Name)},
		{2, "parent", (*stringValue)(&m.Parent)},
		{3, "kind", uintValue[SnapshotKind]{&m.Kind}},
		{4, "created_at", (*timeValue)(&m.CreatedAt)},
		{5, "updated_at", (*timeValue)(&m.UpdatedAt)},
		{6, "labels", (*mapValue)(&m.Labels)},
	}
}

type (
	snapshotRequest struct {
		Snapshotter string            // 1
		Key         string            // 2
		Parent      string            // 3: Prepare only
		Labels      map[string]string // 4: Prepare only
	}
	mountsResponse struct {
		Mounts []Mount // 1
	}
	statSnapshotResponse struct {
		Info SnapshotInfo // 1
	}
)

func (m *snapshotRequest) fields() []field {
	return []field{
		{1, "snapshotter", (*stringValue)(&m.Snapshotter)},
		{2, "key", (*stringValue)(&m.Key)},
		{3, "parent", (*stringValue)(&m.Parent)},
		{4, "labels", (*mapValue)(&m.Labels)},
	}
}
func (m *mountsResponse) fields() []field {
	return []field{{1, "mounts", msgList{(*mountList)(&m.Mounts)}}}
}
func (m *statSnapshotResponse) fields() []field {
	return []field{{1, "info", msgValue{&m.Info}}}
}

var (
	snapshotsPrepare = newRPC("containerd.services.snapshots.v1.Snapshots/Prepare", &snapshotRequest{}, &mountsResponse{}, false)
	snapshotsMounts  = newRPC("containerd.services.snapshots.v1.Snapshots/Mounts", &snapshotRequest{}, &mountsResponse{}, true)
	snapshotsStat    = newRPC("containerd.services.snapshots.v1.Snapshots/Stat", &snapshotRequest{}, &statSnapshotResponse{}, true)
	snapshotsRemove  = newRPC("containerd.services.snapshots.v1.Snapshots/Remove", &snapshotRequest{}, &empty{}, true)
)

// SnapshotPrepare makes the active snapshot key on top of parent (a chain
// ID; "" for an empty one) and returns its mounts. Call it under a lease
// (WithLease) until a container holds the key, or the garbage collector
// may take it. It is sent once: a lost answer is the caller's to settle
// (a prepare sent again meets AlreadyExists if the first made the key).
func (c *Client) SnapshotPrepare(ctx context.Context, snapshotter, key, parent string) ([]Mount, error) {
	var out mountsResponse
	req := &snapshotRequest{Snapshotter: snapshotter, Key: key, Parent: parent}
	if err := c.call(ctx, snapshotsPrepare, req, &out, callOptions{}); err != nil {
		return nil, fmt.Errorf("preparing snapshot %q: %w", key, err)
	}
	return out.Mounts, nil
}

// SnapshotMounts returns the mounts of the active snapshot key.
func (c *Client) SnapshotMounts(ctx context.Context, snapshotter, key string) ([]Mount, error) {
	var out mountsResponse
	if err := c.call(ctx, snapshotsMounts, &snapshotRequest{Snapshotter: snapshotter, Key: key}, &out, callOptions{}); err != nil {
		return nil, fmt.Errorf("getting the mounts of snapshot %q: %w", key, err)
	}
	return out.Mounts, nil
}

// SnapshotStat returns what the snapshotter knows of key (a chain ID for
// an unpacked image).
func (c *Client) SnapshotStat(ctx context.Context, snapshotter, key string) (SnapshotInfo, error) {
	var out statSnapshotResponse
	if err := c.call(ctx, snapshotsStat, &snapshotRequest{Snapshotter: snapshotter, Key: key}, &out, callOptions{}); err != nil {
		return SnapshotInfo{}, fmt.Errorf("stat of snapshot %q: %w", key, err)
	}
	return out.Info, nil
}

// SnapshotRemove removes the snapshot key.
func (c *Client) SnapshotRemove(ctx context.Context, snapshotter, key string) error {
	if err := c.call(ctx, snapshotsRemove, &snapshotRequest{Snapshotter: snapshotter, Key: key}, &empty{}, callOptions{}); err != nil {
		return fmt.Errorf("removing snapshot %q: %w", key, err)
	}
	return nil
}
