package containerdapi

import (
	"context"
	"fmt"
	"time"
)

// Lease is containerd.services.leases.v1.Lease.
type Lease struct {
	ID        string            // 1
	CreatedAt time.Time         // 2
	Labels    map[string]string // 3
}

func (m *Lease) fields() []field {
	return []field{
		{1, "id", (*stringValue)(&m.ID)},
		{2, "created_at", (*timeValue)(&m.CreatedAt)},
		{3, "labels", (*mapValue)(&m.Labels)},
	}
}

// LabelGCExpire is the lease label after which the garbage collector may
// drop a forgotten lease (an RFC 3339 time).
const LabelGCExpire = "containerd.io/gc.expire"

type (
	createLeaseRequest struct {
		ID     string            // 1
		Labels map[string]string // 3
	}
	leaseMsg struct {
		Lease Lease // 1
	}
	deleteLeaseRequest struct {
		ID   string // 1
		Sync bool   // 2
	}
)

func (m *createLeaseRequest) fields() []field {
	return []field{{1, "id", (*stringValue)(&m.ID)}, {3, "labels", (*mapValue)(&m.Labels)}}
}
func (m *leaseMsg) fields() []field { return []field{{1, "lease", msgValue{&m.Lease}}} }
func (m *deleteLeaseRequest) fields() []field {
	return []field{{1, "id", (*stringValue)(&m.ID)}, {2, "sync", (*boolValue)(&m.Sync)}}
}

var (
	leasesCreate = newRPC("containerd.services.leases.v1.Leases/Create", &createLeaseRequest{}, &leaseMsg{}, false)
	leasesDelete = newRPC("containerd.services.leases.v1.Leases/Delete", &deleteLeaseRequest{}, &empty{}, true)
)

// LeaseCreate creates the lease id, which the garbage collector may drop
// after expires (never when zero), and returns it. Use it with WithLease.
// It is sent once: a lost answer is the caller's to settle (a create
// sent again meets AlreadyExists if the first made the lease).
func (c *Client) LeaseCreate(ctx context.Context, id string, expires time.Time) (Lease, error) {
	req := &createLeaseRequest{ID: id}
	if !expires.IsZero() {
		req.Labels = map[string]string{LabelGCExpire: expires.UTC().Format(time.RFC3339)}
	}
	var out leaseMsg
	if err := c.call(ctx, leasesCreate, req, &out, callOptions{}); err != nil {
		return Lease{}, fmt.Errorf("creating lease %q: %w", id, err)
	}
	return out.Lease, nil
}

// LeaseDelete deletes the lease id. With sync, the garbage collector has
// run when it returns: what only the lease held is gone.
func (c *Client) LeaseDelete(ctx context.Context, id string, sync bool) error {
	if err := c.call(ctx, leasesDelete, &deleteLeaseRequest{ID: id, Sync: sync}, &empty{}, callOptions{}); err != nil {
		return fmt.Errorf("deleting lease %q: %w", id, err)
	}
	return nil
}
