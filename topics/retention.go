package topics

import (
	"fmt"
	"time"

	"github.com/vibemq/broker/pebblestore"
)

// Retention (cleanup.policy=delete) deletes whole segments from the oldest,
// as Kafka's UnifiedLog.deleteOldSegments does:
//
//   - by time: a segment whose largest timestamp is more than retention.ms
//     before now;
//   - by size: while the partition minus the segment still holds at least
//     retention.bytes;
//   - below the log start: a segment that ends at or below the log start
//     offset (DeleteRecords moved it), whatever the policy.
//
// Each rule deletes a prefix of the segments and stops at the first segment
// that does not qualify; a segment is deleted only if every offset in it is
// below the high watermark, so the log start never passes it. The active
// segment is deleted too when it qualifies (Kafka rolls it first): the log
// then becomes empty with its start at the log end offset, and the next
// append opens a new segment at that offset.
//
// The log start moves to the first remaining offset; ListOffsets EARLIEST
// follows it and fetches below it get OFFSET_OUT_OF_RANGE. The batches,
// index rows and segment rows below are removed with range deletions in the
// same Pebble batch as the new state row; the store then compacts the
// deleted ranges in the background to reclaim the space (pebblestore
// Store.Reclaim).

// RetentionResult reports what one EnforceRetention call did.
type RetentionResult struct {
	// Trimmed lists the partitions whose segments were deleted.
	Trimmed []PartitionTrim
	// Partitions, Segments, Bytes and Records sum Trimmed.
	Partitions int
	Segments   int
	Bytes      int64
	Records    int64
	// Pending reports that the per-call bound stopped the call before every
	// partition was looked at: call again.
	Pending bool
	// Err is the first error met; the other partitions were still handled.
	Err error
}

// EnforceRetention applies retention to every partition at time now,
// trimming at most Config.RetentionDeletionsPerCall partitions.
func (m *Manager) EnforceRetention(now time.Time) RetentionResult {
	var res RetentionResult
	nowMs := now.UnixMilli()
	for _, t := range m.Topics() {
		for _, p := range t.Partitions() {
			if res.Partitions >= m.cfg.RetentionDeletionsPerCall {
				res.Pending = true
				return res
			}
			trim, err := p.enforceRetention(nowMs)
			if err != nil {
				if res.Err == nil {
					res.Err = err
				}
				m.log.Error().Err(err).Str("topic", t.Name).Int32("partition", p.Index).Msg("retention failed")
				continue
			}
			if trim.Segments == 0 {
				continue
			}
			res.Trimmed = append(res.Trimmed, trim)
			res.Partitions++
			res.Segments += trim.Segments
			res.Bytes += trim.Bytes
			res.Records += trim.Records
			m.log.Debug().Str("topic", t.Name).Int32("partition", p.Index).Int("segments", trim.Segments).
				Int64("bytes", trim.Bytes).Int64("log_start_offset", trim.LogStartOffset).Msg("retention deleted segments")
		}
	}
	return res
}

// PartitionTrim is what retention deleted from one partition.
type PartitionTrim struct {
	Topic     string
	Partition int32
	Segments  int
	Bytes     int64
	Records   int64
	// LogStartOffset is the log start after the deletion.
	LogStartOffset int64
}

// logBounds are a partition's offsets as retention sees them: its log end
// offset (the next offset), high watermark and log start offset.
type logBounds struct {
	leo, hwm, logStart int64
}

// retentionPrefix returns how many of the oldest segments retention deletes
// (see the comment at the top of this file). segs are the partition's
// segments oldest first.
func retentionPrefix(segs []segment, bounds logBounds, nowMs int64, s *topicSettings) int {
	leo, hwm, logStart := bounds.leo, bounds.hwm, bounds.logStart
	upper := func(i int) int64 {
		if i+1 < len(segs) {
			return segs[i+1].Base
		}
		return leo
	}
	var byStart, byTime, bySize int
	for i := range segs {
		if upper(i) > logStart {
			break
		}
		byStart = i + 1
	}
	if s.delete && s.retentionMs >= 0 {
		for i := range segs {
			if upper(i) > hwm || nowMs-segs[i].MaxTimestamp <= s.retentionMs {
				break
			}
			byTime = i + 1
		}
	}
	if s.delete && s.retentionBytes >= 0 {
		var total int64
		for _, seg := range segs {
			total += seg.Size
		}
		diff := total - s.retentionBytes
		for i := range segs {
			if upper(i) > hwm || diff-segs[i].Size < 0 {
				break
			}
			diff -= segs[i].Size
			bySize = i + 1
		}
	}
	return max(byStart, byTime, bySize)
}

// enforceRetention deletes the segments retention allows at nowMs.
func (p *Partition) enforceRetention(nowMs int64) (PartitionTrim, error) {
	return p.trimSegments(nowMs, p.Topic.currentSettings())
}

