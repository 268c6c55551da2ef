package kafkaproto

// DescribeTransactions: v0
//
// Behavior:
//   - For each transactional ID: its state (Kafka's names: Empty, Ongoing,
//     PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort), producer
//     ID and epoch, timeout, start time of the open transaction (-1 when
//     none) and its partitions. An unknown ID gets TRANSACTIONAL_ID_NOT_FOUND.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.DescribeTransactions, 0, 0, (*Server).handleDescribeTransactions) }

func (s *Server) handleDescribeTransactions(r *request) (reply, error) {
	req := r.kreq.(*kmsg.DescribeTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	for _, id := range req.TransactionalIDs {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID = id
		st.ProducerID, st.ProducerEpoch, st.StartTimestamp = -1, -1, -1
		if s.cfg.Txns == nil {
			st.ErrorCode = kerr.CoordinatorNotAvailable.Code
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
		for _, p := range d.Partitions {
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
