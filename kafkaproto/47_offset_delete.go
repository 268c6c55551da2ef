package kafkaproto

// OffsetDelete: v0
//
// Behavior:
//   - Deletes committed offsets of an Empty group, or of a "consumer" group
//     for topics none of its members subscribes to (KIP-496); tombstones go
//     to __consumer_offsets and the answer waits until they are durable.
//   - An unknown group: GROUP_ID_NOT_FOUND; a non-empty group of another
//     protocol type: NON_EMPTY_GROUP; a subscribed topic:
//     GROUP_SUBSCRIBED_TO_TOPIC for its partitions. Partitions without a
//     committed offset succeed.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
	"github.com/vibemq/broker/groups"
)

func init() { register(kmsg.OffsetDelete, 0, 0, (*Server).handleOffsetDelete) }

func (s *Server) handleOffsetDelete(r *request) (reply, error) {
	req := r.kreq.(*kmsg.OffsetDeleteRequest)
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	total := 0
	for _, t := range req.Topics {
		total += len(t.Partitions)
	}
	switch {
	case s.cfg.Groups == nil:
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return reply{resp: resp}, nil
	case total > s.cfg.MaxPartitionsPerRequest:
		resp.ErrorCode = kerr.PolicyViolation.Code
		return reply{resp: resp}, nil
	}
	if s.notGroupCoordinator(req.Group) {
		resp.ErrorCode = s.groupCoordinatorCode(req.Group)
		return reply{resp: resp}, nil
	}
	if !r.allowedGroup(auth.OpDelete, req.Group) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return reply{resp: resp}, nil
	}
	// Topics the principal may not READ are answered
	// TOPIC_AUTHORIZATION_FAILED per partition and left alone (KafkaApis
	// handleOffsetDeleteRequest).
	denied := make([]bool, len(req.Topics))
	topics := make([]groups.OffsetDeleteTopic, 0, len(req.Topics))
	for i, t := range req.Topics {
		if !r.allowedTopic(auth.OpRead, t.Topic) {
			denied[i] = true
			continue
		}
		dt := groups.OffsetDeleteTopic{Topic: t.Topic}
		for _, p := range t.Partitions {
			dt.Partitions = append(dt.Partitions, p.Partition)
		}
		topics = append(topics, dt)
	}
	fut := s.cfg.Groups.DeleteOffsets(req.Group, topics, s.now())
	finish := func() {
		res := fut.Wait(nil)
		resp.ErrorCode = errorCode(res.Err)
		if res.Err != nil {
			return
		}
		k := 0
		for i, t := range req.Topics {
			rt := kmsg.NewOffsetDeleteResponseTopic()
			rt.Topic = t.Topic
			var errs []error
			if !denied[i] {
				errs = res.Topics[k]
				k++
			}
			for j, p := range t.Partitions {
				rp := kmsg.NewOffsetDeleteResponseTopicPartition()
				rp.Partition = p.Partition
				rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				if !denied[i] {
					rp.ErrorCode = errorCode(errs[j])
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
	return reply{resp: resp, finish: finish}, nil
}
