package containerdapi

import (
	"context"
	"fmt"
	"io"
	"time"
)

// Envelope is containerd.services.events.v1.Envelope: one event.
type Envelope struct {
	Timestamp time.Time // 1
	Namespace string    // 2
	Topic     string    // 3: "/tasks/exit"
	Event     Any       // 4
}

func (m *Envelope) fields() []field {
	return []field{
		{1, "timestamp", (*timeValue)(&m.Timestamp)},
		{2, "namespace", (*stringValue)(&m.Namespace)},
		{3, "topic", (*stringValue)(&m.Topic)},
		{4, "event", anyValue{&m.Event}},
	}
}

// TopicTaskExit is the topic of TaskExit events.
const TopicTaskExit = "/tasks/exit"

// TaskExit is containerd.events.TaskExit, the event of a process that
// exited.
type TaskExit struct {
	ContainerID string    // 1
	ID          string    // 2: the container's ID for its task's init
	Pid         uint32    // 3
	ExitStatus  uint32    // 4
	ExitedAt    time.Time // 5
}

func (m *TaskExit) fields() []field {
	return []field{
		{1, "container_id", (*stringValue)(&m.ContainerID)},
		{2, "id", (*stringValue)(&m.ID)},
		{3, "pid", uintValue[uint32]{&m.Pid}},
		{4, "exit_status", uintValue[uint32]{&m.ExitStatus}},
		{5, "exited_at", (*timeValue)(&m.ExitedAt)},
	}
}

// TaskExit decodes the envelope's event, which must be a TaskExit.
func (m *Envelope) TaskExit() (TaskExit, error) {
	var e TaskExit
	err := m.decode("TaskExit", &e)
	return e, err
}

// TopicTaskStart is the topic of TaskStart events.
const TopicTaskStart = "/tasks/start"

// TaskStart is containerd.events.TaskStart, the event of a task started.
type TaskStart struct {
	ContainerID string // 1
	Pid         uint32 // 2
}

func (m *TaskStart) fields() []field {
	return []field{
		{1, "container_id", (*stringValue)(&m.ContainerID)},
		{2, "pid", uintValue[uint32]{&m.Pid}},
	}
}

// TaskStart decodes the envelope's event, which must be a TaskStart.
func (m *Envelope) TaskStart() (TaskStart, error) {
	var e TaskStart
	err := m.decode("TaskStart", &e)
	return e, err
}

// TopicContainerDelete is the topic of ContainerDelete events.
const TopicContainerDelete = "/containers/delete"

// ContainerDelete is containerd.events.ContainerDelete, the event of a
// container deleted.
type ContainerDelete struct {
	ID string // 1
}

func (m *ContainerDelete) fields() []field {
	return []field{{1, "id", (*stringValue)(&m.ID)}}
}

// ContainerDelete decodes the envelope's event, which must be a
// ContainerDelete.
func (m *Envelope) ContainerDelete() (ContainerDelete, error) {
	var e ContainerDelete
	err := m.decode("ContainerDelete", &e)
	return e, err
}

type subscribeRequest struct {
	Filters []string // 1
}

func (m *subscribeRequest) fields() []field {
	return []field{{1, "filters", (*stringsValue)(&m.Filters)}}
}

var eventsSubscribe = newRPC("containerd.services.events.v1.Events/Subscribe", &subscribeRequest{}, &Envelope{}, true)

// Subscription is a stream of events. Close it when done.
type Subscription struct {
	s *stream
}

// Subscribe streams the events of the client's namespace that match any
// of filters, such as `topic=="/tasks/exit"`. The subscription is sent at
// once; the daemon answers with its first event.
func (c *Client) Subscribe(ctx context.Context, filters ...string) (*Subscription, error) {
	s, err := c.openStream(ctx, eventsSubscribe, &subscribeRequest{Filters: filters}, false)
	if err != nil {
		return nil, fmt.Errorf("subscribing to events %q: %w", filters, err)
	}
	return &Subscription{s: s}, nil
}

// Next blocks for the next event. It returns io.EOF if the daemon ends
// the stream, and the context's error once ctx ends.
func (s *Subscription) Next() (Envelope, error) {
	var e Envelope
	if err := s.s.Recv(&e); err != nil {
		if err == io.EOF {
			return e, err
		}
		return e, fmt.Errorf("reading events: %w", err)
	}
	return e, nil
}

// Close ends the subscription.
func (s *Subscription) Close() { s.s.Close() }

// decode decodes the envelope's event into e, which must be the event
// named containerd.events.<name>.
func (m *Envelope) decode(name string, e message) error {
	if m.Event.TypeURL != "containerd.events."+name {
		return fmt.Errorf("event of topic %s is a %q, not a %s", m.Topic, m.Event.TypeURL, name)
	}
	return unmarshal(m.Event.Value, e)
}
