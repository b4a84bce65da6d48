package field

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// The HookOS-like machines run the runner as HookOS runs tink-agent: in a
// Docker container that hook-bootkit creates (tinkerbell/hook,
// images/hook-bootkit), from an image that holds the runner alone,
// imported at boot from the scenario's files, as an image embedded in
// HookOS is there before hook-bootkit looks (pulling it took 40-70 s
// under TCG on two busy cores).
const tinkWorkerImage = "tink-worker:field"

// tinkWorkerMounts are hook-bootkit's binds for the tink-worker
// container, as its HostConfig.Mounts; their sources resolve in
// hook-docker's mount namespace.
var tinkWorkerMounts = [][2]string{
	{"/worker", "/worker"},
	{"/var/run/docker.sock", "/var/run/docker.sock"},
	{"/dev", "/dev"},
	{"/host_root/run", "/run"},
}

// hookDockerBinds are hook-docker's binds that the machine makes in
// dockerd's mount namespace: each mount point, and the directory of the
// host's file system mounted there (/var/run is /run; the host's
// /var/run/docker is /run/docker, its tmpfs's /docker).
var hookDockerBinds = [][2]string{
	{"/run", "/docker"},
	{"/var/lib/docker", "/images"},
	{"/worker", "/worker"},
	{"/host_root", "/"},
}

// bootkitScript is what /field/run runs on a HookOS-like machine in place
// of the runner: it says how hook-docker runs, imports the worker's
// image, then does what hook-bootkit does with it (remove any
// tink-worker, create it with hook-bootkit's settings, start it), waits
// for the runner
// to end and exits with its code. Its arguments go to the runner (its
// release, say); RUNNER, if set, is the runner (field/realagent, which
// runs a release's real tink-agent, with tink-agent and tink-server
// beside it in the image). The action is in /worker, which
// hook-docker binds from the host's /var/run/worker.
var bootkitScript = `#!/bin/sh
d=$(pidof dockerd)
ns() { readlink /proc/$1/ns/$2; }
echo "FIELD-HOOK-DOCKER mnt=$(ns $d mnt) host-mnt=$(ns 1 mnt) pid=$(ns $d pid) host-pid=$(ns 1 pid) net=$(ns $d net) host-net=$(ns 1 net)"
/bin/busybox awk '{print "FIELD-HOOK-DOCKER-MOUNT " $5 " " $4}' /proc/$d/mountinfo
echo "FIELD-DOCKER-INFO $(docker info --format '{"LoggingDriver":{{json .LoggingDriver}},"Debug":{{json .Debug}}}')"
image=` + tinkWorkerImage + `
runner=${RUNNER:-/field/tinkagent}
mkdir -p /tmp/tink-worker && cp "$runner" /tmp/tink-worker/
if [ "$runner" = /field/realagent ]; then
	# A release's real tink-agent, and its server side, which realagent
	# starts on the machine's loopback (the container has the host's
	# network).
	cp /field/tink-agent /field/tink-server /tmp/tink-worker/
fi
/bin/busybox tar -C /tmp/tink-worker -c . | docker import -c "ENTRYPOINT [\"/${runner##*/}\"]" - "$image" >/dev/null ||
	{ echo "FIELD-BOOTKIT importing $image failed"; exit 1; }
docker rm -f tink-worker >/dev/null 2>&1
cp /field/action.yaml /var/run/worker/action.yaml
docker create --name tink-worker --privileged --network host \
	--mount type=bind,source=/worker,target=/worker \
	--mount type=bind,source=/var/run/docker.sock,target=/var/run/docker.sock \
	--mount type=bind,source=/dev,target=/dev \
	--mount type=bind,source=/host_root/run,target=/run \
	"$image" -runtime docker -socket /var/run/docker.sock "$@" -action /worker/action.yaml >/dev/null || exit 1
docker start tink-worker >/dev/null || exit 1
echo "FIELD-TINK-WORKER $(docker inspect --format '{"Name":{{json .Name}},"HostConfig":{{json .HostConfig}}}' tink-worker)"
code=$(docker wait tink-worker)
# Its output, read back through the engine's cache of a syslog-logged
# container.
docker logs tink-worker 2>/dev/null | sed 's/^/FIELD-RUNNER-LOG /'
exit "$code"
`

