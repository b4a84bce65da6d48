package ocilayout

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
)

// Dockerfile is what a one-file scratch Dockerfile describes: FROM
// scratch, one COPY of one file, and an ENTRYPOINT in exec form.
type Dockerfile struct {
	Source     string   // COPY's source, relative to the build context
	Path       string   // COPY's destination, absolute
	Entrypoint []string // ENTRYPOINT's exec form
	History    []History
}

// ParseDockerfile reads such a Dockerfile, so that the layout is the
// image `docker build` makes of it. Any other instruction is an error:
// the layout could not be the same image.
func ParseDockerfile(r io.Reader, name string) (Dockerfile, error) {
	var df Dockerfile
	var from, copied, entry bool
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fail := func(format string, a ...any) error {
			return fmt.Errorf("%s:%d: %s: %s", name, n, line, fmt.Sprintf(format, a...))
		}
		if strings.HasSuffix(line, `\`) {
			return Dockerfile{}, fail("continued lines are not supported")
		}
		instr, args, _ := strings.Cut(line, " ")
		args = strings.TrimSpace(args)
		switch strings.ToUpper(instr) {
		case "FROM":
			if from || args != "scratch" {
				return Dockerfile{}, fail("expected one FROM scratch, first")
			}
			from = true
			continue
		case "COPY":
			f := strings.Fields(args)
			if !from || copied || len(f) != 2 || strings.HasPrefix(f[0], "--") || strings.ContainsAny(f[0], "*?[") {
				return Dockerfile{}, fail("expected one COPY of one file, after FROM, without options")
			}
			dst := f[1]
			if !path.IsAbs(dst) {
				dst = "/" + dst
			}
			if strings.HasSuffix(dst, "/") {
				dst += path.Base(f[0])
			}
			df.Source, df.Path = f[0], path.Clean(dst)
			copied = true
			df.History = append(df.History, History{CreatedBy: line})
		case "ENTRYPOINT":
			if !from || entry {
				return Dockerfile{}, fail("expected one ENTRYPOINT, after FROM")
			}
			if err := json.Unmarshal([]byte(args), &df.Entrypoint); err != nil || len(df.Entrypoint) == 0 {
				return Dockerfile{}, fail("expected the exec form, a JSON array of strings")
			}
			entry = true
			df.History = append(df.History, History{CreatedBy: line, EmptyLayer: true})
		default:
			return Dockerfile{}, fail("%s is not supported: the layout would not be the image docker build makes", instr)
		}
	}
	if err := sc.Err(); err != nil {
		return Dockerfile{}, fmt.Errorf("reading %s: %w", name, err)
	}
	if !copied || !entry {
		return Dockerfile{}, fmt.Errorf("%s: %w", name, errors.New("expected FROM scratch, a COPY and an ENTRYPOINT"))
	}
	return df, nil
}
