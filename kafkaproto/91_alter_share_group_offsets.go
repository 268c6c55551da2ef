package kafkaproto

// AlterShareGroupOffsets: v0
//
// Behavior:
//   - Sets the start offset of share-partitions of a share group (KIP-932)
//     while it has no members (else NON_EMPTY_GROUP, nothing changed); their
//     in-flight state is dropped and the next fetch delivers from the new
//     offset (one below the log start moves to the log start). A group that
//     does not exist is created, as Apache Kafka 4.2 does; a classic or
//     consumer group's name is GROUP_ID_NOT_FOUND.
//   - Per partition: UNKNOWN_TOPIC_OR_PARTITION for an unknown topic (its
//     topic ID is zero) or partition; INVALID_REQUEST for a native queue's
//     topic (its share-partitions are the queue's delivery state) or an
//     event store's. Answered after the change is durable (fsync).
//   - In a cluster only the group's coordinator answers (NOT_COORDINATOR
//     elsewhere), and only for partitions it leads: a share-partition's
//     state lives on its leader (DESIGN.md, Cluster), so a topic with a
//     partition led elsewhere is NOT_LEADER_OR_FOLLOWER, unchanged.
//   - READ on the group (GROUP_AUTHORIZATION_FAILED) and on each topic
//     (TOPIC_AUTHORIZATION_FAILED per partition), as KafkaApis.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
	"github.com/vibemq/broker/groups"
)

func init() {
	register(kmsg.AlterShareGroupOffsets, 0, 0, (*Server).handleAlterShareGroupOffsets)
}

func (s *Server) handleAlterShareGroupOffsets(r *request) (reply, error) {
	req := r.kreq.(*kmsg.AlterShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
	switch {
	case s.cfg.Groups == nil:
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return reply{resp: resp}, nil
	case !r.allowedGroup(auth.OpRead, req.GroupID):
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return reply{resp: resp}, nil
	case s.notGroupCoordinator(req.GroupID):
		resp.ErrorCode = s.groupCoordinatorCode(req.GroupID)
		return reply{resp: resp}, nil
	}
	n := 0
	var ask []groups.ShareOffsetTopic
	var denied []kmsg.AlterShareGroupOffsetsResponseTopic
	for _, rt := range req.Topics {
		n += len(rt.Partitions)
		code, msg := int16(0), ""
		switch {
		case !r.allowedTopic(auth.OpRead, rt.Topic):
			code = kerr.TopicAuthorizationFailed.Code
		case !s.leadsAll(rt.Topic, rt.Partitions):
			code, msg = kerr.NotLeaderForPartition.Code, errShareStateElsewhere
		}
		if code != 0 {
			t := kmsg.NewAlterShareGroupOffsetsResponseTopic()
			t.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				p := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
				p.Partition, p.ErrorCode = rp.Partition, code
				if msg != "" {
					p.ErrorMessage = kmsg.StringPtr(msg)
				}
				t.Partitions = append(t.Partitions, p)
			}
			denied = append(denied, t)
			continue
		}
		a := groups.ShareOffsetTopic{Topic: rt.Topic, Partitions: map[int32]int64{}}
		for _, rp := range rt.Partitions {
			a.Partitions[rp.Partition] = rp.StartOffset
		}
		ask = append(ask, a)
	}
	if n > s.cfg.MaxPartitionsPerRequest {
		resp.ErrorCode = kerr.PolicyViolation.Code
		return reply{resp: resp}, nil
	}
	res, err := s.cfg.Groups.AlterShareGroupOffsets(req.GroupID, ask)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
		return reply{resp: resp}, nil
	}
	for _, tr := range res {
		t := kmsg.NewAlterShareGroupOffsetsResponseTopic()
		t.Topic, t.TopicID = tr.Topic, tr.TopicID
		for _, rp := range req.Topics[topicIndex(req.Topics, tr.Topic)].Partitions {
			p := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
			p.Partition = rp.Partition
			if perr := tr.Partitions[rp.Partition]; perr != nil {
				p.ErrorCode, p.ErrorMessage = errorCode(perr), errorMessage(perr)
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	resp.Topics = append(resp.Topics, denied...)
	return reply{resp: resp}, nil
}

// topicIndex is the index of the first request topic named name.
func topicIndex(ts []kmsg.AlterShareGroupOffsetsRequestTopic, name string) int {
	for i := range ts {
		if ts[i].Topic == name {
			return i
		}
	}
	return 0
}

// errShareStateElsewhere explains a share-offsets change refused in a
// cluster for a partition led by another broker.
const errShareStateElsewhere = "a share-partition's state lives on the partition's leader, another broker; changing it through the group's coordinator is not supported yet"

// leadsAll reports whether this broker leads every named partition of
// topic (always on a single node).
func (s *Server) leadsAll(topic string, parts []kmsg.AlterShareGroupOffsetsRequestTopicPartition) bool {
	for _, p := range parts {
		if !s.leads(topic, p.Partition) {
			return false
		}
	}
	return true
}
