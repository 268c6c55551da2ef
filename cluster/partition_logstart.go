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
// snapshot; a replica whose disk was wiped gets the row of A as its
// snapshot (host_compact.go). The Host drops the entries up to A and the
// state rows below it in one batch; at restart it gives RestoreAt the
// index its log starts after, and replays the rest.

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
		l.pruneAbortedLocked()
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
	return l.mu.batches[i].base + int64(l.mu.batches[i].lastDelta) + 1
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

// State row (format, version 3), the partition's state after applying
// the entry of its index, producers and ongoing transactions sorted by
// ID, aborted transactions by marker offset:
//
//	version u8 (3) | next i64 | logStart i64 | producers u32 |
//	  per producer: id i64 | epoch i16 | coordinatorEpoch i32 | batches u8 (0-5) |
//	    per batch: firstSeq i32 | lastSeq i32 | base i64
//	| ongoing u32 | per transaction: producer i64 | first offset i64
//	| aborted u32 | per transaction: producer i64 | first i64 | marker i64
//
// Version 2 (before the coordinator epoch) lacks coordinatorEpoch; version
// 1 (before transactions) also ends after the producers, each with at
// least one batch. Both still load, their producers with coordinator
// epoch -1 (unknown: any marker passes). Only version 3 is written.
const (
	stateRowVersion   = 3
	stateRowVersionV2 = 2
	stateRowVersionV1 = 1
)

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
		b = binary.BigEndian.AppendUint32(b, uint32(st.coordinatorEpoch))
		b = append(b, byte(len(st.last)))
		for _, pb := range st.last {
			b = binary.BigEndian.AppendUint32(b, uint32(pb.firstSeq))
			b = binary.BigEndian.AppendUint32(b, uint32(pb.lastSeq))
			b = binary.BigEndian.AppendUint64(b, uint64(pb.base))
		}
	}
	return l.encodeTxnsLocked(b)
}

// RestoreAt implements LogCompactor: the group's log starts after index
// (compacted, or replaced by a snapshot received), so the state is the
// state row of index, whatever was applied before; the Host then applies
// the entries after it. The waiters are woken (the high watermark moved).
func (l *PartitionLog) RestoreAt(index uint64) error {
	v, err := l.store.Get(pebblestore.RaftStateKey(l.group, index))
	if err != nil {
		return fmt.Errorf("cluster: raft group %d: its log starts after %d but the state row there cannot be read: %w", l.group, index, err)
	}
	st, what := decodeStateRow(v)
	if what != "" {
		return fmt.Errorf("cluster: raft group %d: state row %d: %s: %w", l.group, index, what, pebblestore.ErrCorruption)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.next, l.mu.logStart, l.mu.producers = st.next, st.logStart, st.producers
	l.mu.ongoing, l.mu.aborted = st.ongoing, st.aborted
	l.mu.batches = nil
	l.mu.anchors, l.mu.compactTo = []uint64{index}, index
	l.wakeLocked()
	return nil
}

// stateRow is a decoded state row.
type stateRow struct {
	next, logStart int64
	producers      map[int64]*producerState
	ongoing        map[int64]int64
	aborted        []AbortedTxn
}

// decodeStateRow decodes a state row of version 1, 2 or 3; what says what
// is wrong with it ("" when nothing).
func decodeStateRow(v []byte) (st stateRow, what string) {
	if len(v) < 21 || v[0] < stateRowVersionV1 || v[0] > stateRowVersion {
		return st, fmt.Sprintf("%d bytes, want at least 21 of version %d to %d", len(v), stateRowVersionV1, stateRowVersion)
	}
	version := v[0]
	st.next, st.logStart = int64(binary.BigEndian.Uint64(v[1:])), int64(binary.BigEndian.Uint64(v[9:]))
	n := binary.BigEndian.Uint32(v[17:])
	v = v[21:]
	producerBytes := 11 // id, epoch, batches
	if version == stateRowVersion {
		producerBytes = 15 // and the coordinator epoch
	}
	if uint64(n)*uint64(producerBytes) > uint64(len(v)) {
		// Checked before the map is sized by n (a corrupt count would
		// allocate gigabytes).
		return st, fmt.Sprintf("%d producers in %d bytes", n, len(v))
	}
	st.producers = make(map[int64]*producerState, n)
	for range n {
		if len(v) < producerBytes {
			return st, "a producer cut short"
		}
		id, ps := int64(binary.BigEndian.Uint64(v)), &producerState{epoch: int16(binary.BigEndian.Uint16(v[8:])), coordinatorEpoch: noCoordinatorEpoch, lastTimestamp: -1}
		if version == stateRowVersion {
			ps.coordinatorEpoch = int32(binary.BigEndian.Uint32(v[10:]))
		}
		k := int(v[producerBytes-1])
		v = v[producerBytes:]
		if (k == 0 && version == stateRowVersionV1) || k > producerBatches || len(v) < 16*k {
			return st, fmt.Sprintf("producer %d with %d batches", id, k)
		}
		for range k {
			ps.last = append(ps.last, producerBatch{firstSeq: int32(binary.BigEndian.Uint32(v)),
				lastSeq: int32(binary.BigEndian.Uint32(v[4:])), base: int64(binary.BigEndian.Uint64(v[8:]))})
			v = v[16:]
		}
		st.producers[id] = ps
	}
	st.ongoing = map[int64]int64{}
	if version >= stateRowVersionV2 {
		if v, what = decodeTxns(v, &st); what != "" {
			return st, what
		}
	}
	if len(v) != 0 || st.logStart < 0 || st.logStart > st.next {
		return st, "trailing bytes or offsets out of order"
	}
	return st, ""
}
