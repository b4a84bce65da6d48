package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/waitdaemon/waitdaemon/dockerapi"
)

// timeline is one action's run, by the engine's clock and the waiter's
// (the same host clock).
type timeline struct {
	wait                      time.Duration
	actionStarted             time.Time
	actionExited              time.Time // the engine's FinishedAt
	waiterStarted             time.Time
	startSent                 time.Time // by the waiter
	userStarted, userFinished time.Time // the engine's
	trips1, trips2            int       // requests in the traces of phase 1 and 2
}

// request is a request line of the --verbose trace.
var request = regexp.MustCompile(`(?m)^> (GET|HEAD|POST|PUT|DELETE) /`)

// waitRun runs one action with the given wait, follows its waiter to the
// end and returns the run's timeline; verbose counts the round trips.
func waitRun(ctx context.Context, c *dockerapi.Client, image, probe, name string, wait int, verbose, podman bool) (timeline, error) {
	tl := timeline{wait: time.Duration(wait) * time.Second}
	var env []string
	if verbose {
		env = append(env, "WAITDAEMON_VERBOSE=true")
	}
	id, err := startAction(ctx, c, image, probe, name, strconv.Itoa(wait), env...)
	if err != nil {
		return tl, err
	}
	defer c.ContainerRemove(context.WithoutCancel(ctx), id, dockerapi.RemoveOptions{Force: true, Volumes: true})
	if _, err := c.ContainerWait(ctx, id, dockerapi.WaitNotRunning); err != nil {
		return tl, err
	}
	// The waiter, found at once: WAIT_SECONDS after the action's exit,
	// it runs the user container and is gone.
	list, err := c.ContainerList(ctx, "org.waitdaemon.action-id="+id, "org.waitdaemon.role=waiter")
	if err != nil || len(list) != 1 {
		return tl, fmt.Errorf("finding the waiter of %s: %v (%d found)", name, err, len(list))
	}
	action, err := c.ContainerInspect(ctx, id)
	if err != nil {
		return tl, err
	}
	var actionOut bytes.Buffer
	if err := c.ContainerLogs(ctx, id, dockerapi.LogsOptions{TTY: true}, &actionOut, &actionOut); err != nil {
		return tl, err
	}
	if action.State.ExitCode != 0 {
		return tl, fmt.Errorf("action %s exited %d:\n%s", name, action.State.ExitCode, actionOut.String())
	}
	tl.trips1 = len(request.FindAllString(actionOut.String(), -1))
	waiter, err := c.ContainerInspect(ctx, list[0].ID)
	if err != nil {
		return tl, err
	}
	var out, trace bytes.Buffer
	if err := followWaiter(ctx, c, list[0].ID, podman, &out, &trace); err != nil {
		return tl, err
	}
	tl.trips2 = len(request.FindAllString(trace.String(), -1))

	var started struct {
		StartSent string `json:"start_sent"`
	}
	var result struct {
		ExitCode int `json:"exit_code"`
		Attempts []struct {
			Started  string `json:"started_at"`
			Finished string `json:"finished_at"`
		} `json:"attempts"`
	}
	sc := bufio.NewScanner(&out)
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
	if len(result.Attempts) == 0 || result.ExitCode != 0 {
		return tl, fmt.Errorf("the waiter of %s reported no successful run:\n%s%s", name, out.String(), trace.String())
	}
	times := []struct {
		t *time.Time
		s string
	}{
		{&tl.actionStarted, action.State.StartedAt},
		{&tl.actionExited, action.State.FinishedAt},
		{&tl.waiterStarted, waiter.State.StartedAt},
		{&tl.startSent, started.StartSent},
		{&tl.userStarted, result.Attempts[0].Started},
		{&tl.userFinished, result.Attempts[0].Finished},
	}
	for _, x := range times {
		if *x.t, err = time.Parse(time.RFC3339Nano, x.s); err != nil {
			return tl, fmt.Errorf("the run of %s: %w", name, err)
		}
	}
	return tl, waitGone(ctx, c, id)
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
	waitEnd := tl.actionExited.Add(tl.wait)
	bar(0, "action (phase 1)", tl.actionStarted, tl.actionExited, "#4a90d9")
	mark(0, tl.actionExited, "exit", 0)
	bar(1, "waiter (phase 2)", tl.waiterStarted, tl.userFinished, "#b8b8b8")
	mark(1, tl.waiterStarted, "start", 0)
	bar(2, "WAIT_SECONDS", tl.actionExited, waitEnd, "#f5c26b")
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
