package kafkaproto

// CreatePartitions: v0-v3
//
// Behavior:
//   - Raises a topic's partition count to count. The count only grows: an
//     equal or smaller count, or one above the per-topic limit, gets
//     INVALID_PARTITIONS with Kafka's message. New partitions are empty,
//     start at offset 0 and appear in Metadata at once; the count is stored
//     in the topic catalog.
//   - An assignment, when given, must list one replica set per new
//     partition, each exactly [this node]: else INVALID_REPLICA_ASSIGNMENT.
//   - A topic named twice gets INVALID_REQUEST for each; an unknown topic
//     UNKNOWN_TOPIC_OR_PARTITION; the internal topics (whose partition
//     count places groups and transactions) INVALID_REQUEST; a topic owned
//     by a queue or an event store POLICY_VIOLATION with a message naming
//     the owner.
//   - validate_only checks everything and changes nothing.
//   - In a cluster (cluster.go) a cluster topic's new partitions are
//     proposed to the metadata group, placed round robin over the
//     registered brokers or as the assignment says (one registered broker
//     each).
//
// Version notes:
//   - v1 changes only throttling; v2 is the flexible version; v3 is v2
//     (KAFKA-14264).

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
	"github.com/vibemq/broker/topics"
)

func init() { register(kmsg.CreatePartitions, 0, 3, (*Server).handleCreatePartitions) }

func (s *Server) handleCreatePartitions(r *request) (reply, error) {
	req := r.kreq.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	count := map[string]int{}
	for _, rt := range req.Topics {
		count[rt.Topic]++
	}
	for _, rt := range req.Topics {
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = rt.Topic
		fail := func(code int16, msg string) {
			st.ErrorCode = code
			st.ErrorMessage = &msg
		}
		t, ok := s.topics.Topic(rt.Topic)
		switch {
		case count[rt.Topic] > 1:
			fail(kerr.InvalidRequest.Code, "duplicate topic name")
		case !r.allowedTopic(auth.OpAlter, rt.Topic):
			fail(kerr.TopicAuthorizationFailed.Code, "Authorization failed.")
		case !ok:
			fail(kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("topic %q does not exist", rt.Topic))
		case topics.IsInternalTopic(rt.Topic):
			fail(kerr.InvalidRequest.Code, fmt.Sprintf("cannot change the partition count of the internal topic %s", rt.Topic))
		case t.Owner() != topics.OwnerNone:
			fail(kerr.PolicyViolation.Code, t.CheckClientChange(topics.ChangePartitions).Error())
		case len(rt.Assignment) > 0 && int32(len(rt.Assignment)) != rt.Count-t.NumPartitions():
			fail(kerr.InvalidReplicaAssignment.Code, fmt.Sprintf("%d replica assignments given for %d new partitions", len(rt.Assignment), rt.Count-t.NumPartitions()))
		default:
			var assignment [][]int32
			for i, a := range rt.Assignment {
				if msg := s.checkReplicas(t.NumPartitions()+int32(i), a.Replicas); msg != "" {
					fail(kerr.InvalidReplicaAssignment.Code, msg)
					break
				}
				assignment = append(assignment, a.Replicas)
			}
			if st.ErrorCode != 0 {
				break
			}
			clustered := s.cfg.Cluster != nil && t.IsClusterTopic()
			err := s.topics.CreatePartitions(rt.Topic, rt.Count, req.ValidateOnly || clustered)
			if err == nil && clustered && !req.ValidateOnly {
				ctx, cancel := clusterContext(req.TimeoutMillis)
				err = s.cfg.Cluster.CreatePartitions(ctx, rt.Topic, rt.Count, assignment)
				cancel()
			}
			if err != nil {
				fail(errorCode(err), err.Error())
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply{resp: resp}, nil
}
