package groups

// This file holds every Kafka encoding the coordinator uses: the key and
// value records of __consumer_offsets, in Kafka's own format (kmsg
// OffsetCommitKey/Value, GroupMetadataKey/Value), and the subscription of
// the consumer protocol, read to learn which topics a "consumer" group
// reads. The coordinator knows no Kafka request or response.

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/topics"
)

// Record versions written, as Apache Kafka writes them: offset commit key
// v1 with value v3 (v1 when the commit carries an expiration time), group
// metadata key v2 with value v3.
const (
	offsetCommitKeyVersion       = 1
	offsetCommitValueVersion     = 3
	offsetCommitValueVersionExp  = 1
	groupMetadataKeyVersion      = 2
	groupMetadataValueVersion    = 3
	maxOffsetCommitValueVersion  = 4 // the newest kmsg decodes
	maxGroupMetadataValueVersion = 4
)

func offsetCommitKey(group, topic string, partition int32) []byte {
	k := kmsg.OffsetCommitKey{Version: offsetCommitKeyVersion, Group: group, Topic: topic, Partition: partition}
	return k.AppendTo(nil)
}

func encodeOffsetCommitValue(e *offsetEntry) []byte {
	v := kmsg.NewOffsetCommitValue()
	v.Version = offsetCommitValueVersion
	v.Offset = e.offset
	v.LeaderEpoch = e.leaderEpoch
	v.Metadata = e.metadata
	v.CommitTimestamp = e.commitTime.UnixMilli()
	if !e.expireTime.IsZero() {
		v.Version = offsetCommitValueVersionExp
		v.ExpireTimestamp = e.expireTime.UnixMilli()
	}
	return v.AppendTo(nil)
}

// decodeOffsetCommitValue reads a stored OffsetCommitValue into e.
func decodeOffsetCommitValue(b []byte, e *offsetEntry) error {
	var v kmsg.OffsetCommitValue
	if err := v.ReadFrom(b); err != nil {
		return err
	}
	if v.Version < 0 || v.Version > maxOffsetCommitValueVersion {
		return fmt.Errorf("offset commit value version %d is unknown", v.Version)
	}
	e.offset = v.Offset
	e.leaderEpoch = -1
	if v.Version >= 3 {
		e.leaderEpoch = v.LeaderEpoch
	}
	e.metadata = v.Metadata
	e.commitTime = time.UnixMilli(v.CommitTimestamp)
	if v.Version == 1 && v.ExpireTimestamp >= 0 {
		e.expireTime = time.UnixMilli(v.ExpireTimestamp)
	}
	return nil
}

func groupMetadataKey(group string) []byte {
	k := kmsg.GroupMetadataKey{Version: groupMetadataKeyVersion, Group: group}
	return k.AppendTo(nil)
}

