package main

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeShort: the README is one an operator reads in two minutes:
// at most 1,500 words, code blocks included, and no line of prose over
// 400 characters; the long explanations live in docs/.
func TestReadmeShort(t *testing.T) {
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if words := len(strings.Fields(string(data))); words > 1500 {
		t.Errorf("README.md has %d words; want 1,500 at most: move explanations and figures into docs/", words)
	}
	code := false
	for i, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "```") {
			code = !code
			continue
		}
		if !code && len(line) > 400 {
			t.Errorf("README.md:%d is %d characters; want 400 at most outside code blocks", i+1, len(line))
		}
	}
}
