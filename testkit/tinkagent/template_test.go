package tinkagent

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// templateBlocks are the YAML blocks of a Markdown page that are one
// action each.
func templateBlocks(t *testing.T, page string) []string {
	t.Helper()
	data, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(data), -1) {
		// A template's first line may be a comment: the releases it
		// works on.
		if strings.HasPrefix(regexp.MustCompile(`^(#.*\n)*`).ReplaceAllString(m[1], ""), "- name:") {
			out = append(out, m[1])
		}
	}
	return out
}

func TestParseTemplateAction(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want Action
	}{
		{
			name: "the README's HookOS reboot: a list of one, top-level pid, a number in the environment",
			yaml: `
- name: reboot
  image: waitdaemon:latest
  timeout: 90
  pid: host
  command: ["reboot"]
  environment:
    WAIT_SECONDS: 10
    IMAGE: alpine:3.20
  volumes:
    - /var/run/docker.sock:/var/run/docker.sock
`,
			want: Action{
				ID: "A1", Name: "reboot", Image: "waitdaemon:latest", Args: []string{"reboot"}, Timeout: 90 * time.Second,
				Env: []string{"IMAGE=alpine:3.20", "WAIT_SECONDS=10"}, Volumes: []string{"/var/run/docker.sock:/var/run/docker.sock"},
				PID: "host",
			},
		},
		{
			name: "a mapping, namespaces each on its own, over the top-level pid; values as written",
			yaml: `
name: kexec
image: registry.example:5000/waitdaemon:v1
timeout: 5
pid: private
namespaces:
  pid: host
  network: host
environment:
  WAITDAEMON_FALLBACK_COMMAND: '["reboot", "-f"]'
  HEX: 0x10
  FLOAT: 1.50
  EMPTY:
  YES: true
volumes:
  - /dev:/dev:ro
`,
			want: Action{
				ID: "A1", Name: "kexec", Image: "registry.example:5000/waitdaemon:v1", Timeout: 5 * time.Second,
				Env:     []string{"EMPTY=", "FLOAT=1.50", "HEX=0x10", `WAITDAEMON_FALLBACK_COMMAND=["reboot", "-f"]`, "YES=true"},
				Volumes: []string{"/dev:/dev:ro"}, PID: "host", Network: "host",
			},
		},
		{
			name: "keys no release reads dropped without a word, as the controller's yaml.Unmarshal drops them",
			yaml: "name: a\nimage: i\ncmd: x\nnetwork: host\nprivileged: false\n",
			want: Action{ID: "A1", Name: "a", Image: "i"},
		},
		{
			name: "the network alone: pid stays the runtime's",
			yaml: "name: a\nimage: i\nnamespaces:\n  network: host\n",
			want: Action{ID: "A1", Name: "a", Image: "i", Network: "host"},
		},
		{
			name: "K=V sorted whole, as the server's sort.Strings: A1= before A=",
			yaml: "name: a\nimage: i\nenvironment:\n  A: x\n  A1: y\n  A_B: z\n",
			want: Action{ID: "A1", Name: "a", Image: "i", Env: []string{"A1=y", "A=x", "A_B=z"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseTemplateAction([]byte(tt.yaml), "A1")
			if err != nil {
				t.Fatal(err)
			}
			if !equalAction(got, tt.want) {
				t.Errorf("ParseTemplateAction() =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

func equalAction(a, b Action) bool {
	return a.ID == b.ID && a.Name == b.Name && a.Image == b.Image && slices.Equal(a.Args, b.Args) && slices.Equal(a.Env, b.Env) &&
		slices.Equal(a.Volumes, b.Volumes) && a.PID == b.PID && a.Network == b.Network && a.Timeout == b.Timeout
}

func TestParseTemplateActionRefuses(t *testing.T) {
	for _, tt := range []struct{ name, yaml, want string }{
		{"not YAML", "name: [", "not YAML"},
		{"two actions", "- name: a\n  image: i\n- name: b\n  image: i\n", "2 actions"},
		{"no image", "name: a\n", "needs a name and an image"},
		{"a list in the environment", "name: a\nimage: i\nenvironment:\n  X: [1]\n", "cannot unmarshal !!seq into string"},
		{"a negative timeout", "name: a\nimage: i\ntimeout: -1\n", "timeout -1"},
		{"empty", "", "want one action"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseTemplateAction([]byte(tt.yaml), "A1")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ParseTemplateAction() error = %v, want one saying %q", err, tt.want)
			}
		})
	}
}

// TestParseTemplateActionDocs reads every one-action template of the
// README and docs/templates.md.
func TestParseTemplateActionDocs(t *testing.T) {
	n := 0
	for _, page := range []string{"../../README.md", "../../docs/templates.md"} {
		for _, block := range templateBlocks(t, page) {
			a, err := ParseTemplateAction([]byte(block), "A1")
			if err != nil {
				t.Errorf("%s: %v\n%s", page, err, block)
				continue
			}
			if a.Timeout == 0 || len(a.Volumes) == 0 || !slices.ContainsFunc(a.Env, func(e string) bool { return strings.HasPrefix(e, "IMAGE=") }) {
				t.Errorf("%s: %+v, want a timeout, the socket's volume and IMAGE", page, a)
			}
			n++
		}
	}
	if n < 8 {
		t.Errorf("%d templates read, want the README's and templates.md's (8 at least)", n)
	}
}

func TestContainerName(t *testing.T) {
	a := Action{Name: "kexec into/os", ID: "01J:X"}
	if got, want := a.ContainerName(), "tinkerbell_kexec_into_os_01J_X"; got != want {
		t.Errorf("ContainerName() = %q, want %q", got, want)
	}
}
