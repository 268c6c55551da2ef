package kafkaproto

// AddOffsetsToTxn: v0-v3
//
// Behavior:
//   - Adds the consumer group to the producer's transaction, so that its
//     TxnOffsetCommit offsets are committed with the transaction. Fencing
//     and CONCURRENT_TRANSACTIONS as AddPartitionsToTxn.
//
// Version notes:
//   - v4 (KIP-890) is not advertised.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
)

func init() { register(kmsg.AddOffsetsToTxn, 0, 3, (*Server).handleAddOffsetsToTxn) }

func (s *Server) handleAddOffsetsToTxn(r *request) (reply, error) {
	req := r.kreq.(*kmsg.AddOffsetsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
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
	if !r.allowedGroup(auth.OpRead, req.Group) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return reply{resp: resp}, nil
	}
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return reply{resp: resp}, nil
	}
	err := s.cfg.Txns.AddOffsets(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group, s.now())
	resp.ErrorCode = fencedCode(errorCode(err), req.Version >= 2)
	return reply{resp: resp}, nil
}
