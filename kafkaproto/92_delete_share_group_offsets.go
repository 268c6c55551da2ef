package kafkaproto

// DeleteShareGroupOffsets: v0
//
// Behavior:
//   - Deletes a share group's share-partition states of the named topics
//     (KIP-932) while it has no members (else NON_EMPTY_GROUP, nothing
//     changed): a later fetch starts them again by share.auto.offset.reset.
//     A group that does not exist, or a classic or consumer group's name, is
//     GROUP_ID_NOT_FOUND.
//   - Per topic: UNKNOWN_TOPIC_OR_PARTITION for an unknown topic or one the
//     group has no state of (topic ID zero), as Apache Kafka 4.2;
//     INVALID_REQUEST for a native queue's topic or an event store's.
//     Answered after the deletion is durable (fsync).
//   - In a cluster only the group's coordinator answers (NOT_COORDINATOR
//     elsewhere), and only for topics whose partitions it all leads
//     (else NOT_LEADER_OR_FOLLOWER for the topic: DESIGN.md, Cluster).
//   - DELETE on the group (GROUP_AUTHORIZATION_FAILED) and READ on each
//     topic (TOPIC_AUTHORIZATION_FAILED per topic), as KafkaApis.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
)

func init() {
	register(kmsg.DeleteShareGroupOffsets, 0, 0, (*Server).handleDeleteShareGroupOffsets)
}

func (s *Server) handleDeleteShareGroupOffsets(r *request) (reply, error) {
	req := r.kreq.(*kmsg.DeleteShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
	switch {
	case s.cfg.Groups == nil:
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return reply{resp: resp}, nil
	case !r.allowedGroup(auth.OpDelete, req.GroupID):
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return reply{resp: resp}, nil
	case s.notGroupCoordinator(req.GroupID):
		resp.ErrorCode = s.groupCoordinatorCode(req.GroupID)
		return reply{resp: resp}, nil
	case len(req.Topics) > s.cfg.MaxPartitionsPerRequest:
		resp.ErrorCode = kerr.PolicyViolation.Code
		return reply{resp: resp}, nil
	}
	var names []string
	var denied []kmsg.DeleteShareGroupOffsetsResponseTopic
	for _, rt := range req.Topics {
		if !r.allowedTopic(auth.OpRead, rt.Topic) {
			t := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
			t.Topic, t.ErrorCode = rt.Topic, kerr.TopicAuthorizationFailed.Code
			denied = append(denied, t)
			continue
		}
		if !s.leadsTopic(rt.Topic) {
			t := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
			t.Topic, t.ErrorCode, t.ErrorMessage = rt.Topic, kerr.NotLeaderForPartition.Code, kmsg.StringPtr(errShareStateElsewhere)
			denied = append(denied, t)
			continue
		}
		names = append(names, rt.Topic)
	}
	res, err := s.cfg.Groups.DeleteShareGroupOffsets(req.GroupID, names)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
		return reply{resp: resp}, nil
	}
	for _, tr := range res {
		t := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
		t.Topic, t.TopicID = tr.Topic, tr.TopicID
		if tr.Err != nil {
			t.ErrorCode, t.ErrorMessage = errorCode(tr.Err), errorMessage(tr.Err)
		}
		resp.Topics = append(resp.Topics, t)
	}
	resp.Topics = append(resp.Topics, denied...)
	return reply{resp: resp}, nil
}

// leadsTopic reports whether this broker leads every partition of topic
// name (always on a single node, and for a topic it does not know).
func (s *Server) leadsTopic(name string) bool {
	t, ok := s.topics.Topic(name)
	if !ok || s.cfg.Cluster == nil {
		return true
	}
	for p := int32(0); p < t.NumPartitions(); p++ {
		if !s.leads(name, p) {
			return false
		}
	}
	return true
}
