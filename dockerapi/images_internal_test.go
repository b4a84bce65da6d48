package dockerapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

func TestDecodePull(t *testing.T) {
	progress := func(status, id string, current, total int64) PullMessage {
		var m PullMessage
		m.Status, m.ID = status, id
		m.ProgressDetail.Current, m.ProgressDetail.Total = current, total
		return m
	}
	cases := []struct {
		name    string
		stream  string
		want    []PullMessage
		wantErr string // "" means nil
	}{
		{name: "empty", stream: ""},
		{name: "blank", stream: "\n \r\n"},
		{
			name: "progress in order",
			stream: `{"status":"Pulling from rr/good","id":"1"}` + "\n" +
				`{"status":"Downloading","progressDetail":{"current":5,"total":10},"id":"abc"}` + "\r\n" +
				`{"status":"Download complete","progressDetail":{},"id":"abc"}` + "\n" +
				`{"status":"Status: Downloaded newer image for 127.0.0.1:5000/rr/good:1"}`, // no final newline
			want: []PullMessage{
				progress("Pulling from rr/good", "1", 0, 0),
				progress("Downloading", "abc", 5, 10),
				progress("Download complete", "abc", 0, 0),
				progress("Status: Downloaded newer image for 127.0.0.1:5000/rr/good:1", "", 0, 0),
			},
		},
		{
			name: "error after progress",
			stream: `{"status":"Pulling fs layer","progressDetail":{},"id":"abc"}` + "\n" +
				`{"errorDetail":{"message":"unknown blob"},"error":"unknown blob"}` + "\n",
			want:    []PullMessage{progress("Pulling fs layer", "abc", 0, 0)},
			wantErr: "unknown blob",
		},
		{
			name:    "errorDetail wins over error",
			stream:  `{"errorDetail":{"code":1,"message":"detailed"},"error":"short"}`,
			wantErr: "detailed",
		},
		{name: "error only", stream: `{"error":"manifest unknown"}`, wantErr: "manifest unknown"},
		{
			name: "nothing after the error is read",
			stream: `{"error":"first"}` + "\n" +
				`{"status":"never seen"}` + "\n",
			wantErr: "first",
		},
		{
			name:    "truncated mid-JSON",
			stream:  `{"status":"Downloading","id":"abc"}` + "\n" + `{"status":"Downl`,
			want:    []PullMessage{progress("Downloading", "abc", 0, 0)},
			wantErr: "reading progress: the stream broke off: unexpected EOF",
		},
		{
			name:    "not JSON",
			stream:  "<html>502 Bad Gateway</html>",
			wantErr: "reading progress: invalid character '<' looking for beginning of value",
		},
		{
			name:    "wrong type",
			stream:  `{"status":5}`,
			wantErr: "reading progress: json: cannot unmarshal number into Go struct field PullMessage.status of type string",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, r := range []struct {
				name string
				wrap func(io.Reader) io.Reader
			}{
				{"whole", func(r io.Reader) io.Reader { return r }},
				{"one byte at a time", iotest.OneByteReader},
			} {
				var got []PullMessage
				err := decodePull(r.wrap(strings.NewReader(tc.stream)), func(m PullMessage) { got = append(got, m) })
				if !reflect.DeepEqual(got, tc.want) {
					t.Errorf("%s: progress (-want +got):\n-%+v\n+%+v", r.name, tc.want, got)
				}
				gotErr := ""
				if err != nil {
					gotErr = err.Error()
				}
				if gotErr != tc.wantErr {
					t.Errorf("%s: decodePull() error (-want +got):\n-%q\n+%q", r.name, tc.wantErr, gotErr)
				}
			}
		})
	}
	t.Run("no progress callback", func(t *testing.T) {
		err := decodePull(strings.NewReader(`{"status":"x"}`+"\n"+`{"error":"boom"}`), nil)
		if err == nil || err.Error() != "boom" {
			t.Errorf("decodePull(nil callback) error = %v, want boom", err)
		}
	})
	t.Run("read error", func(t *testing.T) {
		cause := errors.New("connection reset")
		err := decodePull(io.MultiReader(strings.NewReader(`{"status":"x"}`+"\n"), iotest.ErrReader(cause)), nil)
		if !errors.Is(err, cause) {
			t.Errorf("decodePull() error = %v, want it to wrap %v", err, cause)
		}
	})
}

// FuzzDecodePull checks that decodePull never panics, and that how the
// stream arrives (whole, or a byte at a time) changes nothing.
func FuzzDecodePull(f *testing.F) {
	f.Add([]byte(`{"status":"Pulling from rr/good","id":"1"}` + "\n" + `{"errorDetail":{"message":"unknown blob"},"error":"unknown blob"}`))
	f.Add([]byte(`{"status":"Downl`))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		var whole, bytewise []PullMessage
		errWhole := decodePull(bytes.NewReader(data), func(m PullMessage) { whole = append(whole, m) })
		errBytewise := decodePull(iotest.OneByteReader(bytes.NewReader(data)), func(m PullMessage) { bytewise = append(bytewise, m) })
		if !reflect.DeepEqual(whole, bytewise) || (errWhole == nil) != (errBytewise == nil) {
			t.Errorf("decodePull(%q): whole %+v, %v; a byte at a time %+v, %v", data, whole, errWhole, bytewise, errBytewise)
		}
		if errWhole == nil && json.Valid(data) && len(whole) != 1 {
			t.Errorf("decodePull(%q) = %d messages, nil; want 1 for one valid JSON value", data, len(whole))
		}
	})
}
