// Package inherit is what both planners share: the control variables,
// waitdaemon's own, which no user container gets. The planners, side by
// side below it, plan the user container from the action container, each
// in its engine's terms: hostconfig for Docker and Podman (an inspected
// container's Config and HostConfig), ocispec for containerd (an OCI
// runtime spec). Both are pure functions, tested against recorded cases
// and golden files with one harness (testkit/golden).
package inherit
