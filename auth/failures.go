package auth

import (
	"net/netip"
	"sync"
	"time"
)

// FailureDelay slows repeated authentication failures from one address:
// the n-th failure within Window answers after n x Step, at most Max
// (Kafka delays every failed authentication by
// connection.failed.authentication.delay.ms; this grows it per address).
// It remembers at most MaxAddresses addresses; when full it forgets the
// oldest entries first, so memory stays bounded under a flood of
// addresses. Callers pass the time; the delay itself is the caller's.
type FailureDelay struct {
	Step         time.Duration
	Max          time.Duration
	Window       time.Duration
	MaxAddresses int

	mu struct {
		sync.Mutex
		byAddr map[netip.Addr]failureEntry
	}
}

type failureEntry struct {
	count int
	last  time.Time
}

// Failed records a failure from addr at now and returns how long to wait
// before answering it.
func (f *FailureDelay) Failed(addr netip.Addr, now time.Time) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mu.byAddr == nil {
		f.mu.byAddr = map[netip.Addr]failureEntry{}
	}
	e := f.mu.byAddr[addr]
	if now.Sub(e.last) > f.Window {
		e.count = 0
	}
	e.count++
	e.last = now
	if _, ok := f.mu.byAddr[addr]; !ok && len(f.mu.byAddr) >= f.MaxAddresses {
		f.evictLocked(now)
	}
	f.mu.byAddr[addr] = e
	return min(time.Duration(e.count)*f.Step, f.Max)
}

// evictLocked drops expired entries, and if none expired, the oldest.
//
// REQUIRES: f.mu held.
func (f *FailureDelay) evictLocked(now time.Time) {
	var oldest netip.Addr
	var oldestAt time.Time
	for a, e := range f.mu.byAddr {
		if now.Sub(e.last) > f.Window {
			delete(f.mu.byAddr, a)
			continue
		}
		if oldestAt.IsZero() || e.last.Before(oldestAt) {
			oldest, oldestAt = a, e.last
		}
	}
	if len(f.mu.byAddr) >= f.MaxAddresses {
		delete(f.mu.byAddr, oldest)
	}
}

// Succeeded forgets the failures of addr.
func (f *FailureDelay) Succeeded(addr netip.Addr) {
	f.mu.Lock()
	delete(f.mu.byAddr, addr)
	f.mu.Unlock()
}

// Len is the number of addresses remembered.
func (f *FailureDelay) Len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.mu.byAddr)
}
