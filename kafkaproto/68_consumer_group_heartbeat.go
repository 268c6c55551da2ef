package kafkaproto

// ConsumerGroupHeartbeat: v0-v1
//
// Behavior:
//   - The consumer group protocol of KIP-848 (groups/consumer.go): the
//     member joins with epoch 0, the broker computes the target assignment
//     with its "uniform" (default) or "range" assignor and hands each
//     member its partitions epoch by epoch; a partition goes to a new
//     owner only after its previous owner revoked it. Epoch -1 leaves,
//     -2 leaves for now a static member (instance ID) that keeps its
//     assignment until it rejoins or its session expires.
//   - Errors as Apache Kafka 4 answers them, with an error message:
//     INVALID_REQUEST for a malformed request (empty group, missing member
//     ID, first request without rebalance timeout or subscription, owned
//     partitions on a join), UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION,
//     UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, FENCED_INSTANCE_ID,
//     UNRELEASED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED, and GROUP_ID_NOT_FOUND
//     for a classic group that still has members (an empty one becomes a
//     consumer group).
//   - The response waits until the records the heartbeat wrote to
//     __consumer_offsets are durable.
//   - Session timeout and heartbeat interval are the broker's
//     (consumer-session-timeout, consumer-heartbeat-interval).
//
// Version notes:
//   - v0: the broker generates the member ID of a joining member.
//   - v1: the client generates it (KIP-1082); subscribed_topic_regex
//     (RE2J syntax, matched against whole names, also topics created
//     later; internal topics excluded).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
	"github.com/vibemq/broker/groups"
)

func init() {
	register(kmsg.ConsumerGroupHeartbeat, 0, 1, (*Server).handleConsumerGroupHeartbeat)
}

func (s *Server) handleConsumerGroupHeartbeat(r *request) (reply, error) {
	req := r.kreq.(*kmsg.ConsumerGroupHeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	if s.cfg.Groups == nil {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return reply{resp: resp}, nil
	}
	owned := 0
	for _, t := range req.Topics {
		owned += len(t.Partitions)
	}
	if owned+len(req.SubscribedTopicNames) > s.cfg.MaxPartitionsPerRequest {
		resp.ErrorCode = kerr.PolicyViolation.Code
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
	// Kafka 4 refuses a subscription to topics the principal may not
	// DESCRIBE (KafkaApis handleConsumerGroupHeartbeat).
	if msg := r.deniedTopics(auth.OpDescribe, req.SubscribedTopicNames); msg != nil {
		resp.ErrorCode, resp.ErrorMessage = kerr.TopicAuthorizationFailed.Code, msg
		return reply{resp: resp}, nil
	}
	hr := groups.ConsumerHeartbeatRequest{
		Group:                  req.Group,
		MemberID:               req.MemberID,
		MemberEpoch:            req.MemberEpoch,
		InstanceID:             req.InstanceID,
		RackID:                 req.RackID,
		RebalanceTimeoutMillis: req.RebalanceTimeoutMillis,
		SubscribedTopicNames:   req.SubscribedTopicNames,
		SubscribedTopicRegex:   req.SubscribedTopicRegex,
		ServerAssignor:         req.ServerAssignor,
		ClientID:               r.clientID,
		ClientHost:             clientHost(r),
		Version:                req.Version,
	}
	if req.Topics != nil {
		hr.Owned = make([]groups.TopicIDPartitions, 0, len(req.Topics))
		for _, t := range req.Topics {
			hr.Owned = append(hr.Owned, groups.TopicIDPartitions{TopicID: t.TopicID, Partitions: t.Partitions})
		}
	}
	fut := s.cfg.Groups.ConsumerHeartbeat(hr, s.now())
	finish := func() {
		res := fut.Wait(s.closing)
		if res.Err != nil {
			// Only the code and message: Kafka leaves the member ID null
			// and the epoch 0 in an error answer.
			resp.ErrorCode = errorCode(res.Err)
			resp.ErrorMessage = errorMessage(res.Err)
			return
		}
		id := res.MemberID
		resp.MemberID = &id
		resp.MemberEpoch = res.MemberEpoch
		resp.HeartbeatIntervalMillis = int32(res.HeartbeatInterval.Milliseconds())
		if res.Assignment != nil {
			a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
			a.Topics = make([]kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic, 0, len(res.Assignment))
			for _, t := range res.Assignment {
				at := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
				at.TopicID, at.Partitions = t.TopicID, t.Partitions
				a.Topics = append(a.Topics, at)
			}
			resp.Assignment = &a
		}
	}
	return reply{resp: resp, finish: finish}, nil
}
