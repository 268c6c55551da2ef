package kafkaproto

// OffsetForLeaderEpoch: v0-v4
//
// Behavior:
//   - Every partition has had one leader epoch, 0, since offset 0. Asking for
//     epoch 0 (or any epoch when the partition is empty) answers epoch 0 and
//     the log end offset; asking for a later epoch answers epoch -1, offset
//     -1 (UNDEFINED), as Kafka does for an epoch it has not seen. Clients use
//     this to detect log truncation (KIP-320): with one epoch there is none.
//   - current_leader_epoch (v2+) is checked as in Fetch.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
)

func init() { register(kmsg.OffsetForLeaderEpoch, 0, 4, (*Server).handleOffsetForLeaderEpoch) }

func (s *Server) handleOffsetForLeaderEpoch(r *request) (reply, error) {
	req := r.kreq.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		denied := !r.allowedTopic(auth.OpDescribe, rt.Topic)
		t, topicOK := s.topics.Topic(rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LeaderEpoch, sp.EndOffset = -1, -1
			if denied {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			if !topicOK {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			p, ok := t.Partition(rp.Partition)
			switch {
			case !ok:
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case s.replicatedLog(rt.Topic, rp.Partition) != nil:
				offsetForEpochReplicated(s.replicatedLog(rt.Topic, rp.Partition), req.Version, rp, &sp)
			case s.cfg.Cluster != nil && !s.leads(rt.Topic, rp.Partition):
				sp.ErrorCode = kerr.NotLeaderForPartition.Code
			case req.Version >= 2 && rp.CurrentLeaderEpoch > 0:
				sp.ErrorCode = kerr.UnknownLeaderEpoch.Code
			case req.Version >= 2 && rp.CurrentLeaderEpoch < -1:
				sp.ErrorCode = kerr.FencedLeaderEpoch.Code
			case rp.LeaderEpoch <= 0:
				sp.LeaderEpoch, sp.EndOffset = 0, p.HighWatermark()
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply{resp: resp}, nil
}
