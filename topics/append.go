package topics

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/vibemq/broker/pebblestore"
)

// Append is one partition's batch in a produce request, and after
// Manager.Append and PendingAppend.Wait, its outcome.
type Append struct {
	Partition *Partition
	// Batch holds exactly one v2 RecordBatch as the producer sent it. Append
	// rewrites its header in place (base offset; max timestamp and CRC under
	// LogAppendTime), so the caller must not share it; when the topic's
	// compression.type names another codec, Append replaces it with the
	// recompressed batch.
	Batch []byte

	// Extra, when set, is called once the batch is accepted, with the Pebble
	// batch that will carry it and its base offset, so that an owner of
	// derived state (a consumer-offsets index, transaction markers) can add
	// rows that become durable atomically with the records. It runs with the
	// partition locked: it must be quick and must not call back into topics.
	Extra func(b *pebblestore.Batch, baseOffset int64)

	// Results, final after Wait.
	BaseOffset     int64
	LogAppendTime  int64 // -1 unless the topic uses LogAppendTime
	LogStartOffset int64
	Duplicate      bool // an idempotent retry: answered with the original offsets
	Err            error

	end int64 // offset after the batch's last record

	// marker is set by MarkerAppends: Batch is a broker-built control batch.
	marker      bool
	markerAbort bool
}

// PendingAppend is a set of appends that are visible in order but not yet
// known to be durable. Wait must be called exactly once.
type PendingAppend struct {
	m       *Manager
	batch   *pebblestore.Batch
	appends []*Append
}

// Append validates each batch, assigns offsets, checks idempotent producer
// sequences and publishes the batches to the store in offset order. It
// returns once the batches are applied; PendingAppend.Wait returns once they
// are durable, and only then may they be acknowledged. now is the broker's
// clock in Unix milliseconds (LogAppendTime).
//
// Appends with a nil Partition or a failing batch get Err and write nothing;
// the others are unaffected. While the store's free-space guard is low
// (pebblestore.SpaceGuard), appends of new data get ErrStorageFull (a
// *pebblestore.SpaceError) and write nothing; transaction markers and
// appends to internal topics (__consumer_offsets) are not refused.
func (m *Manager) Append(appends []*Append, now time.Time) *PendingAppend {
	nowMs := now.UnixMilli()
	pa, _ := m.appendBatches(appends, nil, false, nowMs)
	return pa
}

// AppendAtomic is Append for writes that must land together or not at
// all: every batch of appends, with its index, segment, producer and
// transaction rows and the rows its Extra adds, and the rows extra adds,
// go into one Pebble batch, applied once. If any part fails (a batch that
// does not validate, a sequence error, an idempotent duplicate, a deleted
// partition, the apply itself), nothing is applied: the failing append
// gets its error, the others ErrNotApplied, and the error is returned
// with a nil PendingAppend. The one exception is a transaction marker
// (MarkerAppends) of a partition deleted since: it has nothing left to
// end, gets ErrUnknownTopic and is left out without failing the rest.
//
// extra, when set, runs once under the locks of every partition written,
// after their batches were added: like Append.Extra it must be quick, take
// no lock and not call back into topics. It runs (and its rows are
// applied) even when no batch is left to write.
//
// A single Pebble batch is applied atomically and, once its WAL record is
// synced, durable atomically: after a crash either every write of the call
// is in the store or none is. On success, Wait as for Append.
func (m *Manager) AppendAtomic(appends []*Append, extra func(b *pebblestore.Batch), now time.Time) (*PendingAppend, error) {
	nowMs := now.UnixMilli()
	return m.appendBatches(appends, extra, true, nowMs)
}

