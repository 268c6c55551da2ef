package cluster

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/vibemq/broker/pebblestore"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Storage is one Raft group's log, hard state and snapshot on the broker's
// Pebble store (keys 0x70 in pebblestore/keys.go). It implements
// raft.Storage for the reads of the Raft core and Save for the writes of
// the Ready loop.
//
// Ownership: the node's goroutine is the only caller of every method (the
// node drives a raft.RawNode, which calls Storage from that goroutine), so
// the cached indexes need no lock. Opening for inspection (tests, status
// tools) reads through a fresh Storage.
type Storage struct {
	store *pebblestore.Store
	group uint64

	hardState *raftpb.HardState
	snapshot  *raftpb.Snapshot
	// truncatedIndex and truncatedTerm name the last entry removed from
	// the log (by compaction or a snapshot): the log holds exactly the
	// entries (truncatedIndex, lastIndex].
	truncatedIndex, truncatedTerm uint64
	lastIndex                     uint64
	// terms: the terms of the entries appended since the storage was
	// opened, one run per term (termRun), covering [terms[0].first,
	// lastIndex], so that Term, which Raft asks on every append and
	// append response, does not read and decode a whole entry (1 MiB for
	// a full Kafka batch). Older indexes are read from the store. Copies
	// of a Storage (stage) share the backing array: a truncation copies
	// it (addEntries), an append only writes past every copy's length.
	terms []termRun
	// static is the configuration of a host group (its voters, fixed;
	// nil for the metadata group): its log is compacted to a state row
	// rather than to a Raft snapshot, and that row is the snapshot it
	// sends and receives (host_compact.go).
	static *raftpb.ConfState
}

// termRun: the entries from index first on (up to the next run's first,
// or the last index) have term term.
type termRun struct{ first, term uint64 }

// OpenStorage reads the Raft state of group from store.
func OpenStorage(store *pebblestore.Store, group uint64) (*Storage, error) {
	s := &Storage{store: store, group: group, hardState: &raftpb.HardState{}, snapshot: emptySnapshot()}
	if err := s.loadProto(pebblestore.RaftKindHardState, s.hardState); err != nil {
		return nil, err
	}
	if err := s.loadProto(pebblestore.RaftKindSnapshot, s.snapshot); err != nil {
		return nil, err
	}
	s.snapshot = raftpb.EnsureSnapshot(s.snapshot)
	v, err := store.Get(pebblestore.RaftKey(group, pebblestore.RaftKindTruncated))
	switch {
	case errors.Is(err, pebblestore.ErrNotFound):
	case err != nil:
		return nil, fmt.Errorf("cluster: read the truncated state of raft group %d: %w", group, err)
	case len(v) != 16:
		return nil, fmt.Errorf("cluster: truncated state of raft group %d has %d bytes, want 16: %w", group, len(v), pebblestore.ErrCorruption)
	default:
		s.truncatedIndex, s.truncatedTerm = binary.BigEndian.Uint64(v), binary.BigEndian.Uint64(v[8:])
	}
	last, err := s.readLastIndex()
	if err != nil {
		return nil, err
	}
	s.lastIndex = max(last, s.truncatedIndex)
	return s, nil
}

// Incarnation returns the incarnation of group in store, choosing and
// saving one (synced) when there is none: a data directory wiped and
// started again has a new incarnation, which the transport announces to
// the peers, so that a leader does not keep believing the node still has
// the entries it lost.
func Incarnation(store *pebblestore.Store, group uint64) (uint64, error) {
	key := pebblestore.RaftKey(group, pebblestore.RaftKindIncarnation)
	v, err := store.Get(key)
	switch {
	case err == nil && len(v) == 8:
		return binary.BigEndian.Uint64(v), nil
	case err == nil:
		return 0, fmt.Errorf("cluster: incarnation of raft group %d has %d bytes, want 8: %w", group, len(v), pebblestore.ErrCorruption)
	case !errors.Is(err, pebblestore.ErrNotFound):
		return 0, err
	}
	inc := rand.Uint64() | 1 // never 0, which means "not known"
	b := store.NewBatch()
	b.Set(key, binary.BigEndian.AppendUint64(nil, inc))
	if err := b.Commit(); err != nil {
		return 0, fmt.Errorf("cluster: save the incarnation of raft group %d: %w", group, err)
	}
	return inc, nil
}

func emptySnapshot() *raftpb.Snapshot { return raftpb.EnsureSnapshot(nil) }

