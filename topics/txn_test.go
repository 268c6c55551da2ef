package topics

import (
	"errors"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/vibemq/broker/pebblestore"
)

// TestAppendAtomicAllOrNothing pins AppendAtomic, the write that ends a
// transaction (markers, committed offsets, coordinator row): when one of
// its appends fails after others were added to the Pebble batch, nothing is
// applied and the partitions' in-memory state (next offset, open
// transactions, producer epochs) is as before, so the next append takes the
// offsets the failed write would have used. A marker of a deleted partition
// is left out without failing the rest, and extra's rows are written even
// when no batch is.
func TestAppendAtomicAllOrNothing(t *testing.T) {
	fs := vfs.NewMem()
	store, m := openTestManager(t, fs, "data")
	defer func() { _ = store.Close() }()
	topic, err := m.CreateTopic("a", 2, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	p0, _ := topic.Partition(0)
	p1, _ := topic.Partition(1)
	if a := appendOne(t, m, p0, txnBatch(t, 2, 7, 0, 0)); a.Err != nil {
		t.Fatal(a.Err)
	}
	rowKey := pebblestore.TxnKey("outcome")
	row := func(b *pebblestore.Batch) { b.Set(rowKey, []byte("done")) }
	hasRow := func() bool {
		_, err := store.Get(rowKey)
		if err != nil && !errors.Is(err, pebblestore.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}

	// The marker (partition 0) is added before the failing batch
	// (partition 1, sequence 5 from a new producer).
	appends := MarkerAppends([]Marker{{Partition: p0, ProducerID: 7, ProducerEpoch: 1, Commit: true}}, time.UnixMilli(1000))
	bad := &Append{Partition: p1, Batch: testBatch(t, "bad", 1, 8, 0, 5, 1000)}
	appends = append(appends, bad)
	pa, err := m.AppendAtomic(appends, row, time.UnixMilli(1000))
	if pa != nil || !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("AppendAtomic with a failing batch: %v %v, want ErrOutOfOrderSequence", pa, err)
	}
	if !errors.Is(appends[0].Err, ErrNotApplied) || !errors.Is(bad.Err, ErrOutOfOrderSequence) || appends[0].BaseOffset != -1 {
		t.Fatalf("errors: marker %v (base %d), batch %v", appends[0].Err, appends[0].BaseOffset, bad.Err)
	}
	if hasRow() {
		t.Fatal("extra's row written by a failed atomic write")
	}
	if lso, hwm := p0.LastStableOffset(), p0.HighWatermark(); lso != 0 || hwm != 2 {
		t.Fatalf("after the failed write: lso %d hwm %d, want 0 2 (the transaction still open)", lso, hwm)
	}
	if got := p0.Producers(); len(got) != 1 || got[0].Epoch != 0 {
		t.Fatalf("producers after the failed write: %+v (the marker's epoch 1 must not stick)", got)
	}
	if a := appendOne(t, m, p0, txnBatch(t, 1, 7, 0, 2)); a.Err != nil || a.BaseOffset != 2 {
		t.Fatalf("append after the failed write: base %d %v, want 2", a.BaseOffset, a.Err)
	}

	// A batch that does not validate fails the write before any lock.
	garbage := &Append{Partition: p1, Batch: []byte("not a batch")}
	appends = MarkerAppends([]Marker{{Partition: p0, ProducerID: 7, ProducerEpoch: 0, Commit: true}}, time.UnixMilli(1000))
	if _, err := m.AppendAtomic(append(appends, garbage), row, time.UnixMilli(1000)); err == nil || !errors.Is(appends[0].Err, ErrNotApplied) || hasRow() {
		t.Fatalf("AppendAtomic with an invalid batch: %v, marker %v, row %v", err, appends[0].Err, hasRow())
	}

	// A marker of a deleted partition is left out; the rest lands.
	gone, err := m.CreateTopic("gone", 1, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	gp, _ := gone.Partition(0)
	if err := m.DeleteTopic("gone"); err != nil {
		t.Fatal(err)
	}
	appends = MarkerAppends([]Marker{
		{Partition: p0, ProducerID: 7, ProducerEpoch: 0, Commit: true},
		{Partition: gp, ProducerID: 7, ProducerEpoch: 0, Commit: true},
	}, time.UnixMilli(1000))
	pa, err = m.AppendAtomic(appends, row, time.UnixMilli(1000))
	if err != nil {
		t.Fatal(err)
	}
	if err := pa.Wait(); err != nil {
		t.Fatal(err)
	}
	if appends[0].Err != nil || appends[0].BaseOffset != 3 || !errors.Is(appends[1].Err, ErrUnknownTopic) || !hasRow() {
		t.Fatalf("markers: %v@%d, %v; row %v", appends[0].Err, appends[0].BaseOffset, appends[1].Err, hasRow())
	}
	if lso, hwm := p0.LastStableOffset(), p0.HighWatermark(); lso != 4 || hwm != 4 {
		t.Fatalf("after the commit: lso %d hwm %d, want 4 4", lso, hwm)
	}

	// extra alone.
	b := store.NewBatch()
	b.Delete(rowKey)
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if pa, err = m.AppendAtomic(nil, row, time.UnixMilli(1000)); err != nil {
		t.Fatal(err)
	}
	if err := pa.Wait(); err != nil || !hasRow() {
		t.Fatalf("extra alone: %v, row %v", err, hasRow())
	}
}

// txnBatch is a transactional batch of n keyed records of the producer.
func txnBatch(t testing.TB, n int, producerID int64, epoch int16, seq int32) []byte {
	t.Helper()
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = Record{OffsetDelta: int32(i), Key: []byte("k"), Value: []byte("v")}
	}
	b, err := EncodeBatch(BatchHeader{Attributes: batchAttributeTransactional, BaseTimestamp: 1000, MaxTimestamp: 1000,
		ProducerID: producerID, ProducerEpoch: epoch, BaseSequence: seq}, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestReadCommittedKeepsAbortedEntriesOfWhatItRead pins the race between a
// read_committed fetch and compaction: the fetch reads an aborted batch,
// then compaction removes that batch and, finding the transaction's data
// gone, drops its aborted-index entry, all before the fetch lists the
// aborted transactions of what it read. The fetch must still list it
// (it uses the index as of before its read), or the consumer would get the
// aborted records as committed ones.
func TestReadCommittedKeepsAbortedEntriesOfWhatItRead(t *testing.T) {
	store, m := openTestManager(t, vfs.NewMem(), "data")
	defer func() { _ = store.Close() }()
	topic, err := m.CreateTopic("c", 1, map[string]string{"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01"}, false)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := topic.Partition(0)
	appendAt := func(batch []byte) {
		t.Helper()
		if a := appendOne(t, m, p, batch); a.Err != nil {
			t.Fatal(a.Err)
		}
	}
	data, err := EncodeBatch(BatchHeader{Attributes: batchAttributeTransactional, BaseTimestamp: 0, MaxTimestamp: 0, ProducerID: 7, BaseSequence: 0},
		[]Record{{Key: []byte("k"), Value: []byte("aborted")}})
	if err != nil {
		t.Fatal(err)
	}
	appendAt(data)
	pa, err := m.AppendAtomic(MarkerAppends([]Marker{{Partition: p, ProducerID: 7, Commit: false}}, time.UnixMilli(200)), nil, time.UnixMilli(200))
	if err != nil || pa.Wait() != nil {
		t.Fatal(err)
	}
	for _, ts := range []int64{400, 600} {
		plain, err := EncodeBatch(BatchHeader{BaseTimestamp: ts, MaxTimestamp: ts, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
			[]Record{{Key: []byte("other"), Value: []byte("x")}})
		if err != nil {
			t.Fatal(err)
		}
		appendAt(plain)
	}

	compacted := false
	testHookAfterRead = func() {
		if compacted {
			return
		}
		compacted = true
		for i := 0; i < 100; i++ {
			if res := m.Compact(time.UnixMilli(1000)); res.Err != nil {
				t.Fatal(res.Err)
			} else if !res.More {
				break
			}
		}
	}
	defer func() { testHookAfterRead = nil }()
	buf, res, err := p.ReadCommitted(0, 1<<20, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !compacted || len(p.AbortedTransactions()) != 0 {
		t.Fatalf("compaction did not run during the read or kept the entry: %+v", p.AbortedTransactions())
	}
	h, err := ParseBatchHeader(buf)
	if err != nil || h.BaseOffset != 0 || !h.IsTransactional() {
		t.Fatalf("the read did not return the aborted batch first: %+v %v", h, err)
	}
	if len(res.Aborted) != 1 || res.Aborted[0] != (AbortedTxn{ProducerID: 7, FirstOffset: 0, LastOffset: 1}) {
		t.Fatalf("aborted transactions of a read that returned the aborted batch: %+v", res.Aborted)
	}
}

// TestCommitMarkerNotStableBeforeDurable pins a read_committed violation:
// the COMMIT marker of an AppendAtomic removed the producer's open
// transaction from the partition at apply time, so the last stable offset
// jumped to the high watermark and read_committed fetches returned the
// transaction's records before the marker was synced. Since EndTxn writes
// no durable Prepare row, a crash in that window leaves the transaction
// open after restart, and its timeout (or a fencing InitProducerId) then
// aborts records a read_committed consumer already took as committed. The
// transaction's data may only become stable once its marker is below the
// high watermark (durable).
func TestCommitMarkerNotStableBeforeDurable(t *testing.T) {
	store, m := openTestManager(t, vfs.NewMem(), "data")
	defer func() { _ = store.Close() }()
	topic, err := m.CreateTopic("a", 1, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := topic.Partition(0)
	if a := appendOne(t, m, p, txnBatch(t, 2, 7, 0, 0)); a.Err != nil {
		t.Fatal(a.Err)
	}
	pa, err := m.AppendAtomic(MarkerAppends([]Marker{{Partition: p, ProducerID: 7, ProducerEpoch: 0, Commit: true}}, time.UnixMilli(1000)), nil, time.UnixMilli(1000))
	if err != nil {
		t.Fatal(err)
	}
	// Applied, not yet durable.
	if lso := p.LastStableOffset(); lso != 0 {
		t.Errorf("LSO before the marker is durable: %d, want 0", lso)
	}
	buf, res, err := p.ReadCommitted(0, 1<<20, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(buf) != 0 {
		t.Errorf("read_committed returned %d bytes (LSO %d) before the COMMIT marker was durable", len(buf), res.LastStableOffset)
	}
	if err := pa.Wait(); err != nil {
		t.Fatal(err)
	}
	if lso, hwm := p.LastStableOffset(), p.HighWatermark(); lso != 3 || hwm != 3 {
		t.Fatalf("after the marker is durable: lso %d hwm %d, want 3 3", lso, hwm)
	}
}
