package kafkaproto

// Heartbeat: v0-v4
//
// Behavior:
//   - Keeps the member's session alive. During a rebalance the answer is
//     REBALANCE_IN_PROGRESS (the member must rejoin); an unknown group or
//     member UNKNOWN_MEMBER_ID, a stale generation ILLEGAL_GENERATION, a
//     replaced static member FENCED_INSTANCE_ID, an empty group ID
//     INVALID_GROUP_ID.
//
// Version notes:
//   - v3: group_instance_id (KIP-345).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
	"github.com/vibemq/broker/groups"
)

func init() { register(kmsg.Heartbeat, 0, 4, (*Server).handleHeartbeat) }

func (s *Server) handleHeartbeat(r *request) (reply, error) {
	req := r.kreq.(*kmsg.HeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	if s.cfg.Groups == nil {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return reply{resp: resp}, nil
	}
	if !r.allowedGroup(auth.OpRead, req.Group) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return reply{resp: resp}, nil
	}
	if s.notGroupCoordinator(req.Group) {
		resp.ErrorCode = s.groupCoordinatorCode(req.Group)
		return reply{resp: resp}, nil
	}
	err := s.cfg.Groups.Heartbeat(groups.HeartbeatRequest{
		Group:      req.Group,
		Generation: req.Generation,
		MemberID:   req.MemberID,
		InstanceID: req.InstanceID,
	}, s.now())
	resp.ErrorCode = errorCode(err)
	return reply{resp: resp}, nil
}
