// Package inherit is what both planners share: the control variables,
// waitdaemon's own, which no user container gets. The planners, each
// beside its engine, plan the user container from the action container,
// each in its engine's terms: engine/docker/hostconfig for Docker and
// Podman (an inspected container's Config and HostConfig),
// engine/containerd/ocispec for containerd (an OCI runtime spec). Both are pure functions, tested against recorded cases
// and golden files with one harness (testkit/golden).
package inherit
