package containerd

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/waitdaemon/waitdaemon/containerdapi"
)

// updated is the labels and field mask of a Containers/Update request.
type updated struct {
	Container struct {
		ID     string            `json:"id"`
		Labels map[string]string `json:"labels"`
	} `json:"container"`
	UpdateMask struct {
		Paths []string `json:"paths"`
	} `json:"update_mask"`
}

// TestHand: what phase 1 hands the waiter goes into labels of the
// waiter's container, each within containerd's limit and valid UTF-8,
// one label at a time (the others left alone), the first part last; the
// waiter reads it back whole from its own container's labels. Until the
// first part is there, it reads nothing.
func TestHand(t *testing.T) {
	id := "waiter-0001"
	long := `{"act-waitdaemon-user":{"image":"docker.io/library/alpine:3.20","command":["sh","-c","` +
		strings.Repeat("a", maxSaid-70) + strings.Repeat("é", 3000) + `"]}}`
	for name, data := range map[string]string{"one label": `{"act-waitdaemon-user":{"image":"alpine","command":["reboot"]}}`, "three labels": long} {
		t.Run(name, func(t *testing.T) {
			e, d := newFake(t, map[string][]reply{
				"Containers/Update": {{msg: `{"container":{"id":"` + id + `"}}`}},
			})
			if err := e.Hand(testCtx(t), id, []byte(data)); err != nil {
				t.Fatal(err)
			}
			labels := map[string]string{LabelName: "act-waitdaemon-waiter"}
			var order []string
			for _, r := range d.requests("Containers/Update") {
				var u updated
				if err := json.Unmarshal([]byte(r), &u); err != nil {
					t.Fatal(err)
				}
				if len(u.Container.Labels) != 1 || len(u.UpdateMask.Paths) != 1 || u.Container.ID != id {
					t.Fatalf("update %s; want one label of %s, and only it in the mask", r, id)
				}
				for k, v := range u.Container.Labels {
					if u.UpdateMask.Paths[0] != "labels."+k || len(k)+len(v) > 4096 || !utf8.ValidString(v) {
						t.Errorf("label %s of %d bytes, mask %q; want at most 4096 bytes with its key, valid UTF-8, masked alone", k, len(v), u.UpdateMask.Paths)
					}
					labels[k] = v
					order = append(order, k)
				}
			}
			if wantParts := (len(data) + maxSaid - 1) / maxSaid; len(order) < wantParts || order[len(order)-1] != LabelHanded {
				t.Errorf("labels set in the order %q; want at least %d, %s last", order, wantParts, LabelHanded)
			}
			got := handedBack(t, id, labels)
			if string(got) != data {
				t.Errorf("Handed() = %d bytes, want the %d handed, whole", len(got), len(data))
			}
			delete(labels, LabelHanded)
			if got := handedBack(t, id, labels); got != nil {
				t.Errorf("Handed() with the first part not yet there = %d bytes, want nothing", len(got))
			}
		})
	}
}

// handedBack is what Handed reads in the waiter id whose container has
// labels.
func handedBack(t *testing.T, id string, labels map[string]string) []byte {
	t.Helper()
	ctr, err := json.Marshal(map[string]any{"container": map[string]any{"id": id, "labels": labels}})
	if err != nil {
		t.Fatal(err)
	}
	e, _ := newFake(t, map[string][]reply{"Containers/Get": {{msg: string(ctr)}}})
	writeProc(t, e, "cgroup", "0::/"+namespace+"/"+id+"\n")
	got, err := e.Handed(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestHandFails: data that is not UTF-8, which no label holds, and an
// update containerd refuses, are errors.
func TestHandFails(t *testing.T) {
	e, d := newFake(t, map[string][]reply{
		"Containers/Update": {{code: containerdapi.FailedPrecondition, status: "label too long"}},
	})
	if err := e.Hand(testCtx(t), "waiter-0001", []byte{0xff, '{'}); err == nil || !strings.Contains(err.Error(), "not UTF-8") {
		t.Errorf("Hand(not UTF-8) = %v; want an error saying so", err)
	}
	if n := d.count("Containers/Update"); n != 0 {
		t.Errorf("%d updates for data no label holds, want none", n)
	}
	if err := e.Hand(testCtx(t), "waiter-0001", []byte("{}")); err == nil || !strings.HasPrefix(err.Error(), "handing the waiter: ") || !strings.Contains(err.Error(), "label too long") {
		t.Errorf("Hand() = %v; want the update's error", err)
	}
}