// trimSegments deletes the segments retentionPrefix allows under settings.
func (p *Partition) trimSegments(nowMs int64, settings *topicSettings) (PartitionTrim, error) {
	p.cleaner.Lock()
	defer p.cleaner.Unlock()

	p.mu.Lock()
	if p.deleted.Load() {
		p.mu.Unlock()
		return PartitionTrim{}, nil
	}
	segs, err := p.loadSegments()
	if err != nil {
		p.mu.Unlock()
		return PartitionTrim{}, err
	}
	leo, hwm, logStart := p.mu.nextOffset, p.highWatermark.Load(), p.logStart.Load()
	n := retentionPrefix(segs, logBounds{leo: leo, hwm: hwm, logStart: logStart}, nowMs, settings)
	if n == 0 {
		p.mu.Unlock()
		return PartitionTrim{}, nil
	}
	trim := PartitionTrim{Topic: p.Topic.Name, Partition: p.Index, Segments: n}
	for _, s := range segs[:n] {
		trim.Bytes += s.Size
		trim.Records += s.Records
	}
	cut := leo // every segment goes: the log becomes empty at its end
	if n < len(segs) {
		cut = segs[n].Base
	}
	newStart := max(logStart, cut)
	trim.LogStartOffset = newStart

	t := p.Topic
	b := t.m.store.NewBatch()
	for _, prefix := range []byte{pebblestore.PrefixBatch, pebblestore.PrefixBatchIndex, pebblestore.PrefixSegment} {
		start := pebblestore.PartitionPrefix(prefix, t.ID, p.Index)
		end := pebblestore.SegmentKey(t.ID, p.Index, cut)
		end[0] = prefix // same layout in the three tables
		b.DeleteRange(start, end)
	}
	// Aborted transactions whose marker is deleted: their data is too.
	abortedEnd := pebblestore.TxnAbortedKey(t.ID, p.Index, cut)
	b.DeleteRange(pebblestore.PartitionPrefix(pebblestore.PrefixTxnAborted, t.ID, p.Index), abortedEnd)
	oldStart := logStart
	p.logStart.Store(newStart)
	b.Set(pebblestore.PartitionStateKey(t.ID, p.Index), p.stateRowLocked())
	if err := b.Apply(); err != nil {
		p.logStart.Store(oldStart)
		p.mu.Unlock()
		b.Close()
		return PartitionTrim{}, fmt.Errorf("%w: %w", ErrStorage, err)
	}
	if n == len(segs) {
		p.mu.active = nil
	}
	p.pruneAbortedLocked(cut)
	p.sizeBytes.Add(-trim.Bytes)
	p.records.Add(-trim.Records)
	p.mu.Unlock()

	if err := b.Wait(); err != nil {
		return PartitionTrim{}, fmt.Errorf("%w: %w", ErrStorage, err)
	}
	// The store queued the deleted ranges for compaction
	// (pebblestore.Store.Reclaim, run by retention.ReclaimTask): the space
	// comes back within seconds, and no lock of this partition is held
	// meanwhile.
	return trim, nil
}

// DeleteRecordsBefore moves the log start offset to offset, as Kafka's
// DeleteRecords does, and returns the new log start (the low watermark).
// offset -1 means the high watermark. The topic's cleanup.policy must
// include delete (ErrPolicyViolation); an offset beyond the high watermark,
// or another negative one, is ErrOffsetOutOfRange; an owned topic is an
// *OwnedError (its owner's state indexes the records); an offset at or below
// the current log start changes nothing. The move is durable when it returns,
// and the segments wholly below the new start are deleted before it returns
// (their space comes back once the store compacted the range, in the
// background); the segment that holds the new start stays until retention
// or a later DeleteRecords moves past it.
func (p *Partition) DeleteRecordsBefore(offset int64) (int64, error) {
	if err := p.Topic.CheckDeleteRecords(); err != nil {
		return -1, err
	}
	t := p.Topic
	b := t.m.store.NewBatch()
	p.mu.Lock()
	if p.deleted.Load() {
		p.mu.Unlock()
		b.Close()
		return -1, ErrUnknownTopic
	}
	hwm, logStart := p.highWatermark.Load(), p.logStart.Load()
	if offset == -1 {
		offset = hwm
	}
	if offset < 0 || offset > hwm {
		p.mu.Unlock()
		b.Close()
		return -1, fmt.Errorf("%w: cannot delete records before %d: the high watermark is %d", ErrOffsetOutOfRange, offset, hwm)
	}
	if offset <= logStart {
		// Nothing moves, but an earlier move may still be syncing: wait
		// for it before answering.
		b.LogData(nil)
	} else {
		p.logStart.Store(offset)
		b.Set(pebblestore.PartitionStateKey(t.ID, p.Index), p.stateRowLocked())
	}
	if err := b.Apply(); err != nil {
		p.logStart.Store(logStart)
		p.mu.Unlock()
		b.Close()
		return -1, fmt.Errorf("%w: %w", ErrStorage, err)
	}
	start := p.logStart.Load()
	p.mu.Unlock()
	if err := b.Wait(); err != nil {
		return -1, fmt.Errorf("%w: %w", ErrStorage, err)
	}
	// Delete the segments below the new start now, not at the next
	// retention check (minutes away): an operator told to delete records
	// to make room must see the space come back. Only the log-start rule
	// applies (the zero settings have no time or size limit). A failure
	// leaves them to retention; the move itself is done.
	if _, err := p.trimSegments(0, &topicSettings{}); err != nil {
		t.m.log.Warn().Err(err).Str("topic", t.Name).Int32("partition", p.Index).Msg("deleting the segments below the new log start failed; retention deletes them later")
	}
	return start, nil
}
