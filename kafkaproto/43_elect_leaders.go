package kafkaproto

// ElectLeaders: v0-v2
//
// Behavior:
//   - Every partition has one replica, this node, which leads it: there is
//     never an election to hold. A named partition gets ELECTION_NOT_NEEDED
//     for both election types (preferred and unclean), as Kafka answers a
//     partition whose desired leader already leads; an unknown one
//     UNKNOWN_TOPIC_OR_PARTITION.
//   - A null topic list (every partition) answers no partition at all:
//     Kafka leaves out the partitions that already have their desired
//     leader when electing for all.
//   - An election type other than 0 (preferred) or 1 (unclean) gets
//     INVALID_REQUEST for every partition named.
//
// Version notes:
//   - v1 adds election_type (KIP-460) and the top-level error code; v2 is
//     flexible.

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
)

func init() { register(kmsg.ElectLeaders, 0, 2, (*Server).handleElectLeaders) }

func (s *Server) handleElectLeaders(r *request) (reply, error) {
	req := r.kreq.(*kmsg.ElectLeadersRequest)
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	n := 0
	for _, rt := range req.Topics {
		n += len(rt.Partitions)
	}
	if n > s.cfg.MaxPartitionsPerRequest {
		return reply{}, errors.New("elect leaders request names too many partitions")
	}
	if !r.allowedCluster(auth.OpAlter) {
		// KafkaApis: every partition and (v1+) the request fail.
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		for _, rt := range req.Topics {
			st := kmsg.NewElectLeadersResponseTopic()
			st.Topic = rt.Topic
			for _, i := range rt.Partitions {
				sp := kmsg.NewElectLeadersResponseTopicPartition()
				sp.Partition, sp.ErrorCode = i, kerr.ClusterAuthorizationFailed.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return reply{resp: resp}, nil
	}
	validType := req.ElectionType == 0 || req.ElectionType == 1
	for _, rt := range req.Topics {
		st := kmsg.NewElectLeadersResponseTopic()
		st.Topic = rt.Topic
		t, topicOK := s.topics.Topic(rt.Topic)
		for _, i := range rt.Partitions {
			sp := kmsg.NewElectLeadersResponseTopicPartition()
			sp.Partition = i
			partitionOK := false
			if topicOK {
				_, partitionOK = t.Partition(i)
			}
			switch {
			case !validType:
				sp.ErrorCode = kerr.InvalidRequest.Code
				sp.ErrorMessage = kmsg.StringPtr("election type must be 0 (preferred) or 1 (unclean)")
			case !partitionOK:
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			default:
				sp.ErrorCode = kerr.ElectionNotNeeded.Code
				sp.ErrorMessage = kmsg.StringPtr("this broker is the only replica and already leads the partition")
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply{resp: resp}, nil
}
