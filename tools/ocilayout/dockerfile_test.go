package ocilayout

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

func TestParseDockerfileScratch(t *testing.T) {
	f, err := os.Open("../../Dockerfile.scratch")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	df, err := ParseDockerfile(f, "Dockerfile.scratch")
	if err != nil {
		t.Fatal(err)
	}
	want := Dockerfile{
		Source: "waitdaemon", Path: "/waitdaemon", Entrypoint: []string{"/waitdaemon", "action", "--"},
		History: []History{{CreatedBy: "COPY waitdaemon /waitdaemon"}, {CreatedBy: `ENTRYPOINT ["/waitdaemon", "action", "--"]`, EmptyLayer: true}},
	}
	if !reflect.DeepEqual(df, want) {
		t.Errorf("got %+v\nwant %+v", df, want)
	}
}

func TestParseDockerfile(t *testing.T) {
	cases := []struct {
		name, text string
		wantPath   string // or
		wantErr    string
	}{
		{name: "into a directory", text: "FROM scratch\nCOPY bin/w /usr/\nENTRYPOINT [\"/usr/w\"]\n", wantPath: "/usr/w"},
		{name: "relative destination", text: "from scratch\ncopy w w\nentrypoint [\"/w\"]\n", wantPath: "/w"},
		{name: "a base image", text: "FROM alpine\nCOPY w /w\nENTRYPOINT [\"/w\"]\n", wantErr: "expected one FROM scratch"},
		{name: "RUN", text: "FROM scratch\nCOPY w /w\nRUN true\nENTRYPOINT [\"/w\"]\n", wantErr: "RUN is not supported"},
		{name: "ENV", text: "FROM scratch\nCOPY w /w\nENV A=1\nENTRYPOINT [\"/w\"]\n", wantErr: "ENV is not supported"},
		{name: "two COPYs", text: "FROM scratch\nCOPY w /w\nCOPY v /v\nENTRYPOINT [\"/w\"]\n", wantErr: "expected one COPY"},
		{name: "COPY options", text: "FROM scratch\nCOPY --chown=1 w /w\nENTRYPOINT [\"/w\"]\n", wantErr: "expected one COPY"},
		{name: "shell form", text: "FROM scratch\nCOPY w /w\nENTRYPOINT /w\n", wantErr: "exec form"},
		{name: "no ENTRYPOINT", text: "FROM scratch\nCOPY w /w\n", wantErr: "expected FROM scratch, a COPY and an ENTRYPOINT"},
		{name: "continued line", text: "FROM scratch\nCOPY w \\\n /w\n", wantErr: "continued lines"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			df, err := ParseDockerfile(strings.NewReader(tc.text), "Dockerfile")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("error %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || df.Path != tc.wantPath {
				t.Errorf("path %q, error %v; want %q", df.Path, err, tc.wantPath)
			}
		})
	}
}
