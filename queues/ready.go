package queues

import (
	"container/heap"
	"sort"

	"github.com/vibemq/broker/pebblestore"
)

// readyBufferSize is how many ready index entries of one priority band are
// kept in memory (up to twice that between trims).
var readyBufferSize = 4096

// readyEntry is one ready index key of a band, plus the delivery count the
// message had when the key was written (the staleness check at pop).
type readyEntry struct {
	due        int64
	m          msgKey
	deliveries uint32
}

func readyLess(a, b *readyEntry) bool {
	if a.due != b.due {
		return a.due < b.due
	}
	if a.m.part != b.m.part {
		return a.m.part < b.m.part
	}
	return a.m.off < b.m.off
}

// readyBand is the in-memory head of one priority band of the ready index.
//
// Invariant: every durable ready key of the band ordered before `from` is in
// h (h may also hold stale entries, dropped when popped: the state row is
// the authority); keys at or after `from` may be only in Pebble. complete
// means from is +infinity. Receivers pop from h and delete keys below
// `from`, so a refill seeks straight past the deleted keys instead of
// scanning their tombstones.
//
// Ready keys written by an append that is not yet durable (offset at or
// above the partition's high watermark) are never loaded by a refill; the
// sender inserts them once durable. So a receiver never leases a message
// before its send is durable.
type readyBand struct {
	h        readyHeap
	from     readyEntry
	complete bool
}

func (b *readyBand) init() { b.reset(true) }

// reset empties the buffer; complete says whether Pebble holds no ready key
// of the band.
func (b *readyBand) reset(complete bool) {
	b.h = b.h[:0]
	b.from = readyEntry{due: -1 << 62}
	b.complete = complete
}

// insert adds a ready key that is durable (or was just written by a
// transition of a durable message under the queue's lock).
func (b *readyBand) insert(e readyEntry) {
	if !b.complete && !readyLess(&e, &b.from) {
		return // beyond the buffer: a later refill reads it from Pebble
	}
	heap.Push(&b.h, e)
	if len(b.h) > 2*readyBufferSize {
		sort.Slice(b.h, func(i, j int) bool { return readyLess(&b.h[i], &b.h[j]) })
		b.from = b.h[readyBufferSize]
		b.complete = false
		b.h = b.h[:readyBufferSize] // a sorted slice is a valid heap
	}
}

// peek returns the first entry, refilling from Pebble when the buffer is
// empty but the band is not complete.
func (q *queue) peekBand(priority int) (readyEntry, bool, error) {
	b := &q.bands[priority]
	if len(b.h) == 0 && !b.complete {
		if err := q.refill(priority); err != nil {
			return readyEntry{}, false, err
		}
	}
	if len(b.h) == 0 {
		return readyEntry{}, false, nil
	}
	return b.h[0], true, nil
}

func (b *readyBand) pop() readyEntry { return heap.Pop(&b.h).(readyEntry) }

// refill loads up to readyBufferSize keys of the band from Pebble, from
// `from` on, skipping keys of appends that are not durable yet.
// REQUIRES: q.mu held.
func (q *queue) refill(priority int) error {
	b := &q.bands[priority]
	prefix := readyBandPrefix(q.id, uint8(priority))
	lower := readyKey(q.id, uint8(priority), b.from.due, b.from.m)
	if b.from.due < 0 {
		lower = prefix
	}
	it, err := q.e.store.NewIter(lower, pebblestore.PrefixEnd(prefix))
	if err != nil {
		return err
	}
	defer it.Close()
	n := 0
	hwm := map[int32]int64{}
	valid := it.First()
	for ; valid && n < readyBufferSize; valid = it.Next() {
		k := it.Key()
		m := msgFromKeyTail(k)
		w, ok := hwm[m.part]
		if !ok {
			w = -1
			if p, ok := q.topic.Partition(m.part); ok {
				w = p.HighWatermark()
			}
			hwm[m.part] = w
		}
		if m.off >= w {
			continue // its send is not durable yet; the sender inserts it
		}
		v, err := it.Value()
		if err != nil {
			return err
		}
		heap.Push(&b.h, readyEntry{due: u64At(k, len(prefix)), m: m, deliveries: decodeU32(v)})
		n++
	}
	if valid {
		k := it.Key()
		b.from = readyEntry{due: u64At(k, len(prefix)), m: msgFromKeyTail(k)}
		b.complete = false
	} else {
		b.complete = true
	}
	return it.Close()
}

