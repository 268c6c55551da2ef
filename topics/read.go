package topics

import (
	"fmt"

	"github.com/vibemq/broker/pebblestore"
)

// ReadResult is what Read found for one partition.
type ReadResult struct {
	HighWatermark    int64
	LastStableOffset int64
	LogStartOffset   int64
	// Bytes is the number of batch bytes appended to dst.
	Bytes int
	// Aborted lists, for ReadCommitted, the aborted transactions that
	// overlap the returned batches.
	Aborted []AbortedTxn
}

// Read appends to dst the stored batches that hold offset and the ones after
// it, up to maxBytes, and returns the extended slice. With minOne the first
// batch is appended whole even when larger than maxBytes (KIP-74), so a
// consumer always progresses; otherwise, and for later batches, a batch is
// appended only if it fits.
// Batches are returned as stored, byte for byte. Only durable offsets (below
// the high watermark) are ever returned.
//
// offset == high watermark returns no bytes; offset outside
// [log start, high watermark] returns ErrOffsetOutOfRange.
func (p *Partition) Read(offset int64, maxBytes int, minOne bool, dst []byte) ([]byte, ReadResult, error) {
	return p.read(offset, maxBytes, minOne, dst, false)
}

// ReadCommitted is Read for read_committed consumers: it returns batches
// below the last stable offset only, and in res.Aborted the aborted
// transactions whose data may lie in the returned range, so that the
// consumer can drop their batches.
func (p *Partition) ReadCommitted(offset int64, maxBytes int, minOne bool, dst []byte) ([]byte, ReadResult, error) {
	return p.read(offset, maxBytes, minOne, dst, true)
}

func (p *Partition) read(offset int64, maxBytes int, minOne bool, dst []byte, committed bool) ([]byte, ReadResult, error) {
	p.mu.Lock()
	res := ReadResult{HighWatermark: p.highWatermark.Load(), LogStartOffset: p.logStart.Load(), LastStableOffset: p.lastStableLocked()}
	// The aborted-transaction index as of now, before the batches are
	// read: compaction and retention drop an entry only after the deletion
	// of its data is applied, so every aborted batch the iterator below can
	// see has its entry in this snapshot, even if the entry is dropped
	// before this read ends (the slice is never modified in place).
	aborted := p.mu.aborted
	p.mu.Unlock()
	end := res.HighWatermark
	if committed {
		end = res.LastStableOffset
	}
	if p.deleted.Load() {
		return dst, res, ErrUnknownTopic
	}
	if offset < res.LogStartOffset || offset > res.HighWatermark {
		return dst, res, fmt.Errorf("%w: offset %d is outside [%d, %d]", ErrOffsetOutOfRange, offset, res.LogStartOffset, res.HighWatermark)
	}
	if offset >= end || (maxBytes <= 0 && !minOne) {
		// Nothing to read, or no room for it: no iterator is opened. A
		// fetch over many partitions whose response budget ran out
		// reaches every remaining partition this way, so its cost does
		// not grow with the partitions it cannot fill.
		return dst, res, nil
	}
	store := p.Topic.m.store
	// The lower bound is the partition's first key, not the log start: after
	// DeleteRecords the log start may be inside a batch, which must still be
	// found. Keys below the log start are either range-deleted or in the
	// segment that holds the log start.
	lower := p.batchPrefix
	upper := pebblestore.BatchKey(p.Topic.ID, p.Index, end)
	it, err := store.NewIter(lower, upper)
	if err != nil {
		return dst, res, fmt.Errorf("%w: %w", ErrStorage, err)
	}
	// Every return below closes the iterator exactly once (no defer):
	// Pebble pools iterators, and a second Close would release one that is
	// already in use by another reader.

	// A consumer usually asks for the offset after its last batch, which is
	// the base of the next one: a forward seek finds it exactly. Otherwise
	// the batch holding offset starts before it (found by a backward seek,
	// which makes Pebble copy a value still in the memtable: a whole batch
	// per fetch at the tail, so it is the fallback); compaction may have left
	// a gap, in which case the next batch after offset is returned.
	valid := it.SeekGE(pebblestore.BatchKey(p.Topic.ID, p.Index, offset))
	if valid && pebblestore.OffsetFromKey(it.Key()) == offset {
		// The batch at offset starts there.
	} else if valid = it.SeekLT(pebblestore.BatchKey(p.Topic.ID, p.Index, offset+1)); valid {
		v, err := it.Value()
		if err != nil {
			_ = it.Close()
			return dst, res, fmt.Errorf("%w: %w", ErrStorage, err)
		}
		h, err := ParseBatchHeader(v)
		if err != nil {
			_ = it.Close()
			return dst, res, fmt.Errorf("%w: stored batch at %s/%d offset %d: %v", pebblestore.ErrCorruption, p.Topic.Name, p.Index, pebblestore.OffsetFromKey(it.Key()), err)
		}
		if h.LastOffset() < offset {
			valid = it.Next()
		}
	} else {
		valid = it.First()
	}
	last := int64(-1)
	for ; valid; valid = it.Next() {
		v, err := it.Value()
		if err != nil {
			_ = it.Close()
			return dst, res, fmt.Errorf("%w: %w", ErrStorage, err)
		}
		if res.Bytes+len(v) > maxBytes && (res.Bytes > 0 || !minOne) {
			break
		}
		dst = append(dst, v...)
		res.Bytes += len(v)
		if committed {
			last = pebblestore.OffsetFromKey(it.Key()) + int64(batchLastOffsetDelta(v))
		}
		if res.Bytes >= maxBytes {
			break
		}
	}
	if err := it.Close(); err != nil {
		return dst, res, fmt.Errorf("%w: %w", ErrStorage, err)
	}
	if testHookAfterRead != nil {
		testHookAfterRead()
	}
	if committed && last >= offset {
		res.Aborted = abortedOverlapping(aborted, offset, last)
	}
	return dst, res, nil
}

