package kafkaproto

// TxnOffsetCommit: v0-v3
//
// Behavior:
//   - Sent to the group's coordinator (NOT_COORDINATOR elsewhere). A
//     "local group" (localTxnGroup: this broker coordinates the
//     transactional ID too and __consumer_offsets is not replicated, so
//     always on a single node) stages the offsets in the transaction
//     coordinator: they are committed with the transaction's markers in
//     one write and dropped when it aborts; the group must have been added
//     with AddOffsetsToTxn, else INVALID_TXN_STATE.
//   - Otherwise (the transaction is coordinated by another broker) the
//     group coordinator keeps them pending for the producer ID, durably,
//     until a WriteTxnMarkers for the group's partition of
//     __consumer_offsets commits or drops them (Kafka's
//     GroupMetadataManager; groups/txn_offsets.go). It cannot check the
//     transaction's state there (as Kafka before KIP-890); an older epoch
//     than the producer's pending offsets is PRODUCER_FENCED
//     (INVALID_PRODUCER_EPOCH before v3).
//   - Either way, while pending, OffsetFetch with require_stable answers
//     UNSTABLE_OFFSET_COMMIT for those partitions (KIP-447).
//   - An offset whose metadata is over the group coordinator's limit gets
//     OFFSET_METADATA_TOO_LARGE and is not staged (Kafka checks it here
//     too): the commit of a decided transaction must never fail on it.
//   - v3 (KIP-447): the generation, member ID and instance ID are checked
//     against the group as OffsetCommit does (ILLEGAL_GENERATION,
//     UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID): a zombie of an old
//     generation is fenced. Without them (v0-v2) no membership is checked.
//   - In a cluster whose __consumer_offsets is replicated
//     (offsets-topic-replication-factor above 1) no group is local: the
//     pending offsets are records of the group's partition log, answered
//     once committed on a majority (NOT_COORDINATOR when not known
//     committed), and a coordinator that takes over loads them
//     (groups/txn_offsets_log.go).
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
	case s.notGroupCoordinator(req.Group):
		code = s.groupCoordinatorCode(req.Group)
	default:
		cr := groups.CommitRequest{Group: req.Group, Generation: -1}
		if req.Version >= 3 {
			cr.Generation, cr.MemberID, cr.InstanceID = req.Generation, req.MemberID, req.InstanceID
		}
		if err := s.cfg.Groups.ValidateCommit(cr); err != nil {
			code = errorCode(err)
			break
		}
		cr.Topics = s.txnOffsetTopics(r, req, refused)
		var err error
		if s.localTxnGroup(req.TransactionalID) {
			err = s.cfg.Txns.StageOffsets(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group, txnStaged(cr.Topics))
		} else {
			err = s.cfg.Groups.StageTxnOffsets(groups.TxnOffsetsRequest{Commit: cr, ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch}, s.now())
		}
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

// localTxnGroup is rule C4 of transactions across brokers (DESIGN.md,
// Cluster): a TxnOffsetCommit to a group coordinated here is staged in
// the transaction coordinator (written with the transaction's markers)
// when this broker coordinates the transactional ID too and
// __consumer_offsets is not replicated; otherwise the group coordinator
// keeps the offsets pending until a WriteTxnMarkers for the group's
// partition of __consumer_offsets ends them.
func (s *Server) localTxnGroup(txnID string) bool {
	if s.cfg.Cluster == nil {
		return true
	}
	// A replicated __transaction_state ends every group through
	// WriteTxnMarkers (txns/replicated.go): nothing is staged there.
	return !s.notTxnCoordinator(txnID) && !s.cfg.Groups.ReplicatedOffsets() && (s.cfg.Txns == nil || !s.cfg.Txns.Replicated())
}

// txnOffsetTopics is the request's offsets that may be committed; the
// refused ones get their code in refused.
func (s *Server) txnOffsetTopics(r *request, req *kmsg.TxnOffsetCommitRequest, refused map[[2]any]int16) []groups.CommitTopic {
	var out []groups.CommitTopic
	for _, t := range req.Topics {
		tp, ok := s.topics.Topic(t.Topic)
		denied := !r.allowedTopic(auth.OpRead, t.Topic)
		ct := groups.CommitTopic{Topic: t.Topic}
		for _, p := range t.Partitions {
			switch {
			case denied:
				refused[[2]any{t.Topic, p.Partition}] = kerr.TopicAuthorizationFailed.Code
				continue
			case !ok || p.Partition < 0 || p.Partition >= tp.NumPartitions():
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
			ct.Partitions = append(ct.Partitions, groups.CommitPartition{Partition: p.Partition, Offset: p.Offset, LeaderEpoch: epoch, Metadata: p.Metadata})
		}
		if len(ct.Partitions) > 0 {
			out = append(out, ct)
		}
	}
	return out
}

// txnStaged is topics as the transaction coordinator stages them.
func txnStaged(topics []groups.CommitTopic) []txns.Offset {
	var out []txns.Offset
	for _, t := range topics {
		for _, p := range t.Partitions {
			out = append(out, txns.Offset{Topic: t.Topic, Partition: p.Partition, Offset: p.Offset, LeaderEpoch: p.LeaderEpoch, Metadata: p.Metadata})
		}
	}
	return out
}
