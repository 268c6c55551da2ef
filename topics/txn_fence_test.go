package topics

import (
	"encoding/binary"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/vibemq/broker/pebblestore"
)

// TestMarkerCoordinatorFenced pins the bug where a deposed transaction
// coordinator's late marker for transaction N ended transaction N+1,
// which the producer had started since through the new coordinator: a
// marker whose coordinator epoch is lower than that of the producer's
// last marker on the partition is refused (ErrTransactionCoordinatorFenced,
// Kafka's ProducerAppendInfo checkCoordinatorEpoch, KIP-98) and changes
// nothing (LSO, high watermark, aborted index, producer state), through
// Append (WriteTxnMarkers) and AppendAtomic (left out, the rest lands);
// equal and higher pass; a WriteTxnMarkers marker that ends nothing writes
// no batch but records its epoch; the producer epoch is checked first. The
// epoch survives a restart (producer row version 2), and a version 1 row
// (before it) reads as epoch unknown, which any marker passes.
func TestMarkerCoordinatorFenced(t *testing.T) {
	fs := vfs.NewMem()
	store, m := openTestManager(t, fs, "data")
	topic, err := m.CreateTopic("a", 1, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := topic.Partition(0)
	mark := func(p *Partition, epoch int16, commit bool, coordinatorEpoch int32) *Append {
		t.Helper()
		a := MarkerAppends([]Marker{{Partition: p, ProducerID: 7, ProducerEpoch: epoch, Commit: commit,
			CoordinatorEpoch: coordinatorEpoch, OnlyIfOngoing: true}}, time.UnixMilli(1000))[0]
		if err := m.Append([]*Append{a}, time.UnixMilli(1000)).Wait(); err != nil {
			t.Fatal(err)
		}
		return a
	}
	check := func(p *Partition, lso, hwm int64, ongoing map[int64]int64, aborted []AbortedTxn, coordinatorEpoch int32) {
		t.Helper()
		if got, gotHWM := p.LastStableOffset(), p.HighWatermark(); got != lso || gotHWM != hwm {
			t.Fatalf("lso %d hwm %d, want %d %d", got, gotHWM, lso, hwm)
		}
		if got := p.OngoingTransactions(); len(got) != len(ongoing) || got[7] != ongoing[7] {
			t.Fatalf("ongoing %v, want %v", got, ongoing)
		}
		if got := p.AbortedTransactions(); !slices.Equal(got, aborted) {
			t.Fatalf("aborted %v, want %v", got, aborted)
		}
		if got := p.Producers(); len(got) != 1 || got[0].CoordinatorEpoch != coordinatorEpoch {
			t.Fatalf("producers %+v, want producer 7 with coordinator epoch %d", got, coordinatorEpoch)
		}
	}

	if a := appendOne(t, m, p, txnBatch(t, 2, 7, 0, 0)); a.Err != nil { // N at 0-1
		t.Fatal(a.Err)
	}
	if a := mark(p, 0, true, 7); a.Err != nil || a.BaseOffset != 2 { // COMMIT of N at 2
		t.Fatalf("COMMIT by coordinator epoch 7: %d %v", a.BaseOffset, a.Err)
	}
	if a := appendOne(t, m, p, txnBatch(t, 1, 7, 0, 2)); a.Err != nil { // N+1 at 3
		t.Fatal(a.Err)
	}
	if a := mark(p, 0, false, 6); !errors.Is(a.Err, ErrTransactionCoordinatorFenced) {
		t.Fatalf("a deposed coordinator's ABORT (epoch 6 after 7): %v, want ErrTransactionCoordinatorFenced", a.Err)
	}
	check(p, 3, 4, map[int64]int64{7: 3}, nil, 7)

	// In an atomic write the fenced marker is left out; the rest lands.
	rowKey := pebblestore.TxnKey("outcome")
	appends := MarkerAppends([]Marker{{Partition: p, ProducerID: 7, ProducerEpoch: 0, Commit: false, CoordinatorEpoch: 6}}, time.UnixMilli(1000))
	pa, err := m.AppendAtomic(appends, func(b *pebblestore.Batch) { b.Set(rowKey, []byte("done")) }, time.UnixMilli(1000))
	if err != nil || pa.Wait() != nil || !errors.Is(appends[0].Err, ErrTransactionCoordinatorFenced) {
		t.Fatalf("AppendAtomic with a fenced marker: %v, marker %v", err, appends[0].Err)
	}
	if _, err := store.Get(rowKey); err != nil {
		t.Fatalf("the atomic write's row: %v", err)
	}
	check(p, 3, 4, map[int64]int64{7: 3}, nil, 7)

	if a := mark(p, 0, false, 7); a.Err != nil || a.BaseOffset != 4 { // equal: ABORT of N+1 at 4
		t.Fatalf("ABORT by coordinator epoch 7 again: %d %v", a.BaseOffset, a.Err)
	}
	aborted := []AbortedTxn{{ProducerID: 7, FirstOffset: 3, LastOffset: 4}}
	check(p, 5, 5, nil, aborted, 7)
	if a := mark(p, 0, true, 9); a.Err != nil || a.BaseOffset != -1 { // ends nothing, records 9
		t.Fatalf("a marker that ends nothing: %d %v, want no batch", a.BaseOffset, a.Err)
	}
	check(p, 5, 5, nil, aborted, 9)
	if a := appendOne(t, m, p, txnBatch(t, 1, 7, 0, 3)); a.Err != nil { // N+2 at 5
		t.Fatal(a.Err)
	}
	if a := mark(p, 0, true, 8); !errors.Is(a.Err, ErrTransactionCoordinatorFenced) {
		t.Fatalf("epoch 8 after a marker of 9 that ended nothing: %v, want ErrTransactionCoordinatorFenced", a.Err)
	}
	if a := mark(p, 1, false, 10); a.Err != nil || a.BaseOffset != 6 { // a fencing ABORT at producer epoch 1
		t.Fatalf("fencing ABORT: %d %v", a.BaseOffset, a.Err)
	}
	aborted = append(aborted, AbortedTxn{ProducerID: 7, FirstOffset: 5, LastOffset: 6})
	if a := mark(p, 0, true, 8); !errors.Is(a.Err, ErrInvalidProducerEpoch) {
		t.Fatalf("both epochs older: %v, want ErrInvalidProducerEpoch (checked first)", a.Err)
	}
	if a := appendOne(t, m, p, txnBatch(t, 1, 7, 1, 0)); a.Err != nil { // N+3 at 7
		t.Fatal(a.Err)
	}
	check(p, 7, 8, map[int64]int64{7: 7}, aborted, 10)

	// A restart keeps the epoch.
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	store, m = openTestManager(t, fs, "data")
	defer func() { _ = store.Close() }()
	topic, _ = m.Topic("a")
	p, _ = topic.Partition(0)
	check(p, 7, 8, map[int64]int64{7: 7}, aborted, 10)
	if a := mark(p, 1, true, 9); !errors.Is(a.Err, ErrTransactionCoordinatorFenced) {
		t.Fatalf("after a restart, epoch 9 after 10: %v, want ErrTransactionCoordinatorFenced", a.Err)
	}
	check(p, 7, 8, map[int64]int64{7: 7}, aborted, 10)

	// A version 1 row (epoch 1, no batches): coordinator epoch unknown.
	old, err := m.CreateTopic("old", 1, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	v1 := binary.BigEndian.AppendUint16([]byte{1}, 1)
	b := store.NewBatch()
	b.Set(pebblestore.ProducerStateKey(old.ID, 0, 7), append(v1, 0))
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	store, m = openTestManager(t, fs, "data")
	old, _ = m.Topic("old")
	op, _ := old.Partition(0)
	if got := op.Producers(); len(got) != 1 || got[0].Epoch != 1 || got[0].CoordinatorEpoch != -1 {
		t.Fatalf("a version 1 row reads as %+v, want epoch 1, coordinator epoch -1", got)
	}
	if a := appendOne(t, m, op, txnBatch(t, 1, 7, 1, 0)); a.Err != nil {
		t.Fatal(a.Err)
	}
	if a := mark(op, 1, true, 0); a.Err != nil || a.BaseOffset != 1 {
		t.Fatalf("coordinator epoch 0 after a version 1 row: %d %v", a.BaseOffset, a.Err)
	}
	check(op, 2, 2, nil, nil, 0)
}

// FuzzProducerStateRow: decoding a producer row (0x13) never panics; a
// row that decodes re-encodes (as version 2) to a row that decodes to
// the same state, and a version 2 row re-encodes to itself. Version 1
// rows read with coordinator epoch -1.
func FuzzProducerStateRow(f *testing.F) {
	f.Add(append(binary.BigEndian.AppendUint16([]byte{1}, 3), 0))
	f.Add(newProducerState(2).encode())
	st := &producerState{Epoch: 4, CoordinatorEpoch: 9, Batches: []producerBatch{{FirstSeq: 0, LastSeq: 4, BaseOffset: 10, OffsetDelta: 4, Timestamp: 1000}}}
	f.Add(st.encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := decodeProducerState(b)
		if err != nil {
			return
		}
		if b[0] == producerStateVersionV1 && s.CoordinatorEpoch != noCoordinatorEpoch {
			t.Fatalf("a version 1 row read with coordinator epoch %d", s.CoordinatorEpoch)
		}
		enc := s.encode()
		again, err := decodeProducerState(enc)
		if err != nil {
			t.Fatalf("a re-encoded row does not decode: %v", err)
		}
		if again.Epoch != s.Epoch || again.CoordinatorEpoch != s.CoordinatorEpoch || !slices.Equal(again.Batches, s.Batches) {
			t.Fatalf("round trip: %+v, want %+v", again, s)
		}
		if b[0] == producerStateVersion && !slices.Equal(enc, b) {
			t.Fatalf("a version 2 row re-encodes to %x, want %x", enc, b)
		}
	})
}