// appendBatches is Append, and AppendAtomic when atomic is set.
func (m *Manager) appendBatches(appends []*Append, extra func(b *pebblestore.Batch), atomic bool, now int64) (*PendingAppend, error) {
	pa := &PendingAppend{m: m, appends: appends}
	type checked struct {
		a *Append
		h BatchHeader
	}
	ok := make([]checked, 0, len(appends))
	for _, a := range appends {
		a.BaseOffset, a.LogAppendTime, a.LogStartOffset = -1, -1, -1
		if a.Partition == nil {
			a.Err = ErrUnknownTopic
			continue
		}
		if a.marker {
			h, err := ParseBatchHeader(a.Batch)
			if err != nil {
				a.Err = err
				continue
			}
			ok = append(ok, checked{a, h})
			continue
		}
		settings := a.Partition.Topic.currentSettings()
		opts := ValidateOptions{MaxBatchBytes: settings.maxMessageBytes, RequireKeys: settings.compact}
		if !settings.logAppendTime {
			opts.CheckTimestamps = true
			opts.MinTimestamp, opts.MaxTimestamp = settings.timestampBounds(now)
		}
		h, err := ValidateBatch(a.Batch, opts)
		if err != nil {
			a.Err = err
			continue
		}
		if settings.logAppendTime && h.LogAppendTime() {
			// Kafka LogValidator.validateTimestamp: the broker, not the
			// producer, sets the LogAppendTime attribute.
			a.Err = fmt.Errorf("%w: the producer set the LogAppendTime attribute; only the broker may", ErrInvalidTimestamp)
			continue
		}
		if settings.recompress && h.Codec() != settings.compression {
			if h, err = recompressBatch(a, h, settings); err != nil {
				a.Err = err
				continue
			}
		}
		if h.IsTransactional() && h.ProducerID < 0 {
			a.Err = fmt.Errorf("%w: transactional batch without a producer ID", ErrInvalidRecord)
			continue
		}
		// New data is refused while the disk is low (pebblestore.SpaceGuard).
		// Transaction markers (above) and the coordinators' internal topics
		// are small writes that let transactions end and offsets move; they
		// go on.
		if !IsInternalTopic(a.Partition.Topic.Name) {
			if err := m.store.Space().Reserve(len(a.Batch)); err != nil {
				a.Err = err
				continue
			}
		}
		ok = append(ok, checked{a, h})
	}
	if atomic {
		for _, a := range appends {
			if a.Err != nil {
				err := a.Err
				notApplied(appends, a)
				return nil, err
			}
		}
	}
	if len(ok) == 0 && extra == nil {
		return pa, nil
	}
	sort.SliceStable(ok, func(i, j int) bool {
		pi, pj := ok[i].a.Partition, ok[j].a.Partition
		if c := bytes.Compare(pi.Topic.ID[:], pj.Topic.ID[:]); c != 0 {
			return c < 0
		}
		return pi.Index < pj.Index
	})

	// Lock each distinct partition once, in (topic ID, partition) order.
	var locked []*Partition
	for _, c := range ok {
		if len(locked) == 0 || locked[len(locked)-1] != c.a.Partition {
			c.a.Partition.mu.Lock()
			locked = append(locked, c.a.Partition)
		}
	}
	type undo struct {
		p         *Partition
		next      int64
		producers map[int64]*producerState
		active    *segment
		ongoing   map[int64]int64
		aborted   int
		ending    int
		// bytes and records appended, added to the size counters on success
		bytes, records int64
	}
	undos := make([]undo, 0, len(locked))
	for _, p := range locked {
		var ongoing map[int64]int64 // nil: none was open
		if len(p.mu.ongoing) > 0 {
			ongoing = make(map[int64]int64, len(p.mu.ongoing))
			for k, v := range p.mu.ongoing {
				ongoing[k] = v
			}
		}
		undos = append(undos, undo{p: p, next: p.mu.nextOffset, producers: map[int64]*producerState{}, active: p.mu.active, ongoing: ongoing, aborted: len(p.mu.aborted), ending: len(p.mu.ending)})
	}
	undoOf := func(p *Partition) *undo {
		for i := range undos {
			if undos[i].p == p {
				return &undos[i]
			}
		}
		return nil
	}

	size := 0
	for _, c := range ok {
		size += len(c.a.Batch) + appendRowsBytes
	}
	b := m.store.NewBatchWithSize(size)
	needBarrier := false
	var failed *Append // the append that failed an atomic write
	for _, c := range ok {
		if failed != nil {
			break
		}
		a, h, p := c.a, c.h, c.a.Partition
		if p.deleted.Load() {
			a.Err = ErrUnknownTopic
			if atomic && !a.marker {
				failed = a
			}
			continue
		}
		a.LogStartOffset = p.logStart.Load()
		var st *producerState
		var lastSeq int32
		if h.ProducerID >= 0 && !a.marker {
			st = p.mu.producers[h.ProducerID]
			lastSeq = incrementSequence(h.BaseSequence, h.LastOffsetDelta)
			if dup, found := st.findDuplicate(h.ProducerEpoch, h.BaseSequence, lastSeq); found {
				if atomic {
					// The original is in the log already, written by
					// another call: it cannot land with this one.
					a.Err = fmt.Errorf("%w: an idempotent retry cannot be part of an atomic write", ErrInvalidRecord)
					failed = a
					continue
				}
				a.BaseOffset = dup.BaseOffset
				a.end = dup.BaseOffset + int64(dup.OffsetDelta) + 1
				a.Duplicate = true
				needBarrier = true
				if p.Topic.logAppendTime() {
					a.LogAppendTime = dup.Timestamp
				}
				continue
			}
			if err := st.checkSequence(h.ProducerEpoch, h.BaseSequence); err != nil {
				a.Err = err
				if atomic {
					failed = a
				}
				continue
			}
		}
		base := p.mu.nextOffset
		SetBaseOffset(a.Batch, base)
		SetPartitionLeaderEpoch(a.Batch, 0) // the only leader epoch is 0
		maxTS := h.MaxTimestamp
		if p.Topic.logAppendTime() {
			SetLogAppendTime(a.Batch, now)
			maxTS = now
			a.LogAppendTime = now
		}
		a.BaseOffset = base
		a.end = base + int64(h.LastOffsetDelta) + 1
		p.mu.nextOffset = a.end
		b.Set(pebblestore.BatchKey(p.Topic.ID, p.Index, base), a.Batch)
		b.Set(pebblestore.BatchIndexKey(p.Topic.ID, p.Index, base),
			batchIndex{LastOffset: a.end - 1, MaxTimestamp: maxTS, Size: uint32(len(a.Batch))}.encode())
		segTS := maxTS
		if segTS < 0 {
			segTS = now // a batch without timestamps ages from its append
		}
		seg := p.extendActiveLocked(p.Topic.currentSettings(), base, a.end-1, len(a.Batch), h.NumRecords, segTS)
		b.Set(pebblestore.SegmentKey(p.Topic.ID, p.Index, seg.Base), seg.encode())
		u := undoOf(p)
		u.bytes += int64(len(a.Batch))
		u.records += int64(h.NumRecords)
		if a.Extra != nil {
			a.Extra(b, base)
		}
		p.applyTxnLocked(b, h, base, a.markerAbort)
		if a.marker {
			// A marker written with a newer epoch (a fencing abort) fences
			// the producer's older epoch on this partition too, even where
			// the producer has not written yet: a batch of the old epoch
			// arriving after the marker would otherwise open a transaction
			// that nothing ever ends.
			if st = p.mu.producers[h.ProducerID]; st == nil || h.ProducerEpoch > st.Epoch {
				if _, saved := u.producers[h.ProducerID]; !saved {
					u.producers[h.ProducerID] = st.clone()
				}
				if st == nil {
					st = &producerState{}
					p.mu.producers[h.ProducerID] = st
				}
				st.Epoch = h.ProducerEpoch
				st.Batches = st.Batches[:0]
				b.Set(pebblestore.ProducerStateKey(p.Topic.ID, p.Index, h.ProducerID), st.encode())
			}
		} else if h.ProducerID >= 0 {
			if _, saved := u.producers[h.ProducerID]; !saved {
				u.producers[h.ProducerID] = st.clone()
			}
			if st == nil {
				st = &producerState{Epoch: h.ProducerEpoch}
				p.mu.producers[h.ProducerID] = st
			}
			st.record(h.ProducerEpoch, producerBatch{
				FirstSeq: h.BaseSequence, LastSeq: lastSeq, BaseOffset: base,
				OffsetDelta: h.LastOffsetDelta, Timestamp: maxTS,
			})
			b.Set(pebblestore.ProducerStateKey(p.Topic.ID, p.Index, h.ProducerID), st.encode())
		}
	}
	if failed == nil && extra != nil {
		extra(b)
	}
	if b.Empty() && needBarrier {
		b.LogData(nil)
	}
	var applyErr error
	if failed != nil {
		applyErr = failed.Err
	} else if !b.Empty() {
		applyErr = b.Apply()
	}
	if applyErr != nil {
		for _, u := range undos {
			u.p.mu.nextOffset = u.next
			u.p.mu.active = u.active
			u.p.mu.ongoing = u.ongoing
			if u.ongoing == nil {
				u.p.mu.ongoing = make(map[int64]int64)
			}
			u.p.mu.aborted = u.p.mu.aborted[:u.aborted]
			u.p.mu.ending = u.p.mu.ending[:u.ending]
			for id, st := range u.producers {
				if st == nil {
					delete(u.p.mu.producers, id)
				} else {
					u.p.mu.producers[id] = st
				}
			}
		}
		if failed != nil {
			notApplied(appends, failed)
		} else {
			for _, c := range ok {
				if c.a.Err == nil {
					c.a.Err = fmt.Errorf("%w: %v", ErrStorage, applyErr)
					c.a.BaseOffset = -1
				}
			}
			applyErr = fmt.Errorf("%w: %v", ErrStorage, applyErr)
		}
		b.Close()
		b = nil
	} else {
		for _, u := range undos {
			u.p.sizeBytes.Add(u.bytes)
			u.p.records.Add(u.records)
		}
	}
	for _, p := range locked {
		p.mu.Unlock()
	}
	if atomic && applyErr != nil {
		return nil, applyErr
	}
	pa.batch = b
	return pa, nil
}

