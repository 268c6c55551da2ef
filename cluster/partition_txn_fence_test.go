package cluster

import (
	"encoding/binary"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/vibemq/broker/topics"
)

// coordinatorMarker is the control batch of producer pid at epoch sent by
// a transaction coordinator of coordinatorEpoch (topics.ControlBatch).
func coordinatorMarker(t *testing.T, pid int64, epoch int16, commit bool, coordinatorEpoch int32) []byte {
	t.Helper()
	b, err := topics.ControlBatch(pid, epoch, commit, coordinatorEpoch, time.UnixMilli(1000))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPartitionLogMarkerCoordinatorFenced pins the bug where a deposed
// transaction coordinator's late marker for transaction N ended
// transaction N+1, which the producer had started since through the new
// coordinator: every replica must refuse a marker whose coordinator epoch
// is lower than that of the producer's last marker
// (ErrTransactionCoordinatorFenced, Kafka's ProducerAppendInfo
// checkCoordinatorEpoch, KIP-98) and change nothing (LSO, ongoing,
// aborted index); equal and higher pass, a marker that ends nothing still
// records its epoch, the producer epoch is checked first. The decision is
// the same after a replay of the log and after a restore from a state row
// (version 3 carries the epoch); a version 2 row (before it) loads with
// the epoch unknown, which any marker passes.
func TestPartitionLogMarkerCoordinatorFenced(t *testing.T) {
	s := newLogStartLog(t)
	s.must(txnBatch(5, 0, 0, 2), 0)                         // 1: transaction N at 0-1
	s.must(coordinatorMarker(t, 5, 0, true, 7), 2)          // 2: COMMIT of N by coordinator epoch 7
	s.must(txnBatch(5, 0, 2, 1), 3)                         // 3: N+1 opens at 3
	_, err := s.apply(coordinatorMarker(t, 5, 0, false, 6)) // 4: a deposed coordinator's late ABORT of N
	if !errors.Is(err, ErrTransactionCoordinatorFenced) {
		t.Fatalf("a marker of coordinator epoch 6 after one of 7: %v, want ErrTransactionCoordinatorFenced", err)
	}
	checkTxnState(t, s.l, 3, 4, map[int64]int64{5: 3})
	if got := s.l.AbortedTransactions(0, 100); len(got) != 0 {
		t.Fatalf("the fenced ABORT entered the aborted index: %v", got)
	}
	s.must(coordinatorMarker(t, 5, 0, false, 7), 4) // 5: the same coordinator epoch passes: ABORT of N+1 at 4
	checkTxnState(t, s.l, 5, 5, map[int64]int64{})
	s.must(coordinatorMarker(t, 5, 0, true, 9), 5)                                                                // 6: ends nothing (no offset) but records epoch 9
	s.must(txnBatch(5, 0, 3, 1), 5)                                                                               // 7: N+2 opens at 5
	if _, err := s.apply(coordinatorMarker(t, 5, 0, true, 8)); !errors.Is(err, ErrTransactionCoordinatorFenced) { // 8
		t.Fatalf("a marker of coordinator epoch 8 after one of 9 that ended nothing: %v, want ErrTransactionCoordinatorFenced", err)
	}
	checkTxnState(t, s.l, 5, 6, map[int64]int64{5: 5})
	s.must(coordinatorMarker(t, 5, 1, false, 10), 6) // 9: a fencing ABORT (epoch 1) by coordinator epoch 10
	// Both epochs older: the producer epoch is checked first.
	if _, err := s.apply(coordinatorMarker(t, 5, 0, true, 8)); !errors.Is(err, ErrInvalidProducerEpoch) { // 10
		t.Fatalf("a marker of an older producer and coordinator epoch: %v, want ErrInvalidProducerEpoch", err)
	}
	checkTxnState(t, s.l, 7, 7, map[int64]int64{})
	wantAborted := []AbortedTxn{{5, 3, 4}, {5, 5, 6}}
	if got := s.l.AbortedTransactions(0, 100); !slices.Equal(got, wantAborted) {
		t.Fatalf("aborted %v, want %v", got, wantAborted)
	}
	s.must(LogStartCommand(1, 0), 1) // 11: a state row of the state after it

	// A replica replaying the log from the start (a restart) decides alike.
	replay := NewPartitionLog(s.store, 1, nil)
	for i := uint64(1); i <= s.index; i++ {
		_, err1 := replay.Apply(Entry{Index: i, Term: 1, Data: storedEntry(t, s.store, i)})
		if (i == 4 || i == 8) != errors.Is(err1, ErrTransactionCoordinatorFenced) {
			t.Fatalf("replayed entry %d: %v", i, err1)
		}
	}
	// And one restored from the state row.
	restored := NewPartitionLog(s.store, 1, nil)
	if err := restored.RestoreAt(s.index); err != nil {
		t.Fatal(err)
	}
	s.must(txnBatch(5, 1, 0, 1), 7) // 12: the producer's next transaction at 7
	for _, l := range []*PartitionLog{replay, restored} {
		if _, err := applyAt(t, s.store, l, 12, txnBatch(5, 1, 0, 1)); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range []*PartitionLog{s.l, replay, restored} {
		if _, err := applyAt(t, s.store, l, 13, coordinatorMarker(t, 5, 1, true, 9)); !errors.Is(err, ErrTransactionCoordinatorFenced) {
			t.Fatalf("after a replay or a restore, a marker of coordinator epoch 9 after one of 10: %v", err)
		}
		checkTxnState(t, l, 7, 8, map[int64]int64{5: 7})
		if got := l.AbortedTransactions(0, 100); !slices.Equal(got, wantAborted) {
			t.Fatalf("aborted %v, want %v", got, wantAborted)
		}
	}
	s.l.mu.RLock()
	want := s.l.encodeStateLocked()
	s.l.mu.RUnlock()
	for _, l := range []*PartitionLog{replay, restored} {
		l.mu.RLock()
		got := l.encodeStateLocked()
		l.mu.RUnlock()
		if !slices.Equal(got, want) {
			t.Fatalf("state after a replay or restore differs:\n%x\nwant\n%x", got, want)
		}
	}

	// Version 2: next 4, log start 0, producer 9 at epoch 2 without
	// batches, its transaction open at 3, nothing aborted.
	v2 := []byte{2}
	v2 = binary.BigEndian.AppendUint64(v2, 4)
	v2 = binary.BigEndian.AppendUint64(v2, 0)
	v2 = binary.BigEndian.AppendUint32(v2, 1)
	v2 = binary.BigEndian.AppendUint64(v2, 9)
	v2 = binary.BigEndian.AppendUint16(v2, 2)
	v2 = append(v2, 0)
	v2 = binary.BigEndian.AppendUint32(v2, 1)
	v2 = binary.BigEndian.AppendUint64(v2, 9)
	v2 = binary.BigEndian.AppendUint64(v2, 3)
	v2 = binary.BigEndian.AppendUint32(v2, 0)
	old := s.restoreRow(2, 50, v2)
	checkTxnState(t, old, 3, 4, map[int64]int64{9: 3})
	if got, err := old.Apply(Entry{Index: 51, Term: 1, Data: coordinatorMarker(t, 9, 2, true, 0)}); err != nil || got != 4 {
		t.Fatalf("a marker of coordinator epoch 0 after a version 2 row: %d %v, want 4", got, err)
	}
	checkTxnState(t, old, 5, 5, map[int64]int64{})
}

// FuzzStateRow: decoding a state row (0x70 | group | 0x06) of any version
// never panics, and a decoded row encoded again (version 3) decodes to
// the same state; rows before version 3 read with coordinator epoch -1.
func FuzzStateRow(f *testing.F) {
	l := NewPartitionLog(nil, 1, nil)
	l.mu.next, l.mu.logStart = 9, 2
	l.mu.producers[5] = &producerState{epoch: 1, coordinatorEpoch: 7, last: []producerBatch{{firstSeq: 0, lastSeq: 2, base: 3}}}
	l.mu.producers[6] = &producerState{epoch: 0, coordinatorEpoch: noCoordinatorEpoch}
	l.mu.ongoing[5] = 6
	l.mu.aborted = []AbortedTxn{{6, 2, 4}}
	f.Add(l.encodeStateLocked())
	v2 := binary.BigEndian.AppendUint64([]byte{2}, 4)
	v2 = binary.BigEndian.AppendUint64(v2, 0)
	v2 = binary.BigEndian.AppendUint32(v2, 0)
	f.Add(binary.BigEndian.AppendUint64(v2, 0))
	f.Fuzz(func(t *testing.T, v []byte) {
		st, what := decodeStateRow(v)
		if what != "" {
			return
		}
		for id, ps := range st.producers {
			if v[0] < stateRowVersion && ps.coordinatorEpoch != noCoordinatorEpoch {
				t.Fatalf("producer %d of a version %d row read with coordinator epoch %d", id, v[0], ps.coordinatorEpoch)
			}
		}
		r := NewPartitionLog(nil, 1, nil)
		r.mu.next, r.mu.logStart, r.mu.producers, r.mu.ongoing, r.mu.aborted = st.next, st.logStart, st.producers, st.ongoing, st.aborted
		again, what := decodeStateRow(r.encodeStateLocked())
		if what != "" {
			t.Fatalf("a re-encoded row does not decode: %s", what)
		}
		if again.next != st.next || again.logStart != st.logStart || len(again.producers) != len(st.producers) ||
			!slices.Equal(again.aborted, st.aborted) || len(again.ongoing) != len(st.ongoing) {
			t.Fatalf("round trip: %+v, want %+v", again, st)
		}
		for id, ps := range st.producers {
			got := again.producers[id]
			if got == nil || got.epoch != ps.epoch || got.coordinatorEpoch != ps.coordinatorEpoch || !slices.Equal(got.last, ps.last) {
				t.Fatalf("producer %d: %+v, want %+v", id, got, ps)
			}
		}
	})
}
