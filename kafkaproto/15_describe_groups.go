package kafkaproto

// DescribeGroups: v0-v5
//
// Behavior:
//   - State, protocol type and members of each group. The selected
//     protocol and each member's metadata and assignment (byte for byte)
//     are given only when the group is Stable, as Kafka does.
//   - An unknown group, and a consumer group of the KIP-848 protocol, is
//     described as Dead, without error, as Kafka 4 answers (v6 would
//     answer GROUP_ID_NOT_FOUND; it is not served). ConsumerGroupDescribe
//     describes consumer groups.
//   - include_authorized_operations (v3+): without ACLs every operation on
//     a group is allowed: READ, DELETE and DESCRIBE. Otherwise Kafka's
//     "not requested" value, INT32_MIN.
//
// Version notes:
//   - v4: group_instance_id of members (KIP-345).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.DescribeGroups, 0, 5, (*Server).handleDescribeGroups) }

// groupOperations is the authorized-operations bit field of a group when
// every operation is allowed: READ (3), DELETE (6), DESCRIBE (8).
const groupOperations = 1<<3 | 1<<6 | 1<<8

func (s *Server) handleDescribeGroups(r *request) (reply, error) {
	req := r.kreq.(*kmsg.DescribeGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	if len(req.Groups) > s.cfg.MaxPartitionsPerRequest || s.cfg.Groups == nil {
		code := kerr.CoordinatorNotAvailable.Code
		if s.cfg.Groups != nil {
			code = kerr.PolicyViolation.Code
		}
		for _, name := range req.Groups {
			g := kmsg.NewDescribeGroupsResponseGroup()
			g.Group, g.ErrorCode = name, code
			resp.Groups = append(resp.Groups, g)
		}
		return reply{resp: resp}, nil
	}
	for _, d := range s.cfg.Groups.DescribeGroups(req.Groups) {
		g := kmsg.NewDescribeGroupsResponseGroup()
		g.Group = d.Group
		g.ErrorCode = errorCode(d.Err)
		g.State = d.State
		g.ProtocolType = d.ProtocolType
		g.Protocol = d.Protocol
		if req.IncludeAuthorizedOperations {
			g.AuthorizedOperations = groupOperations
		}
		for _, m := range d.Members {
			rm := kmsg.NewDescribeGroupsResponseGroupMember()
			rm.MemberID = m.MemberID
			rm.InstanceID = m.InstanceID
			rm.ClientID = m.ClientID
			rm.ClientHost = m.ClientHost
			rm.ProtocolMetadata = m.Metadata
			rm.MemberAssignment = m.Assignment
			if rm.ProtocolMetadata == nil {
				rm.ProtocolMetadata = []byte{}
			}
			if rm.MemberAssignment == nil {
				rm.MemberAssignment = []byte{}
			}
			g.Members = append(g.Members, rm)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return reply{resp: resp}, nil
}
