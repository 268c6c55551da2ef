package cluster

import (
	"fmt"

	"github.com/vibemq/broker/pebblestore"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
)

// LogCompactor is a GroupStateMachine whose log the Host may compact
// without a Raft snapshot (a partition log: partition_logstart.go). The
// state machine saves its state at some applied indexes (state rows,
// pebblestore.RaftStateKey) and names the one the log may be dropped up
// to; no voter may need an entry at or below it again (every voter's
// log reached it), since host groups send no snapshots.
type LogCompactor interface {
	// CompactTo is the applied index up to which the log may be dropped
	// (0: none); the state row of that index holds the state after it.
	CompactTo() uint64
	// RestoreAt loads the state row of index, where the group's log was
	// compacted to, before the entries after it are applied.
	RestoreAt(index uint64) error
}

// restoreCompacted prepares a group whose saved log was compacted: the
// state machine restores the state row where the log starts, and Raft
// gets the voters from the group's static membership (the configuration
// entries were compacted with the rest; there is no snapshot to carry
// it).
func restoreCompacted(st *Storage, a *addGroup) error {
	if st.truncatedIndex == 0 {
		return nil
	}
	lc, ok := a.sm.(LogCompactor)
	if !ok {
		return fmt.Errorf("cluster: raft group %d: its log was compacted to %d but its state machine cannot restore a state row: %w", a.group, st.truncatedIndex, pebblestore.ErrCorruption)
	}
	if err := lc.RestoreAt(st.truncatedIndex); err != nil {
		return err
	}
	st.confState = &raftpb.ConfState{Voters: a.voters}
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

// errNoSnapshot is Storage.Snapshot's answer for a log compacted without
// a snapshot (host groups): raft then retries later instead of sending one.
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
