//go:build invariants

package queues

// invariantsEnabled turns on the engine's self-checks (invariants.go):
// go test -tags invariants. Pebble's habit (internal/invariants): the
// checks cost time on hot paths and compile away without the tag.
const invariantsEnabled = true
