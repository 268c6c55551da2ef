package kafkaproto

// DescribeTopicPartitions: v0
//
// Behavior (KIP-966, the paginated Metadata that the 4.x Admin client's
// describeTopics uses when the broker serves it):
//   - An empty topic list describes every topic. Topics are answered in
//     name order; unknown names get UNKNOWN_TOPIC_OR_PARTITION (invalid
//     names INVALID_TOPIC_EXCEPTION) and take no part in the partition
//     limit.
//   - At most response_partition_limit partitions are answered (capped at
//     describeTopicPartitionsLimit, Kafka's max.request.partition.size.limit
//     default); when more remain, next_cursor names the first one left out.
//   - A cursor starts the answer at its topic and partition; in a request
//     that names topics, the cursor's topic must be one of them, otherwise
//     every topic gets INVALID_REQUEST (as Kafka).
//   - Partitions are as in Metadata: this node leads every partition at
//     epoch 0 and is the only replica; the eligible-leader lists are empty.
//     In a cluster, a partition whose leader is fenced has leader -1 and
//     fenced replicas are offline (KRaftMetadataCache's
//     describeTopicResponse), without a partition error.
//   - Authorized operations: with no authorizer every topic operation is
//     allowed, as Kafka reports without one.
//
// Version notes:
//   - v0 is the only version.

import (
	"errors"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
	"github.com/vibemq/broker/topics"
)

func init() { register(kmsg.DescribeTopicPartitions, 0, 0, (*Server).handleDescribeTopicPartitions) }

// describeTopicPartitionsLimit is the most partitions one answer carries
// (Kafka's max.request.partition.size.limit default).
const describeTopicPartitionsLimit = 2000

func (s *Server) handleDescribeTopicPartitions(r *request) (reply, error) {
	req := r.kreq.(*kmsg.DescribeTopicPartitionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
	if len(req.Topics) > s.cfg.MaxPartitionsPerRequest {
		return reply{}, errors.New("describe topic partitions request names too many topics")
	}
	var names []string
	if len(req.Topics) == 0 {
		for _, t := range s.topics.Topics() {
			if r.allowedTopic(auth.OpDescribe, t.Name) {
				names = append(names, t.Name)
			}
		}
	} else {
		for _, rt := range req.Topics {
			names = append(names, rt.Topic)
		}
		slices.Sort(names)
		names = slices.Compact(names)
		if req.Cursor != nil && !slices.Contains(names, req.Cursor.Topic) {
			for _, name := range names {
				rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
				rt.Topic = kmsg.StringPtr(name)
				rt.ErrorCode = kerr.InvalidRequest.Code
				resp.Topics = append(resp.Topics, rt)
			}
			return reply{resp: resp}, nil
		}
	}
	limit := int(req.ResponsePartitionLimit)
	if limit <= 0 || limit > describeTopicPartitionsLimit {
		limit = describeTopicPartitionsLimit
	}
	for _, name := range names {
		first := int32(0)
		if req.Cursor != nil {
			if name < req.Cursor.Topic {
				continue
			}
			if name == req.Cursor.Topic {
				first = max(req.Cursor.Partition, 0)
			}
		}
		rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
		rt.Topic = kmsg.StringPtr(name)
		if !r.allowedTopic(auth.OpDescribe, name) {
			rt.ErrorCode = kerr.TopicAuthorizationFailed.Code
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		t, ok := s.topics.Topic(name)
		if !ok {
			rt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			if topics.ValidateTopicName(name) != nil {
				rt.ErrorCode = kerr.InvalidTopicException.Code
			}
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		if limit == 0 {
			resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: first}
			break
		}
		rt.TopicID = t.ID
		rt.IsInternal = topics.IsInternalTopic(name)
		rt.AuthorizedOperations = r.topicAuthorizedOperations(name)
		n := t.NumPartitions()
		for i := first; i < n; i++ {
			if limit == 0 {
				resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: i}
				break
			}
			limit--
			p := kmsg.NewDescribeTopicPartitionsResponseTopicPartition()
			p.Partition = i
			v := s.partitionView(t, i)
			p.LeaderID, p.LeaderEpoch, p.Replicas, p.ISR, p.OfflineReplicas = v.leader, v.epoch, v.replicas, v.isr, v.offline
			p.EligibleLeaderReplicas = []int32{}
			p.LastKnownELR = []int32{}
			rt.Partitions = append(rt.Partitions, p)
		}
		resp.Topics = append(resp.Topics, rt)
		if resp.NextCursor != nil {
			break
		}
	}
	return reply{resp: resp}, nil
}
