package kafkaproto

// DescribeLogDirs: v1-v4
//
// Behavior:
//   - The broker has one log directory: the data directory, which holds
//     the one Pebble database and so every partition. It is reported with
//     the partitions asked for (a null topic list asks for all) and, at
//     v4+, the filesystem's total and usable bytes (-1 when unmeasurable).
//   - A partition's size is the bytes of its stored record batches (the
//     same figure as `broker topics describe`); offset lag is 0 and no
//     partition is a future replica (there is one replica).
//   - Unknown topics and partitions are left out of the answer, as Kafka
//     leaves out partitions it does not host.
//
// Version notes:
//   - v0 (deprecated, removed in Kafka 4.0 by KIP-896) is not served.
//   - v3 adds the top-level error code; v4 total and usable bytes (KIP-827).
//   - v5 (is_cordoned) is not served.

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
	"github.com/vibemq/broker/topics"
)

func init() { register(kmsg.DescribeLogDirs, 1, 4, (*Server).handleDescribeLogDirs) }

func (s *Server) handleDescribeLogDirs(r *request) (reply, error) {
	req := r.kreq.(*kmsg.DescribeLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	n := 0
	for _, rt := range req.Topics {
		n += len(rt.Partitions)
	}
	if n > s.cfg.MaxPartitionsPerRequest {
		return reply{}, errors.New("describe log dirs request names too many partitions")
	}
	if !r.allowedCluster(auth.OpDescribe) {
		// KafkaApis: no directories, and from v3 the top-level error.
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return reply{resp: resp}, nil
	}
	ld := s.topics.LogDir()
	dir := kmsg.NewDescribeLogDirsResponseDir()
	dir.Dir = ld.Path
	dir.TotalBytes, dir.UsableBytes = ld.TotalBytes, ld.UsableBytes

	describe := func(t *topics.Topic, parts []int32) {
		dt := kmsg.NewDescribeLogDirsResponseDirTopic()
		dt.Topic = t.Name
		seen := make(map[int32]bool, len(parts))
		for _, i := range parts {
			p, ok := t.Partition(i)
			if !ok || seen[i] {
				continue
			}
			seen[i] = true
			dp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
			dp.Partition = i
			dp.Size = p.Stats().Bytes
			dt.Partitions = append(dt.Partitions, dp)
		}
		if len(dt.Partitions) > 0 {
			dir.Topics = append(dir.Topics, dt)
		}
	}
	if req.Topics == nil {
		for _, t := range s.topics.Topics() {
			all := make([]int32, t.NumPartitions())
			for i := range all {
				all[i] = int32(i)
			}
			describe(t, all)
		}
	} else {
		for _, rt := range req.Topics {
			if t, ok := s.topics.Topic(rt.Topic); ok {
				describe(t, rt.Partitions)
			}
		}
	}
	resp.Dirs = []kmsg.DescribeLogDirsResponseDir{dir}
	return reply{resp: resp}, nil
}
