package groups

// Persistence. Every change a group makes durable is a batch of records
// appended to the group's partition of __consumer_offsets through
// topics.Manager.Append, the produce path (same validation, group commit
// and durability). Append.Extra adds, in the same Pebble batch, index rows
// that restart reads instead of replaying the log:
//
//	0x20 groupID u64                                -> u16 name length | name | last GroupMetadataValue (may be empty)
//	0x21 groupID u64 | topicID [16] | partition u32 -> u16 topic length | topic | OffsetCommitValue
//
// (pebblestore/keys.go lists the prefixes.) Group IDs are assigned in
// memory from 1 upwards (restart continues after the largest stored one);
// they only name rows. The index is written in log order, so after a crash
// it matches the log's durable prefix.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/topics"
)

func groupRowKey(id uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{pebblestore.PrefixGroup}, id)
}

func groupOffsetsPrefix(id uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{pebblestore.PrefixGroupOffset}, id)
}

func offsetRowKey(id uint64, topicID [16]byte, partition int32) []byte {
	k := make([]byte, 0, 29)
	k = append(k, pebblestore.PrefixGroupOffset)
	k = binary.BigEndian.AppendUint64(k, id)
	k = append(k, topicID[:]...)
	return binary.BigEndian.AppendUint32(k, uint32(partition))
}

func encodeNamed(name string, rest []byte) []byte {
	out := make([]byte, 0, 2+len(name)+len(rest))
	out = binary.BigEndian.AppendUint16(out, uint16(len(name)))
	out = append(out, name...)
	return append(out, rest...)
}

func decodeNamed(b []byte) (string, []byte, error) {
	if len(b) < 2 {
		return "", nil, errors.New("row shorter than its name length")
	}
	n := int(binary.BigEndian.Uint16(b))
	if len(b) < 2+n {
		return "", nil, errors.New("row shorter than its name")
	}
	return string(b[2 : 2+n]), b[2+n:], nil
}

// rowOp is one index row write of an append.
type rowOp struct {
	key, value []byte
	del        bool
	rangeEnd   []byte // with del: delete [key, rangeEnd)
	// rec, when set, is the row's record on a replicated
	// __consumer_offsets, whose log holds what rows hold on a single
	// node (pending transactional offsets, txn_offsets_log.go): appended
	// after the call's records there; unused otherwise.
	rec *topics.Record
}

// persist is an appended batch of records on its way to durability. The
// first wait calls PendingAppend.Wait (exactly once, as topics requires),
// then after; later waits return the same outcome.
type persist struct {
	once sync.Once
	// waitFn, when set, is the wait of a replicated append instead of
	// pa and a.
	waitFn func() error
	pa     *topics.PendingAppend
	a      *topics.Append
	err    error
	after  func(err error)
}

// wait blocks until the batch is durable. REQUIRES: Coordinator.mu is not
// held (after may take it).
func (p *persist) wait() error {
	if p == nil {
		return nil
	}
	p.once.Do(func() {
		var err error
		if p.waitFn != nil {
			err = p.waitFn()
		} else if err = p.pa.Wait(); err == nil {
			err = p.a.Err
		}
		p.err = err
		if p.after != nil {
			p.after(err)
		}
	})
	return p.err
}

// op collects the appends one call makes, to wait for once Coordinator.mu
// is released.
type op struct {
	now      time.Time
	persists []*persist
}

