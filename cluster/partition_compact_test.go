package cluster

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/topics"
	"go.etcd.io/raft/v3/raftpb"
)

// kv is one record of keyedBatch: a nil value is a tombstone.
type kv struct{ key, value string }

// keyedBatch is a batch of records at timestamp ts, of producer pid (-1:
// none; transactional when txn) from sequence seq; value "" is null.
func keyedBatch(t *testing.T, pid int64, txn bool, seq int32, ts int64, recs ...kv) []byte {
	t.Helper()
	h := topics.BatchHeader{LastOffsetDelta: int32(len(recs) - 1), BaseTimestamp: ts, MaxTimestamp: ts,
		ProducerID: pid, ProducerEpoch: 0, BaseSequence: seq}
	if pid < 0 {
		h.ProducerEpoch, h.BaseSequence = -1, -1
	}
	if txn {
		h.Attributes = batchTransactional
	}
	rs := make([]topics.Record, len(recs))
	for i, r := range recs {
		rs[i] = topics.Record{OffsetDelta: int32(i), Key: []byte(r.key)}
		if r.value != "" {
			rs[i].Value = []byte(r.value)
		}
	}
	b, err := topics.EncodeBatch(h, rs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// replica is one replica's store and PartitionLog of group 1.
type replica struct {
	t     *testing.T
	store *pebblestore.Store
	l     *PartitionLog
	index uint64
}

func newReplica(t *testing.T) *replica {
	store := openTestStore(t)
	return &replica{t: t, store: store, l: NewPartitionLog(store, 1, topics.ReplicatedCompactor{})}
}

// must applies data as the next entry and fails unless its result is want.
func (r *replica) must(data []byte, want int64) {
	r.t.Helper()
	r.index++
	if got, err := applyAt(r.t, r.store, r.l, r.index, data); err != nil || got != want {
		r.t.Fatalf("entry %d: result %d %v, want %d", r.index, got, err, want)
	}
}

// entry is the batch or command stored at index i.
func (r *replica) entry(i uint64) []byte {
	r.t.Helper()
	return storedEntry(r.t, r.store, i)
}

// state is the replica's index and state row, for comparisons.
func (r *replica) state() string {
	r.l.mu.RLock()
	defer r.l.mu.RUnlock()
	return fmt.Sprintf("%+v %x", r.l.mu.batches, r.l.encodeStateLocked())
}

// records reads the log from its start: "offset:key=value" per record,
// "offset:marker" per control batch.
func (r *replica) records() []string {
	r.t.Helper()
	raw, err := r.l.ReadRange(r.l.LogStart(), 1<<20, true, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	var out []string
	for len(raw) > 0 {
		h, err := topics.ParseBatchHeader(raw)
		if err != nil {
			r.t.Fatal(err)
		}
		_, recs, err := topics.DecodeRecords(raw[:h.Size()])
		if err != nil {
			r.t.Fatal(err)
		}
		for _, rec := range recs {
			switch {
			case h.IsControl():
				out = append(out, fmt.Sprintf("%d:marker", h.BaseOffset+int64(rec.OffsetDelta)))
			case rec.Value == nil:
				out = append(out, fmt.Sprintf("%d:%s=nil", h.BaseOffset+int64(rec.OffsetDelta), rec.Key))
			default:
				out = append(out, fmt.Sprintf("%d:%s=%s", h.BaseOffset+int64(rec.OffsetDelta), rec.Key, rec.Value))
			}
		}
		raw = raw[h.Size():]
	}
	return out
}

// sameAs fails unless r and o hold the same entries, index and state.
func (r *replica) sameAs(o *replica, what string) {
	r.t.Helper()
	if r.index != o.index {
		r.t.Fatalf("%s: %d entries and %d", what, r.index, o.index)
	}
	for i := uint64(1); i <= r.index; i++ {
		if !bytes.Equal(r.entry(i), o.entry(i)) {
			r.t.Fatalf("%s: entry %d differs", what, i)
		}
	}
	if a, b := r.state(), o.state(); a != b {
		r.t.Fatalf("%s: state\n%s\n%s", what, a, b)
	}
}

// replayed is a new PartitionLog over r's store that applied r's entries
// again, as at a restart.
func (r *replica) replayed() *replica {
	r.t.Helper()
	n := &replica{t: r.t, store: r.store, l: NewPartitionLog(r.store, 1, topics.ReplicatedCompactor{}), index: r.index}
	for i := uint64(1); i <= r.index; i++ {
		if _, err := n.l.Apply(Entry{Index: i, Term: 1, Data: r.entry(i)}); err != nil {
			r.t.Fatalf("replay entry %d: %v", i, err)
		}
	}
	return n
}

func checkRecords(t *testing.T, r *replica, want ...string) {
	t.Helper()
	if got := r.records(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("records %v, want %v", got, want)
	}
}

// TestPartitionLogCompactionCommand: a compaction command keeps the
// latest record per key in [log start, end), stops at the last stable
// offset (an open transaction's data and what follows stay), drops an
// aborted transaction's data, keeps markers, stamps a kept tombstone's
// batch with its delete horizon and drops it once a later command's now
// passes it. Two replicas applying the same entries, and a follower
// catching up from the compacted entries, hold the same bytes and state;
// a replay after a restart (over data later commands compacted) changes
// nothing and rebuilds the same index and state.
func TestPartitionLogCompactionCommand(t *testing.T) {
	entries := [][]byte{
		keyedBatch(t, -1, false, 0, 1000, kv{"k1", "v1"}, kv{"k2", "v1"}), // 0-1
		keyedBatch(t, -1, false, 0, 2000, kv{"k1", "v2"}),                 // 2
		keyedBatch(t, -1, false, 0, 3000, kv{"k2", ""}, kv{"k3", "v1"}),   // 3-4
		keyedBatch(t, 7, true, 0, 3500, kv{"k3", "aborted"}),              // 5
		marker(t, 7, 0, false),                          // 6
		keyedBatch(t, 8, true, 0, 4000, kv{"k1", "v3"}), // 7, open
	}
	results := []int64{0, 2, 3, 5, 6, 7}
	a, b := newReplica(t), newReplica(t)
	for i, e := range entries {
		a.must(e, results[i])
		b.must(e, results[i])
	}
	before := a.records()
	cmd := CompactionCommand(100, 10_000, 1000)
	a.must(cmd, 7) // clamped to the LSO
	b.must(cmd, 7)
	checkRecords(t, a, "2:k1=v2", "3:k2=nil", "4:k3=v1", "6:marker", "7:k1=v3")
	a.sameAs(b, "two replicas")
	if len(before) != 8 {
		t.Fatalf("before: %v", before)
	}
	if got := a.l.LastStableOffset(); got != 7 {
		t.Fatalf("LSO %d", got)
	}

	// A follower catching up from the leader's (compacted) entries.
	f := newReplica(t)
	for i := uint64(1); i <= a.index; i++ {
		f.must(a.entry(i), int64(append(results, 7)[i-1]))
	}
	f.sameAs(a, "follower")
	a.replayed().sameAs(a, "replay")

	// The transaction commits; past the horizon (10000+1000) the
	// tombstone goes, and k1's older value.
	for _, r := range []*replica{a, b} {
		r.must(marker(t, 8, 0, true), 8)
		r.must(CompactionCommand(100, 11_000, 1000), 8) // the marker at 8 is the last batch
	}
	checkRecords(t, a, "4:k3=v1", "6:marker", "7:k1=v3", "8:marker")
	a.sameAs(b, "two replicas, second command")
	stored := a.state()
	re := a.replayed()
	re.sameAs(a, "replay over later compaction")
	if re.state() != stored {
		t.Fatal("replay changed the state")
	}
	if got := re.l.HighWatermark(); got != 9 {
		t.Fatalf("high watermark %d after replay", got)
	}
}

// TestPartitionLogCompactionProducers: an idempotent producer's batch
// emptied by compaction keeps its offsets and sequence range: after a
// replay the producer's next batch follows it and a retry of it is still
// a duplicate; a command of an unknown version is refused alike.
func TestPartitionLogCompactionProducers(t *testing.T) {
	a := newReplica(t)
	a.must(keyedBatch(t, 5, false, 0, 1000, kv{"k", "1"}, kv{"k", "2"}), 0) // 0-1, seq 0-1
	a.must(keyedBatch(t, 5, false, 2, 1000, kv{"k", "3"}), 2)               // 2, seq 2
	a.must(keyedBatch(t, -1, false, 0, 1000, kv{"other", "1"}), 3)          // 3: the last batch, never compacted
	a.must(CompactionCommand(4, 2000, 0), 3)                                // clamped below the last batch
	checkRecords(t, a, "2:k=3", "3:other=1")
	re := a.replayed()
	re.sameAs(a, "replay")
	for _, r := range []*replica{a, re} {
		if got, err := r.l.Apply(Entry{Index: 4, Term: 1, Data: keyedBatch(t, 5, false, 0, 1000, kv{"k", "1"}, kv{"k", "2"})}); err != nil || got != 0 {
			t.Fatalf("retry of the emptied batch: %d %v, want the duplicate 0", got, err)
		}
	}
	a.must(keyedBatch(t, 5, false, 3, 1000, kv{"k", "4"}), 4)
	bad := CompactionCommand(3, 0, 0)
	bad[len(compactMarker)] = 2
	if _, err := a.l.Apply(Entry{Index: 99, Term: 1, Data: bad}); err != ErrInvalidCommand {
		t.Fatalf("version 2 command: %v", err)
	}
}

// TestPartitionLogCompactionRestored: compaction with a log start
// (cleanup.policy=compact,delete): a replica restored from the state row
// of a log-start command and replaying the (compacted) entries after it
// ends with the index and state of the replica that applied everything.
func TestPartitionLogCompactionRestored(t *testing.T) {
	a := newReplica(t)
	a.must(keyedBatch(t, -1, false, 0, 1000, kv{"a", "1"}), 0) // 1
	a.must(keyedBatch(t, -1, false, 0, 1000, kv{"b", "1"}), 1) // 2
	a.must(LogStartCommand(1, 0), 1)                           // 3: the state row
	a.must(keyedBatch(t, 9, false, 0, 1000, kv{"b", "2"}), 2)  // 4
	a.must(keyedBatch(t, 9, false, 1, 1000, kv{"c", "1"}), 3)  // 5
	a.must(keyedBatch(t, -1, false, 0, 1000, kv{"b", ""}), 4)  // 6: a tombstone
	a.must(keyedBatch(t, -1, false, 0, 1000, kv{"z", "1"}), 5) // 7: the last batch
	a.must(CompactionCommand(6, 2000, 10), 5)                  // 8
	a.must(CompactionCommand(6, 2010, 10), 5)                  // 9: past the horizon
	checkRecords(t, a, "3:c=1", "5:z=1")
	r := &replica{t: t, store: a.store, l: NewPartitionLog(a.store, 1, topics.ReplicatedCompactor{}), index: a.index}
	if err := r.l.RestoreAt(3); err != nil {
		t.Fatal(err)
	}
	for i := uint64(4); i <= a.index; i++ {
		if _, err := r.l.Apply(Entry{Index: i, Term: 1, Data: a.entry(i)}); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
	r.sameAs(a, "restored")
	if _, err := r.l.Apply(Entry{Index: 10, Term: 1, Data: keyedBatch(t, 9, false, 1, 1000, kv{"c", "1"})}); err != nil {
		t.Fatalf("retry of producer 9's batch: %v", err)
	}
	if got := r.l.HighWatermark(); got != 6 {
		t.Fatalf("a retried batch took offsets: high watermark %d", got)
	}
}

// TestPartitionLogCompactionPartlyRewritten: a crash between two of a
// command's Pebble batches leaves part of the range rewritten; the
// command applied again over it (the replay) gives what it gave live.
func TestPartitionLogCompactionPartlyRewritten(t *testing.T) {
	entries := [][]byte{
		keyedBatch(t, -1, false, 0, 1000, kv{"a", "1"}, kv{"b", "1"}),               // 0-1
		keyedBatch(t, -1, false, 0, 1000, kv{"a", "2"}, kv{"c", ""}),                // 2-3
		keyedBatch(t, -1, false, 0, 1000, kv{"b", "2"}, kv{"b", "3"}, kv{"c", "1"}), // 4-6
		keyedBatch(t, -1, false, 0, 1000, kv{"z", "1"}),                             // 7: the last batch
	}
	a, b := newReplica(t), newReplica(t)
	for i, e := range entries {
		a.must(e, []int64{0, 2, 4, 7}[i])
		b.must(e, []int64{0, 2, 4, 7}[i])
	}
	cmd := CompactionCommand(8, 5000, 10)
	a.must(cmd, 7)
	checkRecords(t, a, "2:a=2", "5:b=3", "6:c=1", "7:z=1")
	if bytes.Equal(a.entry(3), entries[2]) {
		t.Fatal("the third batch was not rewritten")
	}
	// b crashed applying the command: its row and the first two
	// entries' rewrites durable, not the third's; the restart replays.
	b.index++
	for i, data := range map[uint64][]byte{1: a.entry(1), 2: a.entry(2), b.index: cmd} {
		w := b.store.NewBatch()
		if err := setProto(w, pebblestore.RaftEntryKey(1, i), &raftpb.Entry{Index: new(i), Term: new(uint64(1)), Data: append(make([]byte, 16), data...)}); err != nil {
			t.Fatal(err)
		}
		if err := w.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	b.replayed().sameAs(a, "partly rewritten, replayed")
}
