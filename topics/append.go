package topics

import (
	"bytes"
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

	// marker is set by MarkerAppends: Batch is a broker-built control batch
	// carrying coordinatorEpoch; onlyIfOngoing is Marker.OnlyIfOngoing.
	marker           bool
	markerAbort      bool
	onlyIfOngoing    bool
	coordinatorEpoch int32
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
// (MarkerAppends) of a partition deleted since, or one refused by the
// partition (ErrTransactionCoordinatorFenced, checkMarkerLocked): it gets
// its error (ErrUnknownTopic for the deleted partition) and is left out
// without failing the rest, as final for that partition only.
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

// appendBatches is Append, and AppendAtomic when atomic is set. Its steps:
// validate every batch without a lock (checkAppends), lock the partitions
// written in (topic ID, partition) order (lockPartitions), snapshot what
// the write changes in memory (both lockPartitions), add each batch with
// its rows (appendWrite.add), apply the Pebble batch, and on failure
// restore the snapshot (appendUndo.rollback).
func (m *Manager) appendBatches(appends []*Append, extra func(b *pebblestore.Batch), atomic bool, now int64) (*PendingAppend, error) {
	pa := &PendingAppend{m: m, appends: appends}
	ok := m.checkAppends(appends, now)
	if atomic {
		if failed := firstFailed(appends); failed != nil {
			err := failed.Err
			notApplied(appends, failed)
			return nil, err
		}
	}
	if len(ok) == 0 && extra == nil {
		return pa, nil
	}
	sortByPartition(ok)
	undo := lockPartitions(ok)
	w := appendWrite{atomic: atomic, now: now, b: m.store.NewBatchWithSize(batchSizeHint(ok))}
	for _, c := range ok {
		if w.failed != nil {
			break
		}
		w.add(c, undo.of(c.a.Partition))
	}
	applyErr := w.apply(extra)
	if applyErr != nil {
		undo.rollback()
		if w.failed != nil {
			notApplied(appends, w.failed)
		} else {
			applyErr = fmt.Errorf("%w: %w", ErrStorage, applyErr)
			for _, c := range ok {
				if c.a.Err == nil {
					c.a.Err = applyErr
					c.a.BaseOffset = -1
				}
			}
		}
		w.b.Close()
		w.b = nil
	} else {
		undo.commit()
	}
	undo.unlock()
	if atomic && applyErr != nil {
		return nil, applyErr
	}
	pa.batch = w.b
	return pa, nil
}

// checkedAppend is an append that passed checkAppend, with its header.
type checkedAppend struct {
	a *Append
	h BatchHeader
}

// checkAppends resets each append's results and checks it (checkAppend),
// without any lock. It returns the appends that passed; the others have
// Err set.
func (m *Manager) checkAppends(appends []*Append, now int64) []checkedAppend {
	ok := make([]checkedAppend, 0, len(appends))
	for _, a := range appends {
		a.BaseOffset, a.LogAppendTime, a.LogStartOffset = -1, -1, -1
		h, err := m.checkAppend(a, now)
		if err != nil {
			a.Err = err
			continue
		}
		ok = append(ok, checkedAppend{a, h})
	}
	return ok
}

// checkAppend validates one append before any lock is taken: the batch
// against its topic's settings (sizes, CRC, keys on compacted topics,
// timestamps, producer fields), recompressed into the topic's
// compression.type when that differs, and the free-space guard. A
// broker-built marker is only parsed.
func (m *Manager) checkAppend(a *Append, now int64) (BatchHeader, error) {
	if a.Partition == nil {
		return BatchHeader{}, ErrUnknownTopic
	}
	if a.marker {
		return ParseBatchHeader(a.Batch)
	}
	settings := a.Partition.Topic.currentSettings()
	opts := ValidateOptions{MaxBatchBytes: settings.maxMessageBytes, RequireKeys: settings.compact}
	if !settings.logAppendTime {
		opts.CheckTimestamps = true
		opts.MinTimestamp, opts.MaxTimestamp = settings.timestampBounds(now)
	}
	h, err := ValidateBatch(a.Batch, opts)
	if err != nil {
		return h, err
	}
	if settings.logAppendTime && h.LogAppendTime() {
		// Kafka LogValidator.validateTimestamp: the broker, not the
		// producer, sets the LogAppendTime attribute.
		return h, fmt.Errorf("%w: the producer set the LogAppendTime attribute; only the broker may", ErrInvalidTimestamp)
	}
	if settings.recompress && h.Codec() != settings.compression {
		if h, err = recompressBatch(a, h, settings); err != nil {
			return h, err
		}
	}
	if h.IsTransactional() && h.ProducerID < 0 {
		return h, fmt.Errorf("%w: transactional batch without a producer ID", ErrInvalidRecord)
	}
	// New data is refused while the disk is low (pebblestore.SpaceGuard).
	// Transaction markers (above) and the coordinators' internal topics
	// are small writes that let transactions end and offsets move; they
	// go on.
	if !IsInternalTopic(a.Partition.Topic.Name) {
		if err := m.store.Space().Reserve(len(a.Batch)); err != nil {
			return h, err
		}
	}
	return h, nil
}

// firstFailed returns the first append with an error, or nil.
func firstFailed(appends []*Append) *Append {
	for _, a := range appends {
		if a.Err != nil {
			return a
		}
	}
	return nil
}

// sortByPartition orders the appends by (topic ID, partition), the lock
// order, keeping the request's order within a partition.
func sortByPartition(ok []checkedAppend) {
	sort.SliceStable(ok, func(i, j int) bool {
		pi, pj := ok[i].a.Partition, ok[j].a.Partition
		if c := bytes.Compare(pi.Topic.ID[:], pj.Topic.ID[:]); c != 0 {
			return c < 0
		}
		return pi.Index < pj.Index
	})
}

// lockPartitions locks each distinct partition of ok once, in the order of
// ok (sortByPartition), and snapshots it before any change: the undo log
// of the write, in lock order.
func lockPartitions(ok []checkedAppend) appendUndo {
	n := 0
	for i, c := range ok {
		if i == 0 || ok[i-1].a.Partition != c.a.Partition {
			n++
		}
	}
	undo := make(appendUndo, 0, n)
	for _, c := range ok {
		if p := c.a.Partition; len(undo) == 0 || undo[len(undo)-1].p != p {
			p.mu.Lock()
			undo = append(undo, snapshotLocked(p))
		}
	}
	return undo
}

// batchSizeHint is the size of the Pebble batch that will carry ok.
func batchSizeHint(ok []checkedAppend) int {
	size := 0
	for _, c := range ok {
		size += len(c.a.Batch) + appendRowsBytes
	}
	return size
}

// partitionUndo is what an append changes in a partition's memory, as it
// was before: restored if the write is not applied.
type partitionUndo struct {
	p         *Partition
	next      int64
	producers map[int64]*producerState // state before the first change; nil: none existed
	active    *segment
	ongoing   map[int64]int64 // nil: none was open
	aborted   int
	ending    int
	// bytes and records appended, added to the size counters on success
	bytes, records int64
}

// snapshotLocked saves what an append may change in p.
// REQUIRES: p.mu held.
func snapshotLocked(p *Partition) partitionUndo {
	var ongoing map[int64]int64
	if len(p.mu.ongoing) > 0 {
		ongoing = make(map[int64]int64, len(p.mu.ongoing))
		for k, v := range p.mu.ongoing {
			ongoing[k] = v
		}
	}
	return partitionUndo{p: p, next: p.mu.nextOffset, producers: map[int64]*producerState{}, active: p.mu.active, ongoing: ongoing, aborted: len(p.mu.aborted), ending: len(p.mu.ending)}
}

// appendUndo is the undo log of one write: a partitionUndo per locked
// partition, in lock order.
type appendUndo []partitionUndo

// of returns p's entry.
func (undo appendUndo) of(p *Partition) *partitionUndo {
	for i := range undo {
		if undo[i].p == p {
			return &undo[i]
		}
	}
	return nil
}

// saveProducer keeps the producer's state before its first change (st;
// nil when it had none).
func (u *partitionUndo) saveProducer(producerID int64, st *producerState) {
	if _, saved := u.producers[producerID]; !saved {
		u.producers[producerID] = st.clone()
	}
}

// rollback restores every partition as it was before the write.
// REQUIRES: the partitions are still locked.
func (undo appendUndo) rollback() {
	for _, u := range undo {
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
}

// commit adds the bytes and records written to each partition's counters.
func (undo appendUndo) commit() {
	for _, u := range undo {
		u.p.sizeBytes.Add(u.bytes)
		u.p.records.Add(u.records)
	}
}

// unlock unlocks the partitions lockPartitions locked.
func (undo appendUndo) unlock() {
	for _, u := range undo {
		u.p.mu.Unlock()
	}
}

// appendWrite is one appendBatches call under its partitions' locks: the
// Pebble batch being filled, and what the appends added so far asked for.
type appendWrite struct {
	atomic      bool
	now         int64
	b           *pebblestore.Batch
	needBarrier bool    // an idempotent duplicate is answered: wait for the original's sync
	failed      *Append // the append that failed an atomic write
}

// add writes one append into the batch: the producer checks, offsets and
// rows, the Extra rows, the transaction state and the producer state; or
// records why it cannot (a.Err, and w.failed for an atomic write). u is
// the partition's undo entry.
// REQUIRES: c.a.Partition is locked.
func (w *appendWrite) add(c checkedAppend, u *partitionUndo) {
	a, h, p := c.a, c.h, c.a.Partition
	if p.deleted.Load() {
		a.Err = ErrUnknownTopic
		if w.atomic && !a.marker {
			w.failed = a
		}
		return
	}
	a.LogStartOffset = p.logStart.Load()
	if a.marker && !w.checkMarkerLocked(a, h, u) {
		return
	}
	st, lastSeq, write := w.checkProducerLocked(a, h)
	if !write {
		return
	}
	maxTS := w.writeBatchLocked(a, h, u)
	if a.Extra != nil {
		a.Extra(w.b, a.BaseOffset)
	}
	p.applyTxnLocked(w.b, h, a.BaseOffset, a.markerAbort)
	if a.marker {
		w.recordMarkerLocked(p, h, a.coordinatorEpoch, u)
	} else if h.ProducerID >= 0 {
		w.recordProducerLocked(p, h, u, st, producerBatch{
			FirstSeq: h.BaseSequence, LastSeq: lastSeq, BaseOffset: a.BaseOffset,
			OffsetDelta: h.LastOffsetDelta, Timestamp: maxTS,
		})
	}
}

// checkProducerLocked checks an idempotent producer's batch against the
// producer's state: an idempotent retry is answered with the original's
// offsets (refused in an atomic write), a sequence or epoch error fails
// the append. It returns the producer's state, the batch's last sequence,
// and whether the batch is to be written. Markers and batches without a
// producer ID pass unchecked.
// REQUIRES: a.Partition is locked.
func (w *appendWrite) checkProducerLocked(a *Append, h BatchHeader) (st *producerState, lastSeq int32, write bool) {
	if h.ProducerID < 0 || a.marker {
		return nil, 0, true
	}
	p := a.Partition
	st = p.mu.producers[h.ProducerID]
	lastSeq = incrementSequence(h.BaseSequence, h.LastOffsetDelta)
	if dup, found := st.findDuplicate(h.ProducerEpoch, h.BaseSequence, lastSeq); found {
		if w.atomic {
			// The original is in the log already, written by another
			// call: it cannot land with this one.
			a.Err = fmt.Errorf("%w: an idempotent retry cannot be part of an atomic write", ErrInvalidRecord)
			w.failed = a
			return st, lastSeq, false
		}
		a.BaseOffset = dup.BaseOffset
		a.end = dup.BaseOffset + int64(dup.OffsetDelta) + 1
		a.Duplicate = true
		w.needBarrier = true
		if p.Topic.logAppendTime() {
			a.LogAppendTime = dup.Timestamp
		}
		return st, lastSeq, false
	}
	if err := st.checkSequence(h.ProducerEpoch, h.BaseSequence); err != nil {
		a.Err = err
		if w.atomic {
			w.failed = a
		}
		return st, lastSeq, false
	}
	return st, lastSeq, true
}

// writeBatchLocked assigns the batch its offsets, stamps them (and the
// LogAppendTime) into its header, and adds the batch, its index row and
// its segment row. It returns the batch's max timestamp as stored.
// REQUIRES: a.Partition is locked.
func (w *appendWrite) writeBatchLocked(a *Append, h BatchHeader, u *partitionUndo) (maxTS int64) {
	p := a.Partition
	base := p.mu.nextOffset
	SetBaseOffset(a.Batch, base)
	SetPartitionLeaderEpoch(a.Batch, 0) // the only leader epoch is 0
	maxTS = h.MaxTimestamp
	if p.Topic.logAppendTime() {
		SetLogAppendTime(a.Batch, w.now)
		maxTS = w.now
		a.LogAppendTime = w.now
	}
	a.BaseOffset = base
	a.end = base + int64(h.LastOffsetDelta) + 1
	p.mu.nextOffset = a.end
	w.b.Set(pebblestore.BatchKey(p.Topic.ID, p.Index, base), a.Batch)
	w.b.Set(pebblestore.BatchIndexKey(p.Topic.ID, p.Index, base),
		batchIndex{LastOffset: a.end - 1, MaxTimestamp: maxTS, Size: uint32(len(a.Batch))}.encode())
	segTS := maxTS
	if segTS < 0 {
		segTS = w.now // a batch without timestamps ages from its append
	}
	seg := p.extendActiveLocked(p.Topic.currentSettings(), appendedBatch{base: base, lastOffset: a.end - 1, size: len(a.Batch), records: h.NumRecords, ts: segTS})
	w.b.Set(pebblestore.SegmentKey(p.Topic.ID, p.Index, seg.Base), seg.encode())
	u.bytes += int64(len(a.Batch))
	u.records += int64(h.NumRecords)
	return maxTS
}

// checkMarkerLocked decides a transaction marker against its producer's
// state on the partition, in Kafka's order (ProducerAppendInfo
// appendEndTxnMarker: checkProducerEpoch, then checkCoordinatorEpoch;
// KIP-98, transaction version 0/1):
//   - a WriteTxnMarkers marker (onlyIfOngoing) of a producer epoch older
//     than the producer's here is ErrInvalidProducerEpoch (an equal or
//     newer one passes);
//   - a coordinator epoch lower than that of the producer's last marker
//     here is ErrTransactionCoordinatorFenced: a deposed coordinator's
//     late marker must not end the transaction its producer started since
//     through the new coordinator. An equal or higher one passes.
//
// A refusal writes nothing and changes nothing, and never fails an atomic
// write (w.failed stays nil): the coordinator takes it as final for this
// partition. A WriteTxnMarkers marker of a producer with no ongoing
// transaction here writes no control batch (it would end nothing) but
// still records its epochs (recordMarkerLocked), so that a later marker
// of an older coordinator is fenced however the markers interleaved. It
// reports whether the control batch is to be written.
// REQUIRES: a.Partition is locked.
func (w *appendWrite) checkMarkerLocked(a *Append, h BatchHeader, u *partitionUndo) bool {
	p := a.Partition
	st := p.mu.producers[h.ProducerID]
	if a.onlyIfOngoing && st != nil && h.ProducerEpoch < st.Epoch {
		a.Err = fmt.Errorf("%w: marker of producer %d has epoch %d, the producer's epoch on %s/%d is %d",
			ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, p.Topic.Name, p.Index, st.Epoch)
		return false
	}
	if st != nil && a.coordinatorEpoch < st.CoordinatorEpoch {
		a.Err = fmt.Errorf("%w: marker of producer %d has coordinator epoch %d, the last marker on %s/%d had %d; a newer transaction coordinator owns the producer",
			ErrTransactionCoordinatorFenced, h.ProducerID, a.coordinatorEpoch, p.Topic.Name, p.Index, st.CoordinatorEpoch)
		return false
	}
	if _, open := p.mu.ongoing[h.ProducerID]; a.onlyIfOngoing && !open {
		w.recordMarkerLocked(p, h, a.coordinatorEpoch, u)
		return false
	}
	return true
}

// recordMarkerLocked records a marker's epochs in its producer's state and
// adds the state row when they change it. A newer producer epoch (a
// fencing abort) fences the producer's older epoch on this partition too,
// even where the producer has not written yet: a batch of the old epoch
// arriving after the marker would otherwise open a transaction that
// nothing ever ends. The coordinator epoch becomes the marker's (never
// lower: checkMarkerLocked refused a lower one).
// REQUIRES: p is locked.
func (w *appendWrite) recordMarkerLocked(p *Partition, h BatchHeader, coordinatorEpoch int32, u *partitionUndo) {
	st := p.mu.producers[h.ProducerID]
	if st != nil && h.ProducerEpoch <= st.Epoch && coordinatorEpoch <= st.CoordinatorEpoch {
		return
	}
	u.saveProducer(h.ProducerID, st)
	if st == nil {
		st = newProducerState(h.ProducerEpoch)
		p.mu.producers[h.ProducerID] = st
	}
	if h.ProducerEpoch > st.Epoch {
		st.Epoch = h.ProducerEpoch
		st.Batches = st.Batches[:0]
	}
	st.CoordinatorEpoch = max(st.CoordinatorEpoch, coordinatorEpoch)
	w.b.Set(pebblestore.ProducerStateKey(p.Topic.ID, p.Index, h.ProducerID), st.encode())
}

// recordProducerLocked records an idempotent producer's batch in its state
// (st, nil for a new producer) and adds the state row.
// REQUIRES: p is locked.
func (w *appendWrite) recordProducerLocked(p *Partition, h BatchHeader, u *partitionUndo, st *producerState, batch producerBatch) {
	u.saveProducer(h.ProducerID, st)
	if st == nil {
		st = newProducerState(h.ProducerEpoch)
		p.mu.producers[h.ProducerID] = st
	}
	st.record(h.ProducerEpoch, batch)
	w.b.Set(pebblestore.ProducerStateKey(p.Topic.ID, p.Index, h.ProducerID), st.encode())
}

// apply runs extra (unless the write failed), adds a durability barrier
// when only duplicates are answered, and applies the batch. It returns
// the failed append's error, or the store's.
func (w *appendWrite) apply(extra func(b *pebblestore.Batch)) error {
	if w.failed == nil && extra != nil {
		extra(w.b)
	}
	if w.b.Empty() && w.needBarrier {
		w.b.LogData(nil)
	}
	if w.failed != nil {
		return w.failed.Err
	}
	if w.b.Empty() {
		return nil
	}
	return w.b.Apply()
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
			a.Err = fmt.Errorf("%w: %w", ErrStorage, err)
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
