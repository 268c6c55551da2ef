package topics

import (
	"fmt"
	"hash/maphash"
	"math"
	"sort"
	"time"

	"github.com/vibemq/broker/pebblestore"
)

// Compaction (cleanup.policy=compact, or compact,delete) keeps the latest
// record of every key, as Kafka's LogCleaner does:
//
//   - A pass cleans one partition. It first builds an offset map, key ->
//     latest offset, over the dirty segments: the closed segments at or
//     after the cleaner checkpoint, up to the first segment that must not be
//     cleaned yet (Kafka cleanableOffsets): the active segment, a segment
//     that reaches past the high watermark, or one whose largest timestamp
//     is within min.compaction.lag.ms of now. The map is bounded
//     (Config.CompactionMapEntries) and ends at a segment boundary; what it
//     does not cover waits for the next pass.
//   - It then rewrites every batch from the log start to the end of the map:
//     a record is kept iff its key's latest offset is not after it; keyless
//     records (possible only if the topic was not compacted when they were
//     written) are removed. A tombstone (null value) is kept until the delete
//     horizon of its batch has passed: the first pass that keeps a tombstone
//     stamps its batch with horizon = now + delete.retention.ms (KIP-534,
//     attribute bit 6, the horizon in the base timestamp; record timestamps
//     are kept by re-basing their deltas).
//   - Offsets never change. A rewritten batch keeps its base offset, its last
//     offset delta (so the producer's sequence range stays whole), producer
//     ID, epoch, base sequence, partition leader epoch, attributes and codec
//     (Kafka buildRetainedRecordsInto). A batch left without records is
//     removed (producer state lives in its own rows, so no empty batch needs
//     to stay for it); a fetch inside the gap gets the next batch. A batch
//     that loses nothing is not written. Segments left empty lose their row
//     unless the topic also has the delete policy (see rewriteStep).
//   - A partition is cleaned when its dirty bytes are more than
//     min.cleanable.dirty.ratio of its clean plus dirty bytes, when its
//     oldest dirty segment's first batch is older than max.compaction.lag.ms,
//     or when the earliest delete horizon of its kept tombstones (and
//     markers, below) has passed.
//     Among candidates the dirtiest goes first.
//   - The log start never moves and the active segment is never touched, so
//     the newest record is always kept and a consumer reading to the high
//     watermark always finishes.
//
// A pass runs over several Compact calls, each reading at most
// Config.CompactionBytesPerCall bytes and committing what it rewrote, so it
// can stop at any point: a crash or a shutdown loses only the pass's
// progress (the checkpoint moves when it ends), and a rerun is idempotent.
//
// Transactions: cleaning stops at the last stable offset, so every
// transaction with data in the range has ended. Batches of aborted
// transactions (the aborted-transaction index, snapshotted when the pass
// starts) are removed regardless of key and never enter the offset map, so
// an aborted record never shadows a committed one (Kafka
// LogCleaner.shouldDiscardBatch).
//
// Markers (control batches) go as Kafka's cleaner removes them
// (LogCleaner.CleanedTransactionMetadata, KIP-98 and KIP-534):
//
//   - A marker is removable once no data batch of its transaction remains:
//     the rewrite goes in offset order from the segment holding the log
//     start, and a marker of producer P is removable iff no transactional
//     data batch of P was kept since P's previous marker (or the start of
//     the rewrite). Data of an aborted transaction is always dropped before
//     its marker is reached, so an ABORT marker is removable in the first
//     pass that reaches it; a COMMIT marker once compaction has removed
//     every record of its transaction.
//   - The first pass that finds a marker removable stamps it with a delete
//     horizon, now + delete.retention.ms (attribute bit 6, the horizon in
//     the base timestamp, as for tombstones), and in the same Pebble batch
//     drops the marker's aborted-transaction index entry, in the store and
//     in memory. A pass after the horizon removes the marker. The earliest
//     horizon of kept markers and tombstones makes the partition cleanable
//     when it passes.
//
// So, at every moment and after any crash (each step's batch holds its
// deletions, the index entries it drops and the markers it stamps, and
// steps go in offset order): aborted data is never left without its index
// entry (read_committed readers drop it by the entry), and an index entry
// never outlives its ABORT marker (a reader that added the producer to its
// aborted set on the entry must meet the marker that ends it, or it would
// drop the producer's later committed data). Offsets never change: a
// removed marker leaves a gap like any removed batch.

