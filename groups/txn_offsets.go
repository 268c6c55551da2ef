package groups

// Pending transactional offsets (issue 13, transactions across brokers):
// Kafka's GroupMetadataManager/OffsetMetadataManager keep the offsets a
// TxnOffsetCommit wrote pending per producer ID until the transaction's
// marker on the group's partition of __consumer_offsets commits them
// (they become the committed offsets) or aborts them (dropped). Here that
// path serves a group whose transaction is coordinated by another broker;
// a transaction coordinated here with the group stages its offsets in the
// transaction coordinator instead (txns.StageOffsets, CommitTransaction).
//
// Storage: one Pebble row per pending offset, written synced before
// TxnOffsetCommit answers, read back at Open:
//
//	0x26 groupID u64 | producer u64 | topicID [16] | partition u32 -> u16 topic length | topic | epoch i16 | flags u8 | OffsetCommitValue
//
// flags bit 0: a plain OffsetCommit of that partition came after it
// (superseded).
//
// (pebblestore/keys.go lists the prefix.) The group's 0x20 row is written
// in the same batch when it has none, so recovery finds the group.
// Invariants: a pending offset is in memory iff its row is in the store
// (modulo a failed sync); a commit marker writes the offset records, their
// 0x21 rows and the deletion of the producer's 0x26 rows in one Pebble
// batch; an abort marker deletes the rows in one batch.
//
// Decisions:
//   - A newer epoch of the same producer replaces the older epoch's
//     pending offsets of that group: the transaction coordinator bumps an
//     epoch only once the older transaction was ended (its markers
//     answered), so they can only be leftovers. An older epoch is fenced
//     (ErrProducerFenced) and a marker of an older epoch than the pending
//     offsets ends nothing (ErrInvalidProducerEpoch), as a data partition's
//     producer state answers; then a marker of a stale transaction
//     coordinator is fenced (ErrTransactionCoordinatorFenced,
//     txn_offsets_fence.go).
//   - A plain OffsetCommit of a partition after the TxnOffsetCommit wins:
//     the commit marker leaves that partition's committed offset alone
//     (Kafka's replayEndTransactionMarker keeps the later record by log
//     position; here the pending row is flagged superseded in the plain
//     commit's Pebble batch).
//   - OffsetDelete and DeleteGroups drop the pending offsets of the
//     partitions they delete, as Kafka's tombstone replay does
//     (OffsetMetadataManager.replay of a null value, deleteAllOffsets);
//     retention keeps a partition's offset and the group while offsets are
//     pending (cleanupExpiredOffsets).
//   - On a replicated __consumer_offsets (RF > 1) the log holds, instead
//     of these rows, a record per pending offset, and the marker's outcome
//     (txn_offsets_log.go); every row write below carries its record
//     (rowOp.rec).

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/topics"
)

var (
	// ErrProducerFenced: a TxnOffsetCommit of an older producer epoch than
	// the pending offsets of the same producer.
	ErrProducerFenced = errors.New("groups: producer fenced: a newer epoch of this producer committed transactional offsets")
	// ErrInvalidProducerEpoch: a marker of an older producer epoch than the
	// pending offsets it names.
	ErrInvalidProducerEpoch = errors.New("groups: the marker's producer epoch is older than the pending offsets' epoch")
	// ErrTxnOffsetsStorage wraps a store failure of a pending offset write.
	ErrTxnOffsetsStorage = pebblestore.StorageSentinel("groups: storing transactional offsets failed")
)

// txnPending is one producer's pending offsets in one group.
type txnPending struct {
	epoch   int16
	offsets map[topicPartition]*offsetEntry
	// superseded marks the offsets a plain OffsetCommit overwrote after
	// the TxnOffsetCommit: the commit marker leaves those partitions'
	// committed offsets alone (Kafka keeps the later record).
	superseded map[topicPartition]bool
}

// txnRowSuperseded is the flag of a pending offset row that a plain
// commit superseded.
const txnRowSuperseded = 1

