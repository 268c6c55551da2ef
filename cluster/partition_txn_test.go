package cluster

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/topics"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// txnBatch is a transactional batch of producer pid at epoch, first
// sequence seq, records records.
func txnBatch(pid int64, epoch int16, seq, records int32) []byte {
	b := idempotentBatch(pid, epoch, seq, records, 0)
	binary.BigEndian.PutUint16(b[batchAttributesAt:], batchTransactional)
	binary.BigEndian.PutUint32(b[batchCRCAt:], crc32.Checksum(b[batchAttributesAt:], castagnoli))
	return b
}

// marker is the control batch the leader proposes (topics.ControlBatch,
// Kafka's format).
func marker(t *testing.T, pid int64, epoch int16, commit bool) []byte {
	t.Helper()
	b, err := topics.ControlBatch(pid, epoch, commit, 3, time.UnixMilli(1000))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// restoreRow writes row as partition log group's state at index (a row
// an earlier version wrote) and returns a new PartitionLog of group
// restored from it.
func (s *logStartLog) restoreRow(group, index uint64, row []byte) *PartitionLog {
	s.t.Helper()
	b := s.store.NewBatch()
	b.Set(pebblestore.RaftStateKey(group, index), row)
	if err := b.Commit(); err != nil {
		s.t.Fatal(err)
	}
	l := NewPartitionLog(s.store, group, nil)
	if err := l.RestoreAt(index); err != nil {
		s.t.Fatal(err)
	}
	return l
}

// checkTxnState fails unless l's LSO, high watermark and ongoing
// transactions are as given.
func checkTxnState(t *testing.T, l *PartitionLog, lso, hw int64, ongoing map[int64]int64) {
	t.Helper()
	if got := l.LastStableOffset(); got != lso {
		t.Fatalf("LSO %d, want %d", got, lso)
	}
	if got := l.HighWatermark(); got != hw {
		t.Fatalf("high watermark %d, want %d", got, hw)
	}
	if got := l.OngoingTransactions(); !maps.Equal(got, ongoing) {
		t.Fatalf("ongoing %v, want %v", got, ongoing)
	}
}

// TestPartitionLogTransactions: the transaction state machine of a
// replicated partition (KIP-98, decided at apply): a transactional batch
// opens its producer's transaction, the LSO stays at its first offset
// until a marker ends it; COMMIT and ABORT take an offset each (read back
// with the entry's term as partition leader epoch), ABORT enters the
// aborted index; a marker that ends nothing takes no offset; an older
// epoch is refused for batches and markers alike; a newer epoch's marker
// fences the older one; malformed control batches are refused; a log
// start above an aborted marker drops its entry and keeps the others.
func TestPartitionLogTransactions(t *testing.T) {
	s := newLogStartLog(t)
	s.must(txnBatch(5, 0, 0, 2), 0) // 0-1: producer 5 opens
	checkTxnState(t, s.l, 0, 2, map[int64]int64{5: 0})
	s.must(testBatch(1, "plain"), 2) // 2
	s.must(txnBatch(5, 0, 2, 1), 3)  // 3: the same transaction
	s.must(txnBatch(5, 0, 2, 1), 3)  // a retry: its offset
	checkTxnState(t, s.l, 0, 4, map[int64]int64{5: 0})
	s.must(marker(t, 5, 0, true), 4) // 4: COMMIT
	checkTxnState(t, s.l, 5, 5, map[int64]int64{})
	if b, err := s.l.Read(4); err != nil || binary.BigEndian.Uint32(b[batchEpochAt:]) != 1 || binary.BigEndian.Uint16(b[batchAttributesAt:])&batchControl == 0 {
		t.Fatalf("read the marker: %v, want a control batch with partition leader epoch 1 (the term)", err)
	}
	s.must(marker(t, 5, 0, true), 5) // ends nothing: no offset (the result is the high watermark)
	checkTxnState(t, s.l, 5, 5, map[int64]int64{})

	s.must(txnBatch(6, 0, 0, 1), 5) // 5: producer 6 opens
	s.must(txnBatch(5, 0, 3, 1), 6) // 6: producer 5's next transaction
	checkTxnState(t, s.l, 5, 7, map[int64]int64{5: 6, 6: 5})
	s.must(marker(t, 6, 0, false), 7) // 7: ABORT of 6
	checkTxnState(t, s.l, 6, 8, map[int64]int64{5: 6})
	s.must(marker(t, 5, 1, false), 8) // 8: a fencing ABORT of 5 at epoch 1
	checkTxnState(t, s.l, 9, 9, map[int64]int64{})
	want := []AbortedTxn{{6, 5, 7}, {5, 6, 8}}
	if got := s.l.AbortedTransactions(0, 100); !slices.Equal(got, want) {
		t.Fatalf("aborted %v, want %v", got, want)
	}
	if got := s.l.AbortedTransactions(8, 100); !slices.Equal(got, want[1:]) {
		t.Fatalf("aborted from 8: %v, want %v", got, want[1:])
	}
	if got := s.l.AbortedTransactions(0, 4); len(got) != 0 {
		t.Fatalf("aborted up to 4: %v, want none (their data starts at 5)", got)
	}

	for _, c := range []struct {
		name string
		data []byte
		err  error
	}{
		{"a batch of the fenced epoch", txnBatch(5, 0, 4, 1), ErrInvalidProducerEpoch},
		{"a marker of the fenced epoch", marker(t, 5, 0, true), ErrInvalidProducerEpoch},
		{"the new epoch not from 0", txnBatch(5, 1, 4, 1), ErrOutOfOrderSequence},
		{"a transactional batch without a producer", txnBatch(-1, -1, -1, 1), ErrInvalidBatch},
		{"a control record of type 5", badMarker(t, func(b []byte) { b[len(b)-9] = 5 }), ErrInvalidBatch},
		{"a compressed control batch", badMarker(t, func(b []byte) { b[batchAttributesAt+1] |= 1 }), ErrInvalidBatch},
		{"a control batch that is not transactional", badMarker(t, func(b []byte) { b[batchAttributesAt+1] &^= batchTransactional }), ErrInvalidBatch},
	} {
		if _, err := s.apply(c.data); !errors.Is(err, c.err) {
			t.Fatalf("%s: %v, want %v", c.name, err, c.err)
		}
	}
	checkTxnState(t, s.l, 9, 9, map[int64]int64{})
	s.must(txnBatch(5, 1, 0, 1), 9) // 9: the new epoch from sequence 0

	// A log start of 8 leaves producer 6's abort (marker 7) behind; the
	// one at 8 stays for readers at 8. The LSO never goes below the log
	// start, even with a transaction open below it.
	s.must(LogStartCommand(8, 0), 8)
	if got := s.l.AbortedTransactions(0, 100); !slices.Equal(got, want[1:]) {
		t.Fatalf("aborted after the log start moved to 8: %v, want %v", got, want[1:])
	}
	s.must(LogStartCommand(10, 0), 10)
	checkTxnState(t, s.l, 10, 10, map[int64]int64{5: 9})
}

// badMarker is a COMMIT marker of producer 5 epoch 1 changed by f, its
// CRC fixed.
func badMarker(t *testing.T, f func([]byte)) []byte {
	b := marker(t, 5, 1, true)
	f(b)
	binary.BigEndian.PutUint32(b[batchCRCAt:], crc32.Checksum(b[batchAttributesAt:], castagnoli))
	return b
}

// TestPartitionLogTransactionsRestored: a replica restored from a state
// row written while a transaction is open (and after an abort above the
// log start) and given the entries after it equals the one that applied
// everything: ongoing transactions, LSO, aborted index, producer
// decisions; the marker sent after ends the transaction alike on both. A
// state row of version 1 (before transactions) still loads.
func TestPartitionLogTransactionsRestored(t *testing.T) {
	s := newLogStartLog(t)
	s.must(testBatch(2, "a"), 0)      // 1: 0-1
	s.must(txnBatch(7, 0, 0, 1), 2)   // 2: 7 opens at 2
	s.must(txnBatch(8, 0, 0, 1), 3)   // 3: 8 opens at 3
	s.must(marker(t, 8, 0, false), 4) // 4: 8 aborted (3-4)
	s.must(txnBatch(8, 0, 1, 1), 5)   // 5: 8 opens again at 5
	s.must(LogStartCommand(2, 0), 2)  // 6: the state row (transactions 7 and 8 open)
	s.must(txnBatch(7, 0, 1, 1), 6)   // 7
	r := NewPartitionLog(s.store, 1, nil)
	if err := r.RestoreAt(6); err != nil {
		t.Fatal(err)
	}
	v, err := s.store.Get(pebblestore.RaftEntryKey(1, 7))
	if err != nil {
		t.Fatal(err)
	}
	e := &raftpb.Entry{}
	if err := proto.Unmarshal(v, e); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Apply(Entry{Index: 7, Term: 1, Data: e.GetData()[16:]}); err != nil {
		t.Fatal(err)
	}
	same := func(what string) {
		t.Helper()
		for _, l := range []*PartitionLog{s.l, r} {
			checkTxnState(t, l, s.l.LastStableOffset(), s.l.HighWatermark(), s.l.OngoingTransactions())
			if got, want := l.AbortedTransactions(0, 100), s.l.AbortedTransactions(0, 100); !slices.Equal(got, want) {
				t.Fatalf("%s: aborted %v, want %v", what, got, want)
			}
		}
	}
	same("restored")
	checkTxnState(t, r, 2, 7, map[int64]int64{7: 2, 8: 5})
	next := s.index + 1
	for _, step := range []struct {
		data []byte
		want int64
		err  error
	}{
		{txnBatch(7, 0, 1, 1), 6, nil},    // a duplicate of entry 7
		{txnBatch(8, 0, 2, 1), 7, nil},    // follows
		{marker(t, 7, 0, true), 8, nil},   // ends 7
		{marker(t, 8, 0, false), 9, nil},  // aborts 8
		{txnBatch(8, 0, 0, 1), 3, nil},    // a duplicate of a batch before the row
		{marker(t, 8, 0, false), 10, nil}, // ends nothing
	} {
		for _, l := range []*PartitionLog{s.l, r} {
			if got, err := applyAt(t, s.store, l, next, step.data); !errors.Is(err, step.err) || (err == nil && got != step.want) {
				t.Fatalf("entry %d: %d %v, want %d %v", next, got, err, step.want, step.err)
			}
		}
		next++
		same("after the same entries")
	}
	if got := r.AbortedTransactions(0, 100); !slices.Equal(got, []AbortedTxn{{8, 3, 4}, {8, 5, 9}}) {
		t.Fatalf("aborted %v", got)
	}

	// Version 1: next 4, log start 1, producer 9 at epoch 2 with one batch.
	v1 := []byte{1}
	v1 = binary.BigEndian.AppendUint64(v1, 4)
	v1 = binary.BigEndian.AppendUint64(v1, 1)
	v1 = binary.BigEndian.AppendUint32(v1, 1)
	v1 = binary.BigEndian.AppendUint64(v1, 9)
	v1 = binary.BigEndian.AppendUint16(v1, 2)
	v1 = append(v1, 1)
	v1 = binary.BigEndian.AppendUint32(v1, 0)
	v1 = binary.BigEndian.AppendUint32(v1, 3)
	v1 = binary.BigEndian.AppendUint64(v1, 0)
	old := s.restoreRow(2, 50, v1)
	checkTxnState(t, old, 4, 4, map[int64]int64{})
	if _, err := old.Apply(Entry{Index: 51, Term: 1, Data: txnBatch(9, 2, 4, 1)}); err != nil {
		t.Fatalf("producer 9's next batch after a version 1 row: %v", err)
	}
	checkTxnState(t, old, 4, 5, map[int64]int64{9: 4})
}

// TestPartitionLogProducers: what DescribeProducers reports for a
// replicated partition (KIP-664) comes from its state machine: epoch,
// last sequence and timestamp of the last batch, the first offset of the
// open transaction and the last marker's coordinator epoch (before
// issue 13's fix the RF > 1 answer was the leader's empty local
// partition).
func TestPartitionLogProducers(t *testing.T) {
	s := newLogStartLog(t)
	tb := idempotentBatch(5, 2, 0, 3, 4000)
	binary.BigEndian.PutUint16(tb[batchAttributesAt:], batchTransactional)
	binary.BigEndian.PutUint32(tb[batchCRCAt:], crc32.Checksum(tb[batchAttributesAt:], castagnoli))
	s.must(testBatch(1, "plain"), 0)                // 0
	s.must(idempotentBatch(4, 0, 0, 2, 3000), 1)    // 1-2: idempotent
	s.must(tb, 3)                                   // 3-5: producer 5 opens at 3
	s.must(coordinatorMarker(t, 6, 1, false, 9), 6) // producer 6: a marker ending nothing
	want := []ProducerInfo{
		{ProducerID: 4, Epoch: 0, CoordinatorEpoch: -1, LastSequence: 1, LastTimestamp: 3000, TxnStartOffset: -1},
		{ProducerID: 5, Epoch: 2, CoordinatorEpoch: -1, LastSequence: 2, LastTimestamp: 4000, TxnStartOffset: 3},
		{ProducerID: 6, Epoch: 1, CoordinatorEpoch: 9, LastSequence: -1, LastTimestamp: -1, TxnStartOffset: -1},
	}
	if got := s.l.Producers(); !slices.Equal(got, want) {
		t.Fatalf("producers %+v, want %+v", got, want)
	}
	s.must(coordinatorMarker(t, 5, 2, false, 4), 6) // 6: ABORT ends producer 5's transaction
	want[1].CoordinatorEpoch, want[1].TxnStartOffset = 4, -1
	if got := s.l.Producers(); !slices.Equal(got, want) {
		t.Fatalf("after the ABORT: producers %+v, want %+v", got, want)
	}
}