// loadProto decodes the row of kind into m; a missing row leaves m as it is.
func (s *Storage) loadProto(kind byte, m proto.Message) error {
	v, err := s.store.Get(pebblestore.RaftKey(s.group, kind))
	if errors.Is(err, pebblestore.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cluster: read raft group %d row %#x: %w", s.group, kind, err)
	}
	if err := proto.Unmarshal(v, m); err != nil {
		return fmt.Errorf("cluster: decode raft group %d row %#x: %v: %w", s.group, kind, err, pebblestore.ErrCorruption)
	}
	return nil
}

func (s *Storage) readLastIndex() (uint64, error) {
	lower := pebblestore.RaftKey(s.group, pebblestore.RaftKindEntry)
	it, err := s.store.NewIter(lower, pebblestore.PrefixEnd(lower))
	if err != nil {
		return 0, err
	}
	defer it.Close()
	if !it.Last() {
		return 0, it.Close()
	}
	return pebblestore.RaftIndexFromKey(it.Key()), it.Close()
}

// InitialState implements raft.Storage: the saved hard state and the
// configuration of the latest snapshot. Configuration changes after the
// snapshot are in the log, and the node applies them again on restart.
func (s *Storage) InitialState() (*raftpb.HardState, *raftpb.ConfState, error) {
	if s.static != nil && s.truncatedIndex > 0 && raft.IsEmptySnap(s.snapshot) {
		return proto.Clone(s.hardState).(*raftpb.HardState), proto.Clone(s.static).(*raftpb.ConfState), nil
	}
	return proto.Clone(s.hardState).(*raftpb.HardState), raftpb.EnsureConfState(proto.Clone(s.snapshot.GetMetadata().GetConfState()).(*raftpb.ConfState)), nil
}

// Entries implements raft.Storage: the entries [lo, hi), at most maxSize
// bytes of them but at least one.
func (s *Storage) Entries(lo, hi, maxSize uint64) ([]*raftpb.Entry, error) {
	if lo <= s.truncatedIndex {
		return nil, raft.ErrCompacted
	}
	if hi > s.lastIndex+1 || lo > hi {
		return nil, fmt.Errorf("cluster: raft group %d: entries [%d, %d) asked, the log ends at %d", s.group, lo, hi, s.lastIndex)
	}
	if lo == hi {
		return nil, nil
	}
	it, err := s.store.NewIter(pebblestore.RaftEntryKey(s.group, lo), pebblestore.RaftEntryKey(s.group, hi))
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []*raftpb.Entry
	var size uint64
	want := lo
	for ok := it.First(); ok; ok = it.Next() {
		if pebblestore.RaftIndexFromKey(it.Key()) != want {
			return nil, raft.ErrUnavailable
		}
		v, err := it.Value()
		if err != nil {
			return nil, err
		}
		e := &raftpb.Entry{}
		if err := proto.Unmarshal(v, e); err != nil {
			return nil, fmt.Errorf("cluster: decode raft group %d entry %d: %v: %w", s.group, want, err, pebblestore.ErrCorruption)
		}
		size += uint64(len(v))
		if len(out) > 0 && size > maxSize {
			break
		}
		out = append(out, e)
		want++
	}
	if err := it.Close(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, raft.ErrUnavailable
	}
	return out, nil
}

// Term implements raft.Storage.
func (s *Storage) Term(i uint64) (uint64, error) {
	switch {
	case i < s.truncatedIndex:
		return 0, raft.ErrCompacted
	case i == s.truncatedIndex:
		return s.truncatedTerm, nil
	case i > s.lastIndex:
		return 0, raft.ErrUnavailable
	}
	if n := len(s.terms); n > 0 && i >= s.terms[0].first {
		k, _ := slices.BinarySearchFunc(s.terms, i, func(r termRun, i uint64) int { return cmp.Compare(r.first, i+1) })
		return s.terms[k-1].term, nil // k >= 1: terms[0].first <= i
	}
	e, err := s.entry(i)
	if err != nil {
		return 0, err
	}
	return e.GetTerm(), nil
}

func (s *Storage) entry(i uint64) (*raftpb.Entry, error) {
	v, err := s.store.Get(pebblestore.RaftEntryKey(s.group, i))
	if errors.Is(err, pebblestore.ErrNotFound) {
		return nil, fmt.Errorf("cluster: raft group %d has no entry %d inside its log (%d, %d]: %w", s.group, i, s.truncatedIndex, s.lastIndex, pebblestore.ErrCorruption)
	}
	if err != nil {
		return nil, err
	}
	e := &raftpb.Entry{}
	if err := proto.Unmarshal(v, e); err != nil {
		return nil, fmt.Errorf("cluster: decode raft group %d entry %d: %v: %w", s.group, i, err, pebblestore.ErrCorruption)
	}
	return e, nil
}

