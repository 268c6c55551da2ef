package kafkaproto

// DescribeTransactions: v0
//
// Behavior:
//   - For each transactional ID: its state (Kafka's names: Empty, Ongoing,
//     PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort), producer
//     ID and epoch, timeout, start time of the open transaction (-1 when
//     none) and its partitions, with the __consumer_offsets partition of
//     each group whose offsets it commits (AddOffsetsToTxn adds that
//     partition in Kafka). An unknown ID gets TRANSACTIONAL_ID_NOT_FOUND
//     with every other field zero, as Kafka answers. In a cluster a
//     broker that does not coordinate the ID answers NOT_COORDINATOR
//     (COORDINATOR_LOAD_IN_PROGRESS while it loads the ID's replicated
//     partition of __transaction_state).

import (
	"cmp"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
	"github.com/vibemq/broker/groups"
	"github.com/vibemq/broker/txns"
)

func init() { register(kmsg.DescribeTransactions, 0, 0, (*Server).handleDescribeTransactions) }

func (s *Server) handleDescribeTransactions(r *request) (reply, error) {
	req := r.kreq.(*kmsg.DescribeTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	for _, id := range req.TransactionalIDs {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID = id
		if s.cfg.Txns == nil {
			st.ErrorCode = kerr.CoordinatorNotAvailable.Code
			resp.TransactionStates = append(resp.TransactionStates, st)
			continue
		}
		if !r.allowedTxn(auth.OpDescribe, id) {
			st.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
			resp.TransactionStates = append(resp.TransactionStates, st)
			continue
		}
		if s.notTxnCoordinator(id) {
			// In a cluster the coordinator answers (Kafka's
			// TransactionCoordinator.handleDescribeTransactions).
			st.ErrorCode = s.txnCoordinatorCode(id)
			resp.TransactionStates = append(resp.TransactionStates, st)
			continue
		}
		d, ok := s.cfg.Txns.Describe(id)
		if !ok {
			st.ErrorCode = kerr.TransactionalIDNotFound.Code
			resp.TransactionStates = append(resp.TransactionStates, st)
			continue
		}
		st.State = d.State.String()
		st.TimeoutMillis = d.TimeoutMs
		st.StartTimestamp = d.StartMs
		st.ProducerID, st.ProducerEpoch = d.ProducerID, d.Epoch
		if s.cfg.Groups != nil {
			for _, g := range d.Groups {
				d.Partitions = append(d.Partitions, txns.TopicPartition{Topic: groups.OffsetsTopic, Partition: s.cfg.Groups.PartitionFor(g)})
			}
			slices.SortFunc(d.Partitions, func(a, b txns.TopicPartition) int {
				return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
			})
			d.Partitions = slices.Compact(d.Partitions)
		}
		for _, p := range d.Partitions {
			if !r.allowedTopic(auth.OpDescribe, p.Topic) {
				continue // KafkaApis lists only topics the principal may DESCRIBE
			}
			n := len(st.Topics)
			if n == 0 || st.Topics[n-1].Topic != p.Topic {
				t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
				t.Topic = p.Topic
				st.Topics = append(st.Topics, t)
				n++
			}
			st.Topics[n-1].Partitions = append(st.Topics[n-1].Partitions, p.Partition)
		}
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return reply{resp: resp}, nil
}
