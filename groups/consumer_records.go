package groups

// Storage of consumer groups (KIP-848). Each change is written as Kafka's
// own records to the group's partition of __consumer_offsets, so tools
// that read that topic see what they would see on Apache Kafka:
//
//	key type 3  ConsumerGroupMetadata                 value v0: group epoch
//	key type 5  ConsumerGroupMemberMetadata           value v0: instance, rack, client, subscription, rebalance timeout, assignor
//	key type 6  ConsumerGroupTargetAssignmentMetadata value v0: assignment epoch
//	key type 7  ConsumerGroupTargetAssignmentMember   value v0: target partitions by topic ID
//	key type 8  ConsumerGroupCurrentMemberAssignment  value v0: member epoch, previous epoch, state, assigned, pending revocation
//
// (keys: int16 type | group | member, non-flexible; values: int16 version
// 0 | flexible fields | no tagged fields). A removed member or a deleted
// group gets tombstones. kmsg has no types for these records, so they are
// encoded here with kbin.
//
// The restart index mirrors the latest value of each record key, in the
// same Pebble batch as the records (pebblestore/keys.go):
//
//	0x22 groupID u64 | record key   -> record value
//
// Restart reads these rows instead of replaying the log. Kafka's
// ConsumerGroupPartitionMetadata (type 4, deprecated since 4.1) and the
// MetadataHash tagged field are not written.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/topics"
)

// Record key types of consumer groups in __consumer_offsets.
const (
	recConsumerGroupMetadata     int16 = 3
	recConsumerMemberMetadata    int16 = 5
	recConsumerTargetMetadata    int16 = 6
	recConsumerTargetMember      int16 = 7
	recConsumerCurrentAssignment int16 = 8
)

// consumerWrite collects what a call changed in a consumer group, to be
// written as records at its end.
type consumerWrite struct {
	now            time.Time
	groupMetadata  bool
	targetMetadata bool
	metadataIDs    []string
	targetIDs      []string
	currentIDs     []string
	removed        []string
}

func (w *consumerWrite) memberMetadata(id string) {
	if !slices.Contains(w.metadataIDs, id) {
		w.metadataIDs = append(w.metadataIDs, id)
	}
}

func (w *consumerWrite) targetMember(id string) {
	if !slices.Contains(w.targetIDs, id) {
		w.targetIDs = append(w.targetIDs, id)
	}
}

func (w *consumerWrite) current(id string) {
	if !slices.Contains(w.currentIDs, id) {
		w.currentIDs = append(w.currentIDs, id)
	}
}

func consumerRowPrefix(groupID uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{pebblestore.PrefixConsumerGroupRecord}, groupID)
}

func consumerRowKey(groupID uint64, recordKey []byte) []byte {
	return append(consumerRowPrefix(groupID), recordKey...)
}

func consumerRecordKey(typ int16, group string, member *string) []byte {
	k := kbin.AppendInt16(nil, typ)
	k = kbin.AppendString(k, group)
	if member != nil {
		k = kbin.AppendString(k, *member)
	}
	return k
}

func appendTopicPartitions(dst []byte, a assignment) []byte {
	ts := a.sortedTopics()
	dst = kbin.AppendCompactArrayLen(dst, len(ts))
	for _, t := range ts {
		dst = kbin.AppendUuid(dst, t)
		dst = kbin.AppendCompactArrayLen(dst, len(a[t]))
		for _, p := range a[t] {
			dst = kbin.AppendInt32(dst, p)
		}
		dst = kbin.AppendUvarint(dst, 0) // no tagged fields
	}
	return dst
}

func readTopicPartitions(r *kbin.Reader) assignment {
	a := assignment{}
	n := r.CompactArrayLen()
	for i := int32(0); i < n && r.Ok(); i++ {
		t := r.Uuid()
		np := r.CompactArrayLen()
		for j := int32(0); j < np && r.Ok(); j++ {
			a.add(t, r.Int32())
		}
		skipTags(r)
	}
	return a
}

