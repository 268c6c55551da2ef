package groups

import (
	"bytes"
	"testing"
	"time"
)

// logLen is the number of records appended to log so far.
func logLen(l *memOffsetsLog) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.next
}

// mustStage stages offset for group g, failing the test on an error.
func (h *harness) mustStage(g string, pid int64, epoch int16, partition int32, offset int64) {
	h.t.Helper()
	if err := h.stageTxn(g, pid, epoch, partition, offset); err != nil {
		h.t.Fatalf("stage %s producer %d t/%d: %v", g, pid, partition, err)
	}
}

// marker applies a marker of pid on g's partition of __consumer_offsets.
func (h *harness) marker(g string, pid int64, epoch int16, commit bool) error {
	h.t.Helper()
	return h.c.EndTxnOffsets(TxnMarker{Partition: h.c.PartitionFor(g), ProducerID: pid, ProducerEpoch: epoch, Commit: commit}, h.now)()
}

// TestTxnOffsetsReplicatedLoad: on a replicated __consumer_offsets,
// what one coordinator's TxnOffsetCommits and markers wrote (committed,
// aborted, still pending, a plain commit after the pending one, a
// deleted group, an offset deletion) is what another coordinator loads
// from the same logs; a marker that ends nothing writes nothing there.
func TestTxnOffsetsReplicatedLoad(t *testing.T) {
	logs := map[int32]*memOffsetsLog{}
	h := replicatedHarness(t, logs)
	h.loadAll()
	result(t, h.c.Commit(CommitRequest{Group: "c", Generation: -1, Topics: []CommitTopic{{Topic: "t", Partitions: []CommitPartition{{Offset: 5}}}}}, h.now))
	h.mustStage("c", 7, 0, 0, 10) // committed
	h.mustStage("c", 7, 0, 0, 11)
	h.mustStage("c", 7, 0, 1, 20)
	h.mustStage("a", 8, 0, 0, 30) // aborted
	h.mustStage("p", 9, 2, 0, 40) // pending
	h.mustStage("s", 7, 0, 0, 50) // superseded by a plain commit
	result(t, h.c.Commit(CommitRequest{Group: "s", Generation: -1, Topics: []CommitTopic{{Topic: "t", Partitions: []CommitPartition{{Offset: 60}}}}}, h.now))
	h.mustStage("d", 10, 0, 0, 70) // its group deleted
	wantErr(t, "delete group", result(t, h.c.DeleteGroups([]string{"d"}, h.now))[0], nil)
	h.mustStage("o", 11, 0, 0, 80) // its t/0 offset deleted
	h.mustStage("o", 11, 0, 1, 81)
	if del := result(t, h.c.DeleteOffsets("o", []OffsetDeleteTopic{{Topic: "t", Partitions: []int32{0}}}, h.now)); del.Err != nil || del.Topics[0][0] != nil {
		t.Fatalf("offset delete: %+v", del)
	}
	h.wantTxn("pending", "c", 0, 5, true)
	wantErr(t, "commit c", h.marker("c", 7, 0, true), nil)
	wantErr(t, "commit s", h.marker("s", 7, 0, true), nil)
	wantErr(t, "abort a", h.marker("a", 8, 0, false), nil)
	h.wantTxn("committed", "c", 0, 11, false)

	// Markers that end nothing write nothing.
	before := logLen(logs[h.c.PartitionFor("c")])
	wantErr(t, "repeated commit", h.marker("c", 7, 0, true), nil)
	wantErr(t, "unknown producer", h.marker("c", 99, 0, false), nil)
	if after := logLen(logs[h.c.PartitionFor("c")]); after != before {
		t.Fatalf("markers that end nothing appended %d records", after-before)
	}

	h2 := replicatedHarness(t, logs)
	wantErr(t, "marker while loading", h2.marker("p", 9, 2, true), ErrCoordinatorLoadInProgress)
	h2.loadAll()
	for _, w := range []struct {
		group     string
		partition int32
		offset    int64
		unstable  bool
	}{{"c", 0, 11, false}, {"c", 1, 20, false}, {"a", 0, -1, false}, {"p", 0, -1, true}, {"s", 0, 60, false},
		{"d", 0, -1, false}, {"o", 0, -1, false}, {"o", 1, -1, true}} {
		h2.wantTxn("loaded", w.group, w.partition, w.offset, w.unstable)
	}
	if h2.group("d") != nil {
		t.Fatal("the deleted group was loaded")
	}
	wantErr(t, "older epoch after the load", h2.stageTxn("p", 9, 1, 0, 41), ErrProducerFenced)
	wantErr(t, "marker of an older epoch after the load", h2.marker("p", 9, 1, true), ErrInvalidProducerEpoch)

	// Markers applied after the load, loaded by a third coordinator.
	wantErr(t, "commit after the load", h2.marker("p", 9, 2, true), nil)
	wantErr(t, "abort after the load", h2.marker("o", 11, 0, false), nil)
	h2.wantTxn("committed after the load", "p", 0, 40, false)
	h3 := replicatedHarness(t, logs)
	h3.loadAll()
	h3.wantTxn("loaded commit", "p", 0, 40, false)
	h3.wantTxn("loaded abort", "o", 1, -1, false)
	if n := len(h3.c.mu.txnProducers); n != 0 {
		t.Fatalf("%d producers still pending after their markers", n)
	}
}

