package kafkaproto

// ListPartitionReassignments: v0
//
// Behavior:
//   - No reassignment is ever in progress on a one-node cluster (a
//     reassignment to the current replica completes at once), so the
//     answer lists no partition, for a null topic list (everything) and
//     for named topics alike; Kafka too lists only partitions being moved
//     and skips unknown topics.
//
// Version notes:
//   - v0 is the only version; it is flexible.

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
)

func init() {
	register(kmsg.ListPartitionReassignments, 0, 0, (*Server).handleListPartitionReassignments)
}

func (s *Server) handleListPartitionReassignments(r *request) (reply, error) {
	req := r.kreq.(*kmsg.ListPartitionReassignmentsRequest)
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	n := 0
	for _, rt := range req.Topics {
		n += len(rt.Partitions)
	}
	if n > s.cfg.MaxPartitionsPerRequest {
		return reply{}, errors.New("list partition reassignments request names too many partitions")
	}
	resp.Topics = []kmsg.ListPartitionReassignmentsResponseTopic{}
	if !r.allowedCluster(auth.OpDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
	}
	return reply{resp: resp}, nil
}
