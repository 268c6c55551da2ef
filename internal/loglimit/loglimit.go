// Package loglimit rate-limits repeated warnings (nats-server
// RateLimitWarnf): a flood of refused or stalled connections must not
// flood the log. The Kafka and the HTTP listeners share it.
package loglimit

import (
	"sync"
	"time"
)

// Interval is the least time between two messages of one kind.
const Interval = 10 * time.Second

// Limiter lets one message of each kind through per Interval and counts
// the others. Kinds are a fixed set of constants, so the maps stay small.
// The zero value is ready to use.
type Limiter struct {
	mu struct {
		sync.Mutex
		next       map[string]time.Time
		suppressed map[string]int
	}
}

// Allow reports whether a message of kind may be logged at now, and how
// many were suppressed since the last one that was.
func (l *Limiter) Allow(kind string, now time.Time) (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.next == nil {
		l.mu.next = map[string]time.Time{}
		l.mu.suppressed = map[string]int{}
	}
	if now.Before(l.mu.next[kind]) {
		l.mu.suppressed[kind]++
		return false, 0
	}
	n := l.mu.suppressed[kind]
	l.mu.suppressed[kind] = 0
	l.mu.next[kind] = now.Add(Interval)
	return true, n
}
