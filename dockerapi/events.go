package dockerapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// Event is one entry of GET /events.
type Event struct {
	Type     string `json:"Type"`   // "container"
	Action   string `json:"Action"` // "destroy"; Podman's "remove"
	Actor    Actor  `json:"Actor"`
	TimeNano int64  `json:"timeNano"`
}

// Actor is what an event is about.
type Actor struct {
	ID         string            `json:"ID"`
	Attributes map[string]string `json:"Attributes"`
}

// At is when the engine says the event happened.
func (e Event) At() time.Time { return time.Unix(0, e.TimeNano) }

// EventsOptions are the query of GET /events.
type EventsOptions struct {
	// Since has the engine send the events it still holds from this
	// time on before the new ones, so that none is lost between a look
	// and the stream's start.
	Since time.Time
	// Filters are the engine's filters, such as "container": {id}.
	Filters map[string][]string
}

// Events streams the engine's events. Close it when done.
type Events struct {
	body io.ReadCloser
	dec  *json.Decoder
}

// Events opens the engine's event stream. It returns once the engine
// answers, which it does at once; only ctx or Close ends the stream.
func (c *Client) Events(ctx context.Context, opts EventsOptions) (*Events, error) {
	q := url.Values{}
	if !opts.Since.IsZero() {
		q.Set("since", fmt.Sprintf("%d.%09d", opts.Since.Unix(), opts.Since.Nanosecond()))
	}
	if len(opts.Filters) > 0 {
		f, err := json.Marshal(opts.Filters)
		if err != nil {
			return nil, fmt.Errorf("encoding the events' filters: %w", err)
		}
		q.Set("filters", string(f))
	}
	resp, err := c.send(ctx, request{method: http.MethodGet, path: "/events", query: q, ok: []int{200}, again: true})
	if err != nil {
		return nil, fmt.Errorf("following the engine's events: %w", err)
	}
	return &Events{body: resp.Body, dec: json.NewDecoder(resp.Body)}, nil
}

// Next blocks for the next event. The stream's end is io.EOF.
func (s *Events) Next() (Event, error) {
	var e Event
	if err := s.dec.Decode(&e); err != nil {
		if err == io.EOF {
			return e, err
		}
		return e, fmt.Errorf("reading the engine's events: %w", err)
	}
	return e, nil
}

// Close ends the stream.
func (s *Events) Close() error { return s.body.Close() }