// skipTags reads past a flexible struct's tagged fields.
func skipTags(r *kbin.Reader) {
	n := r.Uvarint()
	for i := uint32(0); i < n && r.Ok(); i++ {
		r.Uvarint()
		r.Span(int(r.Uvarint()))
	}
}

func encodeConsumerEpochValue(epoch int32) []byte {
	v := kbin.AppendInt16(nil, 0)
	v = kbin.AppendInt32(v, epoch)
	return kbin.AppendUvarint(v, 0)
}

func encodeConsumerMemberMetadata(m *consumerMember) []byte {
	v := kbin.AppendInt16(nil, 0)
	v = kbin.AppendCompactNullableString(v, m.instanceID)
	v = kbin.AppendCompactNullableString(v, m.rackID)
	v = kbin.AppendCompactString(v, m.clientID)
	v = kbin.AppendCompactString(v, m.clientHost)
	v = kbin.AppendCompactArrayLen(v, len(m.topicNames))
	for _, t := range m.topicNames {
		v = kbin.AppendCompactString(v, t)
	}
	v = kbin.AppendCompactNullableString(v, m.regex)
	v = kbin.AppendInt32(v, int32(m.rebalanceTimeout/time.Millisecond))
	v = kbin.AppendCompactNullableString(v, m.serverAssignor)
	if m.classic == nil {
		return kbin.AppendUvarint(v, 0)
	}
	// Tagged field 0, ClassicMemberMetadata: a nullable struct, so a
	// presence byte first (as Kafka's generated writer).
	cm := []byte{1}
	cm = kbin.AppendInt32(cm, int32(m.classic.sessionTimeout/time.Millisecond))
	cm = kbin.AppendCompactArrayLen(cm, len(m.classic.protocols))
	for _, p := range m.classic.protocols {
		cm = kbin.AppendCompactString(cm, p.Name)
		cm = kbin.AppendCompactBytes(cm, p.Metadata)
		cm = kbin.AppendUvarint(cm, 0)
	}
	cm = kbin.AppendUvarint(cm, 0)
	v = kbin.AppendUvarint(v, 1)
	v = kbin.AppendUvarint(v, 0)
	v = kbin.AppendUvarint(v, uint32(len(cm)))
	return append(v, cm...)
}

// readClassicMemberMetadata reads the tagged fields of a
// ConsumerGroupMemberMetadataValue: tag 0 is ClassicMemberMetadata, set
// for a classic member inside the consumer group (consumer_classic.go).
func readClassicMemberMetadata(r *kbin.Reader) *classicInfo {
	var ci *classicInfo
	n := r.Uvarint()
	for i := uint32(0); i < n && r.Ok(); i++ {
		tag := r.Uvarint()
		b := r.Span(int(r.Uvarint()))
		if tag != 0 || len(b) == 0 || b[0] != 1 {
			continue
		}
		cr := kbin.Reader{Src: b[1:]}
		c := &classicInfo{sessionTimeout: time.Duration(cr.Int32()) * time.Millisecond}
		pn := cr.CompactArrayLen()
		for j := int32(0); j < pn && cr.Ok(); j++ {
			c.protocols = append(c.protocols, Protocol{Name: cr.CompactString(), Metadata: slices.Clone(cr.CompactBytes())})
			skipTags(&cr)
		}
		skipTags(&cr)
		if cr.Ok() {
			ci = c
		}
	}
	return ci
}

func encodeConsumerTargetMember(a assignment) []byte {
	v := kbin.AppendInt16(nil, 0)
	v = appendTopicPartitions(v, a)
	return kbin.AppendUvarint(v, 0)
}

func encodeConsumerCurrentAssignment(m *consumerMember) []byte {
	v := kbin.AppendInt16(nil, 0)
	v = kbin.AppendInt32(v, m.epoch)
	v = kbin.AppendInt32(v, m.previousEpoch)
	v = kbin.AppendInt8(v, int8(m.state))
	v = appendTopicPartitions(v, m.assigned)
	v = appendTopicPartitions(v, m.pending)
	return kbin.AppendUvarint(v, 0)
}

