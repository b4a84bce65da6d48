package containerdapi_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/waitdaemon/waitdaemon/containerdapi"
)

// TestSubscriptionEnds: a subscription gives the events the daemon sends,
// then io.EOF itself when the daemon ends the stream, and the daemon's
// error, said to be the events', when it fails it.
func TestSubscriptionEnds(t *testing.T) {
	cases := []struct {
		name    string
		fail    bool
		wantErr func(error) bool
	}{
		{"ended", false, func(err error) bool { return err == io.EOF }},
		{"failed", true, func(err error) bool {
			var e *containerdapi.Error
			return errors.As(err, &e) && e.Code == containerdapi.Internal && strings.HasPrefix(err.Error(), "reading events: ")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
				readRequest(t, r)
				if tc.fail {
					w.Header().Set("Trailer", "Grpc-Status, Grpc-Message")
					answer(w, str(3, "/tasks/exit"))
					w.Header().Set("Grpc-Status", "13")
					w.Header().Set("Grpc-Message", "the store broke")
					return
				}
				answer(w, str(3, "/tasks/exit"))
			})
			sub, err := c.Subscribe(shortCtx(t), `topic=="/tasks/exit"`)
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			ev, err := sub.Next()
			if err != nil || ev.Topic != "/tasks/exit" {
				t.Fatalf("Next() = %+v, %v; want the event", ev, err)
			}
			if _, err := sub.Next(); !tc.wantErr(err) {
				t.Errorf("Next() at the end = %v", err)
			}
		})
	}
}

// TestSubscriptionBreaks: a stream that breaks off is a transport error;
// one whose context ends says so instead; one whose daemon was never
// reached fails, and closes without harm.
func TestSubscriptionBreaks(t *testing.T) {
	t.Run("broken off", func(t *testing.T) {
		c := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
			readRequest(t, r)
			w.Header().Set("Content-Type", "application/grpc")
			writeFrame(w, str(3, "/tasks/exit"))
			panic(http.ErrAbortHandler)
		})
		sub, err := c.Subscribe(shortCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		if _, err := sub.Next(); err != nil {
			t.Fatalf("Next() = %v, want the event", err)
		}
		var te *containerdapi.TransportError
		if _, err := sub.Next(); !errors.As(err, &te) || errors.Is(err, context.Canceled) {
			t.Errorf("Next() after the break = %v, want a transport error", err)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		c := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
			readRequest(t, r)
			w.Header().Set("Content-Type", "application/grpc")
			writeFrame(w, str(3, "/tasks/exit"))
			<-r.Context().Done()
		})
		ctx, cancel := context.WithCancel(shortCtx(t))
		sub, err := c.Subscribe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		if _, err := sub.Next(); err != nil {
			t.Fatalf("Next() = %v, want the event", err)
		}
		cancel()
		if _, err := sub.Next(); !errors.Is(err, context.Canceled) {
			t.Errorf("Next() after the cancel = %v, want the context's end", err)
		}
	})
	t.Run("never reached", func(t *testing.T) {
		c := &containerdapi.Client{Socket: filepath.Join(t.TempDir(), "containerd.sock"), WaitForEngine: -1}
		sub, err := c.Subscribe(shortCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		var te *containerdapi.TransportError
		if _, err := sub.Next(); !errors.As(err, &te) {
			t.Errorf("Next() = %v, want a transport error", err)
		}
		sub.Close()
	})
}

// TestContainerDeleteEvent: a container's delete decodes to its ID, as
// containerd 2.2.1 sent it (recorded 2026-12-04: the event of deleting
// "capture-1"); any other event is refused, naming its type.
func TestContainerDeleteEvent(t *testing.T) {
	ev := containerdapi.Envelope{Topic: containerdapi.TopicContainerDelete, Event: containerdapi.Any{TypeURL: "containerd.events.ContainerDelete", Value: []byte("\x0a\x09capture-1")}}
	d, err := ev.ContainerDelete()
	if err != nil || d.ID != "capture-1" {
		t.Errorf("ContainerDelete() = %+v, %v; want capture-1", d, err)
	}
	ev.Event.TypeURL = "containerd.events.TaskExit"
	if _, err := ev.ContainerDelete(); err == nil || !strings.Contains(err.Error(), "TaskExit") {
		t.Errorf("ContainerDelete() of a TaskExit: %v; want an error naming it", err)
	}
}
