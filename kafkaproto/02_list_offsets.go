package kafkaproto

// ListOffsets: v0-v8
//
// Behavior:
//   - timestamp -2: the log start offset; -1: the high watermark (the last
//     stable offset under read_committed); -3 (v7+, KIP-734): the offset and
//     timestamp of the record with the largest timestamp; t >= 0: the first
//     offset whose record timestamp is >= t, or offset -1 and timestamp -1
//     when no record is that late.
//   - -4 (v8+, KIP-405 earliest local): the log start offset, as -2. Without
//     tiered storage the local log starts at the log start; Kafka answers it
//     so (UnifiedLog.fetchOffsetByTimestamp), and Admin.listOffsets with
//     OffsetSpec.earliestLocal() sends it.
//   - The leader epoch is always 0; current_leader_epoch is checked as in Fetch.
//   - A partition named twice in one request gets INVALID_REQUEST (as Kafka).
//
// Version notes:
//   - v0 (old-style offset arrays, removed in Kafka 4.0 by KIP-896) is
//     served because lag monitors still send it (Debian's Burrow 1.2.1).
//     Its answer is a list of at most max_num_offsets offsets, largest
//     first: -1 gives [high watermark, log start] (the log start only when
//     it differs), -2 gives [log start], a timestamp t gives the first
//     offset whose record is at least t old, or the high watermark. Kafka's
//     v0 answered a timestamp from segment file times instead, which were
//     never exact; we answer from record timestamps, as v1+ does.
//   - A topic the principal may not DESCRIBE answers
//     TOPIC_AUTHORIZATION_FAILED for each partition (KafkaApis).
//   - v8 is the maximum: -5 (latest tiered, v9, KIP-1005) and -6 (earliest
//     pending upload, v11) are not served.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
	"github.com/vibemq/broker/topics"
)

func init() { register(kmsg.ListOffsets, 0, 8, (*Server).handleListOffsets) }

// timestampEarliestLocal is ListOffsets' -4 (KIP-405, v8+).
const timestampEarliestLocal int64 = -4

func (s *Server) handleListOffsets(r *request) (reply, error) {
	req := r.kreq.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		denied := !r.allowedTopic(auth.OpDescribe, rt.Topic)
		t, topicOK := s.topics.Topic(rt.Topic)
		seen := map[int32]int{}
		for _, rp := range rt.Partitions {
			seen[rp.Partition]++
		}
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.Offset, sp.Timestamp, sp.LeaderEpoch = -1, -1, -1
			var p *topics.Partition
			if topicOK {
				p, _ = t.Partition(rp.Partition)
			}
			switch {
			case denied:
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case seen[rp.Partition] > 1:
				sp.ErrorCode = kerr.InvalidRequest.Code
			case p == nil:
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case s.replicatedLog(rt.Topic, rp.Partition) != nil:
				listOffsetsReplicated(s.replicatedLog(rt.Topic, rp.Partition), req, rp, &sp)
			case s.cfg.Cluster != nil && !s.leads(rt.Topic, rp.Partition):
				sp.ErrorCode = kerr.NotLeaderForPartition.Code
			case req.Version >= 4 && rp.CurrentLeaderEpoch > 0:
				sp.ErrorCode = kerr.UnknownLeaderEpoch.Code
			case rp.Timestamp == timestampEarliestLocal && req.Version < 8,
				rp.Timestamp < timestampEarliestLocal,
				rp.Timestamp == topics.TimestampMaxTimestamp && req.Version < 7:
				sp.ErrorCode = kerr.UnsupportedVersion.Code
			default:
				ts := rp.Timestamp
				if ts == timestampEarliestLocal {
					ts = topics.TimestampEarliest
				}
				offset, stamp, err := p.OffsetForTimestamp(ts)
				if err != nil {
					sp.ErrorCode = errorCode(err)
					break
				}
				if ts == topics.TimestampLatest && req.IsolationLevel == 1 {
					offset = p.LastStableOffset()
				}
				sp.Offset, sp.Timestamp = offset, stamp
				if offset >= 0 {
					sp.LeaderEpoch = 0
				}
				if req.Version == 0 {
					sp.OldStyleOffsets = oldStyleOffsets(p, ts, offset, rp.MaxNumOffsets)
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply{resp: resp}, nil
}

// oldStyleOffsets is ListOffsets v0's answer for a partition: at most
// maxNum offsets, largest first. offset is the v1+ answer for ts.
func oldStyleOffsets(p *topics.Partition, ts, offset int64, maxNum int32) []int64 {
	var out []int64
	switch {
	case ts == topics.TimestampLatest:
		hwm, start := p.HighWatermark(), p.LogStartOffset()
		out = append(out, hwm)
		if start != hwm {
			out = append(out, start)
		}
	case offset < 0: // no record is that late
		out = append(out, p.HighWatermark())
	default:
		out = append(out, offset)
	}
	if maxNum < 0 {
		maxNum = 0
	}
	if len(out) > int(maxNum) {
		out = out[:maxNum]
	}
	return out
}
