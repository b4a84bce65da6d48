// Package field boots the two machines waitdaemon runs on, CaptainOS-like
// (systemd, containerd) and HookOS-like (busybox init, Docker), in QEMU,
// runs the templates of the README and docs/templates.md on them as
// tink-agent would, and observes how each machine went down. It reads
// top-down: image_rig_test.go builds a machine's image, qemu_rig_test.go
// boots it and watches QEMU's QMP events and serial console,
// scenario_rig_test.go turns each documented template into a run, and
// field_test.go runs them all and prints one row per scenario and
// machine.
//
// It is a rig, kept apart from the production code, and all of it is
// test files, so nothing here can reach the binary (which runs no
// commands): `make field` runs it.
package field
