//go:build !invariants

package queues

// invariantsEnabled is false without the invariants build tag: every check
// of invariants.go is dead code and compiles away.
const invariantsEnabled = false