type readyHeap []readyEntry

func (h readyHeap) Len() int           { return len(h) }
func (h readyHeap) Less(i, j int) bool { return readyLess(&h[i], &h[j]) }
func (h readyHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *readyHeap) Push(x any)        { *h = append(*h, x.(readyEntry)) }
func (h *readyHeap) Pop() any {
	old := *h
	n := len(old)
	x := old[n-1]
	*h = old[:n-1]
	return x
}

// leaseEntry is one lease in the deadline heap; entries whose epoch or
// deadline no longer match queue.leases are stale and skipped.
type leaseEntry struct {
	deadline int64
	m        msgKey
	epoch    uint32
}

type leaseHeap []leaseEntry

func (h leaseHeap) Len() int            { return len(h) }
func (h leaseHeap) Less(i, j int) bool  { return h[i].deadline < h[j].deadline }
func (h leaseHeap) Swap(i, j int)       { h[i], h[j] = h[j], h[i] }
func (h *leaseHeap) Push(x any)         { *h = append(*h, x.(leaseEntry)) }
func (h *leaseHeap) push(e leaseEntry)  { heap.Push(h, e) }
func (h *leaseHeap) popMin() leaseEntry { return heap.Pop(h).(leaseEntry) }
func (h *leaseHeap) Pop() any {
	old := *h
	n := len(old)
	x := old[n-1]
	*h = old[:n-1]
	return x
}

// setLeaseLocked records a lease in memory.
// REQUIRES: q.mu held.
func (q *queue) setLeaseLocked(m msgKey, epoch uint32, deadline int64) {
	li := leaseInfo{epoch: epoch, deadline: deadline}
	if old, ok := q.leases[m]; ok && old.epoch == epoch {
		li.owner = old.owner // the same lease, moved (extend, deferred dead-letter)
	}
	q.leases[m] = li
	q.leaseHeap.push(leaseEntry{deadline: deadline, m: m, epoch: epoch})
	if len(q.leaseHeap) > 4*len(q.leases)+1024 {
		// Too many stale entries (extends, acks): rebuild.
		q.leaseHeap = q.leaseHeap[:0]
		for k, l := range q.leases {
			q.leaseHeap = append(q.leaseHeap, leaseEntry{deadline: l.deadline, m: k, epoch: l.epoch})
		}
		heap.Init(&q.leaseHeap)
	}
}

// nextExpiredLeaseLocked pops the earliest live lease whose deadline is at
// or before now.
// REQUIRES: q.mu held.
func (q *queue) nextExpiredLeaseLocked(now int64) (leaseEntry, bool) {
	for len(q.leaseHeap) > 0 {
		top := q.leaseHeap[0]
		l, ok := q.leases[top.m]
		if !ok || l.epoch != top.epoch || l.deadline != top.deadline {
			q.leaseHeap.popMin()
			continue
		}
		if top.deadline > now {
			return leaseEntry{}, false
		}
		q.leaseHeap.popMin()
		return top, true
	}
	return leaseEntry{}, false
}

// nextDueLocked is the earliest due time among buffered ready entries.
// REQUIRES: q.mu held.
func (q *queue) nextDueLocked() (int64, bool) {
	best, found := int64(0), false
	for i := range q.bands {
		if len(q.bands[i].h) > 0 && (!found || q.bands[i].h[0].due < best) {
			best, found = q.bands[i].h[0].due, true
		}
	}
	return best, found
}
