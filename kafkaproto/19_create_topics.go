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
//   - In a cluster (cluster.go) the topic is checked here, then proposed
//     to the metadata group, placed round robin over the registered
//     brokers (or as the replica assignment says: one registered broker
//     per partition), and answered once this broker applied it.
//     Replication factors above 1 get INVALID_REPLICATION_FACTOR until
//     partitions are replicated; no controller NOT_CONTROLLER, a timeout
//     REQUEST_TIMED_OUT.
//
// Version notes:
//   - v5 returns the effective configs, partition count and replication
//     factor (KIP-525); v7 the topic ID.

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
	"github.com/vibemq/broker/topics"
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
		case s.cfg.Cluster != nil && (rt.ReplicationFactor == 0 || rt.ReplicationFactor < -1):
			fail(kerr.InvalidReplicationFactor.Code, fmt.Sprintf("replication factor %d: give 1 to the number of brokers, or -1 for the default (1)", rt.ReplicationFactor))
		case s.cfg.Cluster == nil && rt.ReplicationFactor != -1 && rt.ReplicationFactor != 1 && len(rt.ReplicaAssignment) == 0:
			fail(kerr.InvalidReplicationFactor.Code, fmt.Sprintf("replication factor %d is not possible on a single broker; use 1 or -1", rt.ReplicationFactor))
		case len(rt.ReplicaAssignment) > 0 && (rt.NumPartitions != -1 || rt.ReplicationFactor != -1):
			fail(kerr.InvalidRequest.Code, "give either a replica assignment or partitions and replication factor, not both")
		case partitions == 0 || partitions < -1:
			fail(kerr.InvalidPartitions.Code, fmt.Sprintf("number of partitions must be positive or -1 for the default, got %d", partitions))
		default:
			if len(rt.ReplicaAssignment) > 0 {
				partitions = int32(len(rt.ReplicaAssignment))
				for _, a := range rt.ReplicaAssignment {
					if msg := s.checkReplicas(a.Partition, a.Replicas); msg != "" {
						fail(kerr.InvalidReplicaAssignment.Code, msg)
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
			t, err := s.topics.CreateTopic(rt.Topic, partitions, configs, req.ValidateOnly || s.cfg.Cluster != nil)
			if err == nil && s.cfg.Cluster != nil && !req.ValidateOnly {
				t, err = s.createClusterTopic(req.TimeoutMillis, rt, t.NumPartitions(), configs)
			}
			if err != nil {
				fail(errorCode(err), err.Error())
				break
			}
			st.TopicID = t.ID
			st.NumPartitions = t.NumPartitions()
			st.ReplicationFactor = max(rt.ReplicationFactor, 1)
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

// checkReplicas checks the replicas a manual assignment gives partition:
// one replica (replicated partitions are placed by the cluster), this node on a single node, a
// registered broker in a cluster. It returns the problem, or "".
func (s *Server) checkReplicas(partition int32, replicas []int32) string {
	if s.cfg.Cluster == nil {
		if len(replicas) != 1 || replicas[0] != s.cfg.NodeID {
			return fmt.Sprintf("replicas must be exactly [%d] on this single broker", s.cfg.NodeID)
		}
		return ""
	}
	if len(replicas) != 1 {
		return fmt.Sprintf("partition %d has %d replicas; a manual assignment gives each partition exactly one broker (for replicated partitions give a replication factor instead)", partition, len(replicas))
	}
	var registered []int32
	for _, b := range s.cfg.Cluster.Brokers() {
		registered = append(registered, b.NodeID)
	}
	if !slices.Contains(registered, replicas[0]) {
		return fmt.Sprintf("partition %d is assigned to broker %d, which is not registered in the cluster (brokers: %v)", partition, replicas[0], registered)
	}
	return ""
}

// createClusterTopic proposes a topic checked by the caller to the
// cluster and returns it from this broker's store once applied.
func (s *Server) createClusterTopic(timeoutMillis int32, rt kmsg.CreateTopicsRequestTopic, partitions int32, configs map[string]string) (*topics.Topic, error) {
	var assignment [][]int32
	if len(rt.ReplicaAssignment) > 0 {
		assignment = make([][]int32, partitions)
		for _, a := range rt.ReplicaAssignment {
			if a.Partition < 0 || a.Partition >= partitions || assignment[a.Partition] != nil {
				return nil, fmt.Errorf("%w: the replica assignment must name partitions 0 to %d once each", topics.ErrInvalidReplicaAssignment, partitions-1)
			}
			assignment[a.Partition] = a.Replicas
		}
	}
	ctx, cancel := clusterContext(timeoutMillis)
	defer cancel()
	err := s.cfg.Cluster.CreateTopic(ctx, ClusterTopic{Name: rt.Topic, Partitions: partitions, ReplicationFactor: max(rt.ReplicationFactor, 1), Assignment: assignment, Configs: configs})
	if err != nil {
		return nil, err
	}
	t, ok := s.topics.Topic(rt.Topic)
	if !ok {
		return nil, fmt.Errorf("%w: %s was created in the cluster but is not in this broker's store; see the broker log", topics.ErrUnknownTopic, rt.Topic)
	}
	return t, nil
}
