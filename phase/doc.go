// Package phase is waitdaemon's two phases, written once for every engine
// against the contract in package engine.
//
// Phase 1 (One) runs as the action container: it validates the action's
// variables, reaches the engine, finds its own container, clears what an
// earlier run of the action left, creates the waiter and starts it while
// it pulls and creates the user container (and the fallback) without
// starting them, confirms the result file, and logs the hand-off; after a
// failure it removes what it made. Phase 2 (Two) runs as the waiter: it
// waits for the action's exit and WAIT_SECONDS, runs the user container
// (again while it fails, then the fallback), writes the result, removes
// what succeeded and keeps what failed; a signal before the start cancels
// everything, one after it leaves the user container running.
//
// What phase 1 tells phase 2 is written once, in contract.go: the names
// of what it makes (<action>-waitdaemon-<role>), the labels and roles,
// the waiter's command line (WaiterArgs), the result-file handshake, and
// the result's schema (result, attempt, and the wait's account, waited).
// How the waiter reaches the engine (the variables each engine sets in
// its environment, such as DOCKER_HOST) is the engine's, in package
// engine. The variables an action can set are one list, Variables.
package phase