// encodeGroupMetadata is the group's GroupMetadataValue as Kafka writes it
// (GroupCoordinatorRecordHelpers.newGroupMetadataRecord): the selected
// protocol's metadata and the assignment of every member.
func encodeGroupMetadata(g *group) []byte {
	v := kmsg.NewGroupMetadataValue()
	v.Version = groupMetadataValueVersion
	if g.protocolType != nil {
		v.ProtocolType = *g.protocolType
	}
	v.Generation = g.generation
	v.Protocol = g.protocolName
	if g.leader != "" {
		l := g.leader
		v.Leader = &l
	}
	v.CurrentStateTimestamp = -1
	if !g.stateTimestamp.IsZero() {
		v.CurrentStateTimestamp = g.stateTimestamp.UnixMilli()
	}
	name := ""
	if g.protocolName != nil {
		name = *g.protocolName
	}
	for _, m := range g.orderedMembers() {
		vm := kmsg.NewGroupMetadataValueMember()
		vm.MemberID = m.id
		vm.InstanceID = m.instanceID
		vm.ClientID = m.clientID
		vm.ClientHost = m.clientHost
		vm.RebalanceTimeoutMillis = int32(m.rebalanceTimeout / time.Millisecond)
		vm.SessionTimeoutMillis = int32(m.sessionTimeout / time.Millisecond)
		vm.Subscription = nonNil(m.metadata(name))
		vm.Assignment = nonNil(m.assignment)
		v.Members = append(v.Members, vm)
	}
	return v.AppendTo(nil)
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// restoreGroupMetadata rebuilds a group's generation and members from its
// stored GroupMetadataValue, as Kafka replays the record: Stable with
// members, else Empty.
func restoreGroupMetadata(g *group, b []byte) error {
	var v kmsg.GroupMetadataValue
	if err := v.ReadFrom(b); err != nil {
		return err
	}
	if v.Version < 0 || v.Version > maxGroupMetadataValueVersion {
		return fmt.Errorf("group metadata value version %d is unknown", v.Version)
	}
	if v.ProtocolType != "" {
		pt := v.ProtocolType
		g.protocolType = &pt
	}
	g.generation = v.Generation
	if v.Protocol != nil {
		p := *v.Protocol
		g.protocolName = &p
	}
	if v.CurrentStateTimestamp >= 0 {
		g.stateTimestamp = time.UnixMilli(v.CurrentStateTimestamp)
	}
	for _, vm := range v.Members {
		if _, dup := g.members[vm.MemberID]; dup || vm.MemberID == "" || g.protocolName == nil {
			continue
		}
		m := &member{
			id:               vm.MemberID,
			instanceID:       vm.InstanceID,
			clientID:         vm.ClientID,
			clientHost:       vm.ClientHost,
			protocolType:     v.ProtocolType,
			protocols:        []Protocol{{Name: *g.protocolName, Metadata: vm.Subscription}},
			sessionTimeout:   time.Duration(vm.SessionTimeoutMillis) * time.Millisecond,
			rebalanceTimeout: time.Duration(vm.RebalanceTimeoutMillis) * time.Millisecond,
			assignment:       vm.Assignment,
		}
		if vm.RebalanceTimeoutMillis < 0 {
			m.rebalanceTimeout = m.sessionTimeout
		}
		if m.instanceID != nil {
			if _, taken := g.staticMembers[*m.instanceID]; taken {
				continue
			}
		}
		g.add(m, nil)
	}
	if v.Leader != nil && g.members[*v.Leader] != nil {
		g.leader = *v.Leader
	}
	g.state = StateEmpty
	if len(g.members) > 0 {
		g.state = StateStable
	}
	g.previousState = StateEmpty
	g.subscribedTopics = g.computeSubscribedTopics()
	return nil
}

// subscriptionTopics reads the topics of a consumer protocol subscription
// (ConsumerMemberMetadata). Like Kafka it reads only the version and the
// v0 fields, a prefix of every version.
func subscriptionTopics(b []byte) ([]string, bool) {
	r := kbin.Reader{Src: b}
	if v := r.Int16(); v < 0 {
		return nil, false
	}
	n := r.ArrayLen()
	if !r.Ok() || n < 0 {
		return nil, false
	}
	out := make([]string, 0, n)
	for i := int32(0); i < n; i++ {
		l := r.Int16()
		if l < 0 {
			return nil, false
		}
		out = append(out, string(r.Span(int(l))))
	}
	return out, r.Ok()
}

// encodeRecords builds one uncompressed batch of records for
// __consumer_offsets, timestamped now.
func encodeRecords(recs []topics.Record, now time.Time) ([]byte, error) {
	ms := now.UnixMilli()
	for i := range recs {
		recs[i].OffsetDelta = int32(i)
	}
	h := topics.BatchHeader{
		PartitionLeaderEpoch: -1,
		BaseTimestamp:        ms,
		MaxTimestamp:         ms,
		ProducerID:           -1,
		ProducerEpoch:        -1,
		BaseSequence:         -1,
	}
	return topics.EncodeBatch(h, recs)
}
