package txns

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/topics"
)

// TestTransactionsEndWhileDiskLow pins the decision that transactions can
// always end: while the disk is almost full, transactional data is
// refused like any produce, but EndTxn (commit and abort) and the
// coordinator's timeout abort write their markers. Refusing those would
// leave the transactions open, pinning the last stable offset (every
// read_committed consumer stalls) and, for a decided transaction (its
// row in a Prepare state), leaving a completion that must be redone.
func TestTransactionsEndWhileDiskLow(t *testing.T) {
	var free atomic.Int64
	free.Store(1 << 30)
	h := newHarness(t, Config{}, func(h *harness) {
		h.freeMin = 64 << 20
		h.probe = func(string) (pebblestore.SpaceReading, error) {
			return pebblestore.SpaceReading{Free: free.Load(), Total: 10 << 30}, nil
		}
	})
	setFree := func(n int64) {
		free.Store(n)
		if err := h.store.Space().Probe(); err != nil {
			t.Fatal(err)
		}
	}
	pa, ea := h.begin("a", 60000)
	if _, err := h.produce(pa, ea, 2, true); err != nil {
		t.Fatal(err)
	}
	pb, eb := h.begin("b", 1000)
	if _, err := h.produce(pb, eb, 1, true); err != nil {
		t.Fatal(err)
	}
	setFree(1 << 20)
	if _, err := h.produce(pa, ea, 1, true); !errors.Is(err, topics.ErrStorageFull) {
		t.Fatalf("transactional produce while low: %v, want ErrStorageFull", err)
	}
	if err := h.c.EndTxn("a", pa, ea, true, h.now); err != nil {
		t.Fatalf("EndTxn commit while low: %v", err)
	}
	h.c.Tick(h.now.Add(1001 * time.Millisecond)) // b times out: aborted
	if d, _ := h.c.Describe("b"); d.State != StateCompleteAbort {
		t.Fatalf("b after its timeout while low: %+v", d)
	}
	if lso, hwm := h.part.LastStableOffset(), h.part.HighWatermark(); lso != 5 || hwm != 5 {
		t.Fatalf("after both ends: lso %d hwm %d, want 5 5 (3 records, 2 markers)", lso, hwm)
	}
	setFree(1 << 30)
	pa, ea = h.begin("a", 60000)
	h.seq[pa] = 0 // a new epoch starts its sequence at 0
	if off, err := h.produce(pa, ea, 1, true); err != nil || off != 5 {
		t.Fatalf("transaction after space returned: %d %v", off, err)
	}
}