// appendRowsBytes is the room one append needs in the Pebble batch beside
// its RecordBatch, for the size hint of the batch: Pebble's record
// framing and key of the batch row (~35 bytes, and 10 more of varint room
// while Set runs), the index row (~52), the segment row (~72) and an
// idempotent producer's state row (~180 with producerBatchesKept
// batches): up to ~340 in all. A hint short of the real size makes
// Pebble double the buffer and copy everything written so far, the
// request's whole batches included: with 256 (the previous value) every
// idempotent produce of several partitions did (BenchmarkAppendIdempotent/partitions=8: 21.1 MB
// allocated per 8.3 MB produced). Transaction and Extra rows are
// uncounted: rare, small, and a miss only costs that copy.
const appendRowsBytes = 512

// notApplied gives every append of a failed atomic write that has no
// error of its own ErrNotApplied, naming the failure.
func notApplied(appends []*Append, failed *Append) {
	for _, a := range appends {
		a.BaseOffset, a.LogAppendTime, a.Duplicate = -1, -1, false
		if a.Err == nil {
			a.Err = fmt.Errorf("%w: %v", ErrNotApplied, failed.Err)
		}
	}
}

// Wait blocks until the applied batches are durable, then advances each
// partition's high watermark past them and fills the final results.
func (pa *PendingAppend) Wait() error {
	if pa.batch == nil {
		return nil
	}
	err := pa.batch.Wait()
	for _, a := range pa.appends {
		if a.Err != nil || a.Partition == nil {
			continue
		}
		if err != nil {
			// The store failed to sync; the outcome of this write is unknown.
			a.Err = fmt.Errorf("%w: %v", ErrStorage, err)
			a.BaseOffset = -1
			continue
		}
		// A synced batch implies every batch applied before it is synced
		// (the WAL is synced as a prefix), so the durable prefix of this
		// partition now reaches a.end.
		a.Partition.advanceHighWatermark(a.end)
	}
	if err != nil {
		pa.m.log.Error().Err(err).Msg("store sync failed; produce requests answered with a storage error")
	}
	return err
}