// LastIndex implements raft.Storage.
func (s *Storage) LastIndex() (uint64, error) { return s.lastIndex, nil }

// FirstIndex implements raft.Storage.
func (s *Storage) FirstIndex() (uint64, error) { return s.truncatedIndex + 1, nil }

// Snapshot implements raft.Storage: the latest snapshot, taken by this node
// or received from the leader; for a host group, the state row its log
// was compacted to (stateSnapshot).
func (s *Storage) Snapshot() (*raftpb.Snapshot, error) {
	if s.static != nil {
		return s.stateSnapshot()
	}
	if s.truncatedIndex > 0 && raft.IsEmptySnap(s.snapshot) {
		return nil, errNoSnapshot
	}
	return proto.Clone(s.snapshot).(*raftpb.Snapshot), nil
}

// HardState is the saved hard state.
func (s *Storage) HardState() *raftpb.HardState {
	return proto.Clone(s.hardState).(*raftpb.HardState)
}

// Save makes one Ready's state durable in one synced Pebble batch (group
// commit with every other writer of the store): a received snapshot
// first (it replaces the whole log), then the entries (overwriting any
// saved entries at or above the first one), then the hard state. Raft's
// contract: all of it is durable before the Ready's messages are sent.
func (s *Storage) Save(hs *raftpb.HardState, entries []*raftpb.Entry, snap *raftpb.Snapshot) error {
	b := s.store.NewBatch()
	next, err := s.stage(b, hs, entries, snap)
	if err != nil {
		b.Close()
		return err
	}
	if b.Empty() {
		b.Close()
		return nil
	}
	if err := b.Commit(); err != nil {
		return fmt.Errorf("cluster: save raft group %d: %w", s.group, err)
	}
	*s = next
	return nil
}

// stage adds one Ready's state to b (as Save writes it) and returns the
// storage's cached state as it will be once b is durable; the caller
// commits b (synced) and only then replaces *s with it. The Host stages
// the Readies of many groups in one batch this way.
func (s *Storage) stage(b *pebblestore.Batch, hs *raftpb.HardState, entries []*raftpb.Entry, snap *raftpb.Snapshot) (Storage, error) {
	next := *s // the cached state once the batch is durable
	switch {
	case raft.IsEmptySnap(snap):
	case s.static != nil:
		if err := next.addStateSnapshot(b, snap); err != nil {
			return next, err
		}
	default:
		if err := next.addSnapshot(b, snap); err != nil {
			return next, err
		}
	}
	if err := next.addEntries(b, entries); err != nil {
		return next, err
	}
	if !raft.IsEmptyHardState(hs) {
		if err := setProto(b, pebblestore.RaftKey(s.group, pebblestore.RaftKindHardState), hs); err != nil {
			return next, err
		}
		next.hardState = proto.Clone(hs).(*raftpb.HardState)
	}
	return next, nil
}

// addSnapshot adds a received snapshot to b: it replaces the log.
func (s *Storage) addSnapshot(b *pebblestore.Batch, snap *raftpb.Snapshot) error {
	index, term := snap.GetMetadata().GetIndex(), snap.GetMetadata().GetTerm()
	if index <= s.snapshot.GetMetadata().GetIndex() {
		return fmt.Errorf("cluster: raft group %d: snapshot at %d is not newer than the saved one at %d: %w", s.group, index, s.snapshot.GetMetadata().GetIndex(), raft.ErrSnapOutOfDate)
	}
	if err := setProto(b, pebblestore.RaftKey(s.group, pebblestore.RaftKindSnapshot), snap); err != nil {
		return err
	}
	s.deleteEntriesFrom(b, 0)
	s.terms = nil
	s.setTruncated(b, index, term)
	s.snapshot = proto.Clone(snap).(*raftpb.Snapshot)
	s.lastIndex = index
	return nil
}

