package retention

import (
	"bytes"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/vibemq/broker/pebblestore"
)

// Issue 17: a deleted topic's space came back only when Pebble's own
// compactions reached the range (or never), and the disk guard kept
// refusing writes. A committed range deletion wakes the space-reclaim
// task at once (its interval here is an hour), which compacts the range
// and probes the guard: writes resume without waiting for the disk-space
// tick.
func TestReclaimTaskWakesOnRangeDeletion(t *testing.T) {
	var free atomic.Int64
	free.Store(1 << 20)
	store := openGuardedStore(t, &free)
	if !store.Space().Low() {
		t.Fatal("the guard is not low with 1 MiB free")
	}
	var id pebblestore.TopicID
	id[0] = 7
	b := store.NewBatch()
	for i := range 64 {
		b.Set(pebblestore.BatchKey(id, 0, int64(i)), bytes.Repeat([]byte{1}, 4<<10))
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	r := New(zerolog.Nop(), nil)
	AddReclaimTask(r, store, reg, time.Hour)
	r.Start()
	defer r.Stop()

	free.Store(1 << 30) // what the compaction gives back
	start := pebblestore.TopicTablePrefix(pebblestore.PrefixBatch, id)
	b = store.NewBatch()
	b.DeleteRange(start, pebblestore.PrefixEnd(start))
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for store.ReclaimStats().Compacted < 1 || store.Space().Low() {
		if time.Now().After(deadline) {
			t.Fatalf("5 s after a range deletion: %+v, guard low %v", store.ReclaimStats(), store.Space().Low())
		}
		time.Sleep(5 * time.Millisecond)
	}
	for name, want := range map[string]float64{
		"broker_reclaim_ranges_scheduled_total":  1,
		"broker_reclaim_ranges_pending":          0,
		"broker_reclaim_compactions_total":       1,
		"broker_reclaim_compaction_errors_total": 0,
	} {
		if v, ok := metricValue(t, reg, name, nil); !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", name, v, ok, want)
		}
	}
}
