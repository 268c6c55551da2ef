package cluster

import (
	"fmt"
	"slices"

	"github.com/vibemq/broker/pebblestore"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
	"google.golang.org/protobuf/proto"
)

// LogCompactor is a GroupStateMachine whose log the Host may compact
// without a Raft snapshot of its own (a partition log:
// partition_logstart.go). The state machine saves its state at some
// applied indexes (state rows, pebblestore.RaftStateKey) and names the one
// the log may be dropped up to. That row is also the group's snapshot: a
// replica that lacks the entries up to it (its data directory was wiped)
// receives the row from the leader (Storage.stateSnapshot) and restores it.
type LogCompactor interface {
	// CompactTo is the applied index up to which the log may be dropped
	// (0: none); the state row of that index holds the state after it.
	CompactTo() uint64
	// RestoreAt loads the state row of index, where the group's log was
	// compacted to (at start, or a snapshot received), before the
	// entries after it are applied.
	RestoreAt(index uint64) error
}

// restoreCompacted prepares a group: Raft's configuration is the group's
// static membership (the configuration entries of a compacted log went
// with the rest; a host group takes no Raft snapshot to carry it), and
// when the saved log was compacted the state machine restores the state
// row where it starts.
func restoreCompacted(st *Storage, a *addGroup) error {
	st.static = &raftpb.ConfState{Voters: slices.Sorted(slices.Values(a.voters))}
	if st.truncatedIndex == 0 {
		return nil
	}
	lc, ok := a.sm.(LogCompactor)
	if !ok {
		return fmt.Errorf("cluster: raft group %d: its log was compacted to %d but its state machine cannot restore a state row: %w", a.group, st.truncatedIndex, pebblestore.ErrCorruption)
	}
	return lc.RestoreAt(st.truncatedIndex)
}

// stateSnapshot is a host group's snapshot: the state row at the index A
// its log was compacted to (term A's, the static voters as configuration,
// the row as data). The data below A lies below the partition's log start,
// so nothing else is needed; a row is a few bytes per producer and
// transaction, sent whole in one message (no chunking). A log never
// compacted has the empty snapshot (raft asks for one only below the
// first index). A row that cannot be read is
// raft.ErrSnapshotTemporarilyUnavailable: raft retries later rather than
// panic on another error.
func (s *Storage) stateSnapshot() (*raftpb.Snapshot, error) {
	if s.truncatedIndex == 0 {
		return emptySnapshot(), nil
	}
	row, err := s.store.Get(pebblestore.RaftStateKey(s.group, s.truncatedIndex))
	if err != nil {
		return nil, errNoSnapshot
	}
	return &raftpb.Snapshot{Data: row, Metadata: &raftpb.SnapshotMetadata{
		Index: new(s.truncatedIndex), Term: new(s.truncatedTerm), ConfState: proto.Clone(s.static).(*raftpb.ConfState)}}, nil
}

// addStateSnapshot adds a host group's snapshot received from its leader
// (stateSnapshot) to b: the log and every state row are replaced by the
// row of the snapshot's index A, the log truncated at A, as a compaction
// to A would leave it (so a restart restores the row). Raft hands over
// only a snapshot above its commit index, hence above the truncated one.
func (s *Storage) addStateSnapshot(b *pebblestore.Batch, snap *raftpb.Snapshot) error {
	index, term := snap.GetMetadata().GetIndex(), snap.GetMetadata().GetTerm()
	if index <= s.truncatedIndex || len(snap.GetData()) == 0 {
		return fmt.Errorf("cluster: raft group %d: snapshot at %d with %d bytes, the log is truncated at %d: %w", s.group, index, len(snap.GetData()), s.truncatedIndex, raft.ErrSnapOutOfDate)
	}
	s.deleteEntriesFrom(b, 0)
	rows := pebblestore.RaftKey(s.group, pebblestore.RaftKindState)
	b.DeleteRange(rows, pebblestore.PrefixEnd(rows))
	b.Set(pebblestore.RaftStateKey(s.group, index), snap.GetData())
	s.terms = nil
	s.setTruncated(b, index, term)
	s.lastIndex = index
	return nil
}

// restoreSnapshot makes g's state machine restore the snapshot just
// saved (addStateSnapshot) before any entry after it is applied.
func (g *hostGroup) restoreSnapshot(snap *raftpb.Snapshot) error {
	index := snap.GetMetadata().GetIndex()
	lc, ok := g.sm.(LogCompactor)
	if !ok {
		return fmt.Errorf("cluster: raft group %d received a snapshot at %d, which its state machine cannot restore", g.id, index)
	}
	if err := lc.RestoreAt(index); err != nil {
		return err
	}
	g.applied = index
	return nil
}

// compactApplied drops g's log up to the index its state machine names
// (LogCompactor), with the state rows below it, in one synced batch; it
// runs on the loop after g's committed entries were applied. Rare: at
// most once per applied log-start command.
func (h *Host) compactApplied(g *hostGroup) error {
	lc, ok := g.sm.(LogCompactor)
	if !ok {
		return nil
	}
	to := lc.CompactTo()
	if to <= g.storage.truncatedIndex || to > g.applied {
		return nil
	}
	return g.storage.compact(to)
}

// compact removes the entries up to index (applied, and a state row's)
// and the state rows below index in one synced batch.
func (s *Storage) compact(index uint64) error {
	term, err := s.Term(index)
	if err != nil {
		return fmt.Errorf("cluster: raft group %d: compact to %d: %w", s.group, index, err)
	}
	b := s.store.NewBatch()
	b.DeleteRange(pebblestore.RaftEntryKey(s.group, 0), pebblestore.RaftEntryKey(s.group, index+1))
	b.DeleteRange(pebblestore.RaftStateKey(s.group, 0), pebblestore.RaftStateKey(s.group, index))
	next := *s
	next.setTruncated(b, index, term)
	if err := b.Commit(); err != nil {
		return fmt.Errorf("cluster: raft group %d: compact the log to %d: %w", s.group, index, err)
	}
	*s = next
	return nil
}

// errNoSnapshot is Storage.Snapshot's answer when no snapshot can be
// given now: raft then retries later instead of sending one.
var errNoSnapshot = raft.ErrSnapshotTemporarilyUnavailable

// Matched is, while this node leads group, the index every voter's log
// has reached in its view (the smallest Raft progress match; a new
// leader's view starts at 0 until each follower answered); 0 on a
// follower, for an unknown group, or once the host stopped. A log-start
// command carries it to bound the compaction it causes.
func (h *Host) Matched(group uint64) uint64 {
	c := make(chan uint64, 1)
	f := func() {
		g := h.groups[group]
		if g == nil || !g.leading {
			c <- 0
			return
		}
		m := uint64(1<<64 - 1)
		g.rn.WithProgress(func(_ uint64, _ raft.ProgressType, pr tracker.Progress) {
			m = min(m, pr.Match)
		})
		c <- m
	}
	select {
	case h.reportc <- f: // not report: this one must not be dropped
	case <-h.done:
		return 0
	}
	select {
	case m := <-c:
		return m
	case <-h.done:
		return 0
	}
}
