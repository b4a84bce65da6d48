package engine

import (
	"path"
	"strings"
)

// EngineDir is where the waiter finds the directory of the engine's
// socket.
const EngineDir = "/run/waitdaemon-engine"

// SocketSource is the host path of the engine socket that binds make
// appear in a container at socket, bound itself or through a directory
// above it; fallback when none does.
func SocketSource(binds []Bind, socket, fallback string) string {
	for _, b := range binds {
		if path.Clean(b.Container) == socket {
			return b.Host
		}
	}
	for _, b := range binds {
		if rest, ok := strings.CutPrefix(socket, path.Clean(b.Container)+"/"); ok {
			return path.Join(b.Host, rest)
		}
	}
	return fallback
}

// EngineBind is the bind that gives the waiter the engine socket at host
// path source, and the socket's path in the waiter: the socket's
// directory, read-only, at EngineDir. The directory, not the socket file:
// an engine that restarts (the waiter lives on) unlinks its socket and
// makes a new one, which a bind of the old file would never see. A socket
// at the root is bound itself, at fallback.
func EngineBind(source, fallback string) (Bind, string) {
	dir, file := path.Split(source)
	if dir == "/" || dir == "" {
		return Bind{Host: source, Container: fallback}, fallback
	}
	return Bind{Host: path.Clean(dir), Container: EngineDir, ReadOnly: true}, path.Join(EngineDir, file)
}
