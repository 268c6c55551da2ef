package topics

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/vibemq/broker/pebblestore"
)

// Partition is one partition log.
//
// Offsets: logStart <= highWatermark <= nextOffset.
//   - nextOffset is the offset the next appended record gets; records below
//     it are in Pebble (visible), possibly not yet synced.
//   - highWatermark is the end of the durable prefix: every record below it
//     is synced. Readers never see records at or above it.
//   - logStart is the first offset readers may ask for.
//
// The owner of each field: mu guards nextOffset, producers, waiters, the
// active segment and the cleaner's state; highWatermark, logStart and the
// size counters are atomics written under mu and read freely. logStart moves
// forward only (retention, DeleteRecords), under mu, before the write that
// makes the move durable is applied.
//
// cleaner serializes the background work that rewrites or deletes stored
// batches of the partition (retention's deletions, compaction); it is taken
// before mu and never held by the produce or fetch paths.
type Partition struct {
	Topic *Topic
	Index int32

	batchPrefix []byte // pebblestore.PartitionPrefix(PrefixBatch, ...)

	highWatermark atomic.Int64
	logStart      atomic.Int64
	deleted       atomic.Bool
	// sizeBytes and records sum the stored batches (metrics).
	sizeBytes atomic.Int64
	records   atomic.Int64

	cleaner sync.Mutex

	mu struct {
		sync.Mutex
		nextOffset int64
		producers  map[int64]*producerState
		waiters    map[chan<- struct{}]struct{}
		// active is the segment appends extend, replaced (never modified)
		// on every append; nil when the log holds no batch.
		active *segment
		// cleanerCheckpoint and tombstoneHorizon: see partitionState.
		cleanerCheckpoint int64
		tombstoneHorizon  int64
		// ongoing maps a producer ID to the first offset of its ongoing
		// transaction; aborted is the aborted-transaction index, by marker
		// offset (see txn.go). aborted is only ever appended to or
		// replaced by a copy, never modified in place: readers keep
		// snapshots of it (read).
		ongoing map[int64]int64
		aborted []AbortedTxn
		// ending lists the transactions whose marker is applied but not
		// yet below the high watermark (durable): they stay unstable
		// until it is (see lastStableLocked).
		ending []endingTxn
	}
}

func newPartition(t *Topic, index int32, logStart, next int64) *Partition {
	p := &Partition{Topic: t, Index: index}
	p.batchPrefix = pebblestore.PartitionPrefix(pebblestore.PrefixBatch, t.ID, index)
	p.logStart.Store(logStart)
	p.highWatermark.Store(next)
	p.mu.nextOffset = next
	p.mu.producers = make(map[int64]*producerState)
	p.mu.waiters = make(map[chan<- struct{}]struct{})
	p.mu.tombstoneHorizon = -1
	p.mu.ongoing = make(map[int64]int64)
	return p
}

