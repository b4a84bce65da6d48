// Package e2e holds the end-to-end tests: they run actions on the local
// Docker engine the way tink-worker and tink-agent do, with a probe of the
// project's own as the user image, and check what the user container
// received. They need an engine and fail, saying how to start one, when
// there is none.
package e2e
