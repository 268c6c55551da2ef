package topics

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/vibemq/broker/pebblestore"
)

// A segment is a range of consecutive batches of one partition: the unit
// that retention deletes and compaction cleans, as Kafka's log segments are.
// There are no segment files: a segment is a row (pebblestore.SegmentKey)
// summing its batches. The last segment is the active one; an append rolls
// to a new segment, as Kafka's LogSegment.shouldRoll decides, when the
// active one would grow past segment.bytes, when the batch's timestamp is
// more than segment.ms (on compacted topics at most max.compaction.lag.ms)
// after the segment's first batch, or when offsets would no longer fit
// 32-bit deltas. Segments close only on append, so the newest batch is
// always in the active segment.
type segment struct {
	Base          int64 // base offset of its first batch (the key)
	LastOffset    int64 // last offset of its last batch
	Size          int64 // bytes of its batches
	Records       int64 // records of its batches
	RollTimestamp int64 // max timestamp of its first batch: segment.ms counts from it
	MaxTimestamp  int64 // largest batch max timestamp: retention.ms counts from it
}

const segmentRowSize = 40

func (s *segment) encode() []byte {
	out := make([]byte, segmentRowSize)
	binary.BigEndian.PutUint64(out[0:], uint64(s.LastOffset))
	binary.BigEndian.PutUint64(out[8:], uint64(s.Size))
	binary.BigEndian.PutUint64(out[16:], uint64(s.Records))
	binary.BigEndian.PutUint64(out[24:], uint64(s.RollTimestamp))
	binary.BigEndian.PutUint64(out[32:], uint64(s.MaxTimestamp))
	return out
}

func decodeSegment(base int64, v []byte) (segment, error) {
	if len(v) != segmentRowSize {
		return segment{}, fmt.Errorf("segment row at %d has %d bytes, expected %d", base, len(v), segmentRowSize)
	}
	s := segment{
		Base:          base,
		LastOffset:    int64(binary.BigEndian.Uint64(v[0:])),
		Size:          int64(binary.BigEndian.Uint64(v[8:])),
		Records:       int64(binary.BigEndian.Uint64(v[16:])),
		RollTimestamp: int64(binary.BigEndian.Uint64(v[24:])),
		MaxTimestamp:  int64(binary.BigEndian.Uint64(v[32:])),
	}
	if s.LastOffset < base-1 || s.Size < 0 || s.Records < 0 {
		return segment{}, fmt.Errorf("segment row at %d is inconsistent: last offset %d, size %d, records %d", base, s.LastOffset, s.Size, s.Records)
	}
	return s, nil
}

// shouldRoll reports whether an append of a batch of batchSize bytes, with
// timestamp batchTimestamp and last offset lastOffset, must start a new
// segment instead of extending s (Kafka LogSegment.shouldRoll, without
// jitter).
func (s *segment) shouldRoll(settings *topicSettings, batchSize int, batchTimestamp, lastOffset int64) bool {
	if s.Size == 0 {
		return false
	}
	return s.Size > settings.segmentBytes-int64(batchSize) ||
		batchTimestamp-s.RollTimestamp > settings.maxSegmentMs() ||
		lastOffset-s.Base > math.MaxInt32
}

// appendedBatch is what a segment records of one appended batch: its
// offsets, size, record count and timestamp (the batch's max timestamp, or
// the append time when the batch has none).
type appendedBatch struct {
	base, lastOffset int64
	size             int
	records          int32
	ts               int64
}

// extendActiveLocked records an appended batch in the active segment,
// rolling first if needed, and returns the new active segment, whose row
// the caller writes in the append's Pebble batch.
// REQUIRES: p.mu held.
func (p *Partition) extendActiveLocked(settings *topicSettings, b appendedBatch) *segment {
	cur := p.mu.active
	var next segment
	if cur == nil || cur.shouldRoll(settings, b.size, b.ts, b.lastOffset) {
		next = segment{Base: b.base, RollTimestamp: b.ts, MaxTimestamp: b.ts}
	} else {
		next = *cur
	}
	next.LastOffset = b.lastOffset
	next.Size += int64(b.size)
	next.Records += int64(b.records)
	next.MaxTimestamp = max(next.MaxTimestamp, b.ts)
	p.mu.active = &next
	return &next
}

// partitionState is the partition state row (pebblestore.PartitionStateKey);
// its layout is documented in pebblestore/keys.go.
type partitionState struct {
	LogStart          int64
	CleanerCheckpoint int64
	TombstoneHorizon  int64
}

func (s partitionState) encode() []byte {
	out := make([]byte, 24)
	binary.BigEndian.PutUint64(out[0:], uint64(s.LogStart))
	binary.BigEndian.PutUint64(out[8:], uint64(s.CleanerCheckpoint))
	binary.BigEndian.PutUint64(out[16:], uint64(s.TombstoneHorizon))
	return out
}

