package kafkaproto

// ShareGroupDescribe: v1
//
// Behavior:
//   - Describes share groups (KIP-932): state Empty or Stable, the group
//     epoch (also the assignment epoch: the assignment is computed at
//     once), assignor "simple", and each member with its epoch, client,
//     subscribed topics and assignment.
//   - A missing group, or one of another type, is GROUP_ID_NOT_FOUND, as
//     Kafka 4.2 answers.
//   - In a cluster only the group's coordinator answers (NOT_COORDINATOR
//     elsewhere); its partitions' delivery state is the coordinator's
//     share-partitions only (those it leads: DESIGN.md, Cluster).
//   - DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED per group, as
//     KafkaApis); include_authorized_operations: the group operations the
//     principal may perform.
//
// Version notes:
//   - v0 (Kafka 4.0 early access) is not served.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
)

func init() {
	register(kmsg.ShareGroupDescribe, 1, 1, (*Server).handleShareGroupDescribe)
}

func (s *Server) handleShareGroupDescribe(r *request) (reply, error) {
	req := r.kreq.(*kmsg.ShareGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
	for _, name := range req.GroupIDs {
		g := kmsg.NewShareGroupDescribeResponseGroup()
		g.GroupID = name
		if s.cfg.Groups == nil {
			g.ErrorCode = kerr.CoordinatorNotAvailable.Code
			resp.Groups = append(resp.Groups, g)
			continue
		}
		if !r.allowedGroup(auth.OpDescribe, name) {
			g.ErrorCode = kerr.GroupAuthorizationFailed.Code
			resp.Groups = append(resp.Groups, g)
			continue
		}
		if s.notGroupCoordinator(name) {
			g.ErrorCode = s.groupCoordinatorCode(name)
			resp.Groups = append(resp.Groups, g)
			continue
		}
		v, ok := s.cfg.Groups.DescribeShareGroup(name)
		if !ok {
			g.ErrorCode = kerr.GroupIDNotFound.Code
			msg := "group " + name + " is not a share group"
			g.ErrorMessage = &msg
			resp.Groups = append(resp.Groups, g)
			continue
		}
		g.GroupState, g.GroupEpoch, g.AssignmentEpoch, g.Assignor = v.State, v.GroupEpoch, v.GroupEpoch, "simple"
		if req.IncludeAuthorizedOperations {
			g.AuthorizedOperations = r.groupAuthorizedOperations(name)
		}
		for _, m := range v.Members {
			gm := kmsg.NewShareGroupDescribeResponseGroupMember()
			gm.MemberID, gm.MemberEpoch, gm.ClientID, gm.ClientHost = m.MemberID, m.MemberEpoch, m.ClientID, m.ClientHost
			if m.RackID != "" {
				rack := m.RackID
				gm.RackID = &rack
			}
			gm.SubscribedTopicNames = m.SubscribedTopicNames
			for _, a := range m.Assignment {
				tp := kmsg.NewShareGroupDescribeResponseGroupMemberAssignmentTopicPartition()
				tp.TopicID, tp.Partitions = a.TopicID, a.Partitions
				if t, ok := s.topics.TopicByID(a.TopicID); ok {
					tp.Topic = t.Name
				}
				gm.Assignment.TopicPartitions = append(gm.Assignment.TopicPartitions, tp)
			}
			g.Members = append(g.Members, gm)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return reply{resp: resp}, nil
}
