package containerdapi

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/waitdaemon/waitdaemon/internal/redact"
	"github.com/waitdaemon/waitdaemon/internal/socketclient"
)

// stream is one streaming call: a server stream (one request, many
// answers) or a bidirectional one. It is opened at once; the daemon's
// answer, which may come only with its first message, is awaited by Recv.
// It is the one path of every stream, as call is of unary calls.
type stream struct {
	c      *Client
	r      *rpc
	ctx    context.Context
	cancel context.CancelFunc
	out    *sendBuffer // nil for a server stream

	ready chan struct{} // closed once resp or err is set
	resp  *http.Response
	err   error
	fr    frameReader
	done  bool

	// joined, when join is set (joinPieces), gathers the pieces of one
	// blob that the stream's messages carry, for the trace, which shows
	// them as one message when the stream ends.
	join   bool
	joined []byte
	// counted, when count is set (countPieces), is how many bytes of a
	// blob the stream's messages carried, which the trace shows instead.
	count   bool
	counted int64
}

// countPieces makes the trace show how many bytes of a blob the
// stream's messages carry, once it ends, instead of the bytes: a layer,
// which is no text to read, and may be large.
func (s *stream) countPieces() { s.count = true }

// piece is a message that carries the next piece of one blob
// (Content/Read's).
type piece interface {
	message
	piece() []byte
}

// joinPieces makes the trace show the blob the stream's messages carry in
// pieces as one message, once the stream ends, redacted whole: a secret
// split across two messages is hidden as one in one message is. A stream
// that breaks off, or is closed before its end, shows what it read as a
// body cut short (redact.Stream's CutOff): an entry it cut, which may be
// a secret, shows as <redacted>.
func (s *stream) joinPieces() { s.join = s.c.Trace != nil }

// traceJoined traces the pieces gathered, once.
func (s *stream) traceJoined(whole bool) {
	if !s.join {
		return
	}
	s.join = false
	data := s.joined
	if !whole {
		var rs redact.Stream
		out, tooLong := rs.Next(data)
		if tooLong {
			data = append(out, "<redacted>"...)
		} else {
			data = append(out, rs.CutOff()...)
		}
	}
	if len(data) > 0 {
		s.c.traceMessage("<", s.r, &readContentResponse{Data: data})
	}
	s.joined = nil
}

// openStream starts r. A server stream sends first and closes its side;
// a bidirectional one (bidi) sends first and keeps its side open for Send.
func (c *Client) openStream(ctx context.Context, r *rpc, first message, bidi bool) (*stream, error) {
	if err := c.init(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &stream{c: c, r: r, ctx: ctx, cancel: cancel, ready: make(chan struct{})}
	c.traceRequest(ctx, r, first)
	var body any = frame(marshal(first))
	if bidi {
		s.out = &sendBuffer{}
		s.out.cond.L = &s.out.mu
		s.out.write(body.([]byte))
		context.AfterFunc(ctx, s.out.close)
		// Not an io.Closer: the HTTP client must not close it on a failed
		// dial, which is retried.
		body = retryablehttp.ReaderFunc(func() (io.Reader, error) { return struct{ io.Reader }{s.out}, nil })
	}
	go func() {
		s.resp, s.err = c.send(ctx, r, body)
		if s.err == nil {
			s.err = statusOf(r, s.resp, true)
			s.fr = frameReader{r: s.resp.Body}
		}
		close(s.ready)
	}()
	return s, nil
}

// Send sends m on a bidirectional stream.
func (s *stream) Send(m message) error {
	s.c.traceMessage(">", s.r, m)
	if !s.out.write(frame(marshal(m))) {
		return fmt.Errorf("%s: sending on a closed stream", s.r.name)
	}
	return nil
}

// CloseSend ends this side of a bidirectional stream.
func (s *stream) CloseSend() {
	if s.out != nil {
		s.out.close()
	}
}

// Recv reads the next message into m. At the end of the stream it
// returns io.EOF when the status is OK, the status as *Error otherwise.
func (s *stream) Recv(m message) error {
	select {
	case <-s.ready:
	case <-s.ctx.Done():
		return socketclient.WithCause(s.ctx, fmt.Errorf("%s: %w", s.r.name, s.ctx.Err()))
	}
	if s.done {
		return io.EOF
	}
	if s.err != nil {
		s.end(s.err)
		return s.err
	}
	msg, err := s.fr.next()
	if err == io.EOF {
		err = statusOf(s.r, s.resp, false)
		s.end(err)
		if err == nil {
			return io.EOF
		}
		return err
	}
	if err != nil {
		err = &TransportError{Method: s.r.name, Socket: s.c.Socket, Err: fmt.Errorf("reading the stream: %w", err)}
		if s.ctx.Err() != nil {
			err = socketclient.WithCause(s.ctx, fmt.Errorf("%s: %w", s.r.name, s.ctx.Err()))
		}
		s.end(err)
		return err
	}
	if err := unmarshal(msg, m); err != nil {
		err = fmt.Errorf("decoding a message of %s: %w", s.r.name, err)
		s.end(err)
		return err
	}
	if p, ok := m.(piece); ok && s.count {
		s.counted += int64(len(p.piece()))
		return nil
	}
	if p, ok := m.(piece); ok && s.join {
		s.joined = append(s.joined, p.piece()...)
		return nil
	}
	s.c.traceMessage("<", s.r, m)
	return nil
}

func (s *stream) end(err error) {
	if !s.done {
		s.done = true
		s.traceJoined(err == nil)
		if s.count && s.c.Trace != nil {
			s.c.writeTrace(fmt.Appendf(nil, "< %s\n< (%d bytes of a blob, not shown)\n", s.r.name, s.counted))
		}
		s.c.traceEnd(s.r, err)
	}
}

// Close ends the stream, whatever its state, and frees its connection.
func (s *stream) Close() {
	s.traceJoined(false)
	s.CloseSend()
	s.cancel()
	closeBody := func() {
		<-s.ready
		if s.resp != nil {
			s.resp.Body.Close()
		}
	}
	select {
	case <-s.ready:
		closeBody()
	default:
		go closeBody() // the send ends with ctx
	}
}

// sendBuffer is the request body of a bidirectional stream: Send appends
// frames, the HTTP/2 transport reads them, and close ends the body.
type sendBuffer struct {
	mu     sync.Mutex
	cond   sync.Cond
	buf    []byte
	closed bool
}

func (b *sendBuffer) write(p []byte) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.buf = append(b.buf, p...)
	b.cond.Broadcast()
	return true
}

func (b *sendBuffer) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	b.cond.Broadcast()
}

func (b *sendBuffer) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for len(b.buf) == 0 && !b.closed {
		b.cond.Wait()
	}
	if len(b.buf) == 0 {
		return 0, io.EOF
	}
	n := copy(p, b.buf)
	b.buf = b.buf[n:]
	return n, nil
}
