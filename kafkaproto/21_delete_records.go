package kafkaproto

// DeleteRecords: v0-v2
//
// Behavior:
//   - Moves each partition's log start offset to the requested offset (-1
//     means the high watermark) and answers the new log start as the low
//     watermark, as Kafka's Partition.deleteRecordsOnLeader. The move is
//     durable before the response is written; an offset at or below the log
//     start changes nothing and answers the current start.
//   - The topic's cleanup.policy must include delete, else
//     POLICY_VIOLATION; an offset above the high watermark, or a negative
//     one other than -1, gets OFFSET_OUT_OF_RANGE; unknown partitions
//     UNKNOWN_TOPIC_OR_PARTITION; a topic owned by a queue or an event
//     store POLICY_VIOLATION (the response has no message field). Failed
//     partitions answer low watermark -1.
//   - Fetches below the new start get OFFSET_OUT_OF_RANGE at once; the
//     segments wholly below it are deleted by the next retention check
//     (Kafka deleteLogStartOffsetBreachedSegments).
//   - timeout_ms is not needed: a single node answers when durable.
//
// Version notes:
//   - v1 changes only throttling; v2 is the flexible version (KIP-482).

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
	"github.com/vibemq/broker/topics"
)

func init() { register(kmsg.DeleteRecords, 0, 2, (*Server).handleDeleteRecords) }

func (s *Server) handleDeleteRecords(r *request) (reply, error) {
	req := r.kreq.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	total := 0
	for _, rt := range req.Topics {
		total += len(rt.Partitions)
	}
	if total > s.cfg.MaxPartitionsPerRequest {
		return reply{}, fmt.Errorf("delete records request names %d partitions, the limit is %d", total, s.cfg.MaxPartitionsPerRequest)
	}
	type work struct {
		sp     *kmsg.DeleteRecordsResponseTopicPartition
		p      *topics.Partition
		offset int64
	}
	var todo []work
	resp.Topics = make([]kmsg.DeleteRecordsResponseTopic, len(req.Topics))
	for ti, rt := range req.Topics {
		st := &resp.Topics[ti]
		*st = kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.DeleteRecordsResponseTopicPartition, len(rt.Partitions))
		denied := !r.allowedTopic(auth.OpDelete, rt.Topic)
		t, topicOK := s.topics.Topic(rt.Topic)
		for pi, rp := range rt.Partitions {
			sp := &st.Partitions[pi]
			*sp = kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LowWatermark = -1
			if denied {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				continue
			}
			var p *topics.Partition
			if topicOK {
				p, _ = t.Partition(rp.Partition)
			}
			if p == nil {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				continue
			}
			if s.cfg.Cluster != nil && !s.leads(rt.Topic, rp.Partition) {
				sp.ErrorCode = kerr.NotLeaderForPartition.Code
				continue
			}
			if s.replicatedLog(rt.Topic, rp.Partition) != nil {
				// A replicated partition's log start is not replicated yet
				// (DESIGN.md "Cluster"); the answer has no message field.
				sp.ErrorCode = kerr.PolicyViolation.Code
				continue
			}
			todo = append(todo, work{sp, p, rp.Offset})
		}
	}
	// Each move waits for its fsync: run them on the writer, in order.
	finish := func() {
		for _, w := range todo {
			low, err := w.p.DeleteRecordsBefore(w.offset)
			if err != nil {
				w.sp.ErrorCode = errorCode(err)
				continue
			}
			w.sp.LowWatermark = low
		}
	}
	return reply{resp: resp, finish: finish}, nil
}