// isHookOS says whether os is one of the HookOS-like machines.
func isHookOS(os string) bool { return strings.HasPrefix(os, "hookos") }

// CheckHookOS reads, from a HookOS-like machine's console, that it ran as
// HookOS ships: dockerd in a mount namespace of its own with
// hook-docker's binds, pid and network the host's; the syslog log driver
// and debug; the runner in hook-bootkit's tink-worker container; and the
// containers' output arriving through syslog, the runner's exit among it
// (and, where the machine went down, the waiter's lines, with no follow
// of a container lost).
func CheckHookOS(lines []Line, want string) error {
	var errs []string
	bad := func(format string, a ...any) { errs = append(errs, fmt.Sprintf(format, a...)) }
	find := func(prefix string) (string, bool) {
		for _, l := range lines {
			if rest, ok := strings.CutPrefix(l.Text, prefix); ok {
				return rest, true
			}
		}
		return "", false
	}

	if rest, ok := find("FIELD-HOOK-DOCKER "); !ok {
		bad("no FIELD-HOOK-DOCKER line: dockerd's namespaces unknown")
	} else {
		ns := map[string]string{}
		for _, f := range strings.Fields(rest) {
			if k, v, ok := strings.Cut(f, "="); ok {
				ns[k] = v
			}
		}
		if ns["mnt"] == "" || ns["mnt"] == ns["host-mnt"] {
			bad("dockerd's mount namespace %q, the host's %q: want one of its own", ns["mnt"], ns["host-mnt"])
		}
		for _, k := range []string{"pid", "net"} {
			if ns[k] == "" || ns[k] != ns["host-"+k] {
				bad("dockerd's %s namespace %q, the host's %q: want the host's", k, ns[k], ns["host-"+k])
			}
		}
	}
	mounts := map[string][]string{}
	for _, l := range lines {
		if rest, ok := strings.CutPrefix(l.Text, "FIELD-HOOK-DOCKER-MOUNT "); ok {
			if point, root, ok := strings.Cut(rest, " "); ok {
				mounts[point] = append(mounts[point], root)
			}
		}
	}
	for _, b := range hookDockerBinds {
		if m := mounts[b[0]]; len(m) == 0 || m[len(m)-1] != b[1] {
			bad("in dockerd's mount namespace %s is %q; want the host's %s bound there", b[0], m, b[1])
		}
	}

	if rest, ok := find("FIELD-DOCKER-INFO "); !ok {
		bad("no FIELD-DOCKER-INFO line")
	} else {
		var info struct {
			LoggingDriver string
			Debug         bool
		}
		if err := json.Unmarshal([]byte(rest), &info); err != nil {
			bad("FIELD-DOCKER-INFO %q: %v", rest, err)
		} else if info.LoggingDriver != "syslog" || !info.Debug {
			bad("dockerd logs with %q, debug %v; want syslog, debug true (hook-docker's daemon.json)", info.LoggingDriver, info.Debug)
		}
	}

	if rest, ok := find("FIELD-TINK-WORKER "); !ok {
		bad("no FIELD-TINK-WORKER line: the runner's container was not started")
	} else {
		var c struct {
			Name       string
			HostConfig struct {
				Privileged  bool
				NetworkMode string
				PidMode     string
				Binds       []string
				Mounts      []struct{ Type, Source, Target string }
			}
		}
		if err := json.Unmarshal([]byte(rest), &c); err != nil {
			bad("FIELD-TINK-WORKER %q: %v", rest, err)
		} else {
			hc := c.HostConfig
			if c.Name != "/tink-worker" || !hc.Privileged || hc.NetworkMode != "host" || hc.PidMode != "" || len(hc.Binds) != 0 {
				bad("the runner's container %s: privileged %v, network %q, pid %q, binds %q; want /tink-worker, privileged, host, the container's own pid namespace, mounts alone",
					c.Name, hc.Privileged, hc.NetworkMode, hc.PidMode, hc.Binds)
			}
			var got [][2]string
			for _, m := range hc.Mounts {
				if m.Type != "bind" {
					bad("the runner's container has a %s mount of %s; want binds alone", m.Type, m.Target)
				}
				got = append(got, [2]string{m.Source, m.Target})
			}
			if !slices.Equal(got, tinkWorkerMounts) {
				bad("the runner's container binds %q; want hook-bootkit's %q", got, tinkWorkerMounts)
			}
		}
	}

	var syslog []string
	for _, l := range lines {
		if rest, ok := strings.CutPrefix(l.Text, "FIELD-SYSLOG "); ok {
			syslog = append(syslog, rest)
		}
	}
	has := func(s string) bool {
		return slices.ContainsFunc(syslog, func(l string) bool { return strings.Contains(l, s) })
	}
	if !slices.ContainsFunc(syslog, actionLine.MatchString) {
		bad("the runner's exit did not arrive through syslog (%d syslog lines)", len(syslog))
	}
	if want != StayedUp && !has(`"msg":"handed off"`) {
		bad("phase 1's hand-off did not arrive through syslog")
	}
	if has("could not follow a container") {
		bad("the waiter could not follow a container under the syslog log driver")
	}
	// A run that failed said why: its output, read back from the
	// engine's cache of a syslog-logged container, is in its log tail.
	for _, l := range syslog {
		var run struct {
			Msg      string
			ExitCode int      `json:"exit_code"`
			LogTail  []string `json:"log_tail"`
		}
		if i := strings.Index(l, "{"); i < 0 || json.Unmarshal([]byte(l[i:]), &run) != nil || run.Msg != "user container exited" && run.Msg != "fallback exited" {
			continue
		}
		if run.ExitCode > 0 && len(run.LogTail) == 0 {
			bad("a run exited %d with no log tail: its output was not read back under the syslog log driver (%s)", run.ExitCode, l)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("not HookOS as shipped:\n\t%s", strings.Join(errs, "\n\t"))
	}
	return nil
}

// TestCheckHookOS: CheckHookOS passes a console of the machine as HookOS
// ships it, and fails each way it can differ: dockerd on the host's mount
// namespace, or not bound as hook-docker, json-file logs, a runner
// container set up otherwise, output that did not come through syslog, a
// follow lost.
func TestCheckHookOS(t *testing.T) {
	good := []string{
		"FIELD-HOOK-DOCKER mnt=mnt:[4026532200] host-mnt=mnt:[4026531841] pid=pid:[4026531836] host-pid=pid:[4026531836] net=net:[4026531840] host-net=net:[4026531840]",
		"FIELD-HOOK-DOCKER-MOUNT / /",
		"FIELD-HOOK-DOCKER-MOUNT /run /",
		"FIELD-HOOK-DOCKER-MOUNT /host_root /",
		"FIELD-HOOK-DOCKER-MOUNT /var/lib/docker /images",
		"FIELD-HOOK-DOCKER-MOUNT /worker /worker",
		"FIELD-HOOK-DOCKER-MOUNT /run /docker",
		`FIELD-DOCKER-INFO {"LoggingDriver":"syslog","Debug":true}`,
		`FIELD-TINK-WORKER {"Name":"/tink-worker","HostConfig":{"Binds":null,"NetworkMode":"host","PidMode":"","Privileged":true,"Mounts":[{"Type":"bind","Source":"/worker","Target":"/worker"},{"Type":"bind","Source":"/var/run/docker.sock","Target":"/var/run/docker.sock"},{"Type":"bind","Source":"/dev","Target":"/dev"},{"Type":"bind","Source":"/host_root/run","Target":"/run"}]}}`,
		`FIELD-SYSLOG <30>Nov 28 06:40:01 hookos 5d1c0a0b2f3e[812]: {"msg":"handed off","waiter":"x"}`,
		`FIELD-SYSLOG <30>Nov 28 06:40:02 hookos 0f9e8d7c6b5a[812]: {"msg":"action exited","action":"reboot","exit_code":0,"at":"2026-11-28T06:40:02Z"}`,
	}
	lines := func(text []string) []Line {
		var out []Line
		for _, s := range text {
			out = append(out, Line{Text: s})
		}
		return out
	}
	if err := CheckHookOS(lines(good), Reset); err != nil {
		t.Fatalf("the machine as shipped: %v", err)
	}
	failed := append(slices.Clone(good), `FIELD-SYSLOG <30>x[1]: {"time":"t","msg":"user container exited","attempt":1,"exit_code":1,"log_tail":["kexec: the kernel: no such file"],"ended":true}`)
	if err := CheckHookOS(lines(failed), Reset); err != nil {
		t.Fatalf("a failed run with its output: %v", err)
	}
	without := func(prefix string) []string {
		return slices.DeleteFunc(slices.Clone(good), func(s string) bool { return strings.HasPrefix(s, prefix) })
	}
	with := func(prefix, line string) []string { return append(without(prefix), line) }
	for _, c := range []struct {
		name string
		text []string
		want string
	}{
		{"dockerd on the host's mount namespace", with("FIELD-HOOK-DOCKER ", "FIELD-HOOK-DOCKER mnt=mnt:[1] host-mnt=mnt:[1] pid=pid:[2] host-pid=pid:[2] net=net:[3] host-net=net:[3]"), "want one of its own"},
		{"dockerd in a pid namespace of its own", with("FIELD-HOOK-DOCKER ", "FIELD-HOOK-DOCKER mnt=mnt:[1] host-mnt=mnt:[9] pid=pid:[2] host-pid=pid:[8] net=net:[3] host-net=net:[3]"), "pid namespace"},
		{"no namespaces said", without("FIELD-HOOK-DOCKER "), "no FIELD-HOOK-DOCKER line"},
		{"/var/run not bound", without("FIELD-HOOK-DOCKER-MOUNT /run /docker"), "/run is"},
		{"no binds", without("FIELD-HOOK-DOCKER-MOUNT "), "/worker is"},
		{"json-file", with("FIELD-DOCKER-INFO ", `FIELD-DOCKER-INFO {"LoggingDriver":"json-file","Debug":false}`), `logs with "json-file"`},
		{"the runner on the host", without("FIELD-TINK-WORKER "), "no FIELD-TINK-WORKER line"},
		{"the runner with the host's pids", with("FIELD-TINK-WORKER ", strings.Replace(good[8], `"PidMode":""`, `"PidMode":"host"`, 1)), `pid "host"`},
		{"the runner with binds", with("FIELD-TINK-WORKER ", strings.Replace(good[8], `"Binds":null`, `"Binds":["/worker:/worker"]`, 1)), "binds"},
		{"the runner without /run", with("FIELD-TINK-WORKER ", strings.Replace(good[8], `,{"Type":"bind","Source":"/host_root/run","Target":"/run"}`, "", 1)), "want hook-bootkit's"},
		{"no syslog", without("FIELD-SYSLOG "), "through syslog"},
		{"a follow lost", append(slices.Clone(good), `FIELD-SYSLOG <30>x: {"msg":"could not follow a container; asking the engine again"}`), "could not follow"},
		{"a failed run's output lost", append(slices.Clone(good), `FIELD-SYSLOG <30>x[1]: {"time":"t","msg":"user container exited","attempt":1,"exit_code":1,"log_tail":[],"ended":true}`), "no log tail"},
	} {
		err := CheckHookOS(lines(c.text), Reset)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: CheckHookOS = %v; want an error saying %q", c.name, err, c.want)
		}
	}
	// Killed at its timeout: no hand-off, the runner's line alone.
	if err := CheckHookOS(lines(slices.DeleteFunc(slices.Clone(good), func(s string) bool { return strings.Contains(s, "handed off") })), StayedUp); err != nil {
		t.Errorf("killed at its timeout: %v", err)
	}
}
