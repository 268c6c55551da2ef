package cluster

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"testing"
)

// idempotentBatch is testBatch from producer pid at epoch, its first
// record numbered seq, with max timestamp ts.
func idempotentBatch(pid int64, epoch int16, seq, records int32, ts int64) []byte {
	b := testBatch(records, "x")
	binary.BigEndian.PutUint64(b[batchProducerIDAt:], uint64(pid))
	binary.BigEndian.PutUint16(b[batchProducerEpAt:], uint16(epoch))
	binary.BigEndian.PutUint32(b[batchBaseSeqAt:], uint32(seq))
	binary.BigEndian.PutUint64(b[batchMaxTsAt:], uint64(ts))
	binary.BigEndian.PutUint32(b[batchCRCAt:], crc32.Checksum(b[batchAttributesAt:], castagnoli))
	return b
}

// TestPartitionLogDeduplicates: the idempotent producer state machine
// (Kafka's ProducerStateManager rules, decided at apply): a retried batch
// among the last five returns its original base offset and takes none; a
// gap is OUT_OF_ORDER_SEQUENCE; an older epoch INVALID_PRODUCER_EPOCH; a
// new epoch starts at sequence 0; sequences wrap at MaxInt32; batches
// without a producer are never deduplicated. Rejected batches take no
// offset.
func TestPartitionLogDeduplicates(t *testing.T) {
	l := NewPartitionLog(nil, 1, nil)
	index := uint64(0)
	apply := func(b []byte) (int64, error) {
		index++
		base, err := l.Apply(Entry{Index: index, Term: 1, Data: b})
		return int64(base), err
	}
	mustApply := func(b []byte, want int64) {
		t.Helper()
		got, err := apply(b)
		if err != nil || got != want {
			t.Fatalf("apply: base %d %v, want %d", got, err, want)
		}
	}
	mustFail := func(b []byte, want error) {
		t.Helper()
		hw := l.HighWatermark()
		if _, err := apply(b); !errors.Is(err, want) {
			t.Fatalf("apply: %v, want %v", err, want)
		}
		if l.HighWatermark() != hw {
			t.Fatalf("a rejected batch moved the high watermark from %d to %d", hw, l.HighWatermark())
		}
	}
	mustApply(idempotentBatch(7, 0, 0, 3, 0), 0) // offsets 0-2, seq 0-2
	mustApply(idempotentBatch(7, 0, 3, 2, 0), 3) // 3-4, seq 3-4
	mustApply(idempotentBatch(7, 0, 0, 3, 0), 0) // retry of the first: its offset
	mustApply(idempotentBatch(7, 0, 3, 2, 0), 3) // retry of the second
	mustFail(idempotentBatch(7, 0, 9, 1, 0), ErrOutOfOrderSequence)
	mustFail(idempotentBatch(8, 0, 5, 1, 0), ErrOutOfOrderSequence) // a new producer starts at 0
	mustApply(idempotentBatch(8, 0, 0, 1, 0), 5)
	for i := range int32(5) { // five more batches of producer 7: the first ones age out
		mustApply(idempotentBatch(7, 0, 5+i, 1, 0), int64(6+i))
	}
	mustFail(idempotentBatch(7, 0, 0, 3, 0), ErrOutOfOrderSequence) // older than the five kept
	mustApply(idempotentBatch(7, 0, 9, 1, 0), 10)                   // still a duplicate of a kept one
	mustApply(idempotentBatch(7, 1, 0, 1, 0), 11)                   // a new epoch from 0
	mustFail(idempotentBatch(7, 0, 10, 1, 0), ErrInvalidProducerEpoch)
	mustFail(idempotentBatch(7, 2, 4, 1, 0), ErrOutOfOrderSequence) // a new epoch not from 0
	mustApply(idempotentBatch(9, 0, 0, 1, 0), 12)
	mustApply(idempotentBatch(9, 0, 1, 1, 0), 13)
	// Wrapping: a producer at MaxInt32-1 goes on at 0 (a fresh epoch to
	// start there is refused, so build the state by hand).
	l.mu.producers[10] = &producerState{epoch: 0, last: []producerBatch{{firstSeq: math.MaxInt32 - 2, lastSeq: math.MaxInt32 - 1, base: 0}}}
	mustApply(idempotentBatch(10, 0, math.MaxInt32, 2, 0), 14) // MaxInt32, then 0
	mustApply(idempotentBatch(10, 0, 1, 1, 0), 16)
	// No producer: equal batches are two batches.
	mustApply(testBatch(1, "a"), 17)
	mustApply(testBatch(1, "a"), 18)
}

// TestPartitionLogEpochLookup: OffsetForLeaderEpoch from the index
// (KIP-279), as Kafka's leader epoch cache answers, and the timestamp
// lookups of ListOffsets.
func TestPartitionLogEpochLookup(t *testing.T) {
	l := NewPartitionLog(nil, 1, nil)
	// Terms 2 (offsets 0-3), 2 (4), 5 (5-6), 7 (7); the leader is at 9.
	for i, e := range []struct {
		term    uint64
		records int32
		ts      int64
	}{{2, 4, 100}, {2, 1, 300}, {5, 2, 200}, {7, 1, 400}} {
		if _, err := l.Apply(Entry{Index: uint64(i + 1), Term: e.term, Data: idempotentBatch(-1, -1, -1, e.records, e.ts)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		epoch, wantEpoch int32
		wantEnd          int64
	}{
		{9, 9, 8},    // the current epoch: the end of the log
		{1, 1, 0},    // before the first epoch: the first batch starts it
		{2, 2, 5},    // epoch 2 ends where epoch 5 starts
		{3, 2, 5},    // no batch of epoch 3: the largest below, until 5
		{5, 5, 7},    // 5 ends where 7 starts
		{7, 7, 8},    // the last batches' epoch: until the end
		{8, 7, 8},    // between the last batch and the current epoch
		{10, -1, -1}, // newer than the leader's
		{-1, -1, -1},
	} {
		if e, end := l.EndOffsetForEpoch(c.epoch, 9); e != c.wantEpoch || end != c.wantEnd {
			t.Errorf("epoch %d: (%d, %d), want (%d, %d)", c.epoch, e, end, c.wantEpoch, c.wantEnd)
		}
	}
	for _, c := range []struct{ ts, off, got int64 }{{0, 0, 100}, {150, 4, 300}, {250, 4, 300}, {301, 7, 400}, {401, -1, -1}} {
		if off, ts := l.OffsetForTimestamp(c.ts); off != c.off || ts != c.got {
			t.Errorf("timestamp %d: offset %d ts %d, want %d %d", c.ts, off, ts, c.off, c.got)
		}
	}
	if off, ts := l.MaxTimestamp(); off != 7 || ts != 400 {
		t.Errorf("max timestamp: offset %d ts %d, want 7 400", off, ts)
	}
}
