package engine

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"time"
)

// Log writes one line of waitdaemon's output, JSON: the time, what
// happened, then the fields of details (a struct or map) at the top
// level. Container output reaches the operator: through syslog on
// HookOS, through the task's log file on CaptainOS. A nil w is silence.
func Log(w io.Writer, msg string, details any) {
	if w == nil {
		return
	}
	head, _ := json.Marshal(struct {
		Time string `json:"time"`
		Msg  string `json:"msg"`
	}{time.Now().UTC().Format(time.RFC3339Nano), msg})
	line := head
	if fields, err := json.Marshal(details); err == nil && len(fields) > 2 && fields[0] == '{' {
		line = append(bytes.TrimSuffix(head, []byte("}")), ',')
		line = append(line, fields[1:]...)
	}
	_, _ = w.Write(append(line, '\n'))
}

// Tail returns the last n lines of s as a terminal shows them: a
// carriage return inside a line (a progress bar's, or a TTY's line end
// whose newline Podman's log lost) starts it over, so what follows the
// last one is the line.
func Tail(s string, n int) []string {
	lines := strings.Split(strings.TrimRight(strings.ReplaceAll(s, "\r\n", "\n"), "\r\n"), "\n")
	if len(lines) == 1 && lines[0] == "" {
		return []string{}
	}
	lines = lines[max(0, len(lines)-n):]
	for i, l := range lines {
		l = strings.TrimRight(l, "\r")
		lines[i] = l[strings.LastIndexByte(l, '\r')+1:]
	}
	return lines
}
