package kafkaproto

// ShareAcknowledge: v1-v2
//
// Behavior:
//   - Acknowledges records a share group member acquired with ShareFetch
//     (KIP-932): ACCEPT, RELEASE (delivered again, or archived at the
//     delivery count limit), REJECT (archived, never delivered again), GAP
//     (an offset without a record), RENEW (v2, KIP-1222: the acquisition
//     lock starts again). Each partition's batches apply all or nothing;
//     the answer waits until they are durable (fsync).
//   - The share session's epoch is checked and advanced as in ShareFetch;
//     -1 closes the session after applying the acknowledgements and
//     releases what the member still holds. Epoch 0 is INVALID_REQUEST.
//   - READ on the group (GROUP_AUTHORIZATION_FAILED) and on each topic
//     (TOPIC_AUTHORIZATION_FAILED per partition), as KafkaApis.
//   - In a cluster a partition another broker leads is
//     NOT_LEADER_OR_FOLLOWER, nothing of it applied (ShareFetch's notes).
//   - Per partition: INVALID_RECORD_STATE for a record the member does not
//     hold (expired lock, another member's), INVALID_REQUEST for malformed
//     batches, UNKNOWN_TOPIC_ID.
//
// Version notes:
//   - v2 adds is_renew_ack and the acquisition lock timeout in the answer.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
	"github.com/vibemq/broker/groups"
)

func init() { register(kmsg.ShareAcknowledge, 1, 2, (*Server).handleShareAcknowledge) }

func (s *Server) handleShareAcknowledge(r *request) (reply, error) {
	req := r.kreq.(*kmsg.ShareAcknowledgeRequest)
	resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
	if s.cfg.Groups == nil {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return reply{resp: resp}, nil
	}
	if req.GroupID == nil || req.MemberID == nil || *req.GroupID == "" || *req.MemberID == "" {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return reply{resp: resp}, nil
	}
	if !r.allowedGroup(auth.OpRead, *req.GroupID) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return reply{resp: resp}, nil
	}
	sr := groups.ShareSessionRequest{Group: *req.GroupID, MemberID: *req.MemberID, Epoch: req.ShareSessionEpoch,
		MembersElsewhere: s.notGroupCoordinator(*req.GroupID)}
	n := 0
	denied := map[groups.SharePartitionID]error{} // not READ, not led here
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			id := groups.SharePartitionID{TopicID: t.TopicID, Partition: p.Partition}
			if err := s.shareRefused(r, t.TopicID, p.Partition); err != nil {
				denied[id] = err
				continue
			}
			a := groups.ShareAcks{SharePartitionID: id}
			for _, b := range p.AcknowledgementBatches {
				a.Batches = append(a.Batches, groups.AckBatch{First: b.FirstOffset, Last: b.LastOffset, Types: b.AcknowledgeTypes})
				n++
			}
			sr.Acks = append(sr.Acks, a)
		}
	}
	if n > s.cfg.MaxPartitionsPerRequest {
		resp.ErrorCode = kerr.PolicyViolation.Code
		return reply{resp: resp}, nil
	}
	if req.ShareSessionEpoch == 0 {
		resp.ErrorCode = kerr.InvalidRequest.Code
		resp.ErrorMessage = errorMessage(groups.ErrInvalidRequest)
		return reply{resp: resp}, nil
	}
	res, err := s.cfg.Groups.ShareSession(sr, s.now())
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
		return reply{resp: resp}, nil
	}
	if req.Version >= 2 {
		resp.AcquisitionLockTimeoutMillis = int32(s.cfg.Groups.ShareRecordLockDuration(sr.Group).Milliseconds())
	}
	finish := func() {
		werr := res.Wait()
		for id, err := range denied {
			res.AckErrors[id] = err
		}
		topicIndex := map[[16]byte]int{}
		for id, aerr := range res.AckErrors {
			if _, refused := denied[id]; werr != nil && !refused {
				aerr = werr
			}
			ti, ok := topicIndex[id.TopicID]
			if !ok {
				t := kmsg.NewShareAcknowledgeResponseTopic()
				t.TopicID = id.TopicID
				resp.Topics = append(resp.Topics, t)
				ti = len(resp.Topics) - 1
				topicIndex[id.TopicID] = ti
			}
			p := kmsg.NewShareAcknowledgeResponseTopicPartition()
			p.Partition = id.Partition
			p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = -1, -1
			if aerr != nil {
				p.ErrorCode, p.ErrorMessage = errorCode(aerr), errorMessage(aerr)
			}
			resp.Topics[ti].Partitions = append(resp.Topics[ti].Partitions, p)
		}
	}
	return reply{resp: resp, finish: finish}, nil
}
