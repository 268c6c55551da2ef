package kafkaproto

// CreateTopics: v0-v7
//
// Behavior:
//   - num_partitions -1 means the broker default; replication_factor must be
//     -1 or 1 on a single node, else INVALID_REPLICATION_FACTOR; a manual
//     replica assignment may only name this node, and then gives the
//     partition count.
//   - Every config is validated (known name, type, range); the first bad one
//     fails the topic with INVALID_CONFIG and a message.
//   - validate_only (v1+) checks everything and creates nothing.
//   - A topic named twice in one request fails with INVALID_REQUEST.
//
// Version notes:
//   - v5 returns the effective configs, partition count and replication
//     factor (KIP-525); v7 the topic ID.

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
)

func init() { register(kmsg.CreateTopics, 0, 7, (*Server).handleCreateTopics) }

func (s *Server) handleCreateTopics(r *request) (reply, error) {
	req := r.kreq.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	count := map[string]int{}
	for _, rt := range req.Topics {
		count[rt.Topic]++
	}
	// CREATE on the cluster, or else on each topic (KafkaApis
	// handleCreateTopicsRequest).
	clusterCreate := r.allowedCluster(auth.OpCreate)
	for _, rt := range req.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		fail := func(code int16, msg string) {
			st.ErrorCode = code
			if req.Version >= 1 {
				st.ErrorMessage = &msg
			}
		}
		partitions := rt.NumPartitions
		switch {
		case count[rt.Topic] > 1:
			fail(kerr.InvalidRequest.Code, fmt.Sprintf("topic %q is named more than once in the request", rt.Topic))
		case !clusterCreate && !r.allowedTopic(auth.OpCreate, rt.Topic):
			fail(kerr.TopicAuthorizationFailed.Code, "Authorization failed.")
		case rt.ReplicationFactor != -1 && rt.ReplicationFactor != 1 && len(rt.ReplicaAssignment) == 0:
			fail(kerr.InvalidReplicationFactor.Code, fmt.Sprintf("replication factor %d is not possible on a single broker; use 1 or -1", rt.ReplicationFactor))
		case len(rt.ReplicaAssignment) > 0 && (rt.NumPartitions != -1 || rt.ReplicationFactor != -1):
			fail(kerr.InvalidRequest.Code, "give either a replica assignment or partitions and replication factor, not both")
		case partitions == 0 || partitions < -1:
			fail(kerr.InvalidPartitions.Code, fmt.Sprintf("number of partitions must be positive or -1 for the default, got %d", partitions))
		default:
			if len(rt.ReplicaAssignment) > 0 {
				partitions = int32(len(rt.ReplicaAssignment))
				for _, a := range rt.ReplicaAssignment {
					if len(a.Replicas) != 1 || a.Replicas[0] != s.cfg.NodeID {
						fail(kerr.InvalidReplicaAssignment.Code, fmt.Sprintf("replicas must be exactly [%d] on this single broker", s.cfg.NodeID))
						break
					}
				}
				if st.ErrorCode != 0 {
					break
				}
			}
			configs := make(map[string]string, len(rt.Configs))
			var cfgErr error
			for _, c := range rt.Configs {
				if c.Value == nil {
					cfgErr = fmt.Errorf("config %s has a null value", c.Name)
					break
				}
				configs[c.Name] = *c.Value
			}
			if cfgErr != nil {
				fail(kerr.InvalidConfig.Code, cfgErr.Error())
				break
			}
			t, err := s.topics.CreateTopic(rt.Topic, partitions, configs, req.ValidateOnly)
			if err != nil {
				fail(errorCode(err), err.Error())
				break
			}
			st.TopicID = t.ID
			st.NumPartitions = t.NumPartitions()
			st.ReplicationFactor = 1
			if req.Version >= 5 && !r.allowedTopic(auth.OpDescribeConfigs, rt.Topic) {
				st.ConfigErrorCode = kerr.TopicAuthorizationFailed.Code
			} else if req.Version >= 5 {
				for _, e := range t.EffectiveConfigs() {
					c := kmsg.NewCreateTopicsResponseTopicConfig()
					c.Name = e.Def.Name
					v := e.Value
					c.Value = &v
					c.Source = int8(e.Source)
					st.Configs = append(st.Configs, c)
				}
			}
		}
		if st.ErrorCode != 0 {
			st.NumPartitions, st.ReplicationFactor = -1, -1
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply{resp: resp}, nil
}
