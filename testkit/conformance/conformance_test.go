package conformance_test

import (
	"errors"
	"strconv"
	"testing"

	"github.com/waitdaemon/waitdaemon/engine"
	"github.com/waitdaemon/waitdaemon/imageref"
	"github.com/waitdaemon/waitdaemon/testkit/conformance"
	"github.com/waitdaemon/waitdaemon/testkit/fake"
)

// fakeRow is the fake engine's row: a new engine for each test, with the
// action, the images and the missing host directory the suite asks for.
type fakeRow struct{ eng *fake.Engine }

func (r *fakeRow) Engine() engine.Engine {
	r.eng = &fake.Engine{
		Action:  engine.Self{ID: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", Name: "action", FoundBy: "cgroup", Env: conformance.ActionEnv},
		Images:  map[string]bool{"probe:1": true, "nostart:1": true},
		Broken:  map[string]bool{"nostart:1": true},
		Missing: map[string]bool{conformance.MissingDir: true},
		Lost:    map[string]error{},
	}
	return r.eng
}

func (r *fakeRow) Action(*testing.T) engine.Self { return r.eng.Action }

func (r *fakeRow) Env(_ *testing.T, id string) []string { return r.eng.Env(id) }

func (r *fakeRow) Images(t *testing.T) conformance.Images {
	ref := func(s string) imageref.Ref {
		i, err := imageref.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return i
	}
	return conformance.Images{Run: ref("probe:1"), NoStart: ref("nostart:1"), Absent: ref("absent:1")}
}

func (r *fakeRow) Program(code int) ([]string, string) {
	if code == conformance.Forever {
		return fake.Sleep(), ""
	}
	return fake.Exit(code), "exiting " + itoa(code)
}

func (r *fakeRow) Mkdir(dir string, code int) []string { return fake.Mkdir(dir, code) }

func itoa(n int) string { return strconv.Itoa(n) }

func (r *fakeRow) Lose(method, name string) bool {
	r.eng.Lost[method+" "+name] = errors.New("the connection broke before the answer")
	return true
}

// TestFake holds the fake engine to the contract, with no engine present.
func TestFake(t *testing.T) { conformance.Run(t, &fakeRow{}) }