func decodePartitionState(v []byte) (partitionState, error) {
	switch len(v) {
	case 8:
		return partitionState{LogStart: int64(binary.BigEndian.Uint64(v)), TombstoneHorizon: -1}, nil
	case 24:
		return partitionState{
			LogStart:          int64(binary.BigEndian.Uint64(v[0:])),
			CleanerCheckpoint: int64(binary.BigEndian.Uint64(v[8:])),
			TombstoneHorizon:  int64(binary.BigEndian.Uint64(v[16:])),
		}, nil
	}
	return partitionState{}, fmt.Errorf("state row has %d bytes, expected 8 or 24", len(v))
}

// stateRowLocked encodes the partition's current state row. Every writer
// of the row encodes all fields under mu, so no update is lost.
// REQUIRES: p.mu held.
func (p *Partition) stateRowLocked() []byte {
	return partitionState{
		LogStart:          p.logStart.Load(),
		CleanerCheckpoint: p.mu.cleanerCheckpoint,
		TombstoneHorizon:  p.mu.tombstoneHorizon,
	}.encode()
}

// loadSegments reads every segment row of the partition, oldest first.
// Called under p.mu it sees every applied append.
func (p *Partition) loadSegments() ([]segment, error) {
	return loadSegments(p.Topic.m.store, p.Topic, p.Index)
}

func loadSegments(store *pebblestore.Store, t *Topic, index int32) ([]segment, error) {
	prefix := pebblestore.PartitionPrefix(pebblestore.PrefixSegment, t.ID, index)
	it, err := store.NewIter(prefix, pebblestore.PrefixEnd(prefix))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStorage, err)
	}
	defer it.Close()
	var out []segment
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.Value()
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrStorage, err)
		}
		s, err := decodeSegment(pebblestore.OffsetFromKey(it.Key()), v)
		if err != nil {
			return nil, fmt.Errorf("%w: %s/%d: %v", pebblestore.ErrCorruption, t.Name, index, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// recoverSegments loads the segment rows at start-up: the last one is the
// active segment, and the sums feed the size metrics. A partition written
// before segments existed (batches, no segment rows) gets one segment
// rebuilt from its index rows.
func (p *Partition) recoverSegments(store *pebblestore.Store, next int64) error {
	t, index := p.Topic, p.Index
	segs, err := loadSegments(store, t, index)
	if err != nil {
		return err
	}
	if len(segs) == 0 && next > p.logStart.Load() {
		s, err := rebuildSegment(store, t, index)
		if err != nil {
			return err
		}
		if s != nil {
			b := store.NewBatch()
			b.Set(pebblestore.SegmentKey(t.ID, index, s.Base), s.encode())
			if err := b.Commit(); err != nil {
				return fmt.Errorf("%w: %w", ErrStorage, err)
			}
			segs = append(segs, *s)
		}
	}
	var size, records int64
	for _, s := range segs {
		size += s.Size
		records += s.Records
	}
	p.sizeBytes.Store(size)
	p.records.Store(records)
	if len(segs) > 0 {
		last := segs[len(segs)-1]
		if last.LastOffset+1 != next {
			return fmt.Errorf("%w: %s/%d: the last segment ends at %d but the last batch at %d", pebblestore.ErrCorruption, t.Name, index, last.LastOffset, next-1)
		}
		p.mu.active = &last
	}
	return nil
}

// rebuildSegment sums every index row of a partition into one segment.
func rebuildSegment(store *pebblestore.Store, t *Topic, index int32) (*segment, error) {
	prefix := pebblestore.PartitionPrefix(pebblestore.PrefixBatchIndex, t.ID, index)
	it, err := store.NewIter(prefix, pebblestore.PrefixEnd(prefix))
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var s *segment
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.Value()
		if err != nil {
			return nil, err
		}
		idx, err := decodeBatchIndex(v)
		if err != nil {
			return nil, fmt.Errorf("%w: %s/%d: %v", pebblestore.ErrCorruption, t.Name, index, err)
		}
		if s == nil {
			s = &segment{Base: pebblestore.OffsetFromKey(it.Key()), RollTimestamp: idx.MaxTimestamp, MaxTimestamp: idx.MaxTimestamp}
		}
		s.LastOffset = idx.LastOffset
		s.Size += int64(idx.Size)
		s.Records += idx.LastOffset - pebblestore.OffsetFromKey(it.Key()) + 1
		s.MaxTimestamp = max(s.MaxTimestamp, idx.MaxTimestamp)
	}
	return s, nil
}

// PartitionStats is a partition's size and offsets, for metrics and tools.
type PartitionStats struct {
	Topic          string
	Partition      int32
	LogStartOffset int64
	HighWatermark  int64
	// Bytes and Records sum the stored batches, including the part of the
	// oldest segment below the log start that retention has not deleted yet.
	Bytes   int64
	Records int64
}

// Stats returns the partition's size and offsets.
func (p *Partition) Stats() PartitionStats {
	return PartitionStats{
		Topic:          p.Topic.Name,
		Partition:      p.Index,
		LogStartOffset: p.logStart.Load(),
		HighWatermark:  p.highWatermark.Load(),
		Bytes:          p.sizeBytes.Load(),
		Records:        p.records.Load(),
	}
}
