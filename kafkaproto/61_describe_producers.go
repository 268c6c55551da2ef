package kafkaproto

// DescribeProducers: v0
//
// Behavior:
//   - For each partition, the producers it remembers (idempotent and
//     transactional): producer ID, epoch, last sequence and timestamp, and
//     the first offset of the producer's open transaction there (-1 when
//     none), and the coordinator epoch of its last transaction marker
//     there (-1 when none is known), which `kafka-transactions abort`
//     sends back in its WriteTxnMarkers so that the partition does not
//     fence it. Unknown partitions get UNKNOWN_TOPIC_OR_PARTITION.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
	"github.com/vibemq/broker/topics"
)

func init() { register(kmsg.DescribeProducers, 0, 0, (*Server).handleDescribeProducers) }

func (s *Server) handleDescribeProducers(r *request) (reply, error) {
	req := r.kreq.(*kmsg.DescribeProducersRequest)
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	total := 0
	for _, t := range req.Topics {
		total += len(t.Partitions)
	}
	tooMany := total > s.cfg.MaxPartitionsPerRequest
	for _, rt := range req.Topics {
		st := kmsg.NewDescribeProducersResponseTopic()
		st.Topic = rt.Topic
		denied := !r.allowedTopic(auth.OpRead, rt.Topic)
		t, topicOK := s.topics.Topic(rt.Topic)
		for _, i := range rt.Partitions {
			sp := kmsg.NewDescribeProducersResponseTopicPartition()
			sp.Partition = i
			if tooMany || denied {
				sp.ErrorCode = kerr.PolicyViolation.Code
				if !tooMany {
					sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				}
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			var p *topics.Partition
			if topicOK {
				p, _ = t.Partition(i)
			}
			if p == nil {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			if s.cfg.Cluster != nil && !s.leads(rt.Topic, i) {
				sp.ErrorCode = kerr.NotLeaderForPartition.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			for _, info := range p.Producers() {
				ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				ap.ProducerID, ap.ProducerEpoch = info.ProducerID, int32(info.Epoch)
				ap.LastSequence, ap.LastTimestamp = info.LastSequence, info.LastTimestamp
				ap.CoordinatorEpoch = info.CoordinatorEpoch
				ap.CurrentTxnStartOffset = info.TxnStartOffset
				sp.ActiveProducers = append(sp.ActiveProducers, ap)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply{resp: resp}, nil
}
