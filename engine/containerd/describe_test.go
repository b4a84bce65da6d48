package containerd

import (
	"encoding/base64"
	"slices"
	"testing"
)

// TestDescribe: what a created container will run is its record's image
// and its spec's process arguments, as Follow gives them once it ran.
func TestDescribe(t *testing.T) {
	spec := base64.StdEncoding.EncodeToString([]byte(`{"ociVersion":"1.0.2","process":{"args":["/usr/bin/kexec","-e"]}}`))
	e, _ := newFake(t, map[string][]reply{
		"Containers/Get": {{msg: `{"container":{"id":"user-1","image":"quay.io/tinkerbell/actions/kexec:latest","spec":{"type_url":"types.containerd.io/opencontainers/runtime-spec/1/Spec","base64":"` + spec + `"}}}`}},
	})
	image, command, err := e.Describe(testCtx(t), "user-1")
	if err != nil || image != "quay.io/tinkerbell/actions/kexec:latest" || !slices.Equal(command, []string{"/usr/bin/kexec", "-e"}) {
		t.Errorf("Describe() = %q, %q, %v; want the image and /usr/bin/kexec -e", image, command, err)
	}
}
