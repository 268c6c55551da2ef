package kafkaproto

// DeleteTopics: v0-v6
//
// Behavior:
//   - Deletion is immediate and removes the topic's data with range
//     deletions; fetches and produces in flight get UNKNOWN_TOPIC_OR_PARTITION.
//   - v6 names topics by name or ID; an unknown ID gets UNKNOWN_TOPIC_ID.
//   - Internal topics cannot be deleted (INVALID_REQUEST... as Kafka,
//     TOPIC_AUTHORIZATION_FAILED is not used: there are no ACLs yet).
//   - The topic of a native queue, dead-letter queue or event store (an
//     owned topic, topics/owner.go) is refused with POLICY_VIOLATION (Kafka
//     has no closer code) and, from v5, a message naming the owner and the
//     command that deletes it; nothing changes. Its owner's API deletes it.
//   - In a cluster (cluster.go) a cluster topic's deletion is proposed to
//     the metadata group and answered once this broker applied it (every
//     broker deletes its copy as it applies the record).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
	"github.com/vibemq/broker/topics"
)

func init() { register(kmsg.DeleteTopics, 0, 6, (*Server).handleDeleteTopics) }

func (s *Server) handleDeleteTopics(r *request) (reply, error) {
	req := r.kreq.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	type target struct {
		name *string
		id   [16]byte
	}
	var targets []target
	if req.Version < 6 {
		for i := range req.TopicNames {
			targets = append(targets, target{name: &req.TopicNames[i]})
		}
	} else {
		for _, t := range req.Topics {
			targets = append(targets, target{name: t.Topic, id: t.TopicID})
		}
	}
	for _, tg := range targets {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic = tg.name
		st.TopicID = tg.id
		var name string
		if tg.name != nil {
			name = *tg.name
		} else if t, ok := s.topics.TopicByID(tg.id); ok {
			name = t.Name
			st.Topic = &t.Name
		} else {
			st.ErrorCode = kerr.UnknownTopicID.Code
			resp.Topics = append(resp.Topics, st)
			continue
		}
		if tg.name == nil && !r.allowedTopic(auth.OpDescribe, name) {
			// By ID: Kafka does not name a topic the principal may not see.
			st.Topic = nil
			st.ErrorCode = kerr.TopicAuthorizationFailed.Code
			resp.Topics = append(resp.Topics, st)
			continue
		}
		if !r.allowedTopic(auth.OpDelete, name) {
			st.ErrorCode = kerr.TopicAuthorizationFailed.Code
			resp.Topics = append(resp.Topics, st)
			continue
		}
		if t, ok := s.topics.Topic(name); ok {
			st.TopicID = t.ID
		}
		var err error
		if topics.IsInternalTopic(name) {
			st.ErrorCode = kerr.InvalidRequest.Code
			msg := "internal topics cannot be deleted"
			if req.Version >= 5 {
				st.ErrorMessage = &msg
			}
		} else if err = s.deleteTopic(name, req.TimeoutMillis); err != nil {
			st.ErrorCode = errorCode(err)
			if req.Version >= 5 {
				st.ErrorMessage = errorMessage(err)
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply{resp: resp}, nil
}

// deleteTopic deletes topic name: through the cluster's metadata for a
// cluster topic, else from this broker's store.
func (s *Server) deleteTopic(name string, timeoutMillis int32) error {
	if s.cfg.Cluster == nil {
		return s.topics.DeleteTopic(name)
	}
	if t, ok := s.topics.Topic(name); ok && !t.IsClusterTopic() {
		return s.topics.DeleteTopic(name)
	}
	ctx, cancel := clusterContext(timeoutMillis)
	defer cancel()
	return s.cfg.Cluster.DeleteTopic(ctx, name)
}
