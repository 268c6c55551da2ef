package cluster

// Compaction of a replicated partition (cleanup.policy=compact; issue 13
// part 2). Kafka's cleaner runs on each replica on its own; here the
// leader decides and every replica applies the same compaction command at
// the same log position, so the replicas stay byte-identical (for one
// broker version: a recompressed batch is as the codec library writes it).
//
// The command names the clean range end (an offset the leader chose at
// or below the high watermark, the last stable offset and the
// min.compaction.lag.ms bound; applying clamps it to the last stable
// offset and to the base of the last indexed batch, which is never
// compacted, as Kafka never cleans the active segment: so an indexed
// batch follows every batch compaction emptied, and a fetch in the gap
// it leaves gets that batch, never nothing below the high watermark), the
// leader's clock and delete.retention.ms. Applying it reads the indexed
// batches wholly inside [log start, end) from the Raft log and keeps, as
// topics/compaction.go does on a local partition:
//
//   - the latest record of every key in the range; keyless records and
//     the batches of aborted transactions go (Kafka
//     LogCleaner.shouldDiscardBatch);
//   - a tombstone until its batch's delete horizon (KIP-534: the first
//     command that keeps it stamps the batch with now + delete.retention.ms,
//     at least now + 1; a later command whose now is at or past the stamp
//     drops it);
//   - every control batch (a deviation from Kafka, which removes markers
//     once their transaction's data is gone: the markers' bytes are small
//     and keeping them keeps the replay rule below simple).
//
// A batch that loses records is rewritten in place, in its Raft entry
// (the 16-byte envelope kept): base offset, last offset delta, producer
// ID, epoch, base sequence and attributes as Kafka's cleaner keeps them
// (topics.EncodeBatch), so applying the rewritten entry again (a replay
// after a restart, or a follower catching up from the leader's entries)
// gives the same next offset, producer and transaction state: Apply reads
// only the header for those. A batch left without records stays as an
// empty batch (Kafka keeps such batches for the producer state too) and
// leaves the index: reads skip it.
//
// Why rewriting committed entries in place is sound: an entry is rewritten
// only once committed and applied here (Raft never truncates it, and only
// compares terms of entries it holds); a follower receives either version,
// and both apply to the same state. A replay applies a command over data a
// later command may have compacted already: that data holds at most one
// record per key in the range, no keyless or aborted record, and every
// batch holding a tombstone the command kept carries the stamp the command
// (or an earlier one) set, which the command's own now does not pass; so
// the command keeps all of it, the replay is a no-op, and the index comes
// out as the live one (sizes and max timestamps taken from the rewritten
// headers). A command reads the range twice (the key map, then the
// rewrite), one batch at a time, and writes its rewrites in Pebble
// batches of a few MiB: a crash between two replays the command over a
// range partly rewritten, which decides the same (a rewritten batch keeps
// the latest record of every key and its stamp). Memory: the key map
// (every key of the range, as Kafka's offset map but unbounded) and one
// chunk.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/vibemq/broker/pebblestore"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Compaction command (format, version 1), 33 bytes, shorter than any
// record batch header (61) so it is never taken for a batch:
//
//	"VMQCMPCT" | version u8 (1) | end i64 | now i64 (ms) | deleteRetention i64 (ms)
const (
	compactMarker      = "VMQCMPCT"
	compactVersion     = 1
	compactCommandSize = 33
)

// CompactionCommand is the command that compacts a replicated partition's
// log in [log start, end) at the proposer's time nowMs with the topic's
// delete.retention.ms.
func CompactionCommand(end, nowMs, deleteRetentionMs int64) []byte {
	b := append([]byte(compactMarker), compactVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(end))
	b = binary.BigEndian.AppendUint64(b, uint64(nowMs))
	return binary.BigEndian.AppendUint64(b, uint64(deleteRetentionMs))
}

func isCompactionCommand(b []byte) bool {
	return len(b) < batchHeaderSize && bytes.HasPrefix(b, []byte(compactMarker))
}

