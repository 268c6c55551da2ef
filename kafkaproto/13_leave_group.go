package kafkaproto

// LeaveGroup: v0-v5
//
// Behavior:
//   - Removes members and rebalances the rest. An unknown group is
//     UNKNOWN_MEMBER_ID (as Kafka answers); an unknown member is
//     UNKNOWN_MEMBER_ID for that member, a static member named with
//     another member ID FENCED_INSTANCE_ID. A member named by instance ID
//     alone (empty member ID) is removed administratively (KIP-345).
//   - Answered once the group change is stored.
//
// Version notes:
//   - v0-v2 name one member and carry its error at the top level.
//   - v3 batches members by member and instance ID (KIP-345); v5 adds a
//     reason per member (logged).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
	"github.com/vibemq/broker/groups"
)

func init() { register(kmsg.LeaveGroup, 0, 5, (*Server).handleLeaveGroup) }

func (s *Server) handleLeaveGroup(r *request) (reply, error) {
	req := r.kreq.(*kmsg.LeaveGroupRequest)
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
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
	var members []groups.LeaveMember
	if req.Version < 3 {
		members = []groups.LeaveMember{{MemberID: req.MemberID}}
	} else {
		if len(req.Members) > s.cfg.MaxPartitionsPerRequest {
			resp.ErrorCode = kerr.PolicyViolation.Code
			return reply{resp: resp}, nil
		}
		for _, m := range req.Members {
			lm := groups.LeaveMember{MemberID: m.MemberID, InstanceID: m.InstanceID}
			if m.Reason != nil {
				lm.Reason = *m.Reason
			}
			members = append(members, lm)
		}
	}
	fut := s.cfg.Groups.Leave(req.Group, members, s.now())
	finish := func() {
		res := fut.Wait(nil)
		if req.Version < 3 {
			if res.Err == nil && len(res.Members) == 1 {
				res.Err = res.Members[0]
			}
			resp.ErrorCode = errorCode(res.Err)
			return
		}
		resp.ErrorCode = errorCode(res.Err)
		if res.Err != nil {
			return
		}
		for i, m := range req.Members {
			rm := kmsg.NewLeaveGroupResponseMember()
			rm.MemberID = m.MemberID
			rm.InstanceID = m.InstanceID
			rm.ErrorCode = errorCode(res.Members[i])
			resp.Members = append(resp.Members, rm)
		}
	}
	return reply{resp: resp, finish: finish}, nil
}