// TxnOffsetsRequest is a TxnOffsetCommit whose transaction is coordinated
// by another broker: Commit carries the group, the membership fields (v3,
// Generation -1 without them) and the offsets, already checked for
// unknown topics and metadata size by the caller.
type TxnOffsetsRequest struct {
	Commit        CommitRequest
	ProducerID    int64
	ProducerEpoch int16
}

func txnOffsetsPrefix(groupID uint64, producerID int64) []byte {
	k := binary.BigEndian.AppendUint64([]byte{pebblestore.PrefixGroupTxnOffset}, groupID)
	return binary.BigEndian.AppendUint64(k, uint64(producerID))
}

func txnOffsetRowKey(groupID uint64, producerID int64, topicID [16]byte, partition int32) []byte {
	k := txnOffsetsPrefix(groupID, producerID)
	k = append(k, topicID[:]...)
	return binary.BigEndian.AppendUint32(k, uint32(partition))
}

func encodeTxnOffsetRow(topic string, epoch int16, flags byte, e *offsetEntry) []byte {
	rest := binary.BigEndian.AppendUint16(nil, uint16(epoch))
	rest = append(rest, flags)
	return encodeNamed(topic, append(rest, encodeOffsetCommitValue(e)...))
}

// supersedeTxnOffsetsLocked returns the rows that mark the pending offsets
// of the partitions of commits (a plain OffsetCommit) superseded, to write
// with the commit's records, and the function that marks them in memory
// once appended. REQUIRES: c.mu held.
func (c *Coordinator) supersedeTxnOffsetsLocked(g *group, commits []pendingCommit) ([]rowOp, func()) {
	if len(g.txnOffsets) == 0 {
		return nil, func() {}
	}
	var rows []rowOp
	var marks []func()
	for pid, p := range g.txnOffsets {
		for _, pc := range commits {
			e := p.offsets[pc.tp]
			if e == nil || p.superseded[pc.tp] {
				continue
			}
			rows = append(rows, p.setOp(g, pid, pc.tp, txnRowSuperseded, e))
			marks = append(marks, func() {
				if p.superseded == nil {
					p.superseded = map[topicPartition]bool{}
				}
				p.superseded[pc.tp] = true
			})
		}
	}
	return rows, func() {
		for _, m := range marks {
			m()
		}
	}
}

// StageTxnOffsets keeps req's offsets pending for the producer until its
// marker (EndTxnOffsets). The membership is validated as ValidateCommit
// does (KIP-447); a group that does not exist is created as a simple group
// when no membership is given. It returns once the rows are durable (on a
// replicated __consumer_offsets: once the records are committed on a
// majority; ErrNotCoordinator when not known committed).
func (c *Coordinator) StageTxnOffsets(req TxnOffsetsRequest, now time.Time) error {
	cr := req.Commit
	c.mu.Lock()
	if err := c.servesPartitionLocked(c.PartitionFor(cr.Group)); err != nil {
		c.mu.Unlock()
		return err
	}
	g := c.mu.groups[cr.Group]
	created := false
	if g == nil {
		if cr.Generation >= 0 || cr.MemberID != "" || cr.InstanceID != nil {
			c.mu.Unlock()
			return ErrIllegalGeneration
		}
		g, created = c.newGroupLocked(cr.Group), true
	}
	wait, err := c.stageTxnOffsetsLocked(g, req, now)
	if created && wait == nil {
		c.dropIfUnusedLocked(g) // refused, or nothing to keep
	}
	c.mu.Unlock()
	if err != nil {
		return err
	}
	if wait == nil {
		return nil
	}
	return wait()
}