// writeConsumerLocked appends the records of w's changes to g, with their
// index rows. REQUIRES: c.mu held.
func (c *Coordinator) writeConsumerLocked(o *op, g *group, w *consumerWrite) error {
	cg := g.cg
	g.syncConsumerState(w.now)
	var recs []topics.Record
	var rows []rowOp
	put := func(key, value []byte) {
		recs = append(recs, topics.Record{Key: key, Value: value})
		if value == nil {
			rows = append(rows, rowOp{key: consumerRowKey(g.id, key), del: true})
		} else {
			rows = append(rows, rowOp{key: consumerRowKey(g.id, key), value: value})
		}
	}
	if g.lastMetadata != nil {
		// Converted from a classic group: its metadata record goes.
		recs = append(recs, topics.Record{Key: groupMetadataKey(g.name)})
		rows = append(rows, rowOp{key: groupRowKey(g.id), value: encodeNamed(g.name, nil)})
		g.lastMetadata = nil
	}
	for _, id := range w.removed {
		if cg.members[id] != nil {
			continue
		}
		id := id
		put(consumerRecordKey(recConsumerCurrentAssignment, g.name, &id), nil)
		put(consumerRecordKey(recConsumerTargetMember, g.name, &id), nil)
		put(consumerRecordKey(recConsumerMemberMetadata, g.name, &id), nil)
	}
	for _, id := range w.metadataIDs {
		if m := cg.members[id]; m != nil {
			put(consumerRecordKey(recConsumerMemberMetadata, g.name, &m.id), encodeConsumerMemberMetadata(m))
		}
	}
	if w.groupMetadata {
		put(consumerRecordKey(recConsumerGroupMetadata, g.name, nil), encodeConsumerEpochValue(cg.groupEpoch))
	}
	for _, id := range w.targetIDs {
		if a, ok := cg.target[id]; ok && cg.members[id] != nil {
			id := id
			put(consumerRecordKey(recConsumerTargetMember, g.name, &id), encodeConsumerTargetMember(a))
		}
	}
	if w.targetMetadata {
		put(consumerRecordKey(recConsumerTargetMetadata, g.name, nil), encodeConsumerEpochValue(cg.assignmentEpoch))
	}
	for _, id := range w.currentIDs {
		if m := cg.members[id]; m != nil {
			put(consumerRecordKey(recConsumerCurrentAssignment, g.name, &m.id), encodeConsumerCurrentAssignment(m))
		}
	}
	if len(recs) == 0 {
		return nil
	}
	if _, _, err := c.appendLocked(o, g, recs, rows); err != nil {
		c.log.Warn().Err(err).Str("group", g.name).Msg("storing consumer group records failed")
		return metadataAppendError(err)
	}
	return nil
}

// consumerDeleteRecords are the tombstones and row deletions that remove
// an empty consumer group's own records (its members are gone already).
func consumerDeleteRecords(g *group) ([]topics.Record, []rowOp) {
	recs := []topics.Record{
		{Key: consumerRecordKey(recConsumerTargetMetadata, g.name, nil)},
		{Key: consumerRecordKey(recConsumerGroupMetadata, g.name, nil)},
	}
	prefix := consumerRowPrefix(g.id)
	return recs, []rowOp{{key: prefix, del: true, rangeEnd: pebblestore.PrefixEnd(prefix)}}
}

// recoverConsumerGroupsLocked rebuilds the consumer groups from their
// index rows. Members get a fresh session. REQUIRES: c.mu held.
func (c *Coordinator) recoverConsumerGroupsLocked(byID map[uint64]*group, now time.Time) error {
	lower := []byte{pebblestore.PrefixConsumerGroupRecord}
	it, err := c.store.NewIter(lower, pebblestore.PrefixEnd(lower))
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		key := it.Key()
		if len(key) < 11 {
			return fmt.Errorf("%w: consumer group row key %x is too short", pebblestore.ErrCorruption, key)
		}
		g := byID[binary.BigEndian.Uint64(key[1:9])]
		if g == nil {
			c.mu.strayRows = append(c.mu.strayRows, slices.Clone(key))
			continue
		}
		val, err := it.Value()
		if err != nil {
			return err
		}
		if g.cg == nil {
			g.cg = newConsumerGroup()
		}
		if err := restoreConsumerRecord(g.cg, key[9:], val); err != nil {
			return fmt.Errorf("%w: consumer group %q row %x: %v", pebblestore.ErrCorruption, g.name, key, err)
		}
	}
	for _, g := range byID {
		if g.cg != nil {
			c.finishConsumerRecovery(g, now)
		}
	}
	return nil
}

