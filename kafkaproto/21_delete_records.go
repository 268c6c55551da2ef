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
//   - timeout_ms is not needed on a single node: it answers when durable.
//   - A replicated partition (RF > 1, cluster mode): its leader proposes a
//     log-start command to the partition's Raft group and answers once it
//     is applied, i.e. committed on a majority (acks=all, like Produce),
//     within timeout_ms (REQUEST_TIMED_OUT after; the move may still be
//     applied); every replica applies it at the same log position.
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
		rl     ReplicatedLog // a replicated partition's (then p is nil)
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
			if rl := s.replicatedLog(rt.Topic, rp.Partition); rl != nil {
				if err := t.CheckDeleteRecords(); err != nil {
					sp.ErrorCode = errorCode(err)
					continue
				}
				todo = append(todo, work{sp: sp, rl: rl, offset: rp.Offset})
				continue
			}
			todo = append(todo, work{sp: sp, p: p, offset: rp.Offset})
		}
	}
	// Each move waits for its fsync: run them on the writer, in order.
	finish := func() {
		for _, w := range todo {
			var low int64
			var err error
			if w.rl != nil {
				low, err = deleteRecordsReplicated(w.rl, w.offset, req.TimeoutMillis)
			} else {
				low, err = w.p.DeleteRecordsBefore(w.offset)
			}
			if err != nil {
				w.sp.ErrorCode = errorCode(err)
				continue
			}
			w.sp.LowWatermark = low
		}
	}
	return reply{resp: resp, finish: finish}, nil
}
