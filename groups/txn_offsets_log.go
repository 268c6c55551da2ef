package groups

// Pending transactional offsets on a replicated __consumer_offsets
// (offsets-topic-replication-factor above 1; replicated.go). The log is
// the truth there, so a pending offset is a record of the partition's
// log, of a kind of our own (Kafka writes the TxnOffsetCommit's offsets
// as a transactional batch of the producer and the marker as a control
// batch; we write neither, see DESIGN.md "Replicated offsets (RF 3)"):
//
//	key   recTxnPendingOffset i16 | group string | producer i64 | topic string | partition i32
//	value version i16 (0) | epoch i16 | flags i8 | topicID [16] | OffsetCommitValue
//
// (strings as Kafka's: i16 length, bytes; flags as the 0x26 rows'.) Every
// write of a 0x26 row (txn_offsets.go) is, on a replicated partition, the
// write of this record (rowOp.rec), and every deletion its tombstone:
//   - TxnOffsetCommit: the records of its offsets (and the tombstones of an
//     older epoch's leftovers) in one batch;
//   - a plain OffsetCommit after it: the record again, flagged superseded,
//     in the commit's batch;
//   - OffsetDelete, DeleteGroups: tombstones in their batch;
//   - COMMIT marker: the offset commit records of the producer's pending
//     offsets of every group of the partition and the tombstones of its
//     pending records, in one batch (one Raft entry: all or nothing);
//     ABORT: the tombstones; either with the record of the marker's
//     coordinator epoch when it is higher (txn_offsets_fence.go).
//
// Invariant: the latest value of each key in the log is the coordinator's
// state, so Load ("latest value wins", replicated.go) rebuilds exactly the
// pending offsets and their outcome, and a compaction of the log (keeping
// the latest value of each key) never drops a pending offset a later
// marker needs: only its tombstone ends it. A request is answered only
// once its batch is committed on a majority; an append that is not known
// committed fails its request (NOT_COORDINATOR) and restores the pending
// offsets in memory where a retry needs them (a failed TxnOffsetCommit's
// are not pending, a failed marker's are pending again).

import (
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/vibemq/broker/topics"
)

// recTxnPendingOffset is the key type of a pending transactional offset
// record: far above Kafka's record types (0-21 today), so no Kafka record
// is taken for it. Part of the log format.
const recTxnPendingOffset int16 = 0x7F01

// txnPendingValueVersion is the value version written and read.
const txnPendingValueVersion int16 = 0

func txnPendingKey(group string, producerID int64, tp topicPartition) []byte {
	k := kbin.AppendInt16(nil, recTxnPendingOffset)
	k = kbin.AppendString(k, group)
	k = kbin.AppendInt64(k, producerID)
	k = kbin.AppendString(k, tp.topic)
	return kbin.AppendInt32(k, tp.partition)
}

func encodeTxnPendingValue(epoch int16, flags byte, e *offsetEntry) []byte {
	v := kbin.AppendInt16(nil, txnPendingValueVersion)
	v = kbin.AppendInt16(v, epoch)
	v = append(v, flags)
	v = append(v, e.topicID[:]...)
	return append(v, encodeOffsetCommitValue(e)...)
}

// setOp is the write of pending offset e of tp (of producerID in g, at
// p's epoch): its 0x26 row, and its record on a replicated partition.
func (p *txnPending) setOp(g *group, producerID int64, tp topicPartition, flags byte, e *offsetEntry) rowOp {
	return rowOp{key: txnOffsetRowKey(g.id, producerID, e.topicID, tp.partition), value: encodeTxnOffsetRow(tp.topic, p.epoch, flags, e),
		rec: &topics.Record{Key: txnPendingKey(g.name, producerID, tp), Value: encodeTxnPendingValue(p.epoch, flags, e)}}
}

// txnDelOp is the deletion of producerID's pending offset e of tp in g:
// its row, and the record's tombstone on a replicated partition.
func txnDelOp(g *group, producerID int64, tp topicPartition, e *offsetEntry) rowOp {
	return rowOp{key: txnOffsetRowKey(g.id, producerID, e.topicID, tp.partition), del: true,
		rec: &topics.Record{Key: txnPendingKey(g.name, producerID, tp)}}
}

// txnDelOps deletes every pending offset of p (producerID's in g).
func txnDelOps(g *group, producerID int64, p *txnPending) []rowOp {
	if p == nil {
		return nil
	}
	var ops []rowOp
	for _, tp := range g.txnPendingTPs() {
		if e := p.offsets[tp]; e != nil {
			ops = append(ops, txnDelOp(g, producerID, tp, e))
		}
	}
	return ops
}

// opRecords is recs followed by the log records of ops (recs itself
// is not changed).
func opRecords(recs []topics.Record, ops []rowOp) []topics.Record {
	out := slices.Clip(recs)
	for _, op := range ops {
		if op.rec != nil {
			out = append(out, *op.rec)
		}
	}
	return out
}

// servesPartitionLocked is nil when partition p of a replicated
// __consumer_offsets is loaded here, else ErrNotCoordinator or
// ErrCoordinatorLoadInProgress (a marker must not find "nothing pending"
// before the load). Always nil unless replicated. REQUIRES: c.mu held.
func (c *Coordinator) servesPartitionLocked(p int32) error {
	if c.mu.replicated == nil {
		return nil
	}
	part := c.mu.replicated[p]
	switch {
	case part == nil:
		return fmt.Errorf("%w: this broker does not lead partition %d of %s now", ErrNotCoordinator, p, OffsetsTopic)
	case part.loading:
		return fmt.Errorf("%w: partition %d of %s is being loaded", ErrCoordinatorLoadInProgress, p, OffsetsTopic)
	}
	return nil
}

