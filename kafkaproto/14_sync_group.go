package kafkaproto

// SyncGroup: v0-v5
//
// Behavior:
//   - The leader's assignment completes the rebalance: it is stored with
//     the group's metadata in __consumer_offsets, then every member gets
//     its own assignment, byte for byte (an empty one if the leader left it
//     out). A follower's SyncGroup waits for the leader's, on the
//     connection's writer.
//   - An unknown group or member: UNKNOWN_MEMBER_ID (as Kafka answers); a
//     stale generation: ILLEGAL_GENERATION; during the join phase:
//     REBALANCE_IN_PROGRESS; protocol type or name (v5) other than the
//     group's: INCONSISTENT_GROUP_PROTOCOL. An assignment over the broker's
//     per-member limit (1 MiB): INVALID_REQUEST to the leader, nothing
//     changed.
//
// Version notes:
//   - v3: group_instance_id (KIP-345); v5: protocol type and name in the
//     request and the response (KIP-559).

import (
	"bytes"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
	"github.com/vibemq/broker/groups"
)

func init() { register(kmsg.SyncGroup, 0, 5, (*Server).handleSyncGroup) }

func (s *Server) handleSyncGroup(r *request) (reply, error) {
	req := r.kreq.(*kmsg.SyncGroupRequest)
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	resp.MemberAssignment = []byte{}
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
	sr := groups.SyncRequest{
		Group:        req.Group,
		Generation:   req.Generation,
		MemberID:     req.MemberID,
		InstanceID:   req.InstanceID,
		ProtocolType: req.ProtocolType,
		ProtocolName: req.Protocol,
	}
	for _, a := range req.GroupAssignment {
		// Copied: kmsg's MemberAssignment aliases the request body, which
		// the group would otherwise keep alive whole (see JoinGroup).
		sr.Assignments = append(sr.Assignments, groups.MemberAssignment{MemberID: a.MemberID, Assignment: bytes.Clone(a.MemberAssignment)})
	}
	fut := s.cfg.Groups.Sync(sr, s.now())
	finish := func() {
		res := fut.Wait(s.closing)
		resp.ErrorCode = errorCode(res.Err)
		if res.Err != nil {
			return
		}
		resp.ProtocolType = res.ProtocolType
		resp.Protocol = res.ProtocolName
		resp.MemberAssignment = res.Assignment
	}
	return reply{resp: resp, finish: finish}, nil
}