// Compactor decides the compaction of a clean range
// (topics.ReplicatedCompactor; cmd/broker wires it, so this package knows
// no record format beyond the batch header). Batches are whole v2
// batches, base offsets set; aborted reports whether a transactional
// data batch of producer pid at base offset is in an aborted
// transaction. Map adds a batch's keyed records to latest (key -> latest
// offset); Clean is a batch after compaction at nowMs (new bytes, nil
// when unchanged) and its delete horizon when it keeps a tombstone (the
// one it had, or horizon), else -1. Both must be deterministic.
type Compactor interface {
	Map(batch []byte, aborted func(pid, base int64) bool, latest map[string]int64) error
	Clean(batch []byte, aborted func(pid, base int64) bool, latest map[string]int64, nowMs, horizon int64) ([]byte, int64, error)
}

// ErrNoCompactor: a compaction command applied by a PartitionLog built
// without a Compactor (a programming error: every replica has one).
var ErrNoCompactor = errors.New("cluster: a compaction command on a partition log without a compactor")

// applyCompaction applies a compaction command at e: the result is the
// clean range end it applied (clamped).
func (l *PartitionLog) applyCompaction(e Entry) (uint64, error) {
	if len(e.Data) != compactCommandSize || e.Data[len(compactMarker)] != compactVersion {
		return 0, ErrInvalidCommand
	}
	if l.compact == nil {
		return 0, ErrNoCompactor
	}
	end := int64(binary.BigEndian.Uint64(e.Data[9:]))
	nowMs := int64(binary.BigEndian.Uint64(e.Data[17:]))
	horizon := nowMs + max(int64(binary.BigEndian.Uint64(e.Data[25:])), 1)
	if horizon < nowMs {
		horizon = math.MaxInt64
	}
	l.mu.RLock()
	end = min(end, l.lastStableLocked())
	if n := len(l.mu.batches); n > 0 {
		end = min(end, l.mu.batches[n-1].base)
	}
	var in []indexedBatch
	for i, b := range l.mu.batches {
		if l.batchEndLocked(i) > end {
			break
		}
		in = append(in, b)
	}
	aborted := slices.Clone(l.mu.aborted)
	l.mu.RUnlock()
	// Only the loop goroutine applies, so the index does not change until
	// the update below; readers go on meanwhile.
	isAborted := func(pid, base int64) bool {
		return slices.ContainsFunc(aborted, func(a AbortedTxn) bool {
			return a.ProducerID == pid && a.FirstOffset <= base && base < a.LastOffset
		})
	}
	latest := map[string]int64{}
	for _, b := range in {
		_, raw, err := l.readBatch(b)
		if err != nil {
			return 0, err
		}
		if err := l.compact.Map(raw, isAborted, latest); err != nil {
			return 0, fmt.Errorf("cluster: raft group %d: compact: %w", l.group, err)
		}
	}
	updated, minHorizon, err := l.rewriteRange(in, isAborted, latest, nowMs, horizon)
	if err != nil {
		return 0, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(updated) > 0 {
		kept := make([]indexedBatch, 0, len(l.mu.batches))
		for _, b := range l.mu.batches {
			if u, ok := updated[b.base]; ok {
				b = u
			}
			if b.size >= 0 {
				kept = append(kept, b)
			}
		}
		l.mu.batches = kept
	}
	l.mu.cleanEnd = max(l.mu.cleanEnd, end)
	l.mu.tombstoneHorizon = minHorizon
	return uint64(end), nil
}

// lastStableLocked is LastStableOffset. REQUIRES: l.mu held.
func (l *PartitionLog) lastStableLocked() int64 {
	lso := l.mu.next
	for _, first := range l.mu.ongoing {
		lso = min(lso, first)
	}
	return max(lso, l.mu.logStart)
}

// readBatch reads the Raft entry of batch b and the batch in it, its
// base offset set.
func (l *PartitionLog) readBatch(b indexedBatch) (*raftpb.Entry, []byte, error) {
	v, err := l.store.Get(pebblestore.RaftEntryKey(l.group, b.raftIndex))
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: raft group %d: read the entry %d of offset %d: %w", l.group, b.raftIndex, b.base, err)
	}
	ent := &raftpb.Entry{}
	if err := proto.Unmarshal(v, ent); err != nil || len(ent.GetData()) < 16+batchHeaderSize {
		return nil, nil, fmt.Errorf("cluster: raft group %d: decode the entry %d of offset %d: %w", l.group, b.raftIndex, b.base, pebblestore.ErrCorruption)
	}
	raw := slices.Clone(ent.GetData()[16:])
	binary.BigEndian.PutUint64(raw, uint64(b.base)) // outside the CRC
	return ent, raw, nil
}