// restorePendingLocked puts pending back as g's pending offsets of
// producerID after a write that is not known committed, unless g is gone
// or they changed since (to cur). REQUIRES: c.mu held.
func (c *Coordinator) restorePendingLocked(g *group, producerID int64, cur, pending *txnPending) {
	if c.mu.groups[g.name] != g || g.txnOffsets[producerID] != cur {
		return
	}
	c.setTxnPendingLocked(g, producerID, pending)
}

// endTxnOffsetsReplicatedLocked is EndTxnOffsets on a replicated
// partition: one batch with, on commit, the offset commit records of
// producerID's pending offsets of gs (all of partition p), and the
// tombstones of its pending records, and the record of ce. It releases
// c.mu. REQUIRES: c.mu held; gs is not empty.
func (c *Coordinator) endTxnOffsetsReplicatedLocked(gs []*group, m TxnMarker, ce *coordEpochWrite, now time.Time) func() error {
	producerID, commit := m.ProducerID, m.Commit
	defer c.mu.Unlock()
	type groupCommits struct {
		g       *group
		pending *txnPending
		commits []pendingCommit
	}
	var recs []topics.Record
	var ops []rowOp
	var writes []*groupCommits
	ids := map[string][16]byte{}
	for _, g := range gs {
		pending := g.txnOffsets[producerID]
		w := &groupCommits{g: g, pending: pending}
		writes = append(writes, w)
		ops = append(ops, txnDelOps(g, producerID, pending)...)
		if !commit {
			continue
		}
		for _, tp := range g.txnPendingTPs() {
			e := pending.offsets[tp]
			if e == nil || pending.superseded[tp] {
				continue // a later plain commit wins
			}
			if id, ok := c.currentTopicID(tp.topic, ids); !ok || id != e.topicID {
				continue // the topic was deleted since
			}
			ce := &offsetEntry{offset: e.offset, leaderEpoch: e.leaderEpoch, metadata: e.metadata, commitTime: now, topicID: e.topicID}
			rec, _, pc := c.offsetRecordLocked(g, tp.topic, tp.partition, ce)
			recs = append(recs, rec)
			w.commits = append(w.commits, pc)
		}
	}
	ops = append(ops, ce.ops()...)
	o := &op{now: now}
	ps, base, err := c.appendReplicatedLocked(o, gs[0], recs, ops, false)
	if err != nil {
		return func() error { return commitAppendError(err) }
	}
	i := int64(0)
	for _, w := range writes {
		for j := range w.commits {
			w.commits[j].entry.logOffset = base + i
			w.g.pendingTPs[w.commits[j].tp]++
			i++
		}
		if len(w.commits) > 0 {
			w.g.pendingCommits++
		}
		c.setTxnPendingLocked(w.g, producerID, nil)
	}
	c.noteCoordEpochLocked(ce)
	return func() error {
		err := ps.wait()
		c.mu.Lock()
		defer c.mu.Unlock()
		if err != nil {
			c.undoCoordEpochLocked(ce)
		}
		for _, w := range writes {
			if len(w.commits) > 0 {
				c.finishCommitsLocked(w.g, w.commits, err)
			}
			if err != nil {
				c.restorePendingLocked(w.g, producerID, nil, w.pending)
			}
		}
		if err != nil {
			return commitAppendError(err)
		}
		return nil
	}
}

// loadTxnPendingRecord applies the latest value of a pending offset
// record to its group's pending offsets (Load). The producers' index
// (txnProducers) is filled once the groups are served.
func loadTxnPendingRecord(get func(string) *group, key, value []byte) error {
	if len(key) < 2 || int16(binary.BigEndian.Uint16(key)) != recTxnPendingOffset {
		return fmt.Errorf("pending transactional offset key %x is malformed", key)
	}
	kr := kbin.Reader{Src: key[2:]}
	name := kr.String()
	pid := kr.Int64()
	topic := kr.String()
	partition := kr.Int32()
	if !kr.Ok() || len(kr.Src) != 0 {
		return fmt.Errorf("pending transactional offset key %x is malformed", key)
	}
	if len(value) < 2+2+1+16 {
		return fmt.Errorf("pending transactional offset of group %q producer %d %s/%d: a value of %d bytes", name, pid, topic, partition, len(value))
	}
	if v := int16(binary.BigEndian.Uint16(value)); v != txnPendingValueVersion {
		return fmt.Errorf("pending transactional offset of group %q: value version %d is unknown (a newer broker wrote it)", name, v)
	}
	epoch, flags := int16(binary.BigEndian.Uint16(value[2:])), value[4]
	e := &offsetEntry{logOffset: -1}
	copy(e.topicID[:], value[5:21])
	if err := decodeOffsetCommitValue(value[21:], e); err != nil {
		return fmt.Errorf("pending transactional offset of group %q producer %d %s/%d: %w", name, pid, topic, partition, err)
	}
	g := get(name)
	if g.txnOffsets == nil {
		g.txnOffsets = map[int64]*txnPending{}
	}
	p := g.txnOffsets[pid]
	if p == nil {
		p = &txnPending{epoch: epoch, offsets: map[topicPartition]*offsetEntry{}}
		g.txnOffsets[pid] = p
	}
	p.epoch = max(p.epoch, epoch) // one epoch per producer: a newer one's write tombstones the older's
	tp := topicPartition{topic, partition}
	p.offsets[tp] = e
	if flags&txnRowSuperseded != 0 {
		if p.superseded == nil {
			p.superseded = map[topicPartition]bool{}
		}
		p.superseded[tp] = true
	}
	return nil
}
