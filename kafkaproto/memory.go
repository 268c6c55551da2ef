package kafkaproto

import (
	"sync"
	"sync/atomic"
)

// requestMemory is the broker-wide budget for the bytes of requests being
// read and queued (Kafka queued.max.request.bytes, but always on).
//
// A connection reserves a frame's whole claimed size, all or nothing,
// before the frame costs more than initialBodyBytes: a frame of at most
// initialBodyBytes before its body is read, a larger one once its first
// initialBodyBytes have arrived. So a peer claiming 100 MiB and sending
// 4 KiB holds no reservation, and memory outside the budget is at most
// initialBodyBytes per connection (as its bufio buffers). The reservation is
// given back once the request's reply has been written (or dropped): kmsg's
// decoders alias the body (Produce records, group protocol metadata, ...),
// so the bytes may be referenced until then. While the budget is
// exhausted, readers wait and read nothing more from their sockets; that is
// the back pressure.
//
// Invariants:
//   - used <= capacity, always; a reservation larger than capacity is never
//     granted (callers refuse frames above max-request-bytes first, and
//     capacity >= max-request-bytes is validated in the configuration).
//   - overdraft is held beside used, not in it: the part of fetch
//     responses beyond their grants (chargeOver), at most the one batch a
//     fetch returns whatever its grant (KIP-74) per response being
//     written. Waiters are granted against used only, so a fetch's
//     overdraft never holds up a request: under a budget of
//     max-request-bytes, continuous consumers would otherwise starve a
//     request of that size. In all, the broker holds at most capacity plus
//     one batch per fetch response being written.
//   - A reader holds no reservation for the frame it waits for: waiters
//     hold nothing partial, so the head of the queue always fits once the
//     granted reservations are released.
//   - Grants are first come, first served: a waiter is granted only when
//     every earlier waiter was. So a frame of max-request-bytes cannot be
//     starved by a stream of small frames: it waits at most until the
//     reservations granted before it are released, and those are released
//     when their replies are written.
type requestMemory struct {
	capacity int64

	mu struct {
		sync.Mutex
		used    int64
		waiters []*memoryWaiter // FIFO
	}
	// inUse mirrors mu.used for metrics without the lock.
	inUse atomic.Int64
	waits atomic.Int64
	// overdraft is what fetch responses hold beyond their grants
	// (chargeOver, releaseOver).
	overdraft atomic.Int64
	// fetchInUse is what fetch responses hold: their grants (reserveUpTo,
	// releaseFetch), part of used, and the overdraft. fetchShrunk counts
	// the fetches whose byte limit was shrunk to what was free
	// (fetch_memory.go).
	fetchInUse  atomic.Int64
	fetchShrunk atomic.Int64
}

type memoryWaiter struct {
	n       int64
	granted chan struct{} // closed when the reservation is granted
}

func newRequestMemory(capacity int64) *requestMemory {
	return &requestMemory{capacity: capacity}
}

// acquire reserves n bytes, waiting while the budget is exhausted or
// earlier waiters are still waiting. It returns false, with nothing
// reserved, when cancel is closed first.
// REQUIRES: 0 <= n <= capacity.
func (m *requestMemory) acquire(n int64, cancel <-chan struct{}) bool {
	if n > m.capacity || n < 0 {
		panic("kafkaproto: request memory reservation out of range")
	}
	m.mu.Lock()
	if len(m.mu.waiters) == 0 && m.mu.used+n <= m.capacity {
		m.mu.used += n
		m.inUse.Store(m.mu.used)
		m.mu.Unlock()
		return true
	}
	w := &memoryWaiter{n: n, granted: make(chan struct{})}
	m.mu.waiters = append(m.mu.waiters, w)
	m.mu.Unlock()
	m.waits.Add(1)

	select {
	case <-w.granted:
		return true
	case <-cancel:
	}
	m.mu.Lock()
	select {
	case <-w.granted:
		// Granted while we were giving up: hand it back.
		m.mu.Unlock()
		m.release(n)
		return false
	default:
	}
	for i, o := range m.mu.waiters {
		if o == w {
			m.mu.waiters = append(m.mu.waiters[:i], m.mu.waiters[i+1:]...)
			break
		}
	}
	// The head may have changed: a smaller waiter behind us may fit now.
	m.grantLocked()
	m.mu.Unlock()
	return false
}

// release gives back n bytes reserved by acquire and grants waiters that
// now fit, in order.
func (m *requestMemory) release(n int64) {
	if n == 0 {
		return
	}
	m.mu.Lock()
	m.mu.used -= n
	if m.mu.used < 0 {
		m.mu.Unlock()
		panic("kafkaproto: request memory released more than reserved")
	}
	m.grantLocked()
	m.mu.Unlock()
}

// grantLocked grants waiters from the head of the queue while they fit.
// REQUIRES: m.mu held.
func (m *requestMemory) grantLocked() {
	for len(m.mu.waiters) > 0 {
		w := m.mu.waiters[0]
		if m.mu.used+w.n > m.capacity {
			break
		}
		m.mu.used += w.n
		m.mu.waiters[0] = nil
		m.mu.waiters = m.mu.waiters[1:]
		close(w.granted)
	}
	m.inUse.Store(m.mu.used)
}

// reserveUpTo reserves, for a fetch response, min(want, free) bytes
// without waiting, and returns what it reserved: 0 while readers wait for
// memory (a fetch never overtakes them, FIFO). A fetch never waits for the
// budget: the budget is held by requests whose replies queue behind other
// connections' writers, so writers waiting for it could wait on each other
// forever. Give it back with releaseFetch.
func (m *requestMemory) reserveUpTo(want int64) int64 {
	if want <= 0 {
		return 0
	}
	m.mu.Lock()
	got := int64(0)
	if len(m.mu.waiters) == 0 {
		got = min(want, max(m.capacity-m.mu.used, 0))
	}
	m.mu.used += got
	m.inUse.Store(m.mu.used)
	m.mu.Unlock()
	m.fetchInUse.Add(got)
	return got
}

// chargeOver charges n bytes to a fetch response beyond its grant, past
// capacity: the first batch a fetch returns whole whatever its grant
// (KIP-74), so that a consumer always makes progress. It is counted in the
// overdraft, which no waiter waits for. Give it back with releaseOver.
func (m *requestMemory) chargeOver(n int64) {
	m.overdraft.Add(n)
	m.fetchInUse.Add(n)
}

// releaseOver gives back n bytes charged by chargeOver.
func (m *requestMemory) releaseOver(n int64) {
	if m.overdraft.Add(-n) < 0 || m.fetchInUse.Add(-n) < 0 {
		panic("kafkaproto: fetch overdraft released more than charged")
	}
}

// held is all the budget accounts for: used and the fetch overdraft.
func (m *requestMemory) held() int64 {
	return m.inUse.Load() + m.overdraft.Load()
}

// releaseFetch gives back n bytes a fetch response reserved (reserveUpTo).
func (m *requestMemory) releaseFetch(n int64) {
	if n == 0 {
		return
	}
	if m.fetchInUse.Add(-n) < 0 {
		panic("kafkaproto: fetch memory released more than reserved")
	}
	m.release(n)
}

// waiting returns the number of readers waiting for memory (tests).
func (m *requestMemory) waiting() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.mu.waiters)
}
