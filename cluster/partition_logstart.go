package cluster

// The log start of a replicated partition (issue 13 part 2: retention and
// DeleteRecords applied on every replica alike).
//
// Only the leader decides (retention on its clock and its view of the
// sizes; DeleteRecords on the leader); it proposes a log-start command,
// the second kind of entry of a partition group beside the record
// batches, and every replica applies it at the same position of the log,
// so the log start is the same on every replica at every index. Applying
// it raises the log start (never lowers it), drops the index entries of
// the batches wholly below it (a batch straddling it stays, its first
// offsets unreadable, as in Kafka) and answers the new log start.
//
// Physical reclamation: the Raft entries below the log start are garbage,
// but the partition's state (next offset, producer state) depends on
// them. So each log-start command that moves the log start saves the
// state after it in a state row (key RaftStateKey(group, index), synced,
// at most once per such command), and the log is compacted only up to
// one of those indexes, A, once (1) every batch at or below A lies below
// the log start and (2) every voter's log matched A in the leader's view
// when the command was proposed (its matched field). (2) means no replica
// ever needs an entry at or below A again, so a group needs no data
// snapshot (a replica whose disk was wiped cannot catch up: Storage
// answers raft.ErrSnapshotTemporarilyUnavailable). The Host drops the
// entries up to A and the state rows below it in one batch; at restart it
// gives RestoreAt the index its log starts after, and replays the rest.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/vibemq/broker/pebblestore"
)

// Log-start command (format, version 1), 25 bytes, shorter than any
// record batch header (61) so it is never taken for a batch:
//
//	"VMQLSTRT" | version u8 (1) | offset i64 | matched u64
//
// offset: the new log start; matched: the index every voter's log had
// reached in the proposing leader's view (0: compact nothing).
const (
	logStartMarker      = "VMQLSTRT"
	logStartVersion     = 1
	logStartCommandSize = 25
)

// ErrInvalidCommand: a log-start command of another version or size (a
// newer broker proposed it); every replica refuses it alike.
var ErrInvalidCommand = errors.New("cluster: a log-start command of an unknown version or size; upgrade every broker of the cluster to the same version")

// LogStartCommand is the command that moves a replicated partition's log
// start to offset; matched is the index every voter's log has reached in
// the proposer's (leader's) view, which bounds the log compaction the
// command may cause.
func LogStartCommand(offset int64, matched uint64) []byte {
	b := append([]byte(logStartMarker), logStartVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(offset))
	return binary.BigEndian.AppendUint64(b, matched)
}

func isLogStartCommand(b []byte) bool {
	return len(b) < batchHeaderSize && bytes.HasPrefix(b, []byte(logStartMarker))
}

// applyLogStart applies a log-start command at e: the result is the log
// start after it. An offset above the log end is ErrOffsetOutOfRange (a
// leader checks it before proposing; the log only grows after).
func (l *PartitionLog) applyLogStart(e Entry) (uint64, error) {
	if len(e.Data) != logStartCommandSize || e.Data[len(logStartMarker)] != logStartVersion {
		return 0, ErrInvalidCommand
	}
	offset := int64(binary.BigEndian.Uint64(e.Data[9:]))
	matched := binary.BigEndian.Uint64(e.Data[17:])
	l.mu.Lock()
	if offset < 0 || offset > l.mu.next {
		next := l.mu.next
		l.mu.Unlock()
		return 0, fmt.Errorf("%w: cannot start the log at %d, it ends at %d", ErrOffsetOutOfRange, offset, next)
	}
	var row []byte
	if offset > l.mu.logStart {
		l.mu.logStart = offset
		k := 0
		for k < len(l.mu.batches) && l.batchEndLocked(k) <= offset {
			k++
		}
		if k > 0 {
			l.mu.batches = slices.Clone(l.mu.batches[k:])
		}
		row = l.encodeStateLocked()
	}
	l.mu.Unlock()
	// The row is synced outside the lock (readers go on); only the loop
	// goroutine applies, so nothing else changes the anchors meanwhile.
	if row != nil && l.store != nil {
		b := l.store.NewBatch()
		b.Set(pebblestore.RaftStateKey(l.group, e.Index), row)
		if b.Commit() == nil {
			l.mu.Lock()
			l.mu.anchors = append(l.mu.anchors, e.Index)
			l.mu.Unlock()
		}
		// A failed write only leaves this index out of the compaction
		// points: the state is the same on every replica either way.
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if to := l.compactionPointLocked(matched); to > l.mu.compactTo {
		l.mu.compactTo = to
		i := slices.Index(l.mu.anchors, to)
		l.mu.anchors = l.mu.anchors[i:]
	}
	return uint64(l.mu.logStart), nil
}

// batchEndLocked is the offset after batch i of the index.
func (l *PartitionLog) batchEndLocked(i int) int64 {
	if i+1 < len(l.mu.batches) {
		return l.mu.batches[i+1].base
	}
	return l.mu.next
}

// compactionPointLocked is the largest state row index the log may be
// compacted to given matched (every voter's log reached it): every batch
// at or below it lies below the log start. 0 when there is none.
func (l *PartitionLog) compactionPointLocked(matched uint64) uint64 {
	limit := matched
	if len(l.mu.batches) > 0 {
		limit = min(limit, l.mu.batches[0].raftIndex-1)
	}
	best := uint64(0)
	for _, a := range l.mu.anchors {
		if a <= limit {
			best = a
		}
	}
	return best
}

// CompactTo implements LogCompactor: the index up to which the Host may
// drop the group's log (a state row holds the state there).
func (l *PartitionLog) CompactTo() uint64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.compactTo
}

