package kafkaproto

// ConsumerGroupDescribe: v0-v1
//
// Behavior:
//   - Each consumer group (KIP-848): state (Empty, Assigning, Reconciling,
//     Stable), group epoch, assignment epoch, the assignor in use, and per
//     member its epoch, client, subscription (names and regex), current
//     and target assignment with topic IDs and names.
//   - A group that does not exist, or a classic group: GROUP_ID_NOT_FOUND
//     with a message, as Kafka answers.
//   - include_authorized_operations: without ACLs every group operation
//     is allowed (READ, DELETE, DESCRIBE); otherwise INT32_MIN.
//
// Version notes:
//   - v1: member_type, always 1 (a member of the consumer protocol; classic
//     members cannot join a consumer group here).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
	"github.com/vibemq/broker/groups"
)

func init() {
	register(kmsg.ConsumerGroupDescribe, 0, 1, (*Server).handleConsumerGroupDescribe)
}

func (s *Server) handleConsumerGroupDescribe(r *request) (reply, error) {
	req := r.kreq.(*kmsg.ConsumerGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	if len(req.Groups) > s.cfg.MaxPartitionsPerRequest || s.cfg.Groups == nil {
		code := kerr.CoordinatorNotAvailable.Code
		if s.cfg.Groups != nil {
			code = kerr.PolicyViolation.Code
		}
		for _, name := range req.Groups {
			g := kmsg.NewConsumerGroupDescribeResponseGroup()
			g.Group, g.ErrorCode = name, code
			resp.Groups = append(resp.Groups, g)
		}
		return reply{resp: resp}, nil
	}
	var names []string
	denied := map[int]bool{}
	for i, name := range req.Groups {
		if r.allowedGroup(auth.OpDescribe, name) {
			names = append(names, name)
		} else {
			denied[i] = true
		}
	}
	described := s.cfg.Groups.DescribeConsumerGroups(names)
	for i, name := range req.Groups {
		if denied[i] {
			g := kmsg.NewConsumerGroupDescribeResponseGroup()
			g.Group, g.ErrorCode = name, kerr.GroupAuthorizationFailed.Code
			resp.Groups = append(resp.Groups, g)
			continue
		}
		d := described[0]
		described = described[1:]
		g := kmsg.NewConsumerGroupDescribeResponseGroup()
		g.Group = d.Group
		g.ErrorCode = errorCode(d.Err)
		g.ErrorMessage = errorMessage(d.Err)
		if req.IncludeAuthorizedOperations && d.Err == nil {
			g.AuthorizedOperations = r.groupAuthorizedOperations(d.Group)
		}
		if d.Err != nil {
			resp.Groups = append(resp.Groups, g)
			continue
		}
		g.State = d.State
		g.Epoch = d.Epoch
		g.AssignmentEpoch = d.AssignmentEpoch
		g.AssignorName = d.Assignor
		for _, m := range d.Members {
			rm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
			rm.MemberID = m.MemberID
			rm.InstanceID = m.InstanceID
			rm.RackID = m.RackID
			rm.MemberEpoch = m.MemberEpoch
			rm.ClientID = m.ClientID
			rm.ClientHost = m.ClientHost
			rm.SubscribedTopics = m.SubscribedTopicNames
			rm.SubscribedTopicRegex = m.SubscribedTopicRegex
			if rm.SubscribedTopicRegex == nil {
				// Kafka answers "" for a member without a regex.
				rm.SubscribedTopicRegex = new(string)
			}
			rm.Assignment = describedAssignment(m.Assignment)
			rm.TargetAssignment = describedAssignment(m.TargetAssignment)
			rm.MemberType = 1 // consumer (KIP-1099)
			if m.Classic {
				rm.MemberType = 0 // classic, inside a consumer group after an online upgrade
			}
			g.Members = append(g.Members, rm)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return reply{resp: resp}, nil
}

func describedAssignment(ts []groups.TopicPartitionsDescription) kmsg.Assignment {
	var a kmsg.Assignment
	a.TopicPartitions = make([]kmsg.AssignmentTopicPartition, 0, len(ts))
	for _, t := range ts {
		tp := kmsg.AssignmentTopicPartition{TopicID: t.TopicID, Topic: t.Topic, Partitions: t.Partitions}
		a.TopicPartitions = append(a.TopicPartitions, tp)
	}
	return a
}
