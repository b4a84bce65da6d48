package engine

import (
	"errors"
	"testing"
)

// TestStartExitCode: a start refused at the runtime's exec of the
// command gives a shell's codes, 127 for a command that is not there and
// 126 for one that cannot run, as each engine and runtime words it; any
// other refusal, whatever words it holds (a device or a bind source that
// is not there, a directory that cannot be made), is the engine's, 125.
func TestStartExitCode(t *testing.T) {
	cases := []struct {
		msg  string
		want int
	}{
		// runc 1.0, Docker 20.10.
		{`OCI runtime create failed: container_linux.go:380: starting container process caused: exec: "/no-such-binary": stat /no-such-binary: no such file or directory: unknown`, 127},
		{`OCI runtime create failed: container_linux.go:380: starting container process caused: exec: "nope": executable file not found in $PATH: unknown`, 127},
		// runc 1.1 and later.
		{`failed to create task for container: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: exec: "nope": executable file not found in $PATH: unknown`, 127},
		{`OCI runtime create failed: runc create failed: unable to start container process: error during container init: exec: "/nope": stat /nope: no such file or directory`, 127},
		{`exec: "/etc/passwd": permission denied`, 126},
		{`OCI runtime create failed: runc create failed: unable to start container process: error during container init: exec /etc/passwd: permission denied`, 126},
		{`OCI runtime create failed: runc create failed: unable to start container process: error during container init: exec /bin/arm-only: exec format error`, 126},
		{`OCI runtime start failed: starting container process caused "exec: \"/x\": permission denied": unknown`, 126},
		// crun, Podman.
		{"crun: executable file `nope` not found in $PATH: No such file or directory: OCI runtime attempted to invoke a command that was not found", 127},
		{"crun: open executable: Permission denied: OCI permission denied", 126},
		// Two steps named: the words after the first tell.
		{`exec: "/x": permission denied (an executable file, by its name)`, 126},
		{`exec: "/x": stat /x: no such file or directory, so no executable file`, 127},
		// Refusals before the exec.
		{`error gathering device information while adding custom device "/dev/sdz": no such file or directory`, 125},
		{`error while creating mount source path '/srv/data': mkdir /srv/data: permission denied`, 125},
		{`OCI runtime create failed: runc create failed: unable to start container process: error during container init: error mounting "/var/lib/result" to rootfs at "/run/waitdaemon-result": stat /var/lib/result: no such file or directory: unknown`, 125},
		{`open /var/lib/docker/containers/x/hostname: permission denied`, 125},
		{"500: the engine is out of sorts", 125},
	}
	for _, tc := range cases {
		if got := StartExitCode(errors.New(tc.msg)); got != tc.want {
			t.Errorf("StartExitCode(%q) = %d, want %d", tc.msg, got, tc.want)
		}
	}
}
