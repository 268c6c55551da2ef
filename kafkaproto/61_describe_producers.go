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
//   - A replicated partition (RF > 1) answers from its Raft group's state
//     machine (cluster/partition_txn.go) on its leader, so that
//     `kafka-transactions describe-producers`, `find-hanging` and `abort`
//     work on it; elsewhere NOT_LEADER_OR_FOLLOWER. Its last timestamp is
//     -1 for a producer with no batch since the leader started or
//     restored a state row.

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
			s.describePartitionProducers(rt.Topic, i, t, topicOK, &sp)
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply{resp: resp}, nil
}

// describePartitionProducers fills sp for partition i of topic t (ok:
// the topic exists here): a replicated partition's producers come from
// its state machine on its leader (Cluster.ReplicatedLog), any other's
// from the local partition.
func (s *Server) describePartitionProducers(topic string, i int32, t *topics.Topic, ok bool, sp *kmsg.DescribeProducersResponseTopicPartition) {
	var producers []topics.ProducerInfo
	if rl := s.replicatedLog(topic, i); rl != nil {
		var err error
		if producers, err = rl.Producers(); err != nil {
			sp.ErrorCode, sp.ErrorMessage = errorCode(err), errorMessage(err)
			return
		}
	} else {
		var p *topics.Partition
		if ok {
			p, _ = t.Partition(i)
		}
		switch {
		case p == nil:
			sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			return
		case s.cfg.Cluster != nil && !s.leads(topic, i):
			sp.ErrorCode = kerr.NotLeaderForPartition.Code
			return
		}
		producers = p.Producers()
	}
	for _, info := range producers {
		ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
		ap.ProducerID, ap.ProducerEpoch = info.ProducerID, int32(info.Epoch)
		ap.LastSequence, ap.LastTimestamp = info.LastSequence, info.LastTimestamp
		ap.CoordinatorEpoch = info.CoordinatorEpoch
		ap.CurrentTxnStartOffset = info.TxnStartOffset
		sp.ActiveProducers = append(sp.ActiveProducers, ap)
	}
}
