package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/waitdaemon/waitdaemon/dockerapi"
)

// timeline is one action's run, by the engine's clock, the worker's and
// the waiter's (the same host clock).
type timeline struct {
	wait                      time.Duration
	actionStarted             time.Time
	actionExited              time.Time // the engine's
	removed                   time.Time // the engine removed the action, by its events; zero: never removed
	waiterStarted             time.Time
	countedFrom, startSent    time.Time // by the waiter
	userStarted, userFinished time.Time // the engine's
	trips1, trips2            int       // requests in the traces of phase 1 and 2
}

// countFrom is what the product counts WAIT_SECONDS from: the later of
// the exit and the removal, at most 60 s after the exit.
func (tl timeline) countFrom() time.Time {
	bound := tl.actionExited.Add(boundAfter)
	if tl.removed.IsZero() || tl.removed.After(bound) {
		return bound
	}
	if tl.removed.Before(tl.actionExited) {
		return tl.actionExited
	}
	return tl.removed
}

// late is the start's error: start sent − countFrom − WAIT_SECONDS.
func (tl timeline) late() time.Duration { return tl.startSent.Sub(tl.countFrom()) - tl.wait }

// request is a request line of the --verbose trace: an HTTP request, or
// a gRPC call.
var request = regexp.MustCompile(`(?m)^> ((GET|HEAD|POST|PUT|DELETE) /|containerd\.)`)

// countTrips counts the requests in a --verbose trace.
func countTrips(trace string) int { return len(request.FindAllString(trace, -1)) }

// read takes the waiter's start line and result from its output (its
// JSON lines), and its round trips from its trace.
func (tl *timeline) read(out, trace string) error {
	var started struct {
		CountedFrom string `json:"counted_from"`
		StartSent   string `json:"start_sent"`
	}
	var result struct {
		ExitCode int `json:"exit_code"`
		Attempts []struct {
			Started  string `json:"started_at"`
			Finished string `json:"finished_at"`
		} `json:"attempts"`
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e struct{ Msg string }
		line := sc.Bytes()
		if json.Unmarshal(line, &e) != nil {
			continue
		}
		switch e.Msg {
		case "started user container":
			_ = json.Unmarshal(line, &started)
		case "result":
			_ = json.Unmarshal(line, &result)
		}
	}
	if len(result.Attempts) == 0 || result.ExitCode != 0 || started.StartSent == "" {
		return fmt.Errorf("no successful run reported:\n%s%s", out, trace)
	}
	times := []struct {
		t *time.Time
		s string
	}{
		{&tl.countedFrom, started.CountedFrom},
		{&tl.startSent, started.StartSent},
		{&tl.userStarted, result.Attempts[0].Started},
		{&tl.userFinished, result.Attempts[0].Finished},
	}
	for _, x := range times {
		var err error
		if *x.t, err = time.Parse(time.RFC3339Nano, x.s); err != nil {
			return err
		}
	}
	tl.trips2 = countTrips(trace)
	return nil
}

