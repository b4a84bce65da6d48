package containerdapi

import (
	"errors"
	"fmt"

	"github.com/waitdaemon/waitdaemon/internal/socketclient"
)

// Code is a gRPC status code.
type Code uint32

// The codes containerd answers with.
const (
	OK                 Code = 0
	Canceled           Code = 1
	Unknown            Code = 2
	InvalidArgument    Code = 3
	DeadlineExceeded   Code = 4
	NotFound           Code = 5
	AlreadyExists      Code = 6
	PermissionDenied   Code = 7
	ResourceExhausted  Code = 8
	FailedPrecondition Code = 9
	Aborted            Code = 10
	OutOfRange         Code = 11
	Unimplemented      Code = 12
	Internal           Code = 13
	Unavailable        Code = 14
	DataLoss           Code = 15
	Unauthenticated    Code = 16
)

var codeNames = [...]string{
	"OK", "Canceled", "Unknown", "InvalidArgument", "DeadlineExceeded", "NotFound",
	"AlreadyExists", "PermissionDenied", "ResourceExhausted", "FailedPrecondition",
	"Aborted", "OutOfRange", "Unimplemented", "Internal", "Unavailable", "DataLoss",
	"Unauthenticated",
}

func (c Code) String() string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return fmt.Sprintf("Code(%d)", uint32(c))
}

// Sentinels for errors.Is on an *Error.
var (
	ErrNotFound           = errors.New("not found")
	ErrAlreadyExists      = errors.New("already exists")
	ErrFailedPrecondition = errors.New("failed precondition")
	ErrUnimplemented      = errors.New("unimplemented")
	ErrUnavailable        = errors.New("unavailable")
)

// Error is a call the daemon answered with a status other than OK.
type Error struct {
	Code    Code
	Method  string // "containerd.services.containers.v1.Containers/Get"
	Message string // the daemon's own message, percent-decoded
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: %s: %s", e.Method, e.Code, e.Message)
}

// Is makes errors.Is(err, ErrNotFound) and its kin work.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.Code == NotFound
	case ErrAlreadyExists:
		return e.Code == AlreadyExists
	case ErrFailedPrecondition:
		return e.Code == FailedPrecondition
	case ErrUnimplemented:
		return e.Code == Unimplemented
	case ErrUnavailable:
		return e.Code == Unavailable
	}
	return false
}

// TransportError is a call that never got a whole answer: the socket is
// missing, refused the connection, or the exchange broke off.
type TransportError struct {
	Method string
	Socket string
	Err    error
}

func (e *TransportError) Error() string {
	return fmt.Sprintf("%s on %s: %v", e.Method, e.Socket, e.Err)
}

func (e *TransportError) Unwrap() error { return e.Err }

// Lost says the request may have reached the daemon, which may or may
// not have carried it out: the exchange broke off after it was sent.
func (e *TransportError) Lost() bool { return socketclient.Sent(e.Err) }

// Lost says the daemon may have carried the call out: it answered
// UNAVAILABLE.
func (e *Error) Lost() bool { return e.Code == Unavailable }
