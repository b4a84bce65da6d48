// Package redact hides secrets in what waitdaemon shows: the values of
// secret-looking environment entries in a JSON body, for both engine
// clients' traces, the dry-run plan and the fixtures; whole (Secrets) or
// as a body arrives in pieces (Stream).
package redact

import (
	"bytes"
	"regexp"
)

// secretEnv matches an environment entry in a JSON body whose name says
// it holds a secret, like "REGISTRY_PASSWORD=…": its value is redacted.
// It is the one definition of what the trace, the plan and the fixtures
// hide.
var secretEnv = regexp.MustCompile(`"(` + secretNamePattern + `)=(?:[^"\\]|\\.)*"`)

// secretNamePattern is a name that says it holds a secret: one of the
// words, within a name as Docker takes them (dots and dashes too, as in
// spring.datasource.password or DB-PASSWORD).
const secretNamePattern = `[A-Za-z0-9_.\-]*(?i:password|passwd|secret|token|credential|api[_.\-]?key)[A-Za-z0-9_.\-]*`

var secretName = regexp.MustCompile(`^` + secretNamePattern + `$`)

// SecretName reports whether name says it holds a secret: whether a
// value under it is never shown.
func SecretName(name string) bool { return secretName.MatchString(name) }

// Secrets hides the values of secret-looking environment entries in a JSON
// body: the trace and the dry-run plan show them as <redacted>.
func Secrets(b []byte) []byte {
	return secretEnv.ReplaceAll(b, []byte(`"$1=<redacted>"`))
}

// openProbe ends any text that may yet become a secret entry: appended to
// the beginning of one (a quote, then part of a secret name, or a secret
// name, "=" and part of a value), it makes a whole entry of it, which
// secretEnv matches up to the probe's end. TestOpenProbe checks that
// secretEnv still takes it for a secret.
const openProbe = `PASSWORD=x"`

// maxHeld bounds what a Stream holds back: a line without its end, or
// an entry that may be secret without its closing quote.
const maxHeld = 64 << 10

// Stream redacts a body that arrives in pieces exactly as Redact would
// redact it whole, whatever the pieces: it gives out whole lines as soon
// as they are complete, and holds back the rest, up to maxHeld.
type Stream struct {
	held []byte
}

// scan finds, in b, the entries secretEnv matches, and where an entry
// begins that more text could still make secret (len(b) when none). No
// match follows an open entry: its value would have closed on the match's
// quotes.
func scan(b []byte) (matches [][]int, open int) {
	probed := append(b[:len(b):len(b)], openProbe...)
	matches = secretEnv.FindAllIndex(probed, -1)
	open = len(b)
	if n := len(matches); n > 0 && matches[n-1][1] > len(b) {
		open = matches[n-1][0]
		matches = matches[:n-1]
	}
	return matches, open
}

// next takes the next piece p of the body and returns what is final of
// the body so far, redacted. tooLong is set when an entry that may be
// secret, still open, is longer than maxHeld: the caller must show no more
// of the body.
func (r *Stream) Next(p []byte) (out []byte, tooLong bool) {
	r.held = append(r.held, p...)
	if bytes.IndexByte(p, '\n') < 0 && len(r.held) <= maxHeld {
		return nil, false // no new line to give out
	}
	matches, open := scan(r.held)
	// The end of the last line before the open entry, outside any match.
	cut := 0
	for i, j := open-1, len(matches)-1; i >= 0; i-- {
		for j >= 0 && matches[j][0] > i {
			j--
		}
		if j >= 0 && i < matches[j][1] {
			i = matches[j][0]
			continue
		}
		if r.held[i] == '\n' {
			cut = i + 1
			break
		}
	}
	if len(r.held)-cut > maxHeld {
		cut = open // a line too long to hold: give out what is safe of it
	}
	out = Secrets(r.held[:cut])
	r.held = append(r.held[:0], r.held[cut:]...)
	return out, len(r.held) > maxHeld
}

// end returns what is held back, redacted, at the end of the body.
func (r *Stream) End() []byte {
	out := Secrets(r.held)
	r.held = nil
	return out
}

// cutOff returns what is held back, redacted, when the body ends before
// its end: an entry still open, which may be a secret cut short, shows as
// <redacted>.
func (r *Stream) CutOff() []byte {
	_, open := scan(r.held)
	out := Secrets(r.held[:open])
	if open < len(r.held) {
		out = append(out, "<redacted>"...)
	}
	r.held = nil
	return out
}
