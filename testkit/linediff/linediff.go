// Package linediff shows how two texts differ, line by line, for test
// failures: (-want +got), with three lines of context.
package linediff

import "strings"

// Text compares want and got line by line.
func Text(want, got string) string {
	return Lines(strings.Split(want, "\n"), strings.Split(got, "\n"))
}

// Lines returns "" when want and got are the same lines, else the lines
// that differ, prefixed - and +, with three lines of context, from a
// longest common subsequence.
func Lines(a, b []string) string {
	if slicesEqual(a, b) {
		return ""
	}
	// lcs[i][j] is the length of the longest common subsequence of a[i:]
	// and b[j:].
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var lines []string
	for i, j := 0, 0; i < len(a) || j < len(b); {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			lines = append(lines, " "+a[i])
			i, j = i+1, j+1
		case i < len(a) && (j == len(b) || lcs[i+1][j] >= lcs[i][j+1]):
			lines = append(lines, "-"+a[i])
			i++
		default:
			lines = append(lines, "+"+b[j])
			j++
		}
	}
	const context = 3
	var out strings.Builder
	skipped := false
	for k, l := range lines {
		near := false
		for d := max(0, k-context); d <= min(len(lines)-1, k+context); d++ {
			if lines[d][0] != ' ' {
				near = true
				break
			}
		}
		if !near {
			if !skipped {
				out.WriteString("  ...\n")
			}
			skipped = true
			continue
		}
		skipped = false
		out.WriteString(l + "\n")
	}
	return out.String()
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
