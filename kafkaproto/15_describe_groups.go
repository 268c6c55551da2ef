package kafkaproto

// DescribeGroups: v0-v6
//
// Behavior:
//   - State, protocol type and members of each group. The selected
//     protocol and each member's metadata and assignment (byte for byte)
//     are given only when the group is Stable, as Kafka does.
//   - An unknown group, a consumer group of the KIP-848 protocol and a
//     share group are described as Dead, without error before v6, as
//     Kafka 4 answers. ConsumerGroupDescribe describes consumer groups.
//   - include_authorized_operations (v3+): without ACLs every operation on
//     a group is allowed: READ, DELETE and DESCRIBE. Otherwise Kafka's
//     "not requested" value, INT32_MIN.
//
// Version notes:
//   - v4: group_instance_id of members (KIP-345).
//   - v6 (KIP-1043): a group that is not a classic group is Dead with
//     GROUP_ID_NOT_FOUND and an error message, as Kafka's
//     GroupMetadataManager.describeGroups.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
)

func init() { register(kmsg.DescribeGroups, 0, 6, (*Server).handleDescribeGroups) }

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
	// Groups the principal may not DESCRIBE are answered
	// GROUP_AUTHORIZATION_FAILED and not looked up (KafkaApis).
	// In a cluster, groups another broker coordinates are answered
	// NOT_COORDINATOR.
	var names []string
	denied := map[int]int16{}
	for i, name := range req.Groups {
		switch {
		case !r.allowedGroup(auth.OpDescribe, name):
			denied[i] = kerr.GroupAuthorizationFailed.Code
		case s.notGroupCoordinator(name):
			denied[i] = s.groupCoordinatorCode(name)
		default:
			names = append(names, name)
		}
	}
	described := s.cfg.Groups.DescribeGroups(names)
	for i, name := range req.Groups {
		if code, ok := denied[i]; ok {
			g := kmsg.NewDescribeGroupsResponseGroup()
			g.Group, g.ErrorCode = name, code
			resp.Groups = append(resp.Groups, g)
			continue
		}
		d := described[0]
		described = described[1:]
		g := kmsg.NewDescribeGroupsResponseGroup()
		g.Group = d.Group
		g.ErrorCode = errorCode(d.Err)
		if d.NotClassic && req.Version >= 6 {
			g.ErrorCode = kerr.GroupIDNotFound.Code
			g.ErrorMessage = kmsg.StringPtr("Group " + d.Group + " not found.")
		}
		g.State = d.State
		g.ProtocolType = d.ProtocolType
		g.Protocol = d.Protocol
		if req.IncludeAuthorizedOperations {
			g.AuthorizedOperations = r.groupAuthorizedOperations(d.Group)
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
