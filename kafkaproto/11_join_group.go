package kafkaproto

// JoinGroup: v0-v9
//
// Behavior:
//   - The classic group protocol of Apache Kafka (groups/membership.go):
//     the response waits, on the connection's writer, until the group's
//     join phase completes (all members rejoined, the rebalance timeout, or
//     for a group that was Empty group.initial.rebalance.delay.ms), and is
//     answered COORDINATOR_NOT_AVAILABLE if the broker shuts down meanwhile.
//   - Empty group ID: INVALID_GROUP_ID. Session timeout outside the
//     broker's range: INVALID_SESSION_TIMEOUT. A protocol type or protocols
//     no member shares: INCONSISTENT_GROUP_PROTOCOL. An unknown member ID:
//     UNKNOWN_MEMBER_ID; a static member's instance ID held by another
//     member ID: FENCED_INSTANCE_ID. Protocol metadata over the broker's
//     per-member limit (1 MiB): INVALID_REQUEST, nothing changed.
//   - Protocol metadata goes to the leader byte for byte, whatever the
//     protocol type ("consumer", "connect", ...).
//
// Version notes:
//   - v0 has no rebalance timeout: the session timeout is used (as Kafka).
//   - v4: a new member without member ID gets MEMBER_ID_REQUIRED and an ID
//     to rejoin with (KIP-394).
//   - v5: group_instance_id, static membership (KIP-345): a known instance
//     rejoining a Stable group without protocol change takes its old place
//     without a rebalance.
//   - v7: protocol_type in the response; v8: reason (not used);
//     v9: skip_assignment for a static leader rejoining (KIP-814).

import (
	"bytes"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
	"github.com/vibemq/broker/groups"
)

func init() { register(kmsg.JoinGroup, 0, 9, (*Server).handleJoinGroup) }

func (s *Server) handleJoinGroup(r *request) (reply, error) {
	req := r.kreq.(*kmsg.JoinGroupRequest)
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.Generation = -1
	resp.MemberID = req.MemberID
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
	jr := groups.JoinRequest{
		Group:            req.Group,
		MemberID:         req.MemberID,
		InstanceID:       req.InstanceID,
		ClientID:         r.clientID,
		ClientHost:       clientHost(r),
		ProtocolType:     req.ProtocolType,
		SessionTimeout:   time.Duration(req.SessionTimeoutMillis) * time.Millisecond,
		RebalanceTimeout: time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond,
		Version:          req.Version,
	}
	if req.Version == 0 {
		jr.RebalanceTimeout = jr.SessionTimeout
	}
	jr.Protocols = make([]groups.Protocol, len(req.Protocols))
	for i, p := range req.Protocols {
		// Copied: kmsg's Metadata aliases the request body, which the group
		// would otherwise keep alive whole (up to max-request-bytes, while
		// the metadata is bounded at 1 MiB) for as long as the member lives,
		// after its request memory was released.
		jr.Protocols[i] = groups.Protocol{Name: p.Name, Metadata: bytes.Clone(p.Metadata)}
	}
	fut := s.cfg.Groups.Join(jr, s.now())
	finish := func() {
		res := fut.Wait(s.closing)
		resp.MemberID = res.MemberID
		if res.Err != nil {
			resp.ErrorCode = errorCode(res.Err)
			return
		}
		resp.Generation = res.Generation
		resp.ProtocolType = res.ProtocolType
		resp.Protocol = res.ProtocolName
		resp.LeaderID = res.Leader
		resp.SkipAssignment = res.SkipAssignment
		for _, m := range res.Members {
			rm := kmsg.NewJoinGroupResponseMember()
			rm.MemberID = m.MemberID
			rm.InstanceID = m.InstanceID
			rm.ProtocolMetadata = m.Metadata
			resp.Members = append(resp.Members, rm)
		}
	}
	return reply{resp: resp, finish: finish}, nil
}

// clientHost is the client's address as Kafka reports it in
// DescribeGroups: "/" and the IP.
func clientHost(r *request) string {
	addr := r.c.nc.RemoteAddr().String()
	if host, _, err := net.SplitHostPort(addr); err == nil {
		addr = host
	}
	return "/" + addr
}