func (o *op) waitAll() error {
	var first error
	for _, p := range o.persists {
		if err := p.wait(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// appendLocked appends recs to g's partition of __consumer_offsets with
// the index rows ops (and g's row, the first time) in the same Pebble
// batch. It returns the log offset of the first record. The batch is
// applied, not yet durable: the returned persist is also added to o.
// REQUIRES: c.mu held.
func (c *Coordinator) appendLocked(o *op, g *group, recs []topics.Record, ops []rowOp) (*persist, int64, error) {
	if c.mu.replicated != nil {
		return c.appendReplicatedLocked(o, g, recs, ops, true)
	}
	a, err := c.offsetsAppendLocked(g, recs, ops, o.now)
	if err != nil {
		return nil, -1, err
	}
	pa := c.tm.Append([]*topics.Append{a}, o.now)
	if a.Err != nil {
		_ = pa.Wait()
		return nil, -1, a.Err
	}
	g.rowWritten = true
	ps := &persist{pa: pa, a: a}
	o.persists = append(o.persists, ps)
	c.metrics.recordsAppended.Add(float64(len(recs)))
	return ps, a.BaseOffset, nil
}

// offsetsAppendLocked builds the append of recs to g's partition of
// __consumer_offsets; its Extra writes the index rows ops, and g's row
// while it has not been written, in the Pebble batch of the records.
// REQUIRES: c.mu held.
func (c *Coordinator) offsetsAppendLocked(g *group, recs []topics.Record, ops []rowOp, now time.Time) (*topics.Append, error) {
	raw, err := encodeRecords(recs, now)
	if err != nil {
		return nil, err
	}
	p, ok := c.offsetsTopic.Partition(g.partition)
	if !ok {
		return nil, fmt.Errorf("%w: __consumer_offsets has no partition %d", ErrCoordinatorNotAvailable, g.partition)
	}
	writeRow := !g.rowWritten
	row := encodeNamed(g.name, g.lastMetadata)
	id := g.id
	return &topics.Append{Partition: p, Batch: raw, Extra: func(b *pebblestore.Batch, _ int64) {
		if writeRow {
			b.Set(groupRowKey(id), row)
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
	}}, nil
}

// persistMetadataLocked stores the group's current metadata (Kafka's
// GroupMetadata record) and its row.
// REQUIRES: c.mu held.
func (c *Coordinator) persistMetadataLocked(o *op, g *group) (*persist, error) {
	value := encodeGroupMetadata(g)
	prev := g.lastMetadata
	g.lastMetadata = value
	rec := topics.Record{Key: groupMetadataKey(g.name), Value: value}
	ps, _, err := c.appendLocked(o, g, []topics.Record{rec}, []rowOp{{key: groupRowKey(g.id), value: encodeNamed(g.name, value)}})
	if err != nil {
		g.lastMetadata = prev
		c.log.Warn().Err(err).Str("group", g.name).Msg("storing group metadata failed")
		return nil, metadataAppendError(err)
	}
	return ps, nil
}

// metadataAppendError maps a failed group metadata append as Kafka's
// appendGroupMetadataErrorToResponseError does.
func metadataAppendError(err error) error {
	switch {
	case errors.Is(err, topics.ErrMessageTooLarge):
		return fmt.Errorf("%w: %v", ErrUnknownServer, err)
	case errors.Is(err, topics.ErrUnknownTopic):
		return fmt.Errorf("%w: %v", ErrCoordinatorNotAvailable, err)
	default:
		return fmt.Errorf("%w: %v", ErrNotCoordinator, err)
	}
}

// commitAppendError maps a failed offset commit append.
func commitAppendError(err error) error {
	switch {
	case errors.Is(err, topics.ErrMessageTooLarge):
		return fmt.Errorf("%w: %v", ErrInvalidCommitOffsetSize, err)
	case errors.Is(err, topics.ErrUnknownTopic):
		return fmt.Errorf("%w: %v", ErrCoordinatorNotAvailable, err)
	default:
		return fmt.Errorf("%w: %v", ErrNotCoordinator, err)
	}
}

// deleteGroupLocked writes tombstones for every offset and the group's
// metadata, deletes its rows and forgets it. Members must be gone.
// REQUIRES: c.mu held.
func (c *Coordinator) deleteGroupLocked(o *op, g *group) error {
	recs := make([]topics.Record, 0, len(g.offsets)+1)
	for tp := range g.offsets {
		recs = append(recs, topics.Record{Key: offsetCommitKey(g.name, tp.topic, tp.partition)})
	}
	for _, tp := range g.txnPendingTPs() {
		if g.offsets[tp] == nil { // pending transactional offsets end too (Kafka's deleteAllOffsets)
			recs = append(recs, topics.Record{Key: offsetCommitKey(g.name, tp.topic, tp.partition)})
		}
	}
	recs = append(recs, topics.Record{Key: groupMetadataKey(g.name)})
	if g.rowWritten {
		prefix := groupOffsetsPrefix(g.id)
		txnPrefix := binary.BigEndian.AppendUint64([]byte{pebblestore.PrefixGroupTxnOffset}, g.id)
		ops := []rowOp{{key: prefix, del: true, rangeEnd: pebblestore.PrefixEnd(prefix)}, {key: groupRowKey(g.id), del: true},
			{key: txnPrefix, del: true, rangeEnd: pebblestore.PrefixEnd(txnPrefix)}}
		for pid, p := range g.txnOffsets {
			ops = append(ops, txnDelOps(g, pid, p)...) // their records' tombstones when replicated
		}
		if g.cg != nil {
			crecs, cops := consumerDeleteRecords(g)
			recs = append(recs, crecs...)
			ops = append(ops, cops...)
		}
		if _, _, err := c.appendLocked(o, g, recs, ops); err != nil {
			return metadataAppendError(err)
		}
	}
	for _, m := range g.orderedMembers() {
		g.remove(m.id)
	}
	c.forgetTxnOffsetsLocked(g)
	g.transitionTo(StateDead, o.now)
	delete(c.mu.groups, g.name)
	c.metrics.groupsDeleted.Inc()
	return nil
}

// recoverLocked rebuilds groups and offsets from the index rows.
// REQUIRES: c.mu held.
func (c *Coordinator) recoverLocked(now time.Time) error {
	byID := map[uint64]*group{}
	lower := []byte{pebblestore.PrefixGroup}
	it, err := c.store.NewIter(lower, pebblestore.PrefixEnd(lower))
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		key := it.Key()
		if len(key) != 9 {
			_ = it.Close()
			return fmt.Errorf("%w: group row key %x has the wrong length", pebblestore.ErrCorruption, key)
		}
		id := binary.BigEndian.Uint64(key[1:])
		val, err := it.Value()
		if err != nil {
			_ = it.Close()
			return err
		}
		name, metadata, err := decodeNamed(val)
		if err != nil {
			_ = it.Close()
			return fmt.Errorf("%w: group row %x: %v", pebblestore.ErrCorruption, key, err)
		}
		g := newGroup(name, id, PartitionFor(name, c.numPartitions))
		g.rowWritten = true
		if len(metadata) > 0 {
			g.lastMetadata = append([]byte(nil), metadata...)
			if err := restoreGroupMetadata(g, g.lastMetadata); err != nil {
				_ = it.Close()
				return fmt.Errorf("%w: group %q metadata: %v", pebblestore.ErrCorruption, name, err)
			}
		}
		for _, m := range g.members {
			m.heartbeatDeadline = now.Add(m.sessionTimeout)
		}
		byID[id] = g
		c.mu.groups[name] = g
		c.mu.nextGroupID = max(c.mu.nextGroupID, id+1)
	}
	if err := it.Close(); err != nil {
		return err
	}
	if err := c.recoverConsumerGroupsLocked(byID, now); err != nil {
		return err
	}
	pendingTxn, err := c.recoverTxnOffsetsLocked(byID)
	if err != nil {
		return err
	}
	if err := c.recoverTxnCoordEpochsLocked(); err != nil {
		return err
	}

	lower = []byte{pebblestore.PrefixGroupOffset}
	it, err = c.store.NewIter(lower, pebblestore.PrefixEnd(lower))
	if err != nil {
		return err
	}
	defer it.Close()
	offsets := 0
	for ok := it.First(); ok; ok = it.Next() {
		key := it.Key()
		if len(key) != 29 {
			return fmt.Errorf("%w: offset row key %x has the wrong length", pebblestore.ErrCorruption, key)
		}
		g := byID[binary.BigEndian.Uint64(key[1:9])]
		if g == nil {
			c.mu.strayRows = append(c.mu.strayRows, append([]byte(nil), key...))
			continue
		}
		var topicID [16]byte
		copy(topicID[:], key[9:25])
		partition := int32(binary.BigEndian.Uint32(key[25:]))
		val, err := it.Value()
		if err != nil {
			return err
		}
		topic, value, err := decodeNamed(val)
		if err != nil {
			return fmt.Errorf("%w: offset row %x: %v", pebblestore.ErrCorruption, key, err)
		}
		e := &offsetEntry{topicID: topicID, logOffset: -1}
		if err := decodeOffsetCommitValue(value, e); err != nil {
			return fmt.Errorf("%w: offset row %x: %v", pebblestore.ErrCorruption, key, err)
		}
		tp := topicPartition{topic, partition}
		if old := g.offsets[tp]; old != nil {
			// Two rows for one topic name: a topic deleted and created
			// again. Keep the row of the topic that exists now.
			if t, ok := c.tm.Topic(topic); ok && t.ID == old.topicID {
				c.mu.strayRows = append(c.mu.strayRows, append([]byte(nil), key...))
				continue
			}
			c.mu.strayRows = append(c.mu.strayRows, offsetRowKey(g.id, old.topicID, partition))
		}
		g.offsets[tp] = e
		offsets++
	}
	c.log.Info().Int("groups", len(c.mu.groups)).Int("offsets", offsets).Int("pending_txn_offsets", pendingTxn).Msg("consumer groups recovered")
	return nil
}
