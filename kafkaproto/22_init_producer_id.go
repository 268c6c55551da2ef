package kafkaproto

// InitProducerID: v0-v5
//
// Behavior:
//   - Without a transactional ID the broker hands out a fresh producer ID at
//     epoch 0, never reused across restarts (IDs are reserved in durable
//     blocks). A client that bumps its epoch after an error (KIP-360, v3+,
//     producer ID and epoch set) gets a fresh ID as well, which is always a
//     valid answer.
//   - A transactional ID is not served yet: the request is answered with
//     TRANSACTIONAL_ID_AUTHORIZATION_FAILED so clients fail fast with a clear
//     error instead of retrying.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.InitProducerID, 0, 5, (*Server).handleInitProducerID) }

func (s *Server) handleInitProducerID(r *request) (reply, error) {
	req := r.kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
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
