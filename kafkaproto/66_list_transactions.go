package kafkaproto

// ListTransactions: v0-v1
//
// Behavior:
//   - Lists every transactional ID with its producer ID and state, filtered
//     by state names and producer IDs (empty filters match all). Unknown
//     state names are echoed in unknown_state_filters.
//
// Version notes:
//   - v1 adds duration_filter_millis (KIP-994): only transactions open for
//     longer than that many milliseconds. v2 (transactional ID regex) is not
//     served.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
	"github.com/vibemq/broker/txns"
)

func init() { register(kmsg.ListTransactions, 0, 1, (*Server).handleListTransactions) }

var txnStateNames = map[string]bool{
	"Empty": true, "Ongoing": true, "PrepareCommit": true, "PrepareAbort": true,
	"CompleteCommit": true, "CompleteAbort": true, "Dead": true, "PrepareEpochFence": true,
}

func (s *Server) handleListTransactions(r *request) (reply, error) {
	req := r.kreq.(*kmsg.ListTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	if s.cfg.Txns == nil {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return reply{resp: resp}, nil
	}
	states := map[string]bool{}
	for _, f := range req.StateFilters {
		if !txnStateNames[f] {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, f)
		}
		states[f] = true
	}
	pids := map[int64]bool{}
	for _, p := range req.ProducerIDFilters {
		pids[p] = true
	}
	nowMs := s.now().UnixMilli()
	for _, d := range s.cfg.Txns.List() {
		if len(states) > 0 && !states[d.State.String()] {
			continue
		}
		if len(pids) > 0 && !pids[d.ProducerID] {
			continue
		}
		if req.Version >= 1 && req.DurationFilterMillis >= 0 {
			if d.State != txns.StateOngoing || nowMs-d.StartMs <= req.DurationFilterMillis {
				continue
			}
		}
		if !r.allowedTxn(auth.OpDescribe, d.TransactionalID) {
			continue
		}
		st := kmsg.NewListTransactionsResponseTransactionState()
		st.TransactionalID, st.ProducerID, st.TransactionState = d.TransactionalID, d.ProducerID, d.State.String()
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return reply{resp: resp}, nil
}
