package kafkaproto

// Metadata: v0-v12
//
// Behavior:
//   - One broker (this node) leads every partition at leader epoch 0, with
//     itself as the only replica and ISR member.
//   - In a cluster (cluster.go): every registered broker, the metadata
//     group's leader as controller, and each cluster partition's leader
//     and replicas from its assignment (ISR = replicas while partitions
//     are not replicated); auto-creation is proposed to the group.
//     Fenced brokers (KIP-631) are left out, this one too, as Kafka's
//     getAliveBrokerNodes; a partition whose leader is fenced has leader
//     -1 and LEADER_NOT_AVAILABLE, and fenced replicas are offline.
//   - A null topic list (v1+), or an empty one at v0, lists every topic.
//   - Unknown topics are created when both the request (v4+ allow flag; v0-v3
//     always) and the broker's auto-create-topics allow it, with the default
//     partition count; otherwise UNKNOWN_TOPIC_OR_PARTITION.
//   - A request topic with a non-zero topic ID (v10+) is looked up by ID,
//     whatever its name: the Java Admin's describeTopics(TopicCollection.
//     ofTopicIds(...)) sends the name "" with the ID, not null (Kafka's
//     KafkaApis uses the IDs whenever one is non-zero). An unknown ID gets
//     UNKNOWN_TOPIC_ID.
//   - Invalid topic names get INVALID_TOPIC_EXCEPTION.
//   - Authorization (KafkaApis.handleTopicMetadataRequest): the list of
//     every topic leaves out those the principal may not DESCRIBE; a named
//     one answers TOPIC_AUTHORIZATION_FAILED without saying whether it
//     exists (by ID: with its ID and no name); auto-creation needs CREATE
//     on the cluster or the topic, else TOPIC_AUTHORIZATION_FAILED.
//   - Authorized operations (v8+, when asked for) are computed from the
//     ACLs (KIP-430); without an authorizer, every operation.
//
// Version notes:
//   - v10 adds topic IDs (KIP-516); v7 leader epochs (KIP-320).
//   - v13 (top-level error code) is not served.

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
	"github.com/vibemq/broker/topics"
)

func init() { register(kmsg.Metadata, 0, 12, (*Server).handleMetadata) }

func (s *Server) handleMetadata(r *request) (reply, error) {
	req := r.kreq.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	defer func() {
		if req.Version >= 8 && req.IncludeClusterAuthorizedOperations {
			resp.AuthorizedOperations = 0
			if r.allowedCluster(auth.OpDescribe) {
				resp.AuthorizedOperations = r.clusterAuthorizedOperations()
			}
		}
		if req.Version >= 8 && req.IncludeTopicAuthorizedOperations {
			for i := range resp.Topics {
				if resp.Topics[i].ErrorCode == 0 {
					resp.Topics[i].AuthorizedOperations = r.topicAuthorizedOperations(*resp.Topics[i].Topic)
				}
			}
		}
	}()
	if len(req.Topics) > s.cfg.MaxPartitionsPerRequest {
		return reply{}, errors.New("metadata request names too many topics")
	}
	if s.cfg.Cluster != nil {
		resp.Brokers = []kmsg.MetadataResponseBroker{}
		for _, b := range s.clusterBrokers(r.c, false) {
			resp.Brokers = append(resp.Brokers, b.MetadataResponseBroker)
		}
	} else {
		resp.Brokers = []kmsg.MetadataResponseBroker{s.brokerEntry(r.c)}
	}
	clusterID := s.clusterID()
	resp.ClusterID = &clusterID
	resp.ControllerID = s.clusterController()

	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if all {
		for _, t := range s.topics.Topics() {
			if !r.allowedTopic(auth.OpDescribe, t.Name) {
				continue
			}
			resp.Topics = append(resp.Topics, s.metadataTopic(t))
		}
		return reply{resp: resp}, nil
	}
	allowCreate := req.Version < 4 || req.AllowAutoTopicCreation
	seen := make(map[string]bool, len(req.Topics))
	for _, rt := range req.Topics {
		if rt.Topic == nil || (req.Version >= 10 && rt.TopicID != [16]byte{}) {
			t, ok := s.topics.TopicByID(rt.TopicID)
			if !ok {
				mt := kmsg.NewMetadataResponseTopic()
				mt.TopicID = rt.TopicID
				mt.ErrorCode = kerr.UnknownTopicID.Code
				resp.Topics = append(resp.Topics, mt)
				continue
			}
			if !r.allowedTopic(auth.OpDescribe, t.Name) {
				mt := kmsg.NewMetadataResponseTopic()
				mt.TopicID = rt.TopicID
				mt.ErrorCode = kerr.TopicAuthorizationFailed.Code
				resp.Topics = append(resp.Topics, mt)
				continue
			}
			resp.Topics = append(resp.Topics, s.metadataTopic(t))
			continue
		}
		name := *rt.Topic
		if seen[name] {
			continue
		}
		seen[name] = true
		if !r.allowedTopic(auth.OpDescribe, name) {
			resp.Topics = append(resp.Topics, metadataTopicError(name, kerr.TopicAuthorizationFailed.Code))
			continue
		}
		t, ok := s.topics.Topic(name)
		if !ok && allowCreate && s.topics.AutoCreate() && !r.allowedCluster(auth.OpCreate) && !r.allowedTopic(auth.OpCreate, name) {
			resp.Topics = append(resp.Topics, metadataTopicError(name, kerr.TopicAuthorizationFailed.Code))
			continue
		}
		if !ok && allowCreate && s.topics.AutoCreate() {
			var err error
			t, err = s.autoCreateTopic(name)
			if errors.Is(err, topics.ErrTopicExists) {
				t, _ = s.topics.Topic(name)
				err = nil
			}
			if err != nil {
				mt := kmsg.NewMetadataResponseTopic()
				mt.Topic = &name
				mt.ErrorCode = errorCode(err)
				if c := mt.ErrorCode; c == kerr.NotController.Code || c == kerr.RequestTimedOut.Code {
					// The cluster could not create it now: Kafka answers
					// a topic being created LEADER_NOT_AVAILABLE, which
					// clients retry.
					mt.ErrorCode = kerr.LeaderNotAvailable.Code
				}
				resp.Topics = append(resp.Topics, mt)
				continue
			}
			ok = t != nil
		}
		if !ok {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic = &name
			mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			if topics.ValidateTopicName(name) != nil {
				mt.ErrorCode = kerr.InvalidTopicException.Code
			}
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		resp.Topics = append(resp.Topics, s.metadataTopic(t))
	}
	return reply{resp: resp}, nil
}

func metadataTopicError(name string, code int16) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic = &name
	mt.ErrorCode = code
	return mt
}