// recoverPartition rebuilds a partition's offsets and producer state from
// the store: the log start and the cleaner's state from its state row, the
// log end from the last batch index row (or the log start when retention
// deleted every batch), the segments from their rows, producers from theirs.
// Its cost grows with the number of segments, not with the data.
func recoverPartition(store *pebblestore.Store, t *Topic, index int32) (*Partition, error) {
	var next int64
	st := partitionState{TombstoneHorizon: -1}
	raw, err := store.Get(pebblestore.PartitionStateKey(t.ID, index))
	switch {
	case errors.Is(err, pebblestore.ErrNotFound):
	case err != nil:
		return nil, err
	default:
		if st, err = decodePartitionState(raw); err != nil {
			return nil, fmt.Errorf("%w: partition state of %s/%d: %v", pebblestore.ErrCorruption, t.Name, index, err)
		}
	}
	logStart := st.LogStart
	next = logStart

	idxPrefix := pebblestore.PartitionPrefix(pebblestore.PrefixBatchIndex, t.ID, index)
	it, err := store.NewIter(idxPrefix, pebblestore.PrefixEnd(idxPrefix))
	if err != nil {
		return nil, err
	}
	if it.Last() {
		v, err := it.Value()
		if err != nil {
			_ = it.Close()
			return nil, err
		}
		idx, err := decodeBatchIndex(v)
		if err != nil {
			_ = it.Close()
			return nil, fmt.Errorf("%w: %s/%d: %v", pebblestore.ErrCorruption, t.Name, index, err)
		}
		if idx.LastOffset+1 > next {
			next = idx.LastOffset + 1
		}
	}
	if err := it.Close(); err != nil {
		return nil, err
	}

	p := newPartition(t, index, logStart, next)
	p.mu.cleanerCheckpoint = st.CleanerCheckpoint
	p.mu.tombstoneHorizon = st.TombstoneHorizon
	if err := p.recoverSegments(store, next); err != nil {
		return nil, err
	}
	if err := p.recoverTxns(store); err != nil {
		return nil, err
	}
	prodPrefix := pebblestore.PartitionPrefix(pebblestore.PrefixProducerState, t.ID, index)
	it, err = store.NewIter(prodPrefix, pebblestore.PrefixEnd(prodPrefix))
	if err != nil {
		return nil, err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.Value()
		if err != nil {
			return nil, err
		}
		s, err := decodeProducerState(v)
		if err != nil {
			return nil, fmt.Errorf("%w: %s/%d producer %d: %v", pebblestore.ErrCorruption, t.Name, index, pebblestore.OffsetFromKey(it.Key()), err)
		}
		p.mu.producers[pebblestore.OffsetFromKey(it.Key())] = s
	}
	return p, nil
}

// HighWatermark is the end of the durable, readable log.
func (p *Partition) HighWatermark() int64 { return p.highWatermark.Load() }

// LogStartOffset is the first readable offset.
func (p *Partition) LogStartOffset() int64 { return p.logStart.Load() }

// LastStableOffset is the end of the log that read_committed consumers may
// read: the first offset of the oldest ongoing transaction, or the high
// watermark when none is open.
func (p *Partition) LastStableOffset() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastStableLocked()
}

// Deleted reports whether the partition's topic was deleted.
func (p *Partition) Deleted() bool { return p.deleted.Load() }

func (p *Partition) markDeleted() {
	p.deleted.Store(true)
	p.mu.Lock()
	p.notifyLocked()
	p.mu.Unlock()
}

// AddWaiter registers ch to receive a non-blocking send whenever the high
// watermark advances (or the partition is deleted). ch should be buffered.
func (p *Partition) AddWaiter(ch chan<- struct{}) {
	p.mu.Lock()
	p.mu.waiters[ch] = struct{}{}
	p.mu.Unlock()
}

// RemoveWaiter undoes AddWaiter.
func (p *Partition) RemoveWaiter(ch chan<- struct{}) {
	p.mu.Lock()
	delete(p.mu.waiters, ch)
	p.mu.Unlock()
}

// REQUIRES: p.mu held.
func (p *Partition) notifyLocked() {
	for ch := range p.mu.waiters {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// advanceHighWatermark publishes offsets below end as durable.
func (p *Partition) advanceHighWatermark(end int64) {
	p.mu.Lock()
	if end > p.highWatermark.Load() {
		p.highWatermark.Store(end)
		p.pruneEndingLocked()
		p.notifyLocked()
	}
	p.mu.Unlock()
}

// batchIndex is the value of a batch index row (pebblestore.BatchIndexKey).
//
//	lastOffset u64 | maxTimestamp i64 | size u32
type batchIndex struct {
	LastOffset   int64
	MaxTimestamp int64
	Size         uint32
}

func (b batchIndex) encode() []byte {
	out := make([]byte, 20)
	binary.BigEndian.PutUint64(out[0:], uint64(b.LastOffset))
	binary.BigEndian.PutUint64(out[8:], uint64(b.MaxTimestamp))
	binary.BigEndian.PutUint32(out[16:], b.Size)
	return out
}

func decodeBatchIndex(v []byte) (batchIndex, error) {
	if len(v) != 20 {
		return batchIndex{}, fmt.Errorf("batch index row has %d bytes, expected 20", len(v))
	}
	return batchIndex{
		LastOffset:   int64(binary.BigEndian.Uint64(v[0:])),
		MaxTimestamp: int64(binary.BigEndian.Uint64(v[8:])),
		Size:         binary.BigEndian.Uint32(v[16:]),
	}, nil
}
