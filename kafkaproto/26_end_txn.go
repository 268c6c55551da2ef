package kafkaproto

// EndTxn: v0-v3
//
// Behavior:
//   - Commits or aborts the producer's transaction: the coordinator records
//     PrepareCommit/PrepareAbort, writes a COMMIT or ABORT marker to every
//     partition of the transaction, commits the offsets staged by
//     TxnOffsetCommit (on commit), then records the outcome. The response
//     is sent once all of it is durable. A transaction holding partitions
//     this broker does not write (a cluster: led elsewhere, replicated,
//     or a group coordinated elsewhere) is answered once its Prepare
//     state is durable; its markers go to those partitions' leaders
//     after (WriteTxnMarkers, Kafka's order), the outcome last (txns).
//     A retry of an EndTxn that already completed the same way succeeds;
//     one while the markers are delivered gets CONCURRENT_TRANSACTIONS.
//   - Fencing as AddPartitionsToTxn; no open transaction is INVALID_TXN_STATE.
//
// Version notes:
//   - v4 and v5 (KIP-890, transaction.version 2: epoch bump per
//     transaction) are not advertised.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
)

func init() { register(kmsg.EndTxn, 0, 3, (*Server).handleEndTxn) }

func (s *Server) handleEndTxn(r *request) (reply, error) {
	req := r.kreq.(*kmsg.EndTxnRequest)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	if s.cfg.Txns == nil {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return reply{resp: resp}, nil
	}
	if !r.allowedTxn(auth.OpWrite, req.TransactionalID) {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return reply{resp: resp}, nil
	}
	if s.notTxnCoordinator(req.TransactionalID) {
		resp.ErrorCode = s.txnCoordinatorCode(req.TransactionalID)
		return reply{resp: resp}, nil
	}
	now := s.now()
	// The markers are synced: end the transaction on the writer goroutine
	// so that the connection's reader is not blocked behind the fsyncs.
	finish := func() {
		err := s.cfg.Txns.EndTxn(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit, now)
		resp.ErrorCode = fencedCode(errorCode(err), req.Version >= 2)
	}
	return reply{resp: resp, finish: finish}, nil
}
