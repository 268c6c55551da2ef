package kafkaproto

// WriteTxnMarkers: v0-v1
//
// Behavior (what `kafka-transactions abort` and Admin.abortTransaction
// send to end a hanging transaction on one partition, KIP-664):
//   - Each marker ends its producer's ongoing transaction on each named
//     partition with a COMMIT or ABORT control batch, written through the
//     same durable path as Produce and answered once synced. The last
//     stable offset moves past the transaction; an abort enters the
//     aborted-transaction index, so read_committed readers skip its data.
//   - A partition where the producer has no ongoing transaction is answered
//     NONE and no control batch is written (a retried marker ends nothing).
//     Kafka appends the marker anyway; we write no control batch that ends
//     nothing, so __consumer_offsets and queue topics never see one. The
//     producer's state still takes the marker's epochs (as Kafka's marker
//     would set them).
//   - An epoch older than the producer's epoch on the partition gets
//     INVALID_PRODUCER_EPOCH; unknown partitions UNKNOWN_TOPIC_OR_PARTITION.
//   - A coordinator epoch lower than that of the last marker written for
//     the producer on the partition gets TRANSACTION_COORDINATOR_FENCED and
//     changes nothing: a deposed transaction coordinator's late marker must
//     not end the transaction the producer started since through the new
//     one. Equal or higher passes. Kafka's rule (ProducerAppendInfo
//     appendEndTxnMarker, KIP-98): the producer epoch is checked first,
//     then the coordinator epoch. Same on replicated partitions, decided
//     at apply (cluster/partition_txn.go).
//     Topics of queues and event stores never hold transactional data, so
//     they fall under "no ongoing transaction".
//   - A partition of __consumer_offsets (offsetsMarker): the producer's
//     pending transactional offsets of every group of that partition
//     (TxnOffsetCommit for a transaction coordinated by another broker)
//     become the committed offsets (COMMIT) or are dropped (ABORT), in one
//     durable write; none pending: NONE, nothing written but a higher
//     coordinator epoch; pending offsets of a newer epoch:
//     INVALID_PRODUCER_EPOCH; then a coordinator epoch lower than that of
//     the producer's last marker on that partition:
//     TRANSACTION_COORDINATOR_FENCED, nothing ended or written (as on a
//     data partition; groups/txn_offsets_fence.go keeps the epochs per
//     partition of __consumer_offsets, as Kafka keeps them in that
//     partition's producer state). Only the broker
//     coordinating that partition accepts it, else NOT_COORDINATOR. On a
//     replicated __consumer_offsets the outcome is one batch of the
//     partition's log, answered once committed on a majority
//     (groups/txn_offsets_log.go); COORDINATOR_LOAD_IN_PROGRESS while the
//     new leader loads the partition (its pending offsets are not known
//     yet; the sender retries).
//   - A partition of a replicated topic (RF > 1): its leader proposes the
//     control batch through the partition's Raft log and answers once it
//     is committed and applied (writeMarkerReplicated); another broker
//     answers NOT_LEADER_OR_FOLLOWER and the sender retries at the leader.
//   - The transaction coordinator is not told: a transaction it still
//     tracks as open goes on there, and its EndTxn later writes its own
//     markers, which end nothing on this partition (as in Kafka, where this
//     tool is for transactions the coordinator has lost).
//
// Version notes:
//   - v1 is flexible. v2 (transaction_version, KIP-890) is not served,
//     since transaction.version 2 is not advertised.

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
	"github.com/vibemq/broker/groups"
	"github.com/vibemq/broker/topics"
)

func init() { register(kmsg.WriteTxnMarkers, 0, 1, (*Server).handleWriteTxnMarkers) }

