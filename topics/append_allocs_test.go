package topics

import (
	"runtime"
	"testing"
)

// Allocation budgets of the produce and fetch paths (issue 14). Allocation
// counts are deterministic where times are not, so a change that adds
// allocations per produced batch fails here, not in a noisy load run. The
// budgets are today's counts rounded up a little; lower them when a change
// removes allocations. testing.AllocsPerRun counts every goroutine's
// allocations: the stores below are fresh, with memtables (64 MiB) far
// larger than what a run writes, so no flush or compaction runs meanwhile.

// TestAppendAllocs bounds the allocations of one produce of an idempotent
// producer's 16-record batch (the normal produce): validation, offsets,
// the Pebble batch (batch, index, segment and producer-state rows), its
// apply and the group-committed fsync wait.
func TestAppendAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("-race changes allocation counts")
	}
	if testing.Short() {
		t.Skip("fsyncs; -short")
	}
	for _, c := range []struct {
		name       string
		partitions int32
		noSync     bool
		budget     float64
	}{
		// Counted 2026-12-01 (go1.26.8, pebble v2 as in go.mod): 12 allocs.
		{"partitions=1/sync", 1, false, 13},
		// Counted 2026-12-01: 64 allocs (about 7 per extra partition).
		{"partitions=8/sync", 8, false, 66},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, parts := openBenchManager(t, c.noSync, c.partitions)
			batches := make([][]byte, len(parts))
			for i := range parts {
				batches[i] = benchBatch(t, 16, 1)
			}
			appends := make([]*Append, len(parts))
			seq := int32(0)
			produce := func() {
				for i, p := range parts {
					benchSetSequence(batches[i], seq)
					appends[i] = &Append{Partition: p, Batch: batches[i]}
				}
				seq += 16
				if err := benchAppend(m, appends).Wait(); err != nil {
					t.Fatal(err)
				}
				for _, a := range appends {
					if a.Err != nil || a.Duplicate {
						t.Fatalf("append: %v (duplicate %v)", a.Err, a.Duplicate)
					}
				}
			}
			produce() // the producer's state exists from here on
			got := testing.AllocsPerRun(200, produce)
			t.Logf("%.1f allocations per produce of %d batch(es)", got, c.partitions)
			if got > c.budget {
				t.Errorf("%.1f allocations per produce, budget %.0f: a change added allocations to the append path (see BENCHMARKS.md)", got, c.budget)
			}
		})
	}
}

// TestReadAllocs bounds the allocations of one fetch read of a 16-record
// batch, from the memtable and from a flushed store (blob files).
func TestReadAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("-race changes allocation counts")
	}
	for _, c := range []struct {
		name   string
		flush  bool
		budget float64
	}{
		// Counted 2026-12-01: 3 allocs. It was 4, one of them a copy of
		// the whole batch: the backward seek that found it made Pebble copy
		// a value still in the memtable; reads at a batch's base now seek
		// forward (bytes bounded below).
		{"memtable", false, 4},
		// Counted 2026-12-01: 3 allocs (4 before the forward seek).
		{"flushed", true, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, parts := openBenchManager(t, true, 1)
			p := parts[0]
			batch := benchBatch(t, 16, -1)
			for range 64 {
				a := &Append{Partition: p, Batch: batch}
				if err := benchAppend(m, []*Append{a}).Wait(); err != nil || a.Err != nil {
					t.Fatal(err, a.Err)
				}
			}
			if c.flush {
				if err := m.store.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			dst := make([]byte, 0, 2*len(batch))
			offset := int64(0)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			got := testing.AllocsPerRun(200, func() {
				var err error
				// One batch: maxBytes is the batch's size.
				dst, _, err = p.Read(offset, len(batch), true, dst[:0])
				if err != nil || len(dst) != len(batch) {
					t.Fatalf("read at %d: %d bytes, %v", offset, len(dst), err)
				}
				offset = (offset + 16) % (64 * 16)
			})
			runtime.ReadMemStats(&after)
			perRead := float64(after.TotalAlloc-before.TotalAlloc) / 201 // AllocsPerRun runs once more to warm up
			t.Logf("%.1f allocations, %.0f bytes per read of one batch of %d bytes", got, perRead, len(batch))
			if perRead > float64(len(batch))/2 {
				t.Errorf("%.0f bytes allocated per read of a %d-byte batch: the read copies the batch (a backward seek into the memtable?)", perRead, len(batch))
			}
			if got > c.budget {
				t.Errorf("%.1f allocations per read of one batch, budget %.0f: a change added allocations to the fetch path (see BENCHMARKS.md)", got, c.budget)
			}
		})
	}
}

// TestAppendRowsBytesCoversRows pins the size hint of the append's Pebble
// batch: with 256 bytes per append for the rows beside the RecordBatch,
// an idempotent producer's state row overflowed it and Pebble doubled the
// buffer and copied the whole request's batches on every produce of
// several partitions (BENCHMARKS.md, "Where the CPU goes").
func TestAppendRowsBytesCoversRows(t *testing.T) {
	m, parts := openBenchManager(t, true, 8)
	batches := make([][]byte, len(parts))
	for i := range parts {
		batches[i] = benchBatch(t, 2, int64(100+i))
	}
	// More produces than producerBatchesKept, so that the state rows are
	// at their largest.
	for n := range producerBatchesKept + 2 {
		appends := make([]*Append, len(parts))
		want := 0
		for i, p := range parts {
			benchSetSequence(batches[i], int32(2*n))
			appends[i] = &Append{Partition: p, Batch: batches[i]}
			want += len(batches[i]) + appendRowsBytes
		}
		pa := benchAppend(m, appends)
		got := pa.batch.Len()
		if err := pa.Wait(); err != nil {
			t.Fatal(err)
		}
		for _, a := range appends {
			if a.Err != nil {
				t.Fatal(a.Err)
			}
		}
		if got > want {
			t.Fatalf("produce %d: the Pebble batch holds %d bytes, more than its size hint %d: raise appendRowsBytes", n, got, want)
		}
	}
}