// CompactionResult reports one Compact call.
type CompactionResult struct {
	Topic     string
	Partition int32
	// Worked reports that a pass made progress in this call; Done that it
	// finished. More means work may remain: call again.
	Worked, Done, More bool
	// BytesRead and BytesWritten count the batch bytes this call read and
	// wrote (rewritten batches).
	BytesRead, BytesWritten int64
	// For a finished pass: bytes and records it removed, and how long it
	// took, from the now of its first call to the now of its last.
	BytesRemoved, RecordsRemoved int64
	Duration                     time.Duration
	// Err is set when the pass failed; it was abandoned.
	Err error
}

type offsetKey [2]uint64

// cleaningPass is one compaction pass over one partition, carried from one
// Compact call to the next.
type cleaningPass struct {
	p       *Partition
	started time.Time

	// Mapping phase: batches [cursor, limit) are read into offsets; a
	// segment base in boundaries is where the map may stop when full.
	rewriting  bool
	limit      int64
	boundaries map[int64]bool
	mapFrom    int64
	mapEnd     int64 // set when mapping ends: the rewrite phase ends here
	cursor     int64
	offsets    map[offsetKey]int64
	seeds      [2]maphash.Seed
	mapEntries int

	// Rewrite phase.
	horizon        int64 // earliest delete horizon of the tombstones and markers kept, -1 none
	curSeg         int64 // base of the segment being rewritten, -1 none
	curSegMaxTS    int64 // largest timestamp of its batches kept so far
	curSegChanged  bool  // whether any of its batches changed
	bytesRemoved   int64
	recordsRemoved int64

	// aborted is the partition's aborted-transaction index when the pass
	// started, by marker offset.
	aborted []AbortedTxn
	// txnData holds the producers of which the rewrite kept a
	// transactional data batch since their last marker: their next marker
	// must stay.
	txnData map[int64]bool
}

// markerRemovable reports whether the marker h may be removed (see the
// package comment) and starts the next transaction of its producer. It
// must be called for every marker, in offset order.
func (c *cleaningPass) markerRemovable(h BatchHeader) bool {
	kept := c.txnData[h.ProducerID]
	delete(c.txnData, h.ProducerID)
	return !kept
}

// hasAbortedEntry reports whether the index held an aborted transaction
// whose marker is at offset when the pass started.
func (c *cleaningPass) hasAbortedEntry(offset int64) bool {
	i := sort.Search(len(c.aborted), func(i int) bool { return c.aborted[i].LastOffset >= offset })
	return i < len(c.aborted) && c.aborted[i].LastOffset == offset
}

// isAborted reports whether the data batch h belongs to an aborted
// transaction: one of its producer whose range holds the batch.
func (c *cleaningPass) isAborted(h BatchHeader) bool {
	if !h.IsTransactional() || h.IsControl() {
		return false
	}
	i := sort.Search(len(c.aborted), func(i int) bool { return c.aborted[i].LastOffset >= h.BaseOffset })
	for _, a := range c.aborted[i:] {
		if a.ProducerID == h.ProducerID && a.FirstOffset <= h.BaseOffset {
			return true
		}
	}
	return false
}

func (c *cleaningPass) hash(key []byte) offsetKey {
	return offsetKey{maphash.Bytes(c.seeds[0], key), maphash.Bytes(c.seeds[1], key)}
}

