package kafkaproto

// OffsetCommit: v0-v10
//
// Behavior:
//   - Each offset is appended as an OffsetCommit record (Kafka's own key
//     v1 / value v3 format) to the group's partition of __consumer_offsets
//     through the produce path, and answered once durable; OffsetFetch sees
//     it from then on.
//   - Partitions of unknown topics: UNKNOWN_TOPIC_OR_PARTITION. The others
//     are checked against the group as Kafka does: generation -1 without a
//     member commits only to an Empty group (admin tools, manual
//     assignment), creating it if needed; otherwise an unknown member is
//     UNKNOWN_MEMBER_ID, a stale generation ILLEGAL_GENERATION, a replaced
//     static member FENCED_INSTANCE_ID, a group in CompletingRebalance
//     REBALANCE_IN_PROGRESS. Metadata over 4096 bytes:
//     OFFSET_METADATA_TOO_LARGE. A failed write: NOT_COORDINATOR (the
//     client retries).
//
// Version notes:
//   - v0 (ZooKeeper storage in Kafka) is stored like the other versions.
//   - v1's per-partition commit timestamp is ignored (the broker's clock
//     is used, as in Kafka since 2.1).
//   - v2-v4 retention_time_ms other than -1 expires the offsets that long
//     after the commit.
//   - v7: group_instance_id (KIP-345). v9: an unknown group with a
//     generation >= 0 is GROUP_ID_NOT_FOUND (ILLEGAL_GENERATION before).
//   - v10 (KIP-848 follow-up, Kafka 4.1+) names topics by ID instead of
//     name, in the request and the answer: a topic ID no topic has is
//     UNKNOWN_TOPIC_ID for each of its partitions and left out of the
//     commit, as KafkaApis does (before the topic's READ check).

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
	"github.com/vibemq/broker/groups"
)

func init() { register(kmsg.OffsetCommit, 0, 10, (*Server).handleOffsetCommit) }

func (s *Server) handleOffsetCommit(r *request) (reply, error) {
	req := r.kreq.(*kmsg.OffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	fixed := s.offsetCommitRefusal(r, req)
	// Topics the principal may not READ are answered
	// TOPIC_AUTHORIZATION_FAILED and left out of the commit (KafkaApis
	// handleOffsetCommitRequest), and so are unknown topic IDs (v10,
	// UNKNOWN_TOPIC_ID); denied[i] marks them. names[i] is the topic's
	// name, from its ID at v10.
	denied := make([]bool, len(req.Topics))
	names := make([]string, len(req.Topics))
	resp.Topics = make([]kmsg.OffsetCommitResponseTopic, len(req.Topics))
	for i, t := range req.Topics {
		rt := &resp.Topics[i]
		*rt = kmsg.NewOffsetCommitResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		rt.Partitions = make([]kmsg.OffsetCommitResponseTopicPartition, len(t.Partitions))
		for j, p := range t.Partitions {
			rp := &rt.Partitions[j]
			*rp = kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = fixed
		}
		if fixed != 0 {
			continue
		}
		names[i] = t.Topic
		code := int16(0)
		if req.Version >= 10 {
			names[i] = ""
			if tp, ok := s.topics.TopicByID(t.TopicID); ok {
				names[i] = tp.Name
			} else {
				code = kerr.UnknownTopicID.Code
			}
		}
		if code == 0 && !r.allowedTopic(auth.OpRead, names[i]) {
			code = kerr.TopicAuthorizationFailed.Code
		}
		if code != 0 {
			denied[i] = true
			for j := range rt.Partitions {
				rt.Partitions[j].ErrorCode = code
			}
		}
	}
	if fixed != 0 {
		return reply{resp: resp}, nil
	}
	cr := groups.CommitRequest{
		Group:      req.Group,
		Generation: req.Generation,
		MemberID:   req.MemberID,
		InstanceID: req.InstanceID,
		Version:    req.Version,
		Topics:     make([]groups.CommitTopic, 0, len(req.Topics)),
	}
	if req.Version == 0 {
		cr.Generation = -1
	}
	if req.Version >= 2 && req.Version <= 4 && req.RetentionTimeMillis != -1 {
		d := time.Duration(max(req.RetentionTimeMillis, 0)) * time.Millisecond
		cr.Retention = &d
	}
	for i, t := range req.Topics {
		if denied[i] {
			continue
		}
		ct := groups.CommitTopic{Topic: names[i], Partitions: make([]groups.CommitPartition, len(t.Partitions))}
		for j, p := range t.Partitions {
			epoch := int32(-1)
			if req.Version >= 6 {
				epoch = p.LeaderEpoch
			}
			ct.Partitions[j] = groups.CommitPartition{Partition: p.Partition, Offset: p.Offset, LeaderEpoch: epoch, Metadata: p.Metadata}
		}
		cr.Topics = append(cr.Topics, ct)
	}
	fut := s.cfg.Groups.Commit(cr, s.now())
	finish := func() {
		res := fut.Wait(nil)
		k := 0
		for i := range resp.Topics {
			if denied[i] {
				continue
			}
			for j := range resp.Topics[i].Partitions {
				resp.Topics[i].Partitions[j].ErrorCode = errorCode(res.Topics[k][j])
			}
			k++
		}
		// Kafka's OffsetCommitResponse.Builder holds the topics refused
		// before the commit ahead of the committed ones: visible at v10,
		// where no name tells topics apart.
		refused := make([]kmsg.OffsetCommitResponseTopic, 0, len(resp.Topics))
		committed := make([]kmsg.OffsetCommitResponseTopic, 0, len(resp.Topics))
		for i, t := range resp.Topics {
			if denied[i] {
				refused = append(refused, t)
			} else {
				committed = append(committed, t)
			}
		}
		resp.Topics = append(refused, committed...)
	}
	return reply{resp: resp, finish: finish}, nil
}

// offsetCommitRefusal is the code every partition of the commit gets when
// the request as a whole is refused, else 0.
func (s *Server) offsetCommitRefusal(r *request, req *kmsg.OffsetCommitRequest) int16 {
	total := 0
	for _, t := range req.Topics {
		total += len(t.Partitions)
	}
	switch {
	case total > s.cfg.MaxPartitionsPerRequest:
		return kerr.PolicyViolation.Code
	case s.cfg.Groups == nil:
		return kerr.CoordinatorNotAvailable.Code
	case !r.allowedGroup(auth.OpRead, req.Group):
		return kerr.GroupAuthorizationFailed.Code
	case s.notGroupCoordinator(req.Group):
		return s.groupCoordinatorCode(req.Group)
	}
	return 0
}
