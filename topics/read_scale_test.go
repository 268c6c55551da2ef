package topics

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Fetch at many partitions (issue 14, scale): a fetch reads every partition
// of its session; once the response budget is spent, the remaining
// partitions must cost nothing but their offsets, and the buffers it takes
// must follow what the partitions hold, not maxBytes each.

// TestReadWithoutBudgetOpensNoIterator: a read with no room (maxBytes 0 and
// not the first partition of the response) returns the offsets without
// opening a Pebble iterator, so it allocates nothing.
func TestReadWithoutBudgetOpensNoIterator(t *testing.T) {
	if raceEnabled {
		t.Skip("-race changes allocation counts")
	}
	_, m := openTestManager(t, vfs.NewMem(), "")
	topic, err := m.CreateTopic("t", 1, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	p := topic.Partitions()[0]
	for i := range 4 {
		appendOne(t, m, p, testBatch(t, "v", 8, -1, -1, int32(i), 1000))
	}
	var res ReadResult
	got := testing.AllocsPerRun(100, func() {
		var dst []byte
		dst, res, err = p.Read(8, 0, false, nil)
		if err != nil || len(dst) != 0 {
			t.Fatalf("read without budget: %d bytes, %v", len(dst), err)
		}
	})
	if res.HighWatermark != 32 || res.LogStartOffset != 0 {
		t.Fatalf("offsets = hwm %d, log start %d; want 32, 0", res.HighWatermark, res.LogStartOffset)
	}
	if got != 0 {
		t.Fatalf("%.1f allocations per read with maxBytes 0: it opened an iterator for nothing", got)
	}
	// With minOne, maxBytes 0 still returns the first batch (KIP-74).
	dst, _, err := p.Read(8, 0, true, nil)
	if err != nil || len(dst) == 0 {
		t.Fatalf("read with minOne: %d bytes, %v; want the batch at offset 8", len(dst), err)
	}
}

// TestReadSizeHint: no data past the offset means no buffer; otherwise the
// estimate covers what the partition holds past it, capped at maxBytes.
func TestReadSizeHint(t *testing.T) {
	_, m := openTestManager(t, vfs.NewMem(), "")
	topic, err := m.CreateTopic("t", 1, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	p := topic.Partitions()[0]
	if n := p.ReadSizeHint(0, 1<<20); n != 0 {
		t.Fatalf("hint of an empty partition = %d, want 0", n)
	}
	total := 0
	for i := range 10 {
		b := testBatch(t, "value", 10, -1, -1, int32(i), 1000)
		total += len(b)
		appendOne(t, m, p, b)
	}
	full := p.ReadSizeHint(0, 1<<20)
	if full < total || full > total+100 { // rounded up per record
		t.Fatalf("hint at offset 0 = %d, want about the %d bytes stored", full, total)
	}
	if n, want := p.ReadSizeHint(90, 1<<20), total/10; n < want || n > want+10 {
		t.Fatalf("hint at offset 90 = %d, want about one batch (%d)", n, want)
	}
	if n := p.ReadSizeHint(100, 1<<20); n != 0 {
		t.Fatalf("hint at the high watermark = %d, want 0", n)
	}
	if n := p.ReadSizeHint(0, 100); n != 100 {
		t.Fatalf("hint capped at maxBytes 100 = %d", n)
	}
	if n := p.ReadSizeHint(0, 0); n != 0 {
		t.Fatalf("hint with maxBytes 0 = %d, want 0", n)
	}
	// A record count that overflows pending*perRecord is capped, not wrapped.
	if n := p.ReadSizeHint(-1<<62, 1<<20); n != 1<<20 {
		t.Fatalf("hint far below the log = %d, want maxBytes", n)
	}
}