// svg draws the timeline: one lane each for the action, the waiter's
// wait and the user container, with the moments marked in milliseconds
// from the action's start.
func (tl timeline) svg() string {
	const (
		width, left, right = 900.0, 150.0, 40.0
		laneH, top         = 44.0, 40.0
	)
	t0 := tl.actionStarted
	end := tl.userFinished
	scale := (width - left - right) / float64(end.Sub(t0))
	x := func(t time.Time) float64 { return left + float64(t.Sub(t0))*scale }
	ms := func(t time.Time) string { return fmt.Sprintf("%d ms", t.Sub(t0).Milliseconds()) }
	var b strings.Builder
	height := top + 4*laneH + 40
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="20" font-size="14" font-weight="bold">One action with WAIT_SECONDS=%d, measured by make bench</text>`+"\n", left, int(tl.wait.Seconds()))
	bar := func(lane int, label string, from, to time.Time, fill string) {
		y := top + float64(lane)*laneH
		fmt.Fprintf(&b, `<text x="10" y="%.0f">%s</text>`+"\n", y+18, label)
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.0f" width="%.1f" height="22" fill="%s" rx="3"/>`+"\n", x(from), y+4, max(x(to)-x(from), 2), fill)
	}
	mark := func(lane int, t time.Time, label string, dy float64) {
		y := top + float64(lane)*laneH
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="black"/>`+"\n", x(t), y, x(t), y+30)
		anchor, tx := "start", x(t)+3
		if x(t) > width-right-150 { // near the right edge: label to the left
			anchor, tx = "end", x(t)-3
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" font-size="10" text-anchor="%s">%s %s</text>`+"\n", tx, y+40+dy, anchor, label, ms(t))
	}
	waitEnd := tl.countFrom().Add(tl.wait)
	bar(0, "action (phase 1)", tl.actionStarted, tl.actionExited, "#4a90d9")
	mark(0, tl.actionExited, "exit", 0)
	mark(0, tl.countFrom(), "removed", 12)
	bar(1, "waiter (phase 2)", tl.waiterStarted, tl.userFinished, "#b8b8b8")
	mark(1, tl.waiterStarted, "start", 0)
	bar(2, "WAIT_SECONDS", tl.countFrom(), waitEnd, "#f5c26b")
	mark(2, tl.startSent, "start sent", 0)
	bar(3, "user container", tl.userStarted, tl.userFinished, "#5cb85c")
	mark(3, tl.userStarted, "start", 0)
	mark(3, tl.userFinished, "exit", 12)
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#888"/>`+"\n", left, height-12, width-right, height-12)
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-size="10">0</text><text x="%.0f" y="%.0f" font-size="10" text-anchor="end">%s</text>`+"\n", left, height-2, width-right, height-2, ms(end))
	b.WriteString("</svg>\n")
	return b.String()
}

// followWaiter copies the waiter's stdout and stderr until it has exited
// and is gone. Podman 4.3's log stream stops once AutoRemove deletes the
// log file, often before the waiter's last lines: there the file itself
// (k8s-file lines, though its API says json-file), opened while the
// waiter runs, is read once the waiter is gone.
func followWaiter(ctx context.Context, c *dockerapi.Client, id string, podman bool, stdout, stderr io.Writer) error {
	if !podman {
		err := c.ContainerLogs(ctx, id, dockerapi.LogsOptions{Follow: true}, stdout, stderr)
		if errors.Is(err, dockerapi.ErrNotFound) {
			return nil
		}
		return err
	}
	resp, err := c.Raw(ctx, "GET", "/containers/"+id+"/json", nil)
	if err != nil {
		return err
	}
	var ins struct{ LogPath string }
	err = json.NewDecoder(resp.Body).Decode(&ins)
	resp.Body.Close()
	if err != nil {
		return err
	}
	f, err := os.Open(ins.LogPath)
	if err != nil {
		return fmt.Errorf("the waiter's log file: %w", err)
	}
	defer f.Close()
	for {
		_, err := c.ContainerInspect(ctx, id)
		if errors.Is(err, dockerapi.ErrNotFound) {
			break
		}
		if err != nil {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
	// <time> <stream> <P (partial) or F> <text>, one line each.
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	var partial strings.Builder
	for sc.Scan() {
		fields := strings.SplitN(sc.Text(), " ", 4)
		if len(fields) < 3 {
			continue
		}
		if len(fields) == 4 {
			partial.WriteString(fields[3])
		}
		if fields[2] == "P" {
			continue
		}
		w := stdout
		if fields[1] == "stderr" {
			w = stderr
		}
		fmt.Fprintln(w, partial.String())
		partial.Reset()
	}
	return sc.Err()
}

// isPodman reports whether the engine on c is Podman, by the components
// of its version.
func isPodman(ctx context.Context, c *dockerapi.Client) (bool, error) {
	resp, err := c.Raw(ctx, "GET", "/version", nil)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	var v struct{ Components []struct{ Name string } }
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return false, err
	}
	for _, comp := range v.Components {
		if strings.Contains(comp.Name, "Podman") {
			return true, nil
		}
	}
	return false, nil
}