func (s *Server) handleWriteTxnMarkers(r *request) (reply, error) {
	req := r.kreq.(*kmsg.WriteTxnMarkersRequest)
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	n := 0
	for _, m := range req.Markers {
		for _, rt := range m.Topics {
			n += len(rt.Partitions)
		}
	}
	if n > s.cfg.MaxPartitionsPerRequest {
		return reply{}, errors.New("write txn markers request names too many partitions")
	}
	// Only brokers write markers: CLUSTER_ACTION, else every partition is
	// CLUSTER_AUTHORIZATION_FAILED (KafkaApis handleWriteTxnMarkersRequest).
	clusterAction := r.allowedCluster(auth.OpClusterAction)
	type slot struct {
		code *int16
		a    *topics.Append
	}
	var slots []slot
	var markers []topics.Marker
	var offsetWaits []func() // markers of __consumer_offsets partitions
	var replicated []func()
	resp.Markers = make([]kmsg.WriteTxnMarkersResponseMarker, len(req.Markers))
	for mi, m := range req.Markers {
		rm := &resp.Markers[mi]
		*rm = kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		rm.Topics = make([]kmsg.WriteTxnMarkersResponseMarkerTopic, len(m.Topics))
		for ti, rt := range m.Topics {
			st := &rm.Topics[ti]
			*st = kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			st.Topic = rt.Topic
			st.Partitions = make([]kmsg.WriteTxnMarkersResponseMarkerTopicPartition, len(rt.Partitions))
			t, topicOK := s.topics.Topic(rt.Topic)
			for pi, i := range rt.Partitions {
				sp := &st.Partitions[pi]
				*sp = kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				sp.Partition = i
				if !clusterAction {
					sp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
					continue
				}
				if rt.Topic == groups.OffsetsTopic {
					if w := s.offsetsMarker(m, i, &sp.ErrorCode); w != nil {
						offsetWaits = append(offsetWaits, w)
					}
					continue
				}
				var p *topics.Partition
				if topicOK {
					p, _ = t.Partition(i)
				}
				if p == nil {
					sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
					continue
				}
				if rl := s.replicatedLog(rt.Topic, i); rl != nil {
					replicated = append(replicated, writeMarkerReplicated(rl, m, &sp.ErrorCode))
					continue
				}
				// The partition decides under its lock: producer epoch,
				// coordinator epoch, whether a transaction is ongoing.
				markers = append(markers, topics.Marker{Partition: p, ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch,
					Commit: m.Committed, CoordinatorEpoch: m.CoordinatorEpoch, OnlyIfOngoing: true})
				slots = append(slots, slot{code: &sp.ErrorCode})
			}
		}
	}
	appends := topics.MarkerAppends(markers, s.now())
	for i := range slots {
		slots[i].a = appends[i]
	}
	pending := s.topics.Append(appends, s.now())
	finish := func() {
		_ = pending.Wait()
		for _, w := range offsetWaits {
			w()
		}
		for _, sl := range slots {
			if sl.a.Err != nil {
				*sl.code = errorCode(sl.a.Err)
			}
		}
		waitReplicated(replicated)
	}
	return reply{resp: resp, finish: finish}, nil
}

// offsetsMarker ends marker m on partition p of __consumer_offsets
// (groups.EndTxnOffsets): the returned wait, called from the reply's
// finish, sets code once the outcome is durable; nil when code is set
// already.
func (s *Server) offsetsMarker(m kmsg.WriteTxnMarkersRequestMarker, p int32, code *int16) func() {
	t, ok := s.topics.Topic(groups.OffsetsTopic)
	switch {
	case s.cfg.Groups == nil:
		*code = kerr.CoordinatorNotAvailable.Code
		return nil
	case !ok || p < 0 || p >= t.NumPartitions():
		*code = kerr.UnknownTopicOrPartition.Code
		return nil
	case s.cfg.Cluster != nil:
		leaders := s.cfg.Cluster.CoordinatorLeaders(groups.OffsetsTopic)
		if int(p) >= len(leaders) || leaders[p] != s.cfg.NodeID {
			*code = kerr.NotCoordinator.Code
			return nil
		}
	}
	wait := s.cfg.Groups.EndTxnOffsets(groups.TxnMarker{Partition: p, ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch,
		CoordinatorEpoch: m.CoordinatorEpoch, Commit: m.Committed}, s.now())
	return func() { *code = errorCode(wait()) }
}

// writeMarkerReplicated starts writing marker m on a replicated partition
// (its leader proposes the control batch through the Raft log) and returns
// the wait that sets *code: NONE once committed and applied (also when the
// marker ends nothing), NOT_LEADER_OR_FOLLOWER off the leader,
// INVALID_PRODUCER_EPOCH for an epoch older than the producer's there,
// TRANSACTION_COORDINATOR_FENCED for a coordinator epoch older than its
// last marker's there.
func writeMarkerReplicated(rl ReplicatedLog, m kmsg.WriteTxnMarkersRequestMarker, code *int16) func() {
	if _, err := rl.LeaderEpoch(); err != nil {
		*code = errorCode(err)
		return func() {}
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	wait := rl.WriteMarker(ctx, m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch)
	return func() {
		defer cancel()
		if err := wait(); err != nil {
			*code = errorCode(err)
		}
	}
}