// CompactionPending reports whether a log-start command proposed with
// matched would let the log be compacted further than now (a leader
// proposes one even when the log start does not move).
func (l *PartitionLog) CompactionPending(matched uint64) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.compactionPointLocked(matched) > l.mu.compactTo
}

// LogStart is the log start offset: reads below it are out of range.
func (l *PartitionLog) LogStart() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.logStart
}

// BatchInfo is one batch of the index as retention sees it.
type BatchInfo struct {
	Base, Size, MaxTimestamp int64
}

// RetentionView is a copy of the index (the batches not wholly below the
// log start, oldest first), the high watermark and the log start.
func (l *PartitionLog) RetentionView() (batches []BatchInfo, highWatermark, logStart int64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	batches = make([]BatchInfo, len(l.mu.batches))
	for i, b := range l.mu.batches {
		batches[i] = BatchInfo{Base: b.base, Size: int64(b.size), MaxTimestamp: b.maxTs}
	}
	return batches, l.mu.next, l.mu.logStart
}

// State row (format, version 1), the partition's state after applying
// the entry of its index, producers sorted by ID:
//
//	version u8 (1) | next i64 | logStart i64 | producers u32 |
//	  per producer: id i64 | epoch i16 | batches u8 |
//	    per batch: firstSeq i32 | lastSeq i32 | base i64
const stateRowVersion = 1

func (l *PartitionLog) encodeStateLocked() []byte {
	b := []byte{stateRowVersion}
	b = binary.BigEndian.AppendUint64(b, uint64(l.mu.next))
	b = binary.BigEndian.AppendUint64(b, uint64(l.mu.logStart))
	ids := make([]int64, 0, len(l.mu.producers))
	for id := range l.mu.producers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	b = binary.BigEndian.AppendUint32(b, uint32(len(ids)))
	for _, id := range ids {
		st := l.mu.producers[id]
		b = binary.BigEndian.AppendUint64(b, uint64(id))
		b = binary.BigEndian.AppendUint16(b, uint16(st.epoch))
		b = append(b, byte(len(st.last)))
		for _, pb := range st.last {
			b = binary.BigEndian.AppendUint32(b, uint32(pb.firstSeq))
			b = binary.BigEndian.AppendUint32(b, uint32(pb.lastSeq))
			b = binary.BigEndian.AppendUint64(b, uint64(pb.base))
		}
	}
	return b
}

// RestoreAt implements LogCompactor: the group's log starts after index
// (compacted), so the state is the state row of index; the Host then
// applies the entries after it. Call before any Apply.
func (l *PartitionLog) RestoreAt(index uint64) error {
	v, err := l.store.Get(pebblestore.RaftStateKey(l.group, index))
	if err != nil {
		return fmt.Errorf("cluster: raft group %d: its log starts after %d but the state row there cannot be read: %w", l.group, index, err)
	}
	bad := func(what string) error {
		return fmt.Errorf("cluster: raft group %d: state row %d: %s: %w", l.group, index, what, pebblestore.ErrCorruption)
	}
	if len(v) < 21 || v[0] != stateRowVersion {
		return bad(fmt.Sprintf("%d bytes, want at least 21 of version %d", len(v), stateRowVersion))
	}
	next, start := int64(binary.BigEndian.Uint64(v[1:])), int64(binary.BigEndian.Uint64(v[9:]))
	n := binary.BigEndian.Uint32(v[17:])
	v = v[21:]
	producers := make(map[int64]*producerState, n)
	for range n {
		if len(v) < 11 {
			return bad("a producer cut short")
		}
		id, st := int64(binary.BigEndian.Uint64(v)), &producerState{epoch: int16(binary.BigEndian.Uint16(v[8:]))}
		k := int(v[10])
		v = v[11:]
		if k == 0 || k > producerBatches || len(v) < 16*k {
			return bad(fmt.Sprintf("producer %d with %d batches", id, k))
		}
		for range k {
			st.last = append(st.last, producerBatch{firstSeq: int32(binary.BigEndian.Uint32(v)),
				lastSeq: int32(binary.BigEndian.Uint32(v[4:])), base: int64(binary.BigEndian.Uint64(v[8:]))})
			v = v[16:]
		}
		producers[id] = st
	}
	if len(v) != 0 || start < 0 || start > next {
		return bad("trailing bytes or offsets out of order")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.next, l.mu.logStart, l.mu.producers = next, start, producers
	l.mu.batches = nil
	l.mu.anchors, l.mu.compactTo = []uint64{index}, index
	return nil
}
