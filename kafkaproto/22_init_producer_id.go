package kafkaproto

// InitProducerID: v0-v5
//
// Behavior:
//   - Without a transactional ID the broker hands out a fresh producer ID at
//     epoch 0, never reused across restarts (IDs are reserved in durable
//     blocks). A client that bumps its epoch after an error (KIP-360, v3+,
//     producer ID and epoch set) gets a fresh ID as well, which is always a
//     valid answer.
//   - With a transactional ID the transaction coordinator (txns) answers:
//     the ID keeps its producer ID and the epoch is bumped, fencing older
//     producers; an ongoing transaction is aborted first; a completing one
//     gets CONCURRENT_TRANSACTIONS. transaction_timeout_millis must be in
//     (0, transaction.max.timeout.ms], else INVALID_TRANSACTION_TIMEOUT.
//     Producer ID -1 with a transactional ID is Admin.fenceProducers.
//
// Version notes:
//   - v3 adds the caller's producer ID and epoch (KIP-360); one that does not
//     match is PRODUCER_FENCED (v4+) or INVALID_PRODUCER_EPOCH (v3).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
)

func init() { register(kmsg.InitProducerID, 0, 5, (*Server).handleInitProducerID) }

func (s *Server) handleInitProducerID(r *request) (reply, error) {
	req := r.kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil && !r.allowedTxn(auth.OpWrite, *req.TransactionalID) {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return reply{resp: resp}, nil
	}
	if req.TransactionalID == nil && !r.allowedIdempotent() {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return reply{resp: resp}, nil
	}
	if req.TransactionalID != nil {
		if s.cfg.Txns == nil {
			resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
			return reply{resp: resp}, nil
		}
		if s.notTxnCoordinator(*req.TransactionalID) {
			resp.ErrorCode = s.txnCoordinatorCode(*req.TransactionalID)
			return reply{resp: resp}, nil
		}
		pid, epoch := int64(-1), int16(-1)
		if req.Version >= 3 {
			pid, epoch = req.ProducerID, req.ProducerEpoch
		}
		id, ep, err := s.cfg.Txns.InitProducerID(*req.TransactionalID, req.TransactionTimeoutMillis, pid, epoch, s.now())
		if err != nil {
			resp.ErrorCode = fencedCode(errorCode(err), req.Version >= 4)
			return reply{resp: resp}, nil
		}
		resp.ProducerID, resp.ProducerEpoch = id, ep
		return reply{resp: resp}, nil
	}
	id, err := s.topics.AllocateProducerID()
	if err != nil {
		resp.ErrorCode = kerr.KafkaStorageError.Code
		return reply{resp: resp}, nil
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return reply{resp: resp}, nil
}

// fencedCode answers PRODUCER_FENCED (KIP-588) only to versions that know
// it, INVALID_PRODUCER_EPOCH to older ones.
func fencedCode(code int16, knowsFenced bool) int16 {
	if code == kerr.ProducerFenced.Code && !knowsFenced {
		return kerr.InvalidProducerEpoch.Code
	}
	return code
}
