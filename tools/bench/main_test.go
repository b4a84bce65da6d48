package main

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestCountFrom holds the bench to what the product counts WAIT_SECONDS
// from: the later of the exit and the removal, at most 60 s after the
// exit, and 60 s after it with no removal.
func TestCountFrom(t *testing.T) {
	exit := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		name     string
		removed  time.Time
		sent     time.Time
		wantFrom time.Time
		wantLate time.Duration
	}{
		{"removed after the exit", exit.Add(2 * time.Second), exit.Add(3*time.Second + 40*time.Millisecond), exit.Add(2 * time.Second), 40 * time.Millisecond},
		{"removed before the exit was read", exit.Add(-time.Second), exit.Add(time.Second), exit, 0},
		{"never removed", time.Time{}, exit.Add(61*time.Second + time.Millisecond), exit.Add(60 * time.Second), time.Millisecond},
		{"removed past the bound", exit.Add(70 * time.Second), exit.Add(61 * time.Second), exit.Add(60 * time.Second), 0},
		{"started early", exit.Add(2 * time.Second), exit.Add(2*time.Second + 900*time.Millisecond), exit.Add(2 * time.Second), -100 * time.Millisecond},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tl := timeline{wait: time.Second, actionExited: exit, removed: c.removed, startSent: c.sent}
			if got := tl.countFrom(); !got.Equal(c.wantFrom) {
				t.Errorf("countFrom() = %v, want %v", got, c.wantFrom)
			}
			if got := tl.late(); got != c.wantLate {
				t.Errorf("late() = %v, want %v", got, c.wantLate)
			}
		})
	}
}

// TestTable: the table gives every engine's figures against the live
// targets, marks those past them, and prints no retired target.
func TestTable(t *testing.T) {
	ms := func(n ...int) []time.Duration {
		var ds []time.Duration
		for _, x := range n {
			ds = append(ds, time.Duration(x)*time.Millisecond)
		}
		return ds
	}
	bound := 3 * time.Millisecond
	all := []figures{
		{engine: "Docker 20.10", phase1: ms(110, 120, 130), floor: ms(100, 100, 100), bridge: ms(240, 240, 240),
			wait: ms(2, 5, 90), learnt: ms(1, 4, 89), bound: &bound, trips1: 9, trips2: 30, mem: memory{hwm: 9.2e6, anon: 2.1e6, file: 7.1e6}},
		{engine: "containerd 2.2", phase1: ms(150, 160, 170), floor: ms(100, 100, 100),
			wait: ms(200, 210, 220), learnt: ms(1, 2, 3), trips1: 27, trips2: 11, mem: memory{hwm: 10e6, anon: 3.2e6, file: 7e6}},
	}
	var b strings.Builder
	printTable(&b, all, []binarySize{{"amd64", 8_450_210, 8.4e6}, {"arm64", 7_667_874, 7.7e6}}, opts{runs: 3, bound: true})
	out := b.String()
	for _, want := range []string{
		"| measure | Docker 20.10 | containerd 2.2 | target |",
		"| phase 1 / the floor | **1.20×** over | **1.60×** over | " + targetPhase1 + " |",
		"| 0.50× (240 ms (240–240)) |",
		"+5.0 ms, worst +90.0 | **+210.0 ms, worst +220.0** over | " + targetWait + " |",
		"| +3.0 ms |  | " + targetBound + " |",
		"| 9 / **30** over | 27 / 11 | phase 2 " + targetTrips2 + " |",
		"| 2.10 / 7.10 / 9.20 MB | **3.20** over / 7.00 / 10.00 MB | " + targetMemory + " |",
		"| linux/amd64 | **8.45 MB** over (8,450,210 bytes) | ≤ 8.4 MB |",
		"| linux/arm64 | 7.67 MB (7,667,874 bytes) | ≤ 7.7 MB |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
	for _, retired := range []string{"6.5 MB", "≤ 5 MB", "0.55×", "1.4×"} {
		if strings.Contains(out, retired) {
			t.Errorf("the table prints the retired target %q:\n%s", retired, out)
		}
	}
	b.Reset()
	printTable(&b, all, nil, opts{runs: 1})
	if strings.Contains(b.String(), "no removal") {
		t.Errorf("a run without the bound's run prints its row:\n%s", b.String())
	}
}

// TestFootprintTargets: docs/footprint.md's table, the bench's own
// output, states the targets the bench prints now.
func TestFootprintTargets(t *testing.T) {
	doc, err := os.ReadFile("../../docs/footprint.md")
	if err != nil {
		t.Fatal(err)
	}
	targets := []string{"| " + targetPhase1 + " |", "| " + targetWait + " |", "| " + targetBound + " |",
		"| phase 2 " + targetTrips2 + " |", "| " + targetMemory + " |"}
	for _, want := range targets {
		if !strings.Contains(string(doc), want) {
			t.Errorf("docs/footprint.md's table lacks the target %q: paste make bench's table there", want)
		}
	}
	for _, b := range binaryBudget {
		if want := fmt.Sprintf("| ≤ %.1f MB |", b.budget/1e6); !strings.Contains(string(doc), want) {
			t.Errorf("docs/footprint.md's table lacks the %s budget %q: paste make bench's table there", b.arch, want)
		}
	}
}
