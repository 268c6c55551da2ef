package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/vibemq/broker/pebblestore"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// encodedState is the partition state of l as a state row encodes it.
func encodedState(l *PartitionLog) []byte {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.encodeStateLocked()
}

// TestHostWipedReplicaCatchesUpFromStateRow: a partition group whose log
// was compacted on every replica (log-start commands past every batch, an
// idempotent producer's batches and an open transaction in the state
// row); a follower stopped, its data directory wiped, started again with
// the same ID (a new incarnation): the leader hands its leadership over
// (again after a transfer raft abandoned),
// the new leader sends the state row as a snapshot and the entries after
// it, and the wiped replica ends with the others' log start, high
// watermark, records and producer and transaction state, restarted too
// (the row saved with the snapshot); it can lead:
// a retried batch of the producer is a duplicate there, new batches take
// the next offsets on every replica.
func TestHostWipedReplicaCatchesUpFromStateRow(t *testing.T) {
	c := newHostCluster(t, 3, 1)
	c.waitLeaders()
	const g = 1
	for i := range 5 {
		if _, err := c.propose(g, testBatch(2, fmt.Sprint("a", i))); err != nil {
			t.Fatal(err)
		}
	}
	for seq := int32(0); seq < 6; seq += 2 { // producer 7: offsets 10..15
		if _, err := c.propose(g, idempotentBatch(7, 0, seq, 2, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if off, err := c.propose(g, txnBatch(9, 0, 0, 1)); err != nil || off != 16 { // open at 16
		t.Fatalf("transactional batch: %d %v", off, err)
	}
	c.waitSameLogs(map[uint64]int64{g: 17})
	command := func(offset int64) {
		t.Helper()
		lead := c.leader(g)
		if _, err := c.propose(g, LogStartCommand(offset, c.nodes[lead].host.Matched(g))); err != nil {
			t.Fatal(err)
		}
	}
	command(17)
	var compacted uint64
	c.waitFor("every replica's log compacted", func() bool {
		if lead := c.leader(g); lead != 0 && c.nodes[lead].logs[g].CompactionPending(c.nodes[lead].host.Matched(g)) {
			command(17)
		}
		compacted = 0
		for _, hn := range c.nodes {
			st, err := OpenStorage(hn.store, g)
			if err != nil {
				t.Fatal(err)
			}
			if st.truncatedIndex == 0 {
				return false
			}
			compacted = max(compacted, st.truncatedIndex)
		}
		return true
	})
	if _, err := c.propose(g, testBatch(3, "b")); err != nil { // 17..19, after the row
		t.Fatal(err)
	}
	c.waitSameLogs(map[uint64]int64{g: 20})

	lead := c.leader(g)
	wiped := c.ids[0]
	if wiped == lead {
		wiped = c.ids[1]
	}
	c.stop(wiped)
	if err := os.RemoveAll(c.dirs[wiped]); err != nil {
		t.Fatal(err)
	}
	if _, err := c.propose(g, testBatch(1, "c")); err != nil { // 20, while it is away
		t.Fatal(err)
	}
	// The first hand-overs are lost (MsgTimeoutNow dropped): raft
	// abandons each after an election timeout, the leader asks again.
	c.setFilter(func(m *raftpb.Message) bool { return m.GetType() != raftpb.MsgTimeoutNow })
	if err := c.start(wiped, nil); err != nil {
		t.Fatal(err)
	}
	ticks := 0
	c.waitFor("three election timeouts", func() bool { ticks++; return ticks > 100 })
	if hw := c.nodes[wiped].logs[g].HighWatermark(); hw == 21 {
		t.Fatal("the wiped replica caught up with no leader change")
	}
	c.setFilter(nil)
	c.waitSameLogs(map[uint64]int64{g: 21})
	if st, _ := c.nodes[wiped].host.Status(g); st.Compacted < compacted {
		t.Fatalf("the wiped replica's log starts after %d, want the snapshot's index (at least %d)", st.Compacted, compacted)
	}
	// Restarted, the wiped replica restores the row its snapshot saved.
	c.stop(wiped)
	if err := c.start(wiped, nil); err != nil {
		t.Fatal(err)
	}
	c.waitSameLogs(map[uint64]int64{g: 21})
	want := encodedState(c.nodes[lead].logs[g])
	for id, hn := range c.nodes {
		if got := encodedState(hn.logs[g]); !bytes.Equal(got, want) {
			t.Fatalf("node %d's partition state %x differs from the leader's %x", id, got, want)
		}
		if ls := hn.logs[g].LogStart(); ls != 17 {
			t.Fatalf("node %d: log start %d, want 17", id, ls)
		}
	}
	if got := c.read(wiped, g); fmt.Sprint(got) != fmt.Sprint(map[int64]string{17: "b", 20: "c"}) {
		t.Fatalf("the wiped replica reads %v", got)
	}

	// The wiped replica leads: the producer's last batch is a duplicate,
	// a new one takes the next offset on every replica.
	c.waitFor("the wiped replica leading", func() bool {
		if l := c.leader(g); l != 0 && l != wiped {
			c.nodes[l].host.TransferLeader(g, wiped)
		}
		return c.leader(g) == wiped
	})
	if off, err := c.propose(g, idempotentBatch(7, 0, 4, 2, 1)); err != nil || off != 14 {
		t.Fatalf("the producer's retried batch on the wiped replica: offset %d %v, want its original 14", off, err)
	}
	if off, err := c.propose(g, idempotentBatch(7, 0, 6, 1, 1)); err != nil || off != 21 {
		t.Fatalf("the producer's next batch: offset %d %v, want 21", off, err)
	}
	c.waitSameLogs(map[uint64]int64{g: 22})
}

// TestStorageStateSnapshot: a host group's snapshot is the state row its
// log was compacted to (index, term, static voters, row), the empty one
// before any compaction, ErrSnapshotTemporarilyUnavailable without its
// row; received, it replaces the log and the state rows by that row,
// survives a reopen, and one not above the truncated index is refused.
func TestStorageStateSnapshot(t *testing.T) {
	store := openStore(t, nil, filepath.Join(t.TempDir(), "data"))
	defer store.Close()
	voters := &raftpb.ConfState{Voters: []uint64{1, 2, 3}}
	open := func(group uint64) *Storage {
		t.Helper()
		s, err := OpenStorage(store, group)
		if err != nil {
			t.Fatal(err)
		}
		s.static = voters
		return s
	}
	leader := open(1)
	if err := leader.Save(hardState(2, 1, 5), ents(2, 1, 5), nil); err != nil {
		t.Fatal(err)
	}
	if snap, err := leader.Snapshot(); err != nil || !raft.IsEmptySnap(snap) {
		t.Fatalf("snapshot of a log never compacted: %v %v, want the empty one", snap, err)
	}
	if err := leader.compact(3); err != nil {
		t.Fatal(err)
	}
	if _, err := leader.Snapshot(); !errors.Is(err, raft.ErrSnapshotTemporarilyUnavailable) {
		t.Fatalf("snapshot without its state row: %v", err)
	}
	b := store.NewBatch()
	b.Set(pebblestore.RaftStateKey(1, 3), []byte("row3"))
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	snap, err := leader.Snapshot()
	if md := snap.GetMetadata(); err != nil || md.GetIndex() != 3 || md.GetTerm() != 2 || !proto.Equal(md.GetConfState(), voters) || string(snap.GetData()) != "row3" {
		t.Fatalf("snapshot %v %v, want row3 at 3, term 2, voters 1-3", snap, err)
	}

	follower := open(2) // a wiped replica: bootstrap entries, a state row of its own
	if err := follower.Save(hardState(1, 0, 2), ents(1, 1, 2), nil); err != nil {
		t.Fatal(err)
	}
	b = store.NewBatch()
	b.Set(pebblestore.RaftStateKey(2, 9), []byte("stale"))
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := follower.Save(hardState(2, 0, 3), ents(2, 4, 4), snap); err != nil {
		t.Fatal(err)
	}
	reopened := open(2)
	for _, s := range []*Storage{follower, reopened} {
		if first, _ := s.FirstIndex(); first != 4 || s.truncatedTerm != 2 || fmt.Sprint(logOf(t, s)) != "[t2-i4]" {
			t.Fatalf("after the snapshot: first index %d, truncated term %d, log %v; want 4, 2, [t2-i4]", first, s.truncatedTerm, logOf(t, s))
		}
	}
	if v, err := store.Get(pebblestore.RaftStateKey(2, 3)); err != nil || string(v) != "row3" {
		t.Fatalf("state row 3: %q %v", v, err)
	}
	if _, err := store.Get(pebblestore.RaftStateKey(2, 9)); !errors.Is(err, pebblestore.ErrNotFound) {
		t.Fatalf("the stale state row 9 is still there: %v", err)
	}
	if err := reopened.Save(nil, nil, snap); !errors.Is(err, raft.ErrSnapOutOfDate) {
		t.Fatalf("a snapshot at the truncated index again: %v, want ErrSnapOutOfDate", err)
	}
}