// addEntries adds entries to b, deleting the saved entries they replace.
func (s *Storage) addEntries(b *pebblestore.Batch, entries []*raftpb.Entry) error {
	if len(entries) > 0 && entries[0].GetIndex() <= s.truncatedIndex {
		skip := s.truncatedIndex + 1 - entries[0].GetIndex()
		entries = entries[min(skip, uint64(len(entries))):]
	}
	if len(entries) == 0 {
		return nil
	}
	first := entries[0].GetIndex()
	if first > s.lastIndex+1 {
		return fmt.Errorf("cluster: raft group %d: entry %d would leave a hole after the last entry %d", s.group, first, s.lastIndex)
	}
	if first <= s.lastIndex {
		s.deleteEntriesFrom(b, first)
	}
	s.truncateTerms(first)
	for i, e := range entries {
		if e.GetIndex() != first+uint64(i) {
			return fmt.Errorf("cluster: raft group %d: entries not contiguous at %d", s.group, e.GetIndex())
		}
		if err := setProto(b, pebblestore.RaftEntryKey(s.group, e.GetIndex()), e); err != nil {
			return err
		}
		if n := len(s.terms); n == 0 || s.terms[n-1].term != e.GetTerm() {
			s.terms = append(s.terms, termRun{first: e.GetIndex(), term: e.GetTerm()})
		}
	}
	s.lastIndex = entries[len(entries)-1].GetIndex()
	return nil
}

// truncateTerms drops the term runs of the entries at or above first
// (about to be replaced), on a copy of the runs when any is dropped.
func (s *Storage) truncateTerms(first uint64) {
	if len(s.terms) == 0 || first > s.lastIndex {
		return
	}
	if first <= s.terms[0].first {
		s.terms = nil
		return
	}
	k, _ := slices.BinarySearchFunc(s.terms, first, func(r termRun, i uint64) int { return cmp.Compare(r.first, i) })
	s.terms = slices.Clone(s.terms[:k])
}

// deleteEntriesFrom deletes every saved entry at or above index.
func (s *Storage) deleteEntriesFrom(b *pebblestore.Batch, index uint64) {
	kind := pebblestore.RaftKey(s.group, pebblestore.RaftKindEntry)
	b.DeleteRange(pebblestore.RaftEntryKey(s.group, index), pebblestore.PrefixEnd(kind))
}

func (s *Storage) setTruncated(b *pebblestore.Batch, index, term uint64) {
	v := binary.BigEndian.AppendUint64(nil, index)
	b.Set(pebblestore.RaftKey(s.group, pebblestore.RaftKindTruncated), binary.BigEndian.AppendUint64(v, term))
	s.truncatedIndex, s.truncatedTerm = index, term
}

func setProto(b *pebblestore.Batch, key []byte, m proto.Message) error {
	v, err := proto.Marshal(m)
	if err != nil {
		return fmt.Errorf("cluster: encode %T: %w", m, err)
	}
	b.Set(key, v)
	return nil
}

// CreateSnapshot saves a snapshot of the state machine at applied index i
// (with the configuration cs in force there) and removes the log entries
// up to compactTo (<= i; entries between stay for followers a little
// behind), in one synced batch.
func (s *Storage) CreateSnapshot(i uint64, cs *raftpb.ConfState, data []byte, compactTo uint64) error {
	if i <= s.snapshot.GetMetadata().GetIndex() {
		return raft.ErrSnapOutOfDate
	}
	if i > s.lastIndex || compactTo > i {
		return fmt.Errorf("cluster: raft group %d: snapshot at %d (compacting to %d) beyond the last entry %d", s.group, i, compactTo, s.lastIndex)
	}
	term, err := s.Term(i)
	if err != nil {
		return err
	}
	snap := &raftpb.Snapshot{Data: data, Metadata: &raftpb.SnapshotMetadata{Index: new(i), Term: new(term), ConfState: proto.Clone(cs).(*raftpb.ConfState)}}
	b := s.store.NewBatch()
	next := *s
	if err := setProto(b, pebblestore.RaftKey(s.group, pebblestore.RaftKindSnapshot), snap); err != nil {
		b.Close()
		return err
	}
	next.snapshot = snap
	if compactTo > s.truncatedIndex {
		compactTerm, err := s.Term(compactTo)
		if err != nil {
			b.Close()
			return err
		}
		b.DeleteRange(pebblestore.RaftEntryKey(s.group, 0), pebblestore.RaftEntryKey(s.group, compactTo+1))
		next.setTruncated(b, compactTo, compactTerm)
	}
	if err := b.Commit(); err != nil {
		return fmt.Errorf("cluster: save the snapshot of raft group %d: %w", s.group, err)
	}
	*s = next
	return nil
}