// Compact does a bounded amount of compaction at time now: it continues
// the pass in progress, or starts one on the partition that needs it most.
func (m *Manager) Compact(now time.Time) CompactionResult {
	m.cleaningMu.Lock()
	defer m.cleaningMu.Unlock()
	nowMs := now.UnixMilli()
	if m.cleaning == nil {
		pass, err := m.pickCleanable(now)
		if err != nil {
			return CompactionResult{Err: err}
		}
		if pass == nil {
			return CompactionResult{}
		}
		m.cleaning = pass
	}
	c := m.cleaning
	res := CompactionResult{Topic: c.p.Topic.Name, Partition: c.p.Index, Worked: true, More: true}
	done, err := c.step(nowMs, m.cfg.CompactionBytesPerCall, &res)
	if err != nil {
		m.cleaning = nil
		res.Err = err
		m.log.Error().Err(err).Str("topic", res.Topic).Int32("partition", res.Partition).Msg("compaction pass abandoned")
		return res
	}
	if done {
		m.cleaning = nil
		res.Done = true
		res.BytesRemoved, res.RecordsRemoved = c.bytesRemoved, c.recordsRemoved
		res.Duration = now.Sub(c.started)
		m.log.Debug().Str("topic", res.Topic).Int32("partition", res.Partition).Int64("bytes_removed", res.BytesRemoved).
			Int64("records_removed", res.RecordsRemoved).Dur("duration", res.Duration).Msg("compaction pass done")
	}
	return res
}

// cleanable describes why and how far a partition can be cleaned.
type cleanable struct {
	p          *Partition
	dirtyFrom  int64 // base of the first dirty segment
	dirtyEnd   int64 // base of the first segment that cannot be cleaned
	boundaries []int64
	ratio      float64
	needed     bool // by ratio or max.compaction.lag.ms; else only a delete horizon (tombstones, markers) is due
}

// pickCleanable chooses the partition to clean: the highest dirty ratio
// among those that need cleaning, else one whose delete horizon (of its
// tombstones or markers) passed.
func (m *Manager) pickCleanable(now time.Time) (*cleaningPass, error) {
	nowMs := now.UnixMilli()
	var best *cleanable
	for _, t := range m.Topics() {
		s := t.currentSettings()
		if !s.compact {
			continue
		}
		for _, p := range t.Partitions() {
			c, err := p.cleanableRange(nowMs, s)
			if err != nil {
				return nil, err
			}
			if c == nil {
				continue
			}
			if best == nil || (c.needed && !best.needed) || (c.needed == best.needed && c.ratio > best.ratio) {
				best = c
			}
		}
	}
	if best == nil {
		return nil, nil
	}
	pass := &cleaningPass{
		p: best.p, started: now, limit: best.dirtyEnd, mapFrom: best.dirtyFrom, cursor: best.dirtyFrom,
		boundaries: make(map[int64]bool, len(best.boundaries)),
		offsets:    make(map[offsetKey]int64),
		seeds:      [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()},
		mapEntries: m.cfg.CompactionMapEntries,
		horizon:    -1, curSeg: -1,
		aborted: best.p.AbortedTransactions(),
		txnData: make(map[int64]bool),
	}
	for _, b := range best.boundaries {
		pass.boundaries[b] = true
	}
	return pass, nil
}

// cleanableRange computes the dirty range of p (Kafka
// LogCleanerManager.cleanableOffsets) and whether it should be cleaned now.
func (p *Partition) cleanableRange(nowMs int64, s *topicSettings) (*cleanable, error) {
	p.mu.Lock()
	if p.deleted.Load() {
		p.mu.Unlock()
		return nil, nil
	}
	segs, err := p.loadSegments()
	// Compaction stops at the last stable offset: open transactions are
	// left alone until their markers are written.
	hwm, logStart := p.lastStableLocked(), p.logStart.Load()
	checkpoint, horizon := p.mu.cleanerCheckpoint, p.mu.tombstoneHorizon
	p.mu.Unlock()
	if err != nil || len(segs) < 2 {
		return nil, err
	}
	closed := segs[:len(segs)-1]
	firstDirty := max(checkpoint, logStart)
	var clean, dirty int64
	from, end := -1, len(closed)
	for i, seg := range closed {
		upper := segs[i+1].Base
		if upper <= logStart {
			continue // wholly below the log start: retention deletes it
		}
		if upper <= firstDirty {
			clean += seg.Size
			continue
		}
		if from < 0 {
			from = i
		}
		if upper > hwm || (s.minCompactionLagMs > 0 && seg.MaxTimestamp > nowMs-s.minCompactionLagMs) {
			end = i
			break
		}
		dirty += seg.Size
	}
	if from < 0 {
		from = len(closed)
	}
	c := &cleanable{p: p, dirtyFrom: segs[from].Base, dirtyEnd: segs[end].Base}
	if dirty > 0 {
		c.ratio = float64(dirty) / float64(clean+dirty)
		forced := nowMs-s.maxCompactionLagMs > closed[from].RollTimestamp
		c.needed = c.ratio > s.minCleanableRatio || forced
	}
	for i := from; i < end; i++ {
		c.boundaries = append(c.boundaries, closed[i].Base)
	}
	if !c.needed && (horizon < 0 || horizon > nowMs) {
		return nil, nil
	}
	return c, nil
}

