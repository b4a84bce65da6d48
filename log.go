package main

import (
	"bytes"
	"encoding/json"
	"io"
	"time"
)

// logEvent writes one JSON line: the time, what happened, then the fields
// of details (a struct or map) at the top level. In HookOS container
// output reaches syslog, and so the operator.
func logEvent(w io.Writer, msg string, details any) {
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
