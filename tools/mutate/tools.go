//go:build tools

// Package tools pins the mutation tester, gremlins, in a module of its
// own, so that it stays out of waitdaemon's module graph.
package tools

import _ "github.com/go-gremlins/gremlins/cmd/gremlins"
