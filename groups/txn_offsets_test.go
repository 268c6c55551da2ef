package groups

import (
	"testing"
	"time"
)

// stageTxn stages offset for t/partition of group g for producer pid.
func (h *harness) stageTxn(g string, pid int64, epoch int16, partition int32, offset int64) error {
	h.t.Helper()
	return h.c.StageTxnOffsets(TxnOffsetsRequest{
		Commit:     CommitRequest{Group: g, Generation: -1, Topics: []CommitTopic{{Topic: "t", Partitions: []CommitPartition{{Partition: partition, Offset: offset, LeaderEpoch: -1}}}}},
		ProducerID: pid, ProducerEpoch: epoch,
	}, h.now)
}

// fetchTxn is t/partition of group g: the offset, and the error with
// require_stable.
func (h *harness) fetchTxn(g string, partition int32) (int64, error) {
	h.t.Helper()
	q := FetchOffsetsRequest{Group: g, Topics: []FetchOffsetsTopic{{Topic: "t", Partitions: []int32{partition}}}}
	plain := h.c.FetchOffsets(q)
	q.RequireStable = true
	stable := h.c.FetchOffsets(q)
	return plain.Topics[0].Partitions[0].Offset, stable.Topics[0].Partitions[0].Err
}

func (h *harness) wantTxn(what, g string, partition int32, offset int64, unstable bool) {
	h.t.Helper()
	got, err := h.fetchTxn(g, partition)
	want := error(nil)
	if unstable {
		want = ErrUnstableOffsetCommit
	}
	if got != offset || err != want {
		h.t.Fatalf("%s: %s t/%d = %d (require_stable: %v), want %d (%v)", what, g, partition, got, err, offset, want)
	}
}

// TestTxnOffsetsCommitAndAbort: pending offsets are not the committed
// ones (require_stable answers UNSTABLE_OFFSET_COMMIT) until a commit
// marker on the group's partition makes them so; an abort drops them; a
// later TxnOffsetCommit of the producer overwrites its pending offset; a
// marker that ends nothing (another producer, another partition of
// __consumer_offsets, a repeat) changes nothing; pending offsets survive a
// restart.
func TestTxnOffsetsCommitAndAbort(t *testing.T) {
	h := newHarness(t, Config{OffsetsTopicPartitions: 5})
	h.createTopic("t", 2)
	result(t, h.c.Commit(CommitRequest{Group: "g", Generation: -1, Topics: []CommitTopic{{Topic: "t", Partitions: []CommitPartition{{Offset: 5}}}}}, h.now))
	p := h.c.PartitionFor("g")
	if err := h.stageTxn("g", 7, 0, 0, 10); err != nil {
		t.Fatal(err)
	}
	if err := h.stageTxn("g", 7, 0, 0, 11); err != nil { // overwrites
		t.Fatal(err)
	}
	if err := h.stageTxn("g", 7, 0, 1, 20); err != nil {
		t.Fatal(err)
	}
	h.wantTxn("pending", "g", 0, 5, true)
	h.wantTxn("pending", "g", 1, -1, true)

	// Markers that end nothing.
	for _, m := range []struct {
		p   int32
		pid int64
	}{{(p + 1) % 5, 7}, {p, 8}} {
		if err := h.c.EndTxnOffsets(TxnMarker{Partition: m.p, ProducerID: m.pid, ProducerEpoch: 0, Commit: true}, h.now)(); err != nil {
			t.Fatalf("marker %+v: %v", m, err)
		}
	}
	h.wantTxn("after markers that end nothing", "g", 0, 5, true)

	h.reopen()
	h.wantTxn("pending after a restart", "g", 0, 5, true)

	if err := h.c.EndTxnOffsets(TxnMarker{Partition: p, ProducerID: 7, ProducerEpoch: 0, Commit: true}, h.now)(); err != nil {
		t.Fatal(err)
	}
	h.wantTxn("committed", "g", 0, 11, false)
	h.wantTxn("committed", "g", 1, 20, false)
	if err := h.c.EndTxnOffsets(TxnMarker{Partition: p, ProducerID: 7, ProducerEpoch: 0, Commit: false}, h.now)(); err != nil { // a late abort ends nothing
		t.Fatal(err)
	}
	h.wantTxn("repeated marker", "g", 0, 11, false)
	h.reopen()
	h.wantTxn("committed after a restart", "g", 0, 11, false)

	// Abort: the offsets stay as they were, also after a restart.
	if err := h.stageTxn("g", 7, 1, 0, 30); err != nil {
		t.Fatal(err)
	}
	if err := h.c.EndTxnOffsets(TxnMarker{Partition: p, ProducerID: 7, ProducerEpoch: 1, Commit: false}, h.now)(); err != nil {
		t.Fatal(err)
	}
	h.wantTxn("aborted", "g", 0, 11, false)
	h.reopen()
	h.wantTxn("aborted after a restart", "g", 0, 11, false)
	if n := len(h.c.mu.txnProducers); n != 0 {
		t.Fatalf("%d producers with pending offsets after every marker", n)
	}
}