// TestTxnOffsetsReplicatedNotCommitted: an append that is not known
// committed (a lost leadership) fails the TxnOffsetCommit without leaving
// its offsets pending, and fails the marker leaving them pending, so the
// marker's retry ends them; an unloaded partition answers NOT_COORDINATOR
// to both, and its pending offsets are forgotten here and loaded by the
// next coordinator.
func TestTxnOffsetsReplicatedNotCommitted(t *testing.T) {
	logs := map[int32]*memOffsetsLog{}
	h := replicatedHarness(t, logs)
	h.loadAll()
	h.mustStage("g", 7, 0, 0, 10)
	log := logs[h.c.PartitionFor("g")]
	log.failing = true
	wantErr(t, "stage without leadership", h.stageTxn("g", 7, 0, 1, 20), ErrNotCoordinator)
	h.wantTxn("a stage not committed", "g", 1, -1, false)
	h.wantTxn("the earlier stage", "g", 0, -1, true)
	wantErr(t, "marker without leadership", h.marker("g", 7, 0, true), ErrNotCoordinator)
	h.wantTxn("a marker not committed", "g", 0, -1, true)
	log.failing = false
	wantErr(t, "marker retried", h.marker("g", 7, 0, true), nil)
	h.wantTxn("the retried marker", "g", 0, 10, false)

	h.mustStage("g", 7, 1, 0, 30)
	h.c.UnloadPartition(h.c.PartitionFor("g"))
	wantErr(t, "stage on an unloaded partition", h.stageTxn("g", 7, 1, 0, 31), ErrNotCoordinator)
	wantErr(t, "marker on an unloaded partition", h.marker("g", 7, 1, true), ErrNotCoordinator)
	if n := len(h.c.mu.txnProducers); n != 0 {
		t.Fatalf("%d producers pending on an unloaded coordinator", n)
	}
	h2 := replicatedHarness(t, logs)
	h2.loadAll()
	h2.wantTxn("pending on the next coordinator", "g", 0, 10, true)
	wantErr(t, "marker on the next coordinator", h2.marker("g", 7, 1, true), nil)
	h2.wantTxn("committed on the next coordinator", "g", 0, 30, false)
}

// FuzzTxnPendingRecord feeds Load's decoder of pending transactional
// offset records arbitrary keys and values: it must never panic, and what
// it decoded must encode to the same key and to a value that decodes the
// same.
func FuzzTxnPendingRecord(f *testing.F) {
	e := &offsetEntry{offset: 42, leaderEpoch: 3, metadata: "m", commitTime: time.UnixMilli(1700000000000), topicID: [16]byte{7}}
	tp := topicPartition{"t", 2}
	f.Add(txnPendingKey("g", 9, tp), encodeTxnPendingValue(4, 0, e))
	f.Add(txnPendingKey("g", -1, tp), encodeTxnPendingValue(0, txnRowSuperseded, e))
	f.Fuzz(func(t *testing.T, key, value []byte) {
		groups := map[string]*group{}
		get := func(name string) *group {
			if groups[name] == nil {
				groups[name] = newGroup(name, 1, 0)
			}
			return groups[name]
		}
		if err := loadTxnPendingRecord(get, key, value); err != nil {
			return
		}
		if len(groups) != 1 {
			t.Fatalf("a record decoded into %d groups", len(groups))
		}
		for name, g := range groups {
			for pid, p := range g.txnOffsets {
				for tp, e := range p.offsets {
					if k := txnPendingKey(name, pid, tp); !bytes.Equal(k, key) {
						t.Fatalf("key %x re-encodes to %x", key, k)
					}
					var flags byte
					if p.superseded[tp] {
						flags = txnRowSuperseded
					}
					again := map[string]*group{}
					if err := loadTxnPendingRecord(func(n string) *group {
						if again[n] == nil {
							again[n] = newGroup(n, 1, 0)
						}
						return again[n]
					}, key, encodeTxnPendingValue(p.epoch, flags, e)); err != nil {
						t.Fatalf("re-encoded value does not decode: %v", err)
					}
					q := again[name].txnOffsets[pid]
					if got := q.offsets[tp]; q.epoch != p.epoch || q.superseded[tp] != p.superseded[tp] || got.offset != e.offset ||
						got.leaderEpoch != e.leaderEpoch || got.metadata != e.metadata || got.topicID != e.topicID || !got.commitTime.Equal(e.commitTime) {
						t.Fatalf("round trip: %+v != %+v", got, e)
					}
				}
			}
		}
	})
}
