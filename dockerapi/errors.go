package dockerapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/waitdaemon/waitdaemon/internal/socketclient"
)

// Sentinels for errors.Is on an *Error.
var (
	ErrNotFound    = errors.New("not found")
	ErrConflict    = errors.New("conflict")
	ErrNotModified = errors.New("not modified")
)

// Error is an answer from the engine with an unwanted status.
type Error struct {
	Status  int
	Method  string
	Path    string
	Message string // the engine's own message
}

func (e *Error) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	return fmt.Sprintf("%s %s: %d: %s", e.Method, e.Path, e.Status, msg)
}

// Is makes errors.Is(err, ErrNotFound) and its kin work.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.Status == http.StatusNotFound || e.Status == http.StatusInternalServerError && podmanNotFound(e.Message)
	case ErrConflict:
		return e.Status == http.StatusConflict || e.Status == http.StatusInternalServerError && podmanConflict(e.Message)
	case ErrNotModified:
		return e.Status == http.StatusNotModified
	}
	return false
}

// Lost says the engine may have carried the call out: a 503 is what
// Docker, or a proxy before it, answers when it cannot say.
func (e *Error) Lost() bool { return e.Status == http.StatusServiceUnavailable }

// newError reads the engine's message from resp: JSON {"message": …} when
// it is JSON, the text itself otherwise (20.10 answers some errors in
// text/plain).
func newError(resp *http.Response, method, path string) *Error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	return &Error{Status: resp.StatusCode, Method: method, Path: path, Message: errorMessage(data)}
}

// podmanConflict recognises the conflicts Podman's compatibility API
// answers with 500 instead of 409: a name in use, a running container
// removed without force.
func podmanConflict(msg string) bool {
	return strings.HasSuffix(msg, "that name is already in use") || strings.HasSuffix(msg, "container state improper")
}

// podmanNotFound recognises a container that is gone, which Podman's
// compatibility API can answer with 500 (seen on 4.3 while a container
// is being removed).
func podmanNotFound(msg string) bool {
	return strings.HasSuffix(msg, "no such container")
}

func errorMessage(data []byte) string {
	var m struct{ Message string }
	if json.Unmarshal(data, &m) == nil && m.Message != "" {
		return m.Message
	}
	return strings.TrimSpace(string(data))
}

// TransportError is a request that never got an answer: the socket is
// missing, refused the connection, or broke mid-exchange.
type TransportError struct {
	Method string
	Path   string
	Socket string
	Err    error
}

func (e *TransportError) Error() string {
	return fmt.Sprintf("%s %s on %s: %v", e.Method, e.Path, e.Socket, e.Err)
}

func (e *TransportError) Unwrap() error { return e.Err }

// Lost says the request may have reached the engine, which may or may
// not have carried it out: the exchange broke off after it was sent.
func (e *TransportError) Lost() bool { return socketclient.Sent(e.Err) }
