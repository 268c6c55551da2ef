// Package gctuner sets the garbage collector's target so that the heap may
// grow by at least a fixed headroom between collections, instead of by the
// live heap (GOGC=100).
//
// The broker's live Go heap is small (with cgo, Pebble's memtables and
// block cache live outside it) while produce allocates about two bytes per
// byte received (Pebble's flush buffers of 1 MB record batches, batch
// buffers): with GOGC=100 a 40 MB live heap was collected some 60 times per
// gigabyte produced, 5-8 % of the broker's CPU. With a headroom the
// collector runs once per headroom allocated, and the heap's goal stays
// bounded: live + max(live, headroom), never above what GOGC=100 would
// allow plus the headroom.
//
// Invariants: the percentage set is at least 100 (never more collections
// than Go's default) and at most headroom/4MiB*100 (the runtime's minimum
// heap goal, 4 MiB at GOGC=100, scales with GOGC: above that the heap
// would outgrow the headroom while almost nothing is live); the tuner changes nothing when
// the operator set GOGC (Start reports false); after Stop it sets nothing
// more (the percentage it set last stays).
package gctuner

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// maxPercent caps the GOGC the tuner sets whatever the headroom.
const maxPercent = 10000

// heapMinimum is the Go runtime's smallest heap goal at GOGC=100 (4 MiB).
// It scales with GOGC, so with a GOGC above headroom/heapMinimum*100 a heap
// with almost nothing live would grow past the headroom before its first
// collections (a GOGC of 10000 makes the smallest goal 400 MB).
const heapMinimum = 4 << 20

// PercentFor is the GOGC that lets a heap of live bytes grow by headroom
// bytes (or by live, if that is more) before the next collection:
// max(100, headroom*100/live), at most headroom*100/heapMinimum and
// maxPercent.
func PercentFor(live, headroom uint64) int {
	limit := uint64(maxPercent)
	if h := headroom / heapMinimum; h < maxPercent/100 {
		limit = h * 100
	}
	if live == 0 {
		live = 1
	}
	p := limit
	if headroom/live < limit/100 {
		p = headroom * 100 / live // headroom < live*limit/100: no overflow
	}
	return int(max(p, 100))
}

// Tuner re-sets GOGC after every collection from the live heap it left.
type Tuner struct {
	headroom uint64
	stopped  atomic.Bool
	mu       sync.Mutex // serializes tune (the finalizer) with Stop
	sample   []metrics.Sample
	// set applies a GOGC (debug.SetGCPercent); tests replace it.
	set func(int) int
}

// liveMetric is the heap the last collection marked live.
const liveMetric = "/gc/heap/live:bytes"

// Start begins tuning with the given headroom (bytes), unless GOGC is set
// in the environment (the operator's choice wins) or headroom is 0; ok
// says whether it started. Stop ends it.
func Start(headroom uint64) (t *Tuner, ok bool) {
	if headroom == 0 || os.Getenv("GOGC") != "" {
		return nil, false
	}
	t = newTuner(headroom, debug.SetGCPercent)
	t.arm() // from the first collection on: before it, no live heap is known
	return t, true
}

func newTuner(headroom uint64, set func(int) int) *Tuner {
	return &Tuner{headroom: headroom, set: set, sample: []metrics.Sample{{Name: liveMetric}}}
}

// sentinel is garbage from its creation: its finalizer runs once per
// collection cycle (the cycle that finds it unreachable) and arms the
// next one.
type sentinel struct{ t *Tuner }

func (t *Tuner) arm() {
	s := &sentinel{t: t}
	runtime.SetFinalizer(s, func(s *sentinel) {
		if s.t.stopped.Load() {
			return
		}
		s.t.tune()
		s.t.arm()
	})
}

// tune sets GOGC from the live heap of the last collection.
func (t *Tuner) tune() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped.Load() {
		return
	}
	metrics.Read(t.sample)
	if t.sample[0].Value.Kind() != metrics.KindUint64 || t.sample[0].Value.Uint64() == 0 {
		return // an unknown metric or no collection yet: leave GOGC as it is
	}
	t.set(PercentFor(t.sample[0].Value.Uint64(), t.headroom))
}

// Stop ends the tuning; safe on a nil Tuner and more than once.
func (t *Tuner) Stop() {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopped.Store(true)
}
