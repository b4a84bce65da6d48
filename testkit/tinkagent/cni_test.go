package tinkagent

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakePlugins writes plugins named names into a new directory: each
// appends its command, environment and stdin to calls.log, and on ADD
// prints its stdin's prevResult with its own IP added, as a chain's
// plugins pass the result along; one named in fail exits 1 with the
// spec's error.
func fakePlugins(t *testing.T, fail string, names ...string) (bin, log string) {
	t.Helper()
	bin = t.TempDir()
	log = filepath.Join(bin, "calls.log")
	for _, n := range names {
		script := `#!/bin/sh
in=$(cat)
printf '%s %s %s %s %s %s\n' "` + n + `" "$CNI_COMMAND" "$CNI_CONTAINERID" "$CNI_NETNS" "$CNI_IFNAME" "$CNI_PATH" >>"` + log + `"
printf '%s\n' "$in" >>"` + log + `"
if [ "` + n + `" = "` + fail + `" ]; then
	echo '{"cniVersion":"1.0.0","code":11,"msg":"` + n + ` failed","details":"on purpose"}'
	exit 1
fi
[ "$CNI_COMMAND" = ADD ] && echo '{"cniVersion":"1.0.0","ips":[{"address":"172.17.0.2/23"}],"by":"` + n + `"}'
exit 0
`
		if err := os.WriteFile(filepath.Join(bin, n), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return bin, log
}

type pluginCall struct {
	plugin, command, id, netns, ifname, path string
	stdin                                    map[string]any
}

func readCalls(t *testing.T, log string) []pluginCall {
	t.Helper()
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	var calls []pluginCall
	for i := 0; i+1 < len(lines); i += 2 {
		f := strings.Fields(lines[i])
		if len(f) != 6 {
			t.Fatalf("calls.log: %q", lines[i])
		}
		c := pluginCall{plugin: f[0], command: f[1], id: f[2], netns: f[3], ifname: f[4], path: f[5]}
		if err := json.Unmarshal([]byte(lines[i+1]), &c.stdin); err != nil {
			t.Fatalf("calls.log: stdin %q: %v", lines[i+1], err)
		}
		calls = append(calls, c)
	}
	return calls
}

// TestCNIChain: Setup runs the list's plugins in order, each with the
// list's name and version and the result before it, and Remove runs them
// last first, each with the ADD's result; the CNI_* variables name the
// command, the container, its task's namespace, eth0 and the plugins'
// directory.
func TestCNIChain(t *testing.T) {
	bin, log := fakePlugins(t, "", "bridge", "portmap", "firewall", "tuning")
	n := &CNI{BinDir: bin, Conflist: []byte(fallbackConflist)}
	id := strings.Repeat("ab", 32)
	att, err := n.Setup(context.Background(), id, "/proc/4242/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	if att.IP != "172.17.0.2/23" {
		t.Errorf("the attachment's IP %q; want 172.17.0.2/23", att.IP)
	}
	if err := n.Remove(context.Background(), att); err != nil {
		t.Fatal(err)
	}
	calls := readCalls(t, log)
	want := []string{"bridge ADD", "portmap ADD", "firewall ADD", "tuning ADD", "tuning DEL", "firewall DEL", "portmap DEL", "bridge DEL"}
	if len(calls) != len(want) {
		t.Fatalf("%d plugin runs; want %d: %+v", len(calls), len(want), calls)
	}
	for i, c := range calls {
		if got := c.plugin + " " + c.command; got != want[i] {
			t.Errorf("run %d: %s; want %s", i, got, want[i])
		}
		if c.id != id || c.netns != "/proc/4242/ns/net" || c.ifname != "eth0" || c.path != bin {
			t.Errorf("run %d (%s): CNI_CONTAINERID %q, CNI_NETNS %q, CNI_IFNAME %q, CNI_PATH %q; want the container, its task's namespace, eth0, %s", i, want[i], c.id, c.netns, c.ifname, c.path, bin)
		}
		if c.stdin["name"] != "bridge" || c.stdin["cniVersion"] != "1.0.0" || c.stdin["type"] != c.plugin {
			t.Errorf("run %d (%s): stdin name %v, cniVersion %v, type %v; want the list's bridge, 1.0.0, the plugin", i, want[i], c.stdin["name"], c.stdin["cniVersion"], c.stdin["type"])
		}
		prev, _ := c.stdin["prevResult"].(map[string]any)
		switch {
		case i == 0:
			if prev != nil {
				t.Errorf("the first ADD has a prevResult %v; want none", prev)
			}
		case c.command == "ADD":
			if prev["by"] != calls[i-1].plugin {
				t.Errorf("%s ADD's prevResult is %v's; want %s's", c.plugin, prev["by"], calls[i-1].plugin)
			}
		default:
			if prev["by"] != "tuning" {
				t.Errorf("%s DEL's prevResult is %v's; want the chain's result, tuning's", c.plugin, prev["by"])
			}
		}
	}
	// The bridge's own settings reach it untouched.
	if ipam, _ := calls[0].stdin["ipam"].(map[string]any); calls[0].stdin["bridge"] != "cni0" || ipam["type"] != "host-local" {
		t.Errorf("the bridge's stdin %v; want cni0 and host-local", calls[0].stdin)
	}
}

// TestCNIErrors: a plugin's error is the spec's message; an ADD that
// failed leaves an attachment for Remove, and a DEL that fails ends the
// teardown there, as libcni's.
func TestCNIErrors(t *testing.T) {
	bin, log := fakePlugins(t, "firewall", "bridge", "portmap", "firewall", "tuning")
	n := &CNI{BinDir: bin, Conflist: []byte(fallbackConflist)}
	id := strings.Repeat("cd", 32)
	att, err := n.Setup(context.Background(), id, "/proc/1/ns/net")
	if err == nil || !strings.Contains(err.Error(), "plugin firewall ADD: firewall failed (code 11) on purpose") {
		t.Fatalf("Setup: %v; want firewall's error", err)
	}
	if att == nil || att.ContainerID != id {
		t.Fatalf("Setup gave the attachment %+v; want one for Remove", att)
	}
	err = n.Remove(context.Background(), att)
	if err == nil || !strings.Contains(err.Error(), "plugin firewall DEL") {
		t.Fatalf("Remove: %v; want firewall's error", err)
	}
	var got []string
	for _, c := range readCalls(t, log) {
		got = append(got, c.plugin+" "+c.command)
	}
	if want := "bridge ADD,portmap ADD,firewall ADD,tuning DEL,firewall DEL"; strings.Join(got, ",") != want {
		t.Errorf("plugin runs %s; want %s", strings.Join(got, ","), want)
	}
}

// TestLoadCNI: the conf dir's first conflist by name, else the agent's
// bridge; a list that is no list is an error naming it.
func TestLoadCNI(t *testing.T) {
	dir := t.TempDir()
	n, err := LoadCNI(dir, "/opt/cni/bin")
	if err != nil {
		t.Fatal(err)
	}
	if l, _ := n.list(); l.Name != "bridge" || len(l.Plugins) != 4 || !strings.Contains(string(n.Conflist), "172.17.0.0/23") {
		t.Errorf("with no conflist: %s; want the agent's bridge", n.Conflist)
	}
	for name, text := range map[string]string{
		"20-other.conflist": `{"cniVersion":"1.0.0","name":"other","plugins":[{"type":"ptp"}]}`,
		"10-first.conflist": `{"cniVersion":"1.0.0","name":"first","plugins":[{"type":"bridge"}]}`,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if n, err = LoadCNI(dir, "/opt/cni/bin"); err != nil {
		t.Fatal(err)
	}
	if l, _ := n.list(); l.Name != "first" {
		t.Errorf("the list %q; want the first by name, first", l.Name)
	}
	if err := os.WriteFile(filepath.Join(dir, "00-bad.conflist"), []byte(`{"name":"bad"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCNI(dir, "/opt/cni/bin"); err == nil || !strings.Contains(err.Error(), "want a name and plugins") {
		t.Errorf("a list without plugins: %v; want an error saying what it needs", err)
	}
}
