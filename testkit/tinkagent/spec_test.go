package tinkagent

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/waitdaemon/waitdaemon/testkit/linediff"
)

// TestSpecAsRecorded holds spec to the specs containerd 2.2.1's client
// made with the agent's options (testdata/ocispec): all but the
// capabilities and the devices, which are the host's.
func TestSpecAsRecorded(t *testing.T) {
	for _, tt := range []struct {
		file             string
		volumes          []string
		hostPID, hostNet bool
	}{
		{"reboot", []string{"/run/containerd/containerd.sock:/run/containerd/containerd.sock"}, true, false},
		{"network-host", []string{"/run/containerd/containerd.sock:/run/containerd/containerd.sock"}, true, true},
		{"kexec", []string{"/run/containerd/containerd.sock:/run/containerd/containerd.sock"}, true, false},
		{"cni-volumes", []string{"/var/lib/tink/data:/data:ro,rslave", "/var/log:/var/log", "named:/named"}, false, false},
	} {
		t.Run(tt.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("../../testdata/ocispec", tt.file+".json"))
			if err != nil {
				t.Fatal(err)
			}
			var rec struct {
				Namespace string
				Container struct {
					ID   string
					Spec struct{ Value map[string]any }
				}
			}
			if err := json.Unmarshal(data, &rec); err != nil {
				t.Fatal(err)
			}
			want := rec.Container.Spec.Value
			proc := want["process"].(map[string]any)
			var args, env []string
			for _, a := range proc["args"].([]any) {
				args = append(args, a.(string))
			}
			for _, e := range proc["env"].([]any) {
				env = append(env, e.(string))
			}
			mounts, err := parseVolumes(tt.volumes)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]any{}
			if err := json.Unmarshal(spec(specInput{
				Namespace: rec.Namespace, ID: rec.Container.ID, Args: args, Env: env, Cwd: "/", Hostname: want["hostname"].(string),
				Volumes: mounts, Etc: "/tmp/tink-dns-ocispec-" + tt.file, HostPID: tt.hostPID, HostNetwork: tt.hostNet,
			}), &got); err != nil {
				t.Fatal(err)
			}
			for _, s := range []map[string]any{want, got} {
				delete(s["process"].(map[string]any), "capabilities")
				delete(s["linux"].(map[string]any), "devices")
			}
			w, _ := json.MarshalIndent(want, "", "  ")
			g, _ := json.MarshalIndent(got, "", "  ")
			if d := linediff.Text(string(w), string(g)); d != "" {
				t.Errorf("spec differs from the recorded one (-want +got):\n%s", d)
			}
		})
	}
}