// compactChunk is how many bytes of rewritten entries one Pebble batch
// of a compaction command holds at most (plus one entry).
const compactChunk = 4 << 20

// rewriteRange cleans the batches in (the second pass) and writes the
// rewritten ones into their entries (the envelope kept), in Pebble
// batches of about compactChunk bytes: a crash between two leaves part
// of the range rewritten, and the replay of the command decides the same
// over it (the rewritten batches keep the latest record of every key).
// It returns the index entries to update by base offset (size -1 for
// one left empty) and the earliest delete horizon of a batch keeping a
// tombstone (-1: none).
func (l *PartitionLog) rewriteRange(in []indexedBatch, aborted func(pid, base int64) bool, latest map[string]int64, nowMs, horizon int64) (map[int64]indexedBatch, int64, error) {
	updated := make(map[int64]indexedBatch)
	minHorizon := int64(-1)
	wb, pending := l.store.NewBatch(), 0
	for _, b := range in {
		ent, raw, err := l.readBatch(b)
		if err != nil {
			return nil, -1, err
		}
		nb, bh, err := l.compact.Clean(raw, aborted, latest, nowMs, horizon)
		if err != nil {
			return nil, -1, fmt.Errorf("cluster: raft group %d: compact: %w", l.group, err)
		}
		if bh >= 0 && (minHorizon < 0 || bh < minHorizon) {
			minHorizon = bh
		}
		if nb == nil {
			continue
		}
		if len(nb) < batchHeaderSize {
			return nil, -1, fmt.Errorf("cluster: raft group %d: the compactor rewrote the batch of offset %d to %d bytes", l.group, b.base, len(nb))
		}
		ent.Data = append(slices.Clone(ent.Data[:16]), nb...)
		if err := setProto(wb, pebblestore.RaftEntryKey(l.group, b.raftIndex), ent); err != nil {
			return nil, -1, err
		}
		u := b
		u.maxTs, u.size = int64(binary.BigEndian.Uint64(nb[batchMaxTsAt:])), int32(len(nb))
		if binary.BigEndian.Uint32(nb[batchRecordsAt:]) == 0 {
			u.size = -1
		}
		updated[u.base] = u
		if pending += len(nb); pending >= compactChunk {
			if err := wb.Commit(); err != nil {
				return nil, -1, fmt.Errorf("cluster: raft group %d: write the compacted batches: %w", l.group, err)
			}
			wb, pending = l.store.NewBatch(), 0
		}
	}
	if pending == 0 {
		wb.Close()
	} else if err := wb.Commit(); err != nil {
		return nil, -1, fmt.Errorf("cluster: raft group %d: write the compacted batches: %w", l.group, err)
	}
	return updated, minHorizon, nil
}

// CleanEnd is the largest clean range end a compaction command applied
// since this process started (0 before): the leader compacts again once
// the cleanable end passes it.
func (l *PartitionLog) CleanEnd() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.cleanEnd
}

// TombstoneHorizon is the earliest delete horizon of a batch keeping a
// tombstone as the last compaction command left them (-1: none): the
// leader compacts again once it passes. An in-memory hint, like CleanEnd.
func (l *PartitionLog) TombstoneHorizon() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.tombstoneHorizon
}

// Bytes is the size of the indexed batches (those a read may return).
func (l *PartitionLog) Bytes() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	n := int64(0)
	for _, b := range l.mu.batches {
		n += int64(b.size)
	}
	return n
}
