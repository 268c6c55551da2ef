package kafkaproto

// ShareGroupHeartbeat: v1
//
// Behavior:
//   - Share group membership of KIP-932 (groups/share.go): a member joins
//     with epoch 0 and the topics it subscribes to, heartbeats at its
//     epoch, leaves with -1. Every member is assigned every partition of
//     its subscribed topics; acquisition locks keep each record with one
//     member at a time.
//   - READ on the group (GROUP_AUTHORIZATION_FAILED) and DESCRIBE on each
//     subscribed topic (TOPIC_AUTHORIZATION_FAILED), as KafkaApis.
//   - Errors as Kafka 4.2 answers them: INVALID_REQUEST (empty group or
//     member ID, epoch below -1, a join without topics), GROUP_ID_NOT_FOUND
//     (the name belongs to a classic or consumer group), UNKNOWN_MEMBER_ID,
//     FENCED_MEMBER_EPOCH, GROUP_MAX_SIZE_REACHED.
//   - In a cluster (cluster.go) only the group's coordinator answers
//     (FindCoordinator key type 0, as Kafka); the others NOT_COORDINATOR.
//   - Session timeout and heartbeat interval are the consumer groups'
//     (group-consumer-session-timeout, group-consumer-heartbeat-interval).
//
// Version notes:
//   - v0 (Kafka 4.0 early access) is not served; v1 is Kafka 4.1+.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
	"github.com/vibemq/broker/groups"
)

func init() {
	register(kmsg.ShareGroupHeartbeat, 1, 1, (*Server).handleShareGroupHeartbeat)
}

func (s *Server) handleShareGroupHeartbeat(r *request) (reply, error) {
	req := r.kreq.(*kmsg.ShareGroupHeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	if s.cfg.Groups == nil {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return reply{resp: resp}, nil
	}
	if len(req.SubscribedTopicNames) > s.cfg.MaxPartitionsPerRequest {
		resp.ErrorCode = kerr.PolicyViolation.Code
		return reply{resp: resp}, nil
	}
	// KafkaApis handleShareGroupHeartbeat: READ on the group, DESCRIBE on
	// every subscribed topic.
	if !r.allowedGroup(auth.OpRead, req.GroupID) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return reply{resp: resp}, nil
	}
	if s.notGroupCoordinator(req.GroupID) {
		resp.ErrorCode = s.groupCoordinatorCode(req.GroupID)
		return reply{resp: resp}, nil
	}
	if msg := r.deniedTopics(auth.OpDescribe, req.SubscribedTopicNames); msg != nil {
		resp.ErrorCode, resp.ErrorMessage = kerr.TopicAuthorizationFailed.Code, msg
		return reply{resp: resp}, nil
	}
	hr := groups.ShareHeartbeatRequest{
		Group:                req.GroupID,
		MemberID:             req.MemberID,
		MemberEpoch:          req.MemberEpoch,
		SubscribedTopicNames: req.SubscribedTopicNames,
		ClientID:             r.clientID,
		ClientHost:           clientHost(r),
	}
	if req.RackID != nil {
		hr.RackID = *req.RackID
	}
	res, wait, err := s.cfg.Groups.ShareHeartbeat(hr, s.now())
	finish := func() {
		if err == nil {
			err = wait()
		}
		if err != nil {
			resp.ErrorCode = errorCode(err)
			resp.ErrorMessage = errorMessage(err)
			return
		}
		id := res.MemberID
		resp.MemberID = &id
		resp.MemberEpoch = res.MemberEpoch
		resp.HeartbeatIntervalMillis = int32(res.HeartbeatInterval.Milliseconds())
		if res.Assignment != nil {
			a := kmsg.NewShareGroupHeartbeatResponseAssignment()
			for _, t := range res.Assignment {
				tp := kmsg.NewShareGroupHeartbeatResponseAssignmentTopicPartition()
				tp.TopicID, tp.Partitions = t.TopicID, t.Partitions
				a.TopicPartitions = append(a.TopicPartitions, tp)
			}
			resp.Assignment = &a
		}
	}
	return reply{resp: resp, finish: finish}, nil
}
