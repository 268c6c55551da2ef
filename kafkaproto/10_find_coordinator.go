package kafkaproto

// FindCoordinator: v0-v5
//
// Behavior:
//   - This broker coordinates every group (key type 0) and every
//     transactional ID (key type 1): the answer is always this node. Other
//     key types (2, share groups, needs v6) get INVALID_REQUEST.
//   - A group key is answered COORDINATOR_NOT_AVAILABLE when the broker
//     runs without a group coordinator.
//   - Keys are not validated: Kafka answers an empty group ID too.
//   - In a cluster (cluster.go) the coordinator is the leader of the key's
//     partition of __consumer_offsets or __transaction_state
//     (abs(hashCode) % partitions, as Kafka); the partitions are placed
//     over the registered brokers by the first FindCoordinator once every
//     voter has registered (Kafka creates these topics then too).
//     COORDINATOR_NOT_AVAILABLE while they cannot be placed or the
//     coordinator is not registered or is fenced (KIP-631; Kafka answers
//     a coordinator that is not alive so). With offsets-topic-replication-factor
//     above 1 a partition of __consumer_offsets is a Raft group and the
//     group coordinator is its current leader (record 8), so it moves
//     with leadership; COORDINATOR_NOT_AVAILABLE while none is recorded.
//
// Version notes:
//   - v4 batches keys (KIP-699): one result per key; v0-v3 have one key and
//     a top-level error, with node -1, host "" and port -1 on error.
//   - v6 (share coordinators, KIP-932) is not served.

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
	"github.com/vibemq/broker/groups"
)

func init() { register(kmsg.FindCoordinator, 0, 5, (*Server).handleFindCoordinator) }

func (s *Server) handleFindCoordinator(r *request) (reply, error) {
	req := r.kreq.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	keys := req.CoordinatorKeys
	if req.Version < 4 {
		keys = []string{req.CoordinatorKey}
	}
	tooMany := len(keys) > s.cfg.MaxPartitionsPerRequest
	for _, key := range keys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key = key
		c.NodeID, c.Port = -1, -1
		switch {
		case tooMany:
			c.ErrorCode = kerr.PolicyViolation.Code
		case req.CoordinatorType != 0 && req.CoordinatorType != 1:
			c.ErrorCode = kerr.InvalidRequest.Code
			c.ErrorMessage = kmsg.StringPtr("only coordinator types 0 (group) and 1 (transaction) are served")
		case req.CoordinatorType == 0 && !r.allowedGroup(auth.OpDescribe, key):
			c.ErrorCode = kerr.GroupAuthorizationFailed.Code
		case req.CoordinatorType == 1 && !r.allowedTxn(auth.OpDescribe, key):
			c.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		case req.CoordinatorType == 0 && s.cfg.Groups == nil:
			c.ErrorCode = kerr.CoordinatorNotAvailable.Code
		case s.cfg.Cluster != nil:
			s.findClusterCoordinator(r, req.CoordinatorType, &c)
		default:
			c.NodeID = s.cfg.NodeID
			c.Host, c.Port = r.c.advertised()
		}
		resp.Coordinators = append(resp.Coordinators, c)
	}
	if req.Version < 4 {
		c := resp.Coordinators[0]
		resp.Coordinators = nil
		resp.ErrorCode, resp.NodeID, resp.Host, resp.Port = c.ErrorCode, c.NodeID, c.Host, c.Port
		if c.ErrorCode != 0 {
			resp.ErrorMessage = c.ErrorMessage
			if resp.ErrorMessage == nil {
				resp.ErrorMessage = kmsg.StringPtr(kerr.ErrorForCode(c.ErrorCode).Error())
			}
		}
	}
	return reply{resp: resp}, nil
}

// findClusterCoordinator fills c with the coordinator of c.Key in a
// cluster.
func (s *Server) findClusterCoordinator(r *request, kind int8, c *kmsg.FindCoordinatorResponseCoordinator) {
	topic := groups.OffsetsTopic
	if kind == 1 {
		topic = TransactionStateTopic
	}
	leaders := s.cfg.Cluster.CoordinatorLeaders(topic)
	if len(leaders) == 0 {
		ctx, cancel := clusterContext(0)
		var err error
		leaders, err = s.cfg.Cluster.PlaceCoordinator(ctx, topic)
		cancel()
		if err != nil || len(leaders) == 0 {
			c.ErrorCode = kerr.CoordinatorNotAvailable.Code
			c.ErrorMessage = kmsg.StringPtr("the coordinators are not placed yet: " + fmt.Sprint(err))
			return
		}
	}
	id := coordinatorOf(leaders, c.Key)
	if id < 0 {
		// A replicated __consumer_offsets partition without a recorded
		// leader (an election): the client retries.
		c.ErrorCode = kerr.CoordinatorNotAvailable.Code
		c.ErrorMessage = kmsg.StringPtr("the coordinator's partition of " + topic + " has no leader yet")
		return
	}
	if s.brokerFenced(id) {
		// Kafka's KafkaApis.getCoordinator answers a leader that is
		// not alive (getAliveBrokerNode) this way; the client retries
		// until the partition's leadership moves or the broker returns.
		c.ErrorCode = kerr.CoordinatorNotAvailable.Code
		c.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("the coordinator, broker %d, is fenced (the metadata leader has not heard from it); retry", id))
		return
	}
	if id == s.cfg.NodeID {
		c.NodeID = id
		c.Host, c.Port = r.c.advertised()
		return
	}
	for _, b := range s.cfg.Cluster.Brokers() {
		if b.NodeID == id {
			c.NodeID, c.Host, c.Port = id, b.Host, b.Port
			return
		}
	}
	c.ErrorCode = kerr.CoordinatorNotAvailable.Code
	c.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("the coordinator, broker %d, is not registered", id))
}
