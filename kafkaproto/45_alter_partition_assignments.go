package kafkaproto

// AlterPartitionAssignments: v0-v1
//
// Behavior:
//   - This broker is the only node, so the only valid assignment of a
//     partition is the one it has: [this node]. That reassignment is
//     accepted and complete at once (nothing moves), as Kafka completes a
//     reassignment to the current replicas.
//   - Replicas naming another node, repeating a node, or empty get
//     INVALID_REPLICA_ASSIGNMENT with a message; a null replica list (a
//     cancellation) gets NO_REASSIGNMENT_IN_PROGRESS, since none ever is;
//     unknown partitions UNKNOWN_TOPIC_OR_PARTITION.
//   - v1 with allow_replication_factor_change false refuses a list whose
//     length differs from the current replication factor (1), as KIP-1101
//     says; the flag is echoed.
//
// Version notes:
//   - v0 is flexible; v1 adds allow_replication_factor_change.

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
)

func init() {
	register(kmsg.AlterPartitionAssignments, 0, 1, (*Server).handleAlterPartitionAssignments)
}

func (s *Server) handleAlterPartitionAssignments(r *request) (reply, error) {
	req := r.kreq.(*kmsg.AlterPartitionAssignmentsRequest)
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	n := 0
	for _, rt := range req.Topics {
		n += len(rt.Partitions)
	}
	if n > s.cfg.MaxPartitionsPerRequest {
		return reply{}, errors.New("alter partition assignments request names too many partitions")
	}
	resp.AllowReplicationFactorChange = req.AllowReplicationFactorChange
	if !r.allowedCluster(auth.OpAlter) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return reply{resp: resp}, nil
	}
	for _, rt := range req.Topics {
		st := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		st.Topic = rt.Topic
		t, topicOK := s.topics.Topic(rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			sp.Partition = rp.Partition
			partitionOK := false
			if topicOK {
				_, partitionOK = t.Partition(rp.Partition)
			}
			switch {
			case !partitionOK:
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case rp.Replicas == nil:
				sp.ErrorCode = kerr.NoReassignmentInProgress.Code
				sp.ErrorMessage = kmsg.StringPtr("no reassignment is in progress: this broker is the only node, so partitions never move")
			default:
				if msg := s.checkAssignment(rp.Replicas, req.Version >= 1 && !req.AllowReplicationFactorChange); msg != "" {
					sp.ErrorCode = kerr.InvalidReplicaAssignment.Code
					sp.ErrorMessage = &msg
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply{resp: resp}, nil
}

// checkAssignment returns why replicas is not a valid assignment on this
// one-node cluster, or "" when it is ([this node]).
func (s *Server) checkAssignment(replicas []int32, keepFactor bool) string {
	if len(replicas) == 0 {
		return "the replica list is empty; the only valid assignment is [" + fmt.Sprint(s.cfg.NodeID) + "]"
	}
	if keepFactor && len(replicas) != 1 {
		return fmt.Sprintf("the replication factor would change from 1 to %d, and allow_replication_factor_change is false", len(replicas))
	}
	for i, id := range replicas {
		if id != s.cfg.NodeID {
			return fmt.Sprintf("replica %d is not a broker of this cluster; the only broker is %d", id, s.cfg.NodeID)
		}
		if i > 0 {
			return fmt.Sprintf("replica %d is listed more than once", id)
		}
	}
	return ""
}
