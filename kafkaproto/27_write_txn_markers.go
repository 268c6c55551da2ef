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
//     NONE and nothing is written (a retried marker ends nothing). Kafka
//     appends the marker anyway; we write no control batch that ends
//     nothing, so __consumer_offsets and queue topics never see one.
//   - An epoch older than the producer's epoch on the partition gets
//     INVALID_PRODUCER_EPOCH; unknown partitions UNKNOWN_TOPIC_OR_PARTITION.
//     Topics of queues and event stores never hold transactional data, so
//     they fall under "no ongoing transaction".
//   - The transaction coordinator is not told: a transaction it still
//     tracks as open goes on there, and its EndTxn later writes its own
//     markers, which end nothing on this partition (as in Kafka, where this
//     tool is for transactions the coordinator has lost).
//
// Version notes:
//   - v1 is flexible. v2 (transaction_version, KIP-890) is not served,
//     since transaction.version 2 is not advertised.

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
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
				var p *topics.Partition
				if topicOK {
					p, _ = t.Partition(i)
				}
				if p == nil {
					sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
					continue
				}
				ongoing := false
				for _, info := range p.Producers() {
					if info.ProducerID != m.ProducerID {
						continue
					}
					if info.Epoch > m.ProducerEpoch {
						sp.ErrorCode = kerr.InvalidProducerEpoch.Code
					}
					ongoing = info.TxnStartOffset >= 0
				}
				if sp.ErrorCode != 0 || !ongoing {
					continue
				}
				markers = append(markers, topics.Marker{Partition: p, ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, Commit: m.Committed, CoordinatorEpoch: m.CoordinatorEpoch})
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
		for _, sl := range slots {
			if sl.a.Err != nil {
				*sl.code = errorCode(sl.a.Err)
			}
		}
	}
	return reply{resp: resp, finish: finish}, nil
}