// step advances the pass by at most budget bytes read. It reports whether
// the pass is over (finished, or abandoned because the partition was
// deleted or is no longer compacted).
func (c *cleaningPass) step(nowMs, budget int64, res *CompactionResult) (bool, error) {
	p := c.p
	p.cleaner.Lock()
	defer p.cleaner.Unlock()
	s := p.Topic.currentSettings()
	if p.deleted.Load() || !s.compact {
		return true, nil
	}
	if !c.rewriting {
		mapped, err := c.mapStep(budget, res)
		if err != nil || !mapped {
			return false, err
		}
		c.rewriting = true
		c.cursor = 0
		if res.BytesRead >= budget {
			return false, nil
		}
	}
	finished, err := c.rewriteStep(nowMs, budget, s, res)
	if err != nil || !finished {
		return false, err
	}
	p.mu.Lock()
	if p.deleted.Load() {
		p.mu.Unlock()
		return true, nil
	}
	p.mu.cleanerCheckpoint = max(p.mu.cleanerCheckpoint, c.mapEnd)
	p.mu.tombstoneHorizon = c.horizon
	b := p.Topic.m.store.NewBatch()
	b.Set(pebblestore.PartitionStateKey(p.Topic.ID, p.Index), p.stateRowLocked())
	err = b.Apply()
	p.mu.Unlock()
	if err != nil {
		b.Close()
		return false, fmt.Errorf("%w: %w", ErrStorage, err)
	}
	if err := b.Wait(); err != nil {
		return false, fmt.Errorf("%w: %w", ErrStorage, err)
	}
	return true, nil
}

