package containerdapi

import (
	"context"
	"fmt"
)

// VersionInfo is the answer of containerd.services.version.v1.Version.
type VersionInfo struct {
	Version  string // 1: "v2.2.1"
	Revision string // 2
}

func (m *VersionInfo) fields() []field {
	return []field{{1, "version", (*stringValue)(&m.Version)}, {2, "revision", (*stringValue)(&m.Revision)}}
}

// Namespace is containerd.services.namespaces.v1.Namespace.
type Namespace struct {
	Name   string            // 1
	Labels map[string]string // 2
}

func (m *Namespace) fields() []field {
	return []field{{1, "name", (*stringValue)(&m.Name)}, {2, "labels", (*mapValue)(&m.Labels)}}
}

// namespaceList is a repeated Namespace (see msgList).
type namespaceList []Namespace

func (l *namespaceList) len() int         { return len(*l) }
func (l *namespaceList) at(i int) message { return &(*l)[i] }
func (l *namespaceList) add() message     { *l = append(*l, Namespace{}); return &(*l)[len(*l)-1] }

type (
	listNamespacesRequest struct {
		Filter string // 1
	}
	listNamespacesResponse struct {
		Namespaces []Namespace // 1
	}
)

func (m *listNamespacesRequest) fields() []field {
	return []field{{1, "filter", (*stringValue)(&m.Filter)}}
}
func (m *listNamespacesResponse) fields() []field {
	return []field{{1, "namespaces", msgList{(*namespaceList)(&m.Namespaces)}}}
}

var (
	versionVersion = newRPC("containerd.services.version.v1.Version/Version", &empty{}, &VersionInfo{}, true)
	namespacesList = newRPC("containerd.services.namespaces.v1.Namespaces/List", &listNamespacesRequest{}, &listNamespacesResponse{}, true)
)

// Version returns the daemon's version, for `waitdaemon version`.
func (c *Client) Version(ctx context.Context) (VersionInfo, error) {
	var out VersionInfo
	if err := c.call(ctx, versionVersion, &empty{}, &out, callOptions{}); err != nil {
		return VersionInfo{}, fmt.Errorf("asking the daemon's version: %w", err)
	}
	return out, nil
}

// NamespaceList returns the daemon's namespaces.
func (c *Client) NamespaceList(ctx context.Context) ([]Namespace, error) {
	var out listNamespacesResponse
	if err := c.call(ctx, namespacesList, &listNamespacesRequest{}, &out, callOptions{}); err != nil {
		return nil, fmt.Errorf("listing namespaces: %w", err)
	}
	return out.Namespaces, nil
}