// recompressBatch rewrites a.Batch in the topic's compression.type, as
// Kafka's LogValidator does when the producer's codec differs: same records,
// offsets deltas, timestamps and producer fields, a new CRC. This is the one
// case where a batch is not stored as received.
func recompressBatch(a *Append, h BatchHeader, settings *topicSettings) (BatchHeader, error) {
	_, records, err := DecodeRecords(a.Batch)
	if err != nil {
		return h, err
	}
	nh := h
	nh.Attributes = h.Attributes&^batchAttributeCodecMask | int16(settings.compression)
	out, err := EncodeBatch(nh, records)
	if err != nil {
		return h, err
	}
	if settings.maxMessageBytes > 0 && len(out) > settings.maxMessageBytes {
		return h, fmt.Errorf("%w: batch is %d bytes in the topic's compression.type, above max.message.bytes %d", ErrMessageTooLarge, len(out), settings.maxMessageBytes)
	}
	a.Batch = out
	return ParseBatchHeader(out)
}

// incrementSequence adds delta to a producer sequence, wrapping at MaxInt32
// as Kafka's DefaultRecordBatch.incrementSequence does.
func incrementSequence(seq, delta int32) int32 {
	if seq > math.MaxInt32-delta {
		return delta - (math.MaxInt32 - seq) - 1
	}
	return seq + delta
}

// IsStorageError reports whether err means the store failed.
func IsStorageError(err error) bool { return errors.Is(err, ErrStorage) }