// mapStep reads dirty batches into the offset map. It reports whether the
// map is complete (c.mapEnd set).
func (c *cleaningPass) mapStep(budget int64, res *CompactionResult) (bool, error) {
	p := c.p
	t := p.Topic
	if c.cursor >= c.limit {
		c.mapEnd = c.limit
		return true, nil
	}
	it, err := t.m.store.NewIter(pebblestore.BatchKey(t.ID, p.Index, c.cursor), pebblestore.BatchKey(t.ID, p.Index, c.limit))
	if err != nil {
		return false, fmt.Errorf("%w: %w", ErrStorage, err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		base := pebblestore.OffsetFromKey(it.Key())
		if c.boundaries[base] && base > c.mapFrom && len(c.offsets) >= c.mapEntries {
			c.mapEnd = base
			return true, nil
		}
		raw, err := it.Value()
		if err != nil {
			return false, fmt.Errorf("%w: %w", ErrStorage, err)
		}
		h, records, err := DecodeRecords(raw)
		if err != nil {
			return false, fmt.Errorf("%w: stored batch %s/%d@%d: %v", pebblestore.ErrCorruption, t.Name, p.Index, base, err)
		}
		if !h.IsControl() && !c.isAborted(h) {
			for i := range records {
				if records[i].Key != nil {
					c.offsets[c.hash(records[i].Key)] = h.BaseOffset + int64(records[i].OffsetDelta)
				}
			}
		}
		res.BytesRead += int64(len(raw))
		if res.BytesRead >= budget {
			c.cursor = base + 1
			return false, nil
		}
	}
	if err := it.Close(); err != nil {
		return false, fmt.Errorf("%w: %w", ErrStorage, err)
	}
	c.mapEnd = c.limit
	return true, nil
}

// segmentChange is what one rewrite step did to one segment.
type segmentChange struct {
	seg             segment
	size, records   int64 // deltas
	complete        bool
	maxTimestamp    int64
	changedThisStep bool
}

// rewriteStep rewrites batches from the cursor (at least the segment that
// holds the log start) to the end of the map, and commits them with the
// segment rows they change. It reports whether it reached the end.
func (c *cleaningPass) rewriteStep(nowMs, budget int64, s *topicSettings, res *CompactionResult) (bool, error) {
	p := c.p
	segs, err := p.loadSegments()
	if err != nil {
		return false, err
	}
	// Start at the segment holding the log start (earlier ones wait for
	// retention), or where the last step stopped.
	first := firstRetained(segs, p.logStart.Load(), c.mapEnd)
	if c.cursor < first {
		c.cursor = first
		c.curSeg = -1
	}
	b := p.Topic.m.store.NewBatch()
	defer b.Close()
	r := &stepRewrite{c: c, segs: segs, b: b, nowMs: nowMs, settings: s, res: res}
	finished, err := r.rewriteBatches(budget)
	if err != nil {
		return false, err
	}
	if finished {
		r.completeCurrent()
		c.cursor = c.mapEnd
	}

	// A segment left without batches loses its row (its range joins the
	// previous segment), except under compact,delete: there it stays for
	// retention to delete by its timestamps, which moves the log start past
	// it as Kafka's retention does with an emptied segment.
	dropEmpty := !s.delete
	if finished && dropEmpty {
		r.dropEmptiedSegments(first)
	}
	sizeDelta, recordsDelta := r.writeSegmentRows(dropEmpty)
	if b.Empty() {
		return finished, nil
	}
	if deleted, err := r.commit(sizeDelta, recordsDelta); deleted || err != nil {
		return deleted, err
	}
	return finished, nil
}

// firstRetained returns the base of the first segment that reaches past
// logStart, or mapEnd when none does.
func firstRetained(segs []segment, logStart, mapEnd int64) int64 {
	for i := range segs {
		upper := segs[i].LastOffset + 1
		if i+1 < len(segs) {
			upper = segs[i+1].Base
		}
		if upper > logStart {
			return segs[i].Base
		}
	}
	return mapEnd
}

// stepRewrite is one rewriteStep: the segments as loaded, the Pebble batch
// of the step's writes, and the segment changes and aborted-index entries
// to drop that it has gathered.
type stepRewrite struct {
	c              *cleaningPass
	nowMs          int64
	settings       *topicSettings
	res            *CompactionResult
	segs           []segment
	b              *pebblestore.Batch
	changes        []*segmentChange // in offset order
	droppedAborted []int64          // markers whose index entry this step drops
}

// segmentOf returns the segment holding base, or one with Base -1 when no
// row covers it (no row to update).
func (r *stepRewrite) segmentOf(base int64) segment {
	i := sort.Search(len(r.segs), func(i int) bool { return r.segs[i].Base > base }) - 1
	if i < 0 {
		return segment{Base: -1}
	}
	return r.segs[i]
}

// change returns the change of seg, adding it after the others.
func (r *stepRewrite) change(seg segment) *segmentChange {
	if n := len(r.changes); n > 0 && r.changes[n-1].seg.Base == seg.Base {
		return r.changes[n-1]
	}
	sc := &segmentChange{seg: seg}
	r.changes = append(r.changes, sc)
	return sc
}

// completeCurrent marks the segment being rewritten as complete, with the
// max timestamp of its batches as kept, if any of them changed.
func (r *stepRewrite) completeCurrent() {
	c := r.c
	if c.curSeg < 0 {
		return
	}
	if c.curSegChanged {
		sc := r.change(r.segmentOf(c.curSeg))
		sc.complete = true
		sc.maxTimestamp = c.curSegMaxTS
	}
	c.curSeg = -1
}

// rewriteBatches cleans the batches from the cursor to the end of the map
// (rewriteBatch) until budget bytes are read. It reports whether it
// reached the end; if not, the cursor is where the next step resumes.
func (r *stepRewrite) rewriteBatches(budget int64) (bool, error) {
	c, res := r.c, r.res
	p := c.p
	t := p.Topic
	it, err := t.m.store.NewIter(pebblestore.BatchKey(t.ID, p.Index, c.cursor), pebblestore.BatchKey(t.ID, p.Index, max(c.cursor, c.mapEnd)))
	if err != nil {
		return false, fmt.Errorf("%w: %w", ErrStorage, err)
	}
	defer it.Close()
	finished := true
	for ok := it.First(); ok; ok = it.Next() {
		base := pebblestore.OffsetFromKey(it.Key())
		seg := r.segmentOf(base)
		if seg.Base != c.curSeg {
			r.completeCurrent()
			c.curSeg, c.curSegMaxTS, c.curSegChanged = seg.Base, -1, false
		}
		raw, err := it.Value()
		if err != nil {
			return false, fmt.Errorf("%w: %w", ErrStorage, err)
		}
		if err := r.rewriteBatch(base, seg, raw); err != nil {
			return false, err
		}
		if res.BytesRead >= budget {
			c.cursor = base + 1
			finished = false
			break
		}
	}
	if err := it.Close(); err != nil {
		return false, fmt.Errorf("%w: %w", ErrStorage, err)
	}
	return finished, nil
}

// rewriteBatch decides what the pass keeps of the stored batch at base
// (cleanBatch) and adds the writes that carry it out: the batch and its
// index row dropped or rewritten, the aborted-index entry of a marker
// whose data is gone, and the change to its segment.
func (r *stepRewrite) rewriteBatch(base int64, seg segment, raw []byte) error {
	c, b, res := r.c, r.b, r.res
	p := c.p
	t := p.Topic
	out, err := cleanBatch(raw, cleanRules{
		latest: c.latestOffset, aborted: c.isAborted, removable: c.markerRemovable,
		nowMs: r.nowMs, deleteRetentionMs: r.settings.deleteRetentionMs,
	})
	if err != nil {
		return fmt.Errorf("%w: stored batch %s/%d@%d: %v", pebblestore.ErrCorruption, t.Name, p.Index, base, err)
	}
	if out.pendingHorizon && (c.horizon < 0 || out.horizon < c.horizon) {
		c.horizon = out.horizon
	}
	switch {
	case out.txnData && out.action != cleanDrop:
		c.txnData[out.producerID] = true
	case out.markerRemovable && c.hasAbortedEntry(base):
		// Its data is gone (dropped by this pass, in this step's batch
		// or an earlier one): the entry goes with the stamping.
		b.Delete(pebblestore.TxnAbortedKey(t.ID, p.Index, base))
		r.droppedAborted = append(r.droppedAborted, base)
	}
	switch out.action {
	case cleanKeep:
		c.curSegMaxTS = max(c.curSegMaxTS, out.maxTimestamp)
	case cleanDrop:
		b.Delete(pebblestore.BatchKey(t.ID, p.Index, base))
		b.Delete(pebblestore.BatchIndexKey(t.ID, p.Index, base))
		sc := r.change(seg)
		sc.size -= int64(len(raw))
		sc.records -= int64(out.removed)
		sc.changedThisStep = true
		c.curSegChanged = true
		c.bytesRemoved += int64(len(raw))
	case cleanRewrite:
		h, _ := ParseBatchHeader(out.batch)
		b.Set(pebblestore.BatchKey(t.ID, p.Index, base), out.batch)
		b.Set(pebblestore.BatchIndexKey(t.ID, p.Index, base),
			batchIndex{LastOffset: h.LastOffset(), MaxTimestamp: out.maxTimestamp, Size: uint32(len(out.batch))}.encode())
		sc := r.change(seg)
		sc.size += int64(len(out.batch) - len(raw))
		sc.records -= int64(out.removed)
		sc.changedThisStep = true
		c.curSegChanged = true
		c.curSegMaxTS = max(c.curSegMaxTS, out.maxTimestamp)
		c.bytesRemoved += int64(len(raw) - len(out.batch))
		res.BytesWritten += int64(len(out.batch))
	}
	c.recordsRemoved += int64(out.removed)
	res.BytesRead += int64(len(raw))
	return nil
}

// latestOffset returns the latest offset of key in the offset map.
func (c *cleaningPass) latestOffset(key []byte) (int64, bool) {
	o, ok := c.offsets[c.hash(key)]
	return o, ok
}

// dropEmptiedSegments deletes the rows of the segments from first to the
// end of the map that earlier passes, or a pass stopped midway, left
// empty, outside the range of this step's changes.
func (r *stepRewrite) dropEmptiedSegments(first int64) {
	c, changes := r.c, r.changes
	p := c.p
	for _, seg := range r.segs {
		if seg.Base >= first && seg.Base < c.mapEnd && seg.Size == 0 && (len(changes) == 0 || seg.Base < changes[0].seg.Base || seg.Base > changes[len(changes)-1].seg.Base) {
			r.b.Delete(pebblestore.SegmentKey(p.Topic.ID, p.Index, seg.Base))
		}
	}
}

// writeSegmentRows adds the rows of the segments this step changed (or
// completed), deleting a completed empty one when dropEmpty, and returns
// the size and record count deltas.
func (r *stepRewrite) writeSegmentRows(dropEmpty bool) (sizeDelta, recordsDelta int64) {
	p := r.c.p
	for _, sc := range r.changes {
		if (!sc.changedThisStep && !sc.complete) || sc.seg.Base < 0 {
			continue
		}
		row := sc.seg
		row.Size += sc.size
		row.Records += sc.records
		sizeDelta += sc.size
		recordsDelta += sc.records
		if sc.complete && sc.maxTimestamp >= 0 {
			row.MaxTimestamp = sc.maxTimestamp
		}
		key := pebblestore.SegmentKey(p.Topic.ID, p.Index, row.Base)
		if sc.complete && row.Size == 0 && dropEmpty {
			r.b.Delete(key)
		} else {
			r.b.Set(key, row.encode())
		}
	}
	return sizeDelta, recordsDelta
}

// commit applies the step's batch under the partition's lock, updates the
// size counters and the aborted-transaction index, and waits for the
// sync. It reports whether the partition was deleted meanwhile (nothing
// written).
func (r *stepRewrite) commit(sizeDelta, recordsDelta int64) (deleted bool, err error) {
	p := r.c.p
	p.mu.Lock()
	if p.deleted.Load() {
		p.mu.Unlock()
		return true, nil
	}
	if err := r.b.Apply(); err != nil {
		p.mu.Unlock()
		return false, fmt.Errorf("%w: %w", ErrStorage, err)
	}
	p.sizeBytes.Add(sizeDelta)
	p.records.Add(recordsDelta)
	p.dropAbortedLocked(r.droppedAborted)
	p.mu.Unlock()
	if err := r.b.Wait(); err != nil {
		return false, fmt.Errorf("%w: %w", ErrStorage, err)
	}
	return false, nil
}

type cleanAction int8

const (
	cleanKeep    cleanAction = iota // the batch stays as stored
	cleanDrop                       // no record is kept: delete the batch
	cleanRewrite                    // some records go: store batch instead
)

type cleanOutcome struct {
	action       cleanAction
	batch        []byte // cleanRewrite: the new batch
	maxTimestamp int64  // of the batch as kept
	removed      int32  // records removed
	// pendingHorizon: the kept batch holds tombstones or is a removable
	// marker, to be removed from horizon (Unix ms).
	pendingHorizon bool
	horizon        int64
	// txnData: a transactional data batch of producerID.
	txnData    bool
	producerID int64
	// markerRemovable: a marker whose transaction has no data left.
	markerRemovable bool
}

// cleanRules are what cleanBatch decides by.
type cleanRules struct {
	// latest returns the latest offset of a key in the offset map.
	latest func(key []byte) (int64, bool)
	// aborted reports a data batch of an aborted transaction.
	aborted func(BatchHeader) bool
	// removable, called for every marker in offset order, reports whether
	// the marker's transaction has no data left (see the package comment).
	removable         func(BatchHeader) bool
	nowMs             int64
	deleteRetentionMs int64 // the topic's delete.retention.ms
}

// cleanBatch decides what compaction keeps of one stored batch.
func cleanBatch(raw []byte, rules cleanRules) (cleanOutcome, error) {
	h, records, err := DecodeRecords(raw)
	if err != nil {
		return cleanOutcome{}, err
	}
	if h.IsControl() {
		if !rules.removable(h) {
			return cleanOutcome{action: cleanKeep, maxTimestamp: h.MaxTimestamp}, nil
		}
		out := cleanOutcome{markerRemovable: true}
		if !h.HasDeleteHorizon() {
			// First seen removable: stamp the horizon, keep the record.
			out.pendingHorizon, out.horizon = true, horizonFrom(rules.nowMs, rules.deleteRetentionMs)
			return stampHorizon(h, records, out, out.horizon)
		}
		if rules.nowMs >= h.BaseTimestamp {
			out.action, out.removed = cleanDrop, int32(len(records))
			return out, nil
		}
		out.action, out.maxTimestamp = cleanKeep, h.MaxTimestamp
		out.pendingHorizon, out.horizon = true, h.BaseTimestamp
		return out, nil
	}
	if rules.aborted(h) {
		return cleanOutcome{action: cleanDrop, removed: int32(len(records))}, nil
	}
	kept := records[:0:0]
	tombstones := false
	for _, r := range records {
		if r.Key == nil {
			continue
		}
		if o, ok := rules.latest(r.Key); ok && h.BaseOffset+int64(r.OffsetDelta) < o {
			continue
		}
		if r.Value == nil {
			if h.HasDeleteHorizon() && rules.nowMs >= h.BaseTimestamp {
				continue
			}
			tombstones = true
		}
		kept = append(kept, r)
	}
	out := cleanOutcome{removed: int32(len(records) - len(kept)), pendingHorizon: tombstones,
		txnData: h.IsTransactional(), producerID: h.ProducerID}
	if len(kept) == 0 {
		out.action = cleanDrop
		out.pendingHorizon = false
		return out, nil
	}
	horizon := int64(-1)
	if h.HasDeleteHorizon() {
		horizon = h.BaseTimestamp
	} else if tombstones {
		horizon = horizonFrom(rules.nowMs, rules.deleteRetentionMs)
	}
	out.horizon = horizon
	if len(kept) == len(records) && (!tombstones || h.HasDeleteHorizon()) {
		out.action = cleanKeep
		out.maxTimestamp = h.MaxTimestamp
		return out, nil
	}
	return stampHorizon(h, kept, out, horizon)
}

// horizonFrom is the delete horizon of something first kept at nowMs.
func horizonFrom(nowMs, deleteRetentionMs int64) int64 {
	if nowMs > math.MaxInt64-deleteRetentionMs {
		return math.MaxInt64
	}
	return nowMs + deleteRetentionMs
}

// stampHorizon rebuilds batch h with the records kept and, when horizon
// is not -1, the delete horizon (KIP-534: attribute bit 6, the horizon in
// the base timestamp), filling out's rewrite fields.
func stampHorizon(h BatchHeader, kept []Record, out cleanOutcome, horizon int64) (cleanOutcome, error) {
	// Rebuild with the same header fields; record timestamps keep their
	// absolute values against the new base timestamp.
	nh := h
	stamps := make([]int64, len(kept))
	maxTS := int64(math.MinInt64)
	for i := range kept {
		stamps[i] = h.BaseTimestamp + kept[i].TimestampDelta
		maxTS = max(maxTS, stamps[i])
	}
	if horizon >= 0 {
		nh.Attributes |= batchAttributeDeleteHorizon
		nh.BaseTimestamp = horizon
	} else {
		nh.BaseTimestamp = stamps[0]
	}
	for i := range kept {
		kept[i].TimestampDelta = stamps[i] - nh.BaseTimestamp
	}
	if !h.LogAppendTime() {
		nh.MaxTimestamp = maxTS
	}
	batch, err := EncodeBatch(nh, kept)
	if err != nil {
		return cleanOutcome{}, err
	}
	out.action = cleanRewrite
	out.batch = batch
	out.maxTimestamp = nh.MaxTimestamp
	return out, nil
}
