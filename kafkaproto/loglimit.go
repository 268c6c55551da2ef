package kafkaproto

import (
	"sync"
	"time"
)

// logLimitInterval is the least time between two warnings of one kind.
const logLimitInterval = 10 * time.Second

// logLimiter lets one message of each kind through per logLimitInterval and
// counts the others (nats-server RateLimitWarnf). Kinds are a fixed set of
// constants, so the maps stay small.
type logLimiter struct {
	mu         sync.Mutex
	next       map[string]time.Time
	suppressed map[string]int
}

// allow reports whether a message of kind may be logged at now, and how
// many were suppressed since the last one that was.
func (l *logLimiter) allow(kind string, now time.Time) (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.next == nil {
		l.next = map[string]time.Time{}
		l.suppressed = map[string]int{}
	}
	if now.Before(l.next[kind]) {
		l.suppressed[kind]++
		return false, 0
	}
	n := l.suppressed[kind]
	l.suppressed[kind] = 0
	l.next[kind] = now.Add(logLimitInterval)
	return true, n
}
