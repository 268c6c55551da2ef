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
	topics := make([]groups.OffsetDeleteTopic, len(req.Topics))
	for i, t := range req.Topics {
		topics[i].Topic = t.Topic
		for _, p := range t.Partitions {
			topics[i].Partitions = append(topics[i].Partitions, p.Partition)
		}
	}
	fut := s.cfg.Groups.DeleteOffsets(req.Group, topics, s.now())
	finish := func() {
		res := fut.Wait(nil)
		resp.ErrorCode = errorCode(res.Err)
		if res.Err != nil {
			return
		}
		for i, t := range req.Topics {
			rt := kmsg.NewOffsetDeleteResponseTopic()
			rt.Topic = t.Topic
			for j, p := range t.Partitions {
				rp := kmsg.NewOffsetDeleteResponseTopicPartition()
				rp.Partition = p.Partition
				rp.ErrorCode = errorCode(res.Topics[i][j])
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
	return reply{resp: resp, finish: finish}, nil
}