// TestTxnOffsetsEpochs: an older epoch is fenced; a newer epoch replaces
// the older epoch's leftovers; a marker of an older epoch than the pending
// offsets ends nothing.
func TestTxnOffsetsEpochs(t *testing.T) {
	h := newHarness(t, Config{})
	h.createTopic("t", 2)
	p := h.c.PartitionFor("g")
	if err := h.stageTxn("g", 7, 3, 0, 10); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "older epoch", h.stageTxn("g", 7, 2, 0, 9), ErrProducerFenced)
	wantErr(t, "older marker", h.c.EndTxnOffsets(TxnMarker{Partition: p, ProducerID: 7, ProducerEpoch: 2, Commit: true}, h.now)(), ErrInvalidProducerEpoch)
	h.wantTxn("after an older marker", "g", 0, -1, true)
	if err := h.stageTxn("g", 7, 4, 1, 40); err != nil {
		t.Fatal(err)
	}
	h.reopen()
	if err := h.c.EndTxnOffsets(TxnMarker{Partition: p, ProducerID: 7, ProducerEpoch: 4, Commit: true}, h.now)(); err != nil {
		t.Fatal(err)
	}
	h.wantTxn("epoch 3's leftover", "g", 0, -1, false)
	h.wantTxn("epoch 4's offset", "g", 1, 40, false)
}

// TestTxnOffsetsMembership: with a generation and member (TxnOffsetCommit
// v3, KIP-447) the group's membership is checked; without, a missing group
// is created as a simple group, which keeps its pending offsets across a
// restart and is not expired while they are pending.
func TestTxnOffsetsMembership(t *testing.T) {
	h := newHarness(t, Config{OffsetsRetention: time.Hour, OffsetsRetentionCheckInterval: time.Minute})
	h.createTopic("t", 1)
	ids, gen := h.stableGroup("live", 1)
	req := func(g string, gen int32, member string) error {
		return h.c.StageTxnOffsets(TxnOffsetsRequest{Commit: CommitRequest{Group: g, Generation: gen, MemberID: member,
			Topics: []CommitTopic{{Topic: "t", Partitions: []CommitPartition{{Offset: 3}}}}}, ProducerID: 1}, h.now)
	}
	wantErr(t, "old generation", req("live", gen-1, ids[0]), ErrIllegalGeneration)
	wantErr(t, "unknown member", req("live", gen, "nobody"), ErrUnknownMemberID)
	wantErr(t, "member of a missing group", req("missing", 1, "m"), ErrIllegalGeneration)
	if h.group("missing") != nil {
		t.Fatal("a refused commit created its group")
	}
	if err := h.c.StageTxnOffsets(TxnOffsetsRequest{Commit: CommitRequest{Group: "ghost", Generation: -1}, ProducerID: 1}, h.now); err != nil || h.group("ghost") != nil {
		t.Fatalf("a commit of no offsets: %v, group %v", err, h.group("ghost"))
	}
	wantErr(t, "current member", req("live", gen, ids[0]), nil)
	h.wantTxn("member's pending offset", "live", 0, -1, true)

	wantErr(t, "simple", req("simple", -1, ""), nil)
	h.reopen()
	h.advance(3 * time.Hour)
	if h.state("simple") != StateEmpty {
		t.Fatalf("the group with pending offsets is %v after retention", h.state("simple"))
	}
	h.wantTxn("simple group's pending offset", "simple", 0, -1, true)
}

// TestTxnOffsetsDeleted: OffsetDelete and DeleteGroups drop the pending
// offsets of what they delete (Kafka's tombstones do), so a later commit
// marker commits nothing there.
func TestTxnOffsetsDeleted(t *testing.T) {
	h := newHarness(t, Config{})
	h.createTopic("t", 2)
	p := h.c.PartitionFor("g")
	if err := h.stageTxn("g", 7, 0, 0, 10); err != nil {
		t.Fatal(err)
	}
	if err := h.stageTxn("g", 7, 0, 1, 11); err != nil {
		t.Fatal(err)
	}
	res := result(t, h.c.DeleteOffsets("g", []OffsetDeleteTopic{{Topic: "t", Partitions: []int32{0}}}, h.now))
	wantErr(t, "offset delete", res.Topics[0][0], nil)
	h.wantTxn("deleted pending offset", "g", 0, -1, false)
	h.wantTxn("other pending offset", "g", 1, -1, true)
	h.reopen()
	h.wantTxn("deleted pending offset after a restart", "g", 0, -1, false)
	wantErr(t, "delete group", result(t, h.c.DeleteGroups([]string{"g"}, h.now))[0], nil)
	if err := h.c.EndTxnOffsets(TxnMarker{Partition: p, ProducerID: 7, ProducerEpoch: 0, Commit: true}, h.now)(); err != nil {
		t.Fatal(err)
	}
	h.wantTxn("after the group's deletion", "g", 1, -1, false)
	h.reopen()
	if h.group("g") != nil {
		t.Fatal("the deleted group came back")
	}
}

// TestTxnOffsetsPlainCommitWins: a plain OffsetCommit of a partition after
// the TxnOffsetCommit is kept when the transaction commits (Kafka keeps
// the later record), also across a restart; the transaction's other
// partitions are committed.
func TestTxnOffsetsPlainCommitWins(t *testing.T) {
	h := newHarness(t, Config{})
	h.createTopic("t", 2)
	p := h.c.PartitionFor("g")
	for part := int32(0); part < 2; part++ {
		if err := h.stageTxn("g", 7, 0, part, 10+int64(part)); err != nil {
			t.Fatal(err)
		}
	}
	result(t, h.c.Commit(CommitRequest{Group: "g", Generation: -1, Topics: []CommitTopic{{Topic: "t", Partitions: []CommitPartition{{Offset: 50}}}}}, h.now))
	h.wantTxn("plain commit while pending", "g", 0, 50, true)
	h.reopen()
	if err := h.c.EndTxnOffsets(TxnMarker{Partition: p, ProducerID: 7, ProducerEpoch: 0, Commit: true}, h.now)(); err != nil {
		t.Fatal(err)
	}
	h.wantTxn("the later plain commit", "g", 0, 50, false)
	h.wantTxn("the transaction's other partition", "g", 1, 11, false)
}
