package pebblestore

import (
	"runtime"
	"testing"

	"github.com/rs/zerolog"
)

// TestBatchWithSizeAllocatesOnce: a batch sized for one large value and a
// few rows allocates its buffer once. Pebble's Batch.init throws away a
// buffer smaller than the first record rounded up to a power of two, so a
// hint of exactly the bytes to be written (a 1 MB produce request's batch)
// was allocated twice: at the hint, then at 1 MiB. Pebble's batch pool is
// emptied (two GCs) before each batch, as it mostly is under load.
func TestBatchWithSizeAllocatesOnce(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation figures differ under -race")
	}
	s, err := Open(t.TempDir(), Options{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	value := make([]byte, 1_000_000)
	row := make([]byte, 300)
	key := []byte("a key of about the length of a batch key")
	const runs = 10
	var total uint64
	for range runs {
		runtime.GC()
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		b := s.NewBatchWithSize(len(value) + 512)
		b.Set(key, value)
		b.Set(key, row)
		b.Set(key, row)
		runtime.ReadMemStats(&after)
		b.Close()
		total += after.TotalAlloc - before.TotalAlloc
	}
	if perBatch := total / runs; perBatch > 1<<20+64<<10 {
		t.Fatalf("%d bytes allocated per batch of %d bytes, want at most 1 MiB + 64 KiB (one buffer)", perBatch, len(value)+2*len(row))
	}
}

// TestLargeBatchBufferReused: the buffer of a batch of several MiB (a
// produce request of 1 MB batches for 8 partitions) goes back to Pebble's
// batch pool when the batch is released, and the next batch of that size
// reuses it. Above Pebble's default limit (1 MiB) every such batch allocated
// its buffer anew.
func TestLargeBatchBufferReused(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation figures differ under -race")
	}
	s, err := Open(t.TempDir(), Options{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	value := make([]byte, 1_000_000)
	key := []byte("a key of about the length of a batch key")
	batch := func() {
		b := s.NewBatchWithSize(8 * (len(value) + 512))
		for range 8 {
			b.Set(key, value)
		}
		b.Close()
	}
	batch()
	const runs = 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		batch()
	}
	runtime.ReadMemStats(&after)
	if perBatch := (after.TotalAlloc - before.TotalAlloc) / runs; perBatch > 1<<20 {
		t.Fatalf("%d bytes allocated per batch of 8 MB, want under 1 MiB: the buffer is not reused", perBatch)
	}
}