// finishConsumerRecovery gives the members of a consumer group rebuilt
// from its records a fresh session and their holdings.
func (c *Coordinator) finishConsumerRecovery(g *group, now time.Time) {
	cg := g.cg
	for _, m := range cg.members {
		m.sessionDeadline = now.Add(c.cfg.ConsumerSessionTimeout)
		if m.assigned == nil {
			m.assigned = assignment{}
		}
		if m.pending == nil {
			m.pending = assignment{}
		}
		cg.setHoldings(m, m.assigned, m.pending)
		if m.state == memberUnrevokedPartitions {
			m.revokeDeadline = now.Add(m.rebalanceTimeout)
		}
	}
	if len(cg.members) > 0 {
		g.state = StateStable
	}
}

// restoreConsumerRecord applies one stored record to cg.
func restoreConsumerRecord(cg *consumerGroup, key, value []byte) error {
	kr := kbin.Reader{Src: key}
	typ := kr.Int16()
	_ = kr.String() // group
	var memberID string
	if typ == recConsumerMemberMetadata || typ == recConsumerTargetMember || typ == recConsumerCurrentAssignment {
		memberID = kr.String()
	}
	if err := kr.Complete(); err != nil {
		return fmt.Errorf("record key: %v", err)
	}
	r := kbin.Reader{Src: value}
	if v := r.Int16(); v != 0 {
		return fmt.Errorf("record type %d value version %d is unknown", typ, v)
	}
	member := func() *consumerMember {
		m := cg.members[memberID]
		if m == nil {
			m = &consumerMember{id: memberID, state: memberStable, assigned: assignment{}, pending: assignment{}}
			cg.members[memberID] = m
		}
		return m
	}
	switch typ {
	case recConsumerGroupMetadata:
		cg.groupEpoch = r.Int32()
	case recConsumerTargetMetadata:
		cg.assignmentEpoch = r.Int32()
	case recConsumerMemberMetadata:
		m := member()
		m.instanceID = r.CompactNullableString()
		m.rackID = r.CompactNullableString()
		m.clientID = r.CompactString()
		m.clientHost = r.CompactString()
		n := r.CompactArrayLen()
		m.topicNames = []string{}
		for i := int32(0); i < n && r.Ok(); i++ {
			m.topicNames = append(m.topicNames, r.CompactString())
		}
		m.regex = r.CompactNullableString()
		m.rebalanceTimeout = time.Duration(r.Int32()) * time.Millisecond
		m.serverAssignor = r.CompactNullableString()
		if m.regex != nil {
			re, err := compileTopicRegex(*m.regex)
			if err != nil {
				return err
			}
			m.re = re
		}
		if m.instanceID != nil {
			cg.staticMembers[*m.instanceID] = m.id
		}
		m.classic = readClassicMemberMetadata(&r)
		if !r.Ok() {
			return errors.New("record value is truncated")
		}
		return nil
	case recConsumerTargetMember:
		cg.target[memberID] = readTopicPartitions(&r)
	case recConsumerCurrentAssignment:
		m := member()
		m.epoch = r.Int32()
		m.previousEpoch = r.Int32()
		m.state = memberState(r.Int8())
		m.assigned = readTopicPartitions(&r)
		m.pending = readTopicPartitions(&r)
	default:
		return fmt.Errorf("record type %d is not a consumer group record", typ)
	}
	skipTags(&r)
	if !r.Ok() {
		return errors.New("record value is truncated")
	}
	return nil
}
