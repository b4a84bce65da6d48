package dockerapi_test

import (
	"testing"

	"github.com/waitdaemon/waitdaemon/dockerapi"
	"github.com/waitdaemon/waitdaemon/internal/rr"
)

// TestNegotiateRecorded replays negotiations recorded from the engines
// HookOS ships: Docker 28.2 answers the ping with Api-Version 1.50, the
// client's own maximum, and Docker 26.1 with 1.45, below it. The client
// must prefix its requests with min(MaxVersion, the engine's version),
// within the engine's range.
func TestNegotiateRecorded(t *testing.T) {
	want := map[string]string{"docker-28.2": "1.50", "docker-26.1": "1.45"}
	for _, engine := range []string{"docker-28.2", "docker-26.1"} {
		t.Run(engine, func(t *testing.T) {
			s := rr.Open(t, fixtures, engine, "Negotiate")
			c := &dockerapi.Client{Socket: s.Socket, Transport: s.Transport}
			v, err := c.EngineVersion(shortCtx(t))
			if err != nil {
				t.Fatal(err)
			}
			if v.APIVersion != want[engine] {
				t.Fatalf("EngineVersion() = API %s, want %s", v.APIVersion, want[engine])
			}
			list, err := c.ContainerList(shortCtx(t), "org.waitdaemon.test=negotiate")
			if err != nil {
				t.Fatalf("ContainerList() error = %v", err)
			}
			if len(list) != 0 {
				t.Errorf("ContainerList() = %+v, want none", list)
			}
			got, err := c.APIVersion(shortCtx(t))
			if err != nil || got != want[engine] {
				t.Errorf("APIVersion() = %q, %v; want %q, nil", got, err, want[engine])
			}
			if dockerapi.VersionLess(got, v.MinAPIVersion) {
				t.Errorf("APIVersion() = %s, below the engine's minimum %s", got, v.MinAPIVersion)
			}
		})
	}
}
