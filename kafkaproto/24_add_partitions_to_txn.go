package kafkaproto

// AddPartitionsToTxn: v0-v3
//
// Behavior:
//   - Adds the partitions to the producer's transaction, starting one if
//     none is open. Every partition gets the same error; an unknown
//     partition gets UNKNOWN_TOPIC_OR_PARTITION and the others
//     OPERATION_NOT_ATTEMPTED, as Kafka answers. A partition of a topic
//     owned by a queue or an event store gets INVALID_TOPIC_EXCEPTION (the
//     topic refuses client writes, see Produce; a transaction's markers
//     would take offsets of its log), the others OPERATION_NOT_ATTEMPTED.
//   - In a cluster (Config.CrossBrokerTxns) the partitions may be led by
//     other brokers or belong to replicated topics: the coordinator sends
//     their markers to their leaders (WriteTxnMarkers, txns.MarkerSender).
//     Without a marker sender, a partition this broker does not lead gets
//     INVALID_TXN_STATE.
//   - Fencing: an older epoch gets PRODUCER_FENCED (v2+) or
//     INVALID_PRODUCER_EPOCH; a transaction being completed
//     CONCURRENT_TRANSACTIONS.
//
// Version notes:
//   - v4+ (KIP-890, broker-to-broker verification batches) are not
//     advertised.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
	"github.com/vibemq/broker/topics"
	"github.com/vibemq/broker/txns"
)

func init() { register(kmsg.AddPartitionsToTxn, 0, 3, (*Server).handleAddPartitionsToTxn) }

func (s *Server) handleAddPartitionsToTxn(r *request) (reply, error) {
	req := r.kreq.(*kmsg.AddPartitionsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)

	total := 0
	for _, t := range req.Topics {
		total += len(t.Partitions)
	}
	var code int16
	var parts []txns.TopicPartition
	// unknown holds the refused partitions with their code.
	unknown := map[txns.TopicPartition]int16{}
	switch {
	case s.cfg.Txns == nil:
		code = kerr.CoordinatorNotAvailable.Code
	case total > s.cfg.MaxPartitionsPerRequest:
		code = kerr.PolicyViolation.Code
	case !r.allowedTxn(auth.OpWrite, req.TransactionalID):
		code = kerr.TransactionalIDAuthorizationFailed.Code
	case s.notTxnCoordinator(req.TransactionalID):
		code = s.txnCoordinatorCode(req.TransactionalID)
	default:
		parts = make([]txns.TopicPartition, 0, total)
		for _, t := range req.Topics {
			tp, ok := s.topics.Topic(t.Topic)
			denied := !r.allowedTopic(auth.OpWrite, t.Topic)
			for _, p := range t.Partitions {
				k := txns.TopicPartition{Topic: t.Topic, Partition: p}
				switch {
				case denied:
					unknown[k] = kerr.TopicAuthorizationFailed.Code
				case !ok || p < 0 || p >= tp.NumPartitions():
					unknown[k] = kerr.UnknownTopicOrPartition.Code
				case tp.Owner() != topics.OwnerNone:
					unknown[k] = kerr.InvalidTopicException.Code
				case !s.cfg.CrossBrokerTxns && !s.leads(t.Topic, p):
					// Without a marker sender the coordinator writes
					// every marker itself, so a transaction may only
					// hold partitions it leads (DESIGN.md, issue 13).
					unknown[k] = kerr.InvalidTxnState.Code
				}
				parts = append(parts, k)
			}
		}
		if len(unknown) == 0 {
			code = fencedCode(errorCode(s.cfg.Txns.AddPartitions(req.TransactionalID, req.ProducerID, req.ProducerEpoch, parts, s.now())), req.Version >= 2)
		}
	}
	for _, t := range req.Topics {
		rt := kmsg.NewAddPartitionsToTxnResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			rp.Partition = p
			rp.ErrorCode = code
			if len(unknown) > 0 {
				rp.ErrorCode = kerr.OperationNotAttempted.Code
				if code, refused := unknown[txns.TopicPartition{Topic: t.Topic, Partition: p}]; refused {
					rp.ErrorCode = code
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return reply{resp: resp}, nil
}