// stageTxnOffsetsLocked validates req against g, applies its rows (not yet
// durable) or proposes its records, and records the offsets in memory. It
// returns the wait for the write (nil when nothing is written).
// REQUIRES: c.mu held.
func (c *Coordinator) stageTxnOffsetsLocked(g *group, req TxnOffsetsRequest, now time.Time) (func() error, error) {
	cr := req.Commit
	if cr.Generation >= 0 || cr.MemberID != "" || cr.InstanceID != nil {
		if err := validateOffsetCommit(g, cr); err != nil {
			return nil, err
		}
	} else if g.is(StateDead) {
		return nil, ErrCoordinatorNotAvailable
	}
	tp := g.txnOffsets[req.ProducerID]
	if tp != nil && tp.epoch > req.ProducerEpoch {
		return nil, ErrProducerFenced
	}
	prev := tp
	var ops []rowOp
	if tp != nil && tp.epoch < req.ProducerEpoch {
		// The older epoch's leftovers (see the package comment).
		prefix := txnOffsetsPrefix(g.id, req.ProducerID)
		ops = append(ops, rowOp{key: prefix, del: true, rangeEnd: pebblestore.PrefixEnd(prefix)})
		ops = append(ops, txnDelOps(g, req.ProducerID, tp)...)
		tp = nil
	}
	next := &txnPending{epoch: req.ProducerEpoch, offsets: map[topicPartition]*offsetEntry{}}
	if tp != nil {
		for k, e := range tp.offsets {
			next.offsets[k] = e
		}
		for k := range tp.superseded {
			if next.superseded == nil {
				next.superseded = map[topicPartition]bool{}
			}
			next.superseded[k] = true
		}
	}
	n := 0
	for _, t := range cr.Topics {
		topic, ok := c.tm.Topic(t.Topic)
		for _, p := range t.Partitions {
			if !ok || p.Partition < 0 || p.Partition >= topic.NumPartitions() {
				continue // the caller answered it
			}
			md := ""
			if p.Metadata != nil {
				md = *p.Metadata
			}
			e := &offsetEntry{offset: p.Offset, leaderEpoch: p.LeaderEpoch, metadata: md, commitTime: now, topicID: topic.ID, logOffset: -1}
			k := topicPartition{t.Topic, p.Partition}
			if old := next.offsets[k]; old != nil && old.topicID != e.topicID {
				ops = append(ops, txnDelOp(g, req.ProducerID, k, old))
			}
			ops = append(ops, next.setOp(g, req.ProducerID, k, 0, e))
			next.offsets[k] = e
			delete(next.superseded, k)
			n++
		}
	}
	if n == 0 {
		return nil, nil
	}
	if c.mu.replicated != nil {
		ps, _, err := c.appendReplicatedLocked(&op{now: now}, g, nil, ops, true)
		if err != nil {
			return nil, commitAppendError(err)
		}
		c.setTxnPendingLocked(g, req.ProducerID, next)
		return func() error {
			err := ps.wait()
			if err == nil {
				return nil
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			c.restorePendingLocked(g, req.ProducerID, next, prev)
			return commitAppendError(err)
		}, nil
	}
	b, err := c.applyTxnRowsLocked(g, ops)
	if err != nil {
		return nil, err
	}
	c.setTxnPendingLocked(g, req.ProducerID, next)
	return func() error {
		if err := b.Wait(); err != nil {
			return fmt.Errorf("%w: %v", ErrTxnOffsetsStorage, err)
		}
		return nil
	}, nil
}

// applyTxnRowsLocked applies ops (and g's row, the first time) in one
// Pebble batch, not yet durable. REQUIRES: c.mu held.
func (c *Coordinator) applyTxnRowsLocked(g *group, ops []rowOp) (*pebblestore.Batch, error) {
	b := c.store.NewBatch()
	if !g.rowWritten {
		b.Set(groupRowKey(g.id), encodeNamed(g.name, g.lastMetadata))
	}
	for _, r := range ops {
		switch {
		case r.del && r.rangeEnd != nil:
			b.DeleteRange(r.key, r.rangeEnd)
		case r.del:
			b.Delete(r.key)
		default:
			b.Set(r.key, r.value)
		}
	}
	if err := b.Apply(); err != nil {
		b.Close()
		return nil, fmt.Errorf("%w: %v", ErrTxnOffsetsStorage, err)
	}
	g.rowWritten = true
	return b, nil
}

// setTxnPendingLocked sets (tp non-empty) or removes (nil or empty) g's
// pending offsets of producer pid. REQUIRES: c.mu held.
func (c *Coordinator) setTxnPendingLocked(g *group, pid int64, tp *txnPending) {
	if tp == nil || len(tp.offsets) == 0 {
		delete(g.txnOffsets, pid)
		if gs := c.mu.txnProducers[pid]; gs != nil {
			delete(gs, g.name)
			if len(gs) == 0 {
				delete(c.mu.txnProducers, pid)
			}
		}
		return
	}
	if g.txnOffsets == nil {
		g.txnOffsets = map[int64]*txnPending{}
	}
	g.txnOffsets[pid] = tp
	if c.mu.txnProducers[pid] == nil {
		c.mu.txnProducers[pid] = map[string]bool{}
	}
	c.mu.txnProducers[pid][g.name] = true
}

// forgetTxnOffsetsLocked removes every pending offset of g from memory (the
// group is deleted or unloaded). REQUIRES: c.mu held.
func (c *Coordinator) forgetTxnOffsetsLocked(g *group) {
	for pid := range g.txnOffsets {
		c.setTxnPendingLocked(g, pid, nil)
	}
}

// txnPendingOn reports whether a producer has a pending offset for tp.
// REQUIRES: c.mu held.
func (g *group) txnPendingOn(tp topicPartition) bool {
	for _, p := range g.txnOffsets {
		if p.offsets[tp] != nil {
			return true
		}
	}
	return false
}

// dropTxnOffsetsLocked removes the pending offsets of tps (every producer)
// from memory and returns the deletions of their rows: OffsetDelete and
// DeleteGroups tombstones end them, as in Kafka. REQUIRES: c.mu held.
func (c *Coordinator) dropTxnOffsetsLocked(g *group, tps []topicPartition) []rowOp {
	var rows []rowOp
	for pid, p := range g.txnOffsets {
		for _, tp := range tps {
			if e := p.offsets[tp]; e != nil {
				rows = append(rows, txnDelOp(g, pid, tp, e))
				delete(p.offsets, tp)
			}
		}
		if len(p.offsets) == 0 {
			c.setTxnPendingLocked(g, pid, nil)
		}
	}
	return rows
}

// txnPendingTPs lists the partitions of g with pending offsets, sorted.
func (g *group) txnPendingTPs() []topicPartition {
	var out []topicPartition
	seen := map[topicPartition]bool{}
	for _, p := range g.txnOffsets {
		for tp := range p.offsets {
			if !seen[tp] {
				seen[tp] = true
				out = append(out, tp)
			}
		}
	}
	slices.SortFunc(out, func(a, b topicPartition) int {
		return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
	})
	return out
}

// EndTxnOffsets applies transaction marker m to its partition of
// __consumer_offsets (WriteTxnMarkers): on commit the producer's pending
// offsets in every group of the partition become the committed offsets
// (their records and rows, and the deletion of the pending rows, in one
// Pebble batch), on abort they are dropped. The returned wait blocks
// until that is durable (commit: and visible to FetchOffsets) and returns
// the outcome: nil also when nothing was pending (nothing is written but
// a higher coordinator epoch, so a repeated marker is harmless);
// ErrInvalidProducerEpoch when the pending offsets carry a newer epoch
// than the marker, then ErrTransactionCoordinatorFenced when the
// producer's last marker on the partition had a higher coordinator epoch
// (nothing ended, nothing written; txn_offsets_fence.go). On a replicated
// __consumer_offsets the outcome is one batch of the partition's log
// (txn_offsets_log.go), answered once committed on a majority;
// ErrNotCoordinator off its leader, ErrCoordinatorLoadInProgress while it
// is loaded (its pending offsets are not known yet).
func (c *Coordinator) EndTxnOffsets(m TxnMarker, now time.Time) func() error {
	c.mu.Lock()
	if err := c.servesPartitionLocked(m.Partition); err != nil {
		c.mu.Unlock()
		return func() error { return err }
	}
	var gs []*group
	for name := range c.mu.txnProducers[m.ProducerID] {
		if g := c.mu.groups[name]; g != nil && g.partition == m.Partition {
			if g.txnOffsets[m.ProducerID].epoch > m.ProducerEpoch {
				c.mu.Unlock()
				return func() error { return ErrInvalidProducerEpoch }
			}
			gs = append(gs, g)
		}
	}
	ce, err := c.fenceTxnMarkerLocked(m)
	if err != nil {
		c.mu.Unlock()
		return func() error { return err }
	}
	if len(gs) == 0 {
		if ce == nil {
			c.mu.Unlock()
			return func() error { return nil }
		}
		return c.writeCoordEpochLocked(ce, now)
	}
	slices.SortFunc(gs, func(a, b *group) int { return cmp.Compare(a.id, b.id) })
	if c.mu.replicated != nil {
		return c.endTxnOffsetsReplicatedLocked(gs, m, ce, now)
	}
	if !m.Commit {
		return c.abortTxnOffsetsLocked(gs, m.ProducerID, ce)
	}
	return c.commitTxnOffsetsLocked(gs, m.ProducerID, ce, now)
}

// abortTxnOffsetsLocked drops producerID's pending offsets of gs and
// records ce in the same batch. It releases c.mu. REQUIRES: c.mu held.
func (c *Coordinator) abortTxnOffsetsLocked(gs []*group, producerID int64, ce *coordEpochWrite) func() error {
	defer c.mu.Unlock()
	b := c.store.NewBatch()
	for _, g := range gs {
		prefix := txnOffsetsPrefix(g.id, producerID)
		b.DeleteRange(prefix, pebblestore.PrefixEnd(prefix))
	}
	for _, r := range ce.ops() {
		b.Set(r.key, r.value)
	}
	if err := b.Apply(); err != nil {
		b.Close()
		return func() error { return fmt.Errorf("%w: %v", ErrTxnOffsetsStorage, err) }
	}
	for _, g := range gs {
		c.setTxnPendingLocked(g, producerID, nil)
	}
	c.noteCoordEpochLocked(ce)
	return func() error {
		if err := b.Wait(); err != nil {
			return fmt.Errorf("%w: %v", ErrTxnOffsetsStorage, err)
		}
		return nil
	}
}

// commitTxnOffsetsLocked writes producerID's pending offsets of gs as
// committed offsets, in one Pebble batch with the deletion of their
// pending rows and the row of ce. It releases c.mu. REQUIRES: c.mu held.
func (c *Coordinator) commitTxnOffsetsLocked(gs []*group, producerID int64, ce *coordEpochWrite, now time.Time) func() error {
	unlocked := false
	defer func() {
		if !unlocked {
			c.mu.Unlock()
		}
	}()
	fail := func(err error) func() error { return func() error { return commitAppendError(err) } }
	var writes []*txnGroupWrite
	var all []*topics.Append
	var prefixes [][]byte
	ids := map[string][16]byte{}
	for _, g := range gs {
		tc := TxnCommit{Group: g.name}
		for _, tp := range g.txnPendingTPs() {
			pending := g.txnOffsets[producerID]
			e := pending.offsets[tp]
			if e == nil || pending.superseded[tp] {
				continue // a later plain commit wins
			}
			if id, ok := c.currentTopicID(tp.topic, ids); !ok || id != e.topicID {
				continue // the topic was deleted since: dropped, as Kafka's onTopicsDeleted
			}
			md := e.metadata
			tc.Topics = append(tc.Topics, CommitTopic{Topic: tp.topic, Partitions: []CommitPartition{{Partition: tp.partition, Offset: e.offset, LeaderEpoch: e.leaderEpoch, Metadata: &md}}})
		}
		w, err := c.txnGroupAppendsLocked(g, tc, now)
		if err != nil {
			return fail(err)
		}
		writes = append(writes, w)
		for _, ch := range w.chunks {
			all = append(all, ch.a)
		}
		prefixes = append(prefixes, txnOffsetsPrefix(g.id, producerID))
	}
	deleteRows := func(b *pebblestore.Batch) {
		for _, prefix := range prefixes {
			b.DeleteRange(prefix, pebblestore.PrefixEnd(prefix))
		}
		for _, r := range ce.ops() {
			b.Set(r.key, r.value)
		}
	}
	if len(all) == 0 {
		// Every pending offset was of a deleted topic: only the rows go.
		for _, g := range gs {
			c.setTxnPendingLocked(g, producerID, nil)
		}
		b := c.store.NewBatch()
		deleteRows(b)
		if err := b.Commit(); err != nil {
			return func() error { return fmt.Errorf("%w: %v", ErrTxnOffsetsStorage, err) }
		}
		c.noteCoordEpochLocked(ce)
		return func() error { return nil }
	}
	pa, err := c.tm.AppendAtomic(all, deleteRows, now)
	if err != nil {
		return fail(err)
	}
	for _, g := range gs {
		c.setTxnPendingLocked(g, producerID, nil)
	}
	c.noteCoordEpochLocked(ce)
	c.startTxnCommitsLocked(writes)
	c.mu.Unlock()
	unlocked = true
	return func() error { return c.finishTxnWrites(writes, pa) }
}

// finishTxnWrites waits for a transaction's offset write and makes its
// offsets visible (or drops them on failure). REQUIRES: c.mu not held.
func (c *Coordinator) finishTxnWrites(writes []*txnGroupWrite, pa *topics.PendingAppend) error {
	err := pa.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range writes {
		var pcs []pendingCommit
		for _, ch := range w.chunks {
			pcs = append(pcs, ch.commits...)
		}
		if len(pcs) > 0 {
			c.finishCommitsLocked(w.g, pcs, err)
		}
	}
	if err != nil {
		return commitAppendError(err)
	}
	return nil
}

// recoverTxnOffsetsLocked reads the pending offset rows back (Open).
// Rows of groups that have no row are stray. REQUIRES: c.mu held.
func (c *Coordinator) recoverTxnOffsetsLocked(byID map[uint64]*group) (int, error) {
	lower := []byte{pebblestore.PrefixGroupTxnOffset}
	it, err := c.store.NewIter(lower, pebblestore.PrefixEnd(lower))
	if err != nil {
		return 0, err
	}
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		key := it.Key()
		if len(key) != 37 {
			return 0, fmt.Errorf("%w: pending transactional offset key %x has the wrong length", pebblestore.ErrCorruption, key)
		}
		g := byID[binary.BigEndian.Uint64(key[1:9])]
		if g == nil {
			c.mu.strayRows = append(c.mu.strayRows, append([]byte(nil), key...))
			continue
		}
		pid := int64(binary.BigEndian.Uint64(key[9:17]))
		var topicID [16]byte
		copy(topicID[:], key[17:33])
		partition := int32(binary.BigEndian.Uint32(key[33:]))
		val, err := it.Value()
		if err != nil {
			return 0, err
		}
		topic, rest, err := decodeNamed(val)
		if err != nil || len(rest) < 3 {
			return 0, fmt.Errorf("%w: pending transactional offset row %x: %v", pebblestore.ErrCorruption, key, err)
		}
		epoch, flags := int16(binary.BigEndian.Uint16(rest)), rest[2]
		e := &offsetEntry{topicID: topicID, logOffset: -1}
		if err := decodeOffsetCommitValue(rest[3:], e); err != nil {
			return 0, fmt.Errorf("%w: pending transactional offset row %x: %v", pebblestore.ErrCorruption, key, err)
		}
		tp := g.txnOffsets[pid]
		if tp == nil {
			tp = &txnPending{epoch: epoch, offsets: map[topicPartition]*offsetEntry{}}
		}
		tp.offsets[topicPartition{topic, partition}] = e
		if flags&txnRowSuperseded != 0 {
			if tp.superseded == nil {
				tp.superseded = map[topicPartition]bool{}
			}
			tp.superseded[topicPartition{topic, partition}] = true
		}
		c.setTxnPendingLocked(g, pid, tp)
		n++
	}
	return n, nil
}
