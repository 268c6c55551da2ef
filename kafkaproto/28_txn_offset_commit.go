package kafkaproto

// TxnOffsetCommit: v0-v3
//
// Behavior:
//   - Stages consumer offsets in the producer's transaction; they are
//     committed to the group when the transaction commits and dropped when
//     it aborts. The group must have been added with AddOffsetsToTxn, else
//     INVALID_TXN_STATE. While staged, OffsetFetch with require_stable
//     answers UNSTABLE_OFFSET_COMMIT for those partitions.
//   - An offset whose metadata is over the group coordinator's limit gets
//     OFFSET_METADATA_TOO_LARGE and is not staged (Kafka checks it here
//     too): the commit of a decided transaction must never fail on it.
//   - v3 (KIP-447): the generation, member ID and instance ID are checked
//     against the group as OffsetCommit does (ILLEGAL_GENERATION,
//     UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID): a zombie of an old
//     generation is fenced. Without them (v0-v2) no membership is checked.
//   - In a cluster whose __consumer_offsets is replicated
//     (offsets-topic-replication-factor above 1): INVALID_TXN_STATE for
//     every partition (transactions across brokers are not built).
//
// Version notes:
//   - v4 and v5 (KIP-890) are not advertised.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
	"github.com/vibemq/broker/groups"
	"github.com/vibemq/broker/txns"
)

func init() { register(kmsg.TxnOffsetCommit, 0, 3, (*Server).handleTxnOffsetCommit) }

func (s *Server) handleTxnOffsetCommit(r *request) (reply, error) {
	req := r.kreq.(*kmsg.TxnOffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)

	total := 0
	for _, t := range req.Topics {
		total += len(t.Partitions)
	}
	var code int16
	var offsets []txns.Offset
	refused := map[[2]any]int16{} // per-partition error codes
	switch {
	case s.cfg.Txns == nil || s.cfg.Groups == nil:
		code = kerr.CoordinatorNotAvailable.Code
	case total > s.cfg.MaxPartitionsPerRequest:
		code = kerr.PolicyViolation.Code
	case !r.allowedTxn(auth.OpWrite, req.TransactionalID):
		code = kerr.TransactionalIDAuthorizationFailed.Code
	case !r.allowedGroup(auth.OpRead, req.Group):
		code = kerr.GroupAuthorizationFailed.Code
	case req.Group == "":
		code = kerr.InvalidGroupID.Code
	case s.notGroupCoordinator(req.Group) || s.notTxnCoordinator(req.TransactionalID):
		// Kafka sends it to the group's coordinator; here the
		// transaction's coordinator stages the offsets, so in a cluster
		// both must be this broker (DESIGN.md, issue 13).
		code = kerr.NotCoordinator.Code
	case s.cfg.Cluster != nil && s.cfg.Groups.ReplicatedOffsets():
		// The staged offsets are written with the transaction's markers
		// into the local partition of __consumer_offsets; a replicated one
		// needs transactions across brokers (groups.ErrTxnOffsetsReplicated).
		code = kerr.InvalidTxnState.Code
	default:
		cr := groups.CommitRequest{Group: req.Group, Generation: -1}
		if req.Version >= 3 {
			cr.Generation, cr.MemberID, cr.InstanceID = req.Generation, req.MemberID, req.InstanceID
		}
		if err := s.cfg.Groups.ValidateCommit(cr); err != nil {
			code = errorCode(err)
			break
		}
		for _, t := range req.Topics {
			tp, ok := s.topics.Topic(t.Topic)
			denied := !r.allowedTopic(auth.OpRead, t.Topic)
			for _, p := range t.Partitions {
				if denied {
					refused[[2]any{t.Topic, p.Partition}] = kerr.TopicAuthorizationFailed.Code
					continue
				}
				if !ok || p.Partition < 0 || p.Partition >= tp.NumPartitions() {
					refused[[2]any{t.Topic, p.Partition}] = kerr.UnknownTopicOrPartition.Code
					continue
				}
				if err := s.cfg.Groups.CheckOffsetMetadata(p.Metadata); err != nil {
					refused[[2]any{t.Topic, p.Partition}] = errorCode(err)
					continue
				}
				epoch := int32(-1)
				if req.Version >= 2 {
					epoch = p.LeaderEpoch
				}
				offsets = append(offsets, txns.Offset{Topic: t.Topic, Partition: p.Partition, Offset: p.Offset, LeaderEpoch: epoch, Metadata: p.Metadata})
			}
		}
		err := s.cfg.Txns.StageOffsets(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group, offsets)
		code = fencedCode(errorCode(err), req.Version >= 3)
	}
	for _, t := range req.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = code
			if c, ok := refused[[2]any{t.Topic, p.Partition}]; ok {
				rp.ErrorCode = c
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return reply{resp: resp}, nil
}