// ReadSizeHint is the buffer capacity a Read(offset, maxBytes, ...) is
// expected to fill: 0 when offset is at or past the high watermark or
// maxBytes is not positive, otherwise the stored bytes per record (sizeBytes
// over records) times the records from offset to the high watermark, at
// most maxBytes. It is an estimate (compaction leaves offset gaps, batch
// sizes vary; Read grows a buffer that is too small), so that a fetch
// sizes its buffers by what the partitions hold rather than by
// maxBytes each: with thousands of partitions per fetch, maxBytes each
// would be gigabytes.
func (p *Partition) ReadSizeHint(offset int64, maxBytes int) int {
	pending := p.highWatermark.Load() - offset
	if pending <= 0 || maxBytes <= 0 {
		return 0
	}
	size, records := p.sizeBytes.Load(), p.records.Load()
	if size <= 0 || records <= 0 {
		return maxBytes
	}
	perRecord := (size + records - 1) / records
	if pending > int64(maxBytes)/perRecord {
		return maxBytes
	}
	return int(pending * perRecord)
}

// testHookAfterRead, set only by tests, runs in read between reading the
// batches and listing their aborted transactions.
var testHookAfterRead func()

// Special timestamps of ListOffsets.
const (
	TimestampLatest       int64 = -1
	TimestampEarliest     int64 = -2
	TimestampMaxTimestamp int64 = -3
)

// OffsetForTimestamp answers ListOffsets for one partition:
//   - TimestampEarliest: the log start offset;
//   - TimestampLatest: the high watermark;
//   - TimestampMaxTimestamp: the offset and timestamp of the record with the
//     largest timestamp (KIP-734), or (-1, -1) for an empty log;
//   - ts >= 0: the first offset whose record timestamp is >= ts and that
//     timestamp, or (-1, -1) when there is none.
func (p *Partition) OffsetForTimestamp(ts int64) (offset, timestamp int64, err error) {
	if p.deleted.Load() {
		return -1, -1, ErrUnknownTopic
	}
	hwm := p.highWatermark.Load()
	start := p.logStart.Load()
	switch ts {
	case TimestampEarliest:
		return start, -1, nil
	case TimestampLatest:
		return hwm, -1, nil
	}
	store := p.Topic.m.store
	lower := pebblestore.BatchIndexKey(p.Topic.ID, p.Index, 0)
	upper := pebblestore.BatchIndexKey(p.Topic.ID, p.Index, hwm)
	it, err := store.NewIter(lower, upper)
	if err != nil {
		return -1, -1, fmt.Errorf("%w: %w", ErrStorage, err)
	}
	defer it.Close()

	var found int64 = -1
	var bestTS int64 = -1
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.Value()
		if err != nil {
			return -1, -1, fmt.Errorf("%w: %w", ErrStorage, err)
		}
		idx, err := decodeBatchIndex(v)
		if err != nil {
			return -1, -1, fmt.Errorf("%w: %v", pebblestore.ErrCorruption, err)
		}
		if idx.LastOffset < start {
			continue
		}
		base := pebblestore.OffsetFromKey(it.Key())
		if ts == TimestampMaxTimestamp {
			if found < 0 || idx.MaxTimestamp > bestTS {
				bestTS, found = idx.MaxTimestamp, base
			}
			continue
		}
		if idx.MaxTimestamp >= ts {
			found = base
			break
		}
	}
	if found < 0 {
		return -1, -1, nil
	}
	// Look inside the batch for the exact record.
	raw, err := store.Get(pebblestore.BatchKey(p.Topic.ID, p.Index, found))
	if err != nil {
		return -1, -1, fmt.Errorf("%w: %w", ErrStorage, err)
	}
	h, records, err := DecodeRecords(raw)
	if err != nil {
		return -1, -1, fmt.Errorf("%w: stored batch %s/%d@%d: %v", pebblestore.ErrCorruption, p.Topic.Name, p.Index, found, err)
	}
	if h.LogAppendTime() {
		off := h.BaseOffset
		if ts == TimestampMaxTimestamp {
			off = h.LastOffset()
		}
		if off < start {
			off = start
		}
		return off, h.MaxTimestamp, nil
	}
	var bestOff int64 = -1
	bestTS = -1
	for _, r := range records {
		off := h.BaseOffset + int64(r.OffsetDelta)
		rts := h.BaseTimestamp + r.TimestampDelta
		if off < start {
			continue
		}
		if ts == TimestampMaxTimestamp {
			if bestOff < 0 || rts > bestTS {
				bestTS, bestOff = rts, off
			}
			continue
		}
		if rts >= ts {
			return off, rts, nil
		}
	}
	if ts == TimestampMaxTimestamp && bestOff >= 0 {
		return bestOff, bestTS, nil
	}
	// The batch's max timestamp matched but no record did (it can happen only
	// with an inconsistent producer); answer the next batch start.
	return h.LastOffset() + 1, -1, nil
}