// brokerEntry describes this broker as the listener c came in on
// advertises it (Kafka answers each listener with its own endpoints).
func (s *Server) brokerEntry(c *conn) kmsg.MetadataResponseBroker {
	b := kmsg.NewMetadataResponseBroker()
	b.NodeID = s.cfg.NodeID
	b.Host, b.Port = c.advertised()
	if s.cfg.Rack != "" {
		rack := s.cfg.Rack
		b.Rack = &rack
	}
	return b
}

func (s *Server) metadataTopic(t *topics.Topic) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic = &name
	mt.TopicID = t.ID
	mt.IsInternal = topics.IsInternalTopic(t.Name)
	n := t.NumPartitions()
	mt.Partitions = make([]kmsg.MetadataResponseTopicPartition, 0, n)
	for i := int32(0); i < n; i++ {
		p := kmsg.NewMetadataResponseTopicPartition()
		p.Partition = i
		v := s.partitionView(t, i)
		p.Leader, p.LeaderEpoch, p.Replicas, p.ISR, p.OfflineReplicas = v.leader, v.epoch, v.replicas, v.isr, v.offline
		if p.Leader < 0 {
			p.ErrorCode = kerr.LeaderNotAvailable.Code
		}
		mt.Partitions = append(mt.Partitions, p)
	}
	return mt
}

// autoCreateTopic creates an unknown topic with the default partition
// count, through the cluster's metadata in a cluster.
func (s *Server) autoCreateTopic(name string) (*topics.Topic, error) {
	if s.cfg.Cluster == nil {
		return s.topics.CreateTopic(name, 0, nil, false)
	}
	if _, err := s.topics.CreateTopic(name, 0, nil, true); err != nil {
		return nil, err
	}
	ctx, cancel := clusterContext(0)
	defer cancel()
	if err := s.cfg.Cluster.CreateTopic(ctx, ClusterTopic{Name: name, Partitions: s.topics.DefaultPartitions(), ReplicationFactor: 1}); err != nil {
		return nil, err
	}
	t, ok := s.topics.Topic(name)
	if !ok {
		return nil, fmt.Errorf("%w: %s was created in the cluster but is not in this broker's store; see the broker log", topics.ErrUnknownTopic, name)
	}
	return t, nil
}
