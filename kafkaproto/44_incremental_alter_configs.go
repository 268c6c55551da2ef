package kafkaproto

// IncrementalAlterConfigs: v0-v1
//
// Behavior:
//   - TOPIC resources: each operation changes one explicit config (KIP-339):
//     SET replaces it, DELETE returns it to its default (a config that is
//     not set is left alone), APPEND and SUBTRACT add or remove elements of
//     a list config (cleanup.policy, the throttled replica lists) starting
//     from its effective value; on another config they get INVALID_CONFIG
//     ("Can't APPEND to key ... because its type is not LIST", as Kafka's
//     ConfigurationControlManager). The resulting set is validated as a
//     whole (INVALID_CONFIG with the reason) and stored in the topic
//     catalog. A null value on SET/APPEND/SUBTRACT, a config named twice, an
//     unknown operation or an empty topic name get INVALID_REQUEST; an
//     unknown topic UNKNOWN_TOPIC_OR_PARTITION; a topic owned by a queue or
//     an event store POLICY_VIOLATION with a message naming the owner.
//   - GROUP resources (KIP-932 group configs): share.auto.offset.reset
//     (latest, earliest, by_duration:<ISO 8601>),
//     share.record.lock.duration.ms (1000-3600000),
//     share.session.timeout.ms (45000-60000) and
//     share.heartbeat.interval.ms (5000-15000, below the session timeout;
//     both ranges widened to the broker's own settings),
//     share.isolation.level (read_uncommitted, read_committed) and
//     share.delivery.count.limit (1-1000) of a share group, SET or DELETE
//     (back to the broker's group-share-* setting), before or after the
//     group exists, stored durably (groups/share_config.go); another name,
//     a bad value, APPEND or SUBTRACT get INVALID_CONFIG. In a cluster
//     the change is checked by the receiving broker and proposed to the
//     metadata group (record 9), which every broker applies.
//   - BROKER resources: as in AlterConfigs, static here (INVALID_REQUEST
//     for any change).
//   - validate_only checks everything and changes nothing.
//
// Version notes:
//   - v1 is the flexible version (KIP-482).

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/groups"
	"github.com/vibemq/broker/topics"
)

func init() {
	register(kmsg.IncrementalAlterConfigs, 0, 1, (*Server).handleIncrementalAlterConfigs)
}

func (s *Server) handleIncrementalAlterConfigs(r *request) (reply, error) {
	req := r.kreq.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	rs := make([]alterResource, len(req.Resources))
	for i, rr := range req.Resources {
		rs[i] = alterResource{
			typ: rr.ResourceType, name: rr.ResourceName, configs: len(rr.Configs),
			config: func(j int) (string, bool) {
				c := rr.Configs[j]
				return c.Name, c.Value == nil && c.Op != kmsg.IncrementalAlterConfigOpDelete
			},
			apply: func() error {
				if rr.ResourceType == kmsg.ConfigResourceTypeGroupConfig {
					return s.alterGroupConfigs(rr, req.ValidateOnly)
				}
				ops := make([]topics.ConfigOp, len(rr.Configs))
				for i, c := range rr.Configs {
					ops[i] = topics.ConfigOp{Name: c.Name, Op: topics.ConfigOpType(c.Op), Value: c.Value}
				}
				if s.clusterTopic(rr.ResourceName) {
					return s.alterClusterTopicConfigs(rr.ResourceName, req.ValidateOnly,
						func(current map[string]string) (map[string]string, error) {
							return s.topics.NextTopicConfigs(current, nil, ops)
						})
				}
				return s.topics.AlterTopicConfigs(rr.ResourceName, ops, req.ValidateOnly)
			},
		}
	}
	s.alterConfigs(r, rs, func(rr alterResource, code int16, msg *string) {
		res := kmsg.NewIncrementalAlterConfigsResponseResource()
		res.ResourceType, res.ResourceName = rr.typ, rr.name
		res.ErrorCode, res.ErrorMessage = code, msg
		resp.Resources = append(resp.Resources, res)
	})
	return reply{resp: resp}, nil
}

// alterGroupConfigs applies a GROUP resource's operations.
func (s *Server) alterGroupConfigs(rr kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) error {
	ops := make([]groups.GroupConfigOp, 0, len(rr.Configs))
	for _, c := range rr.Configs {
		switch c.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			ops = append(ops, groups.GroupConfigOp{Name: c.Name, Value: *c.Value})
		case kmsg.IncrementalAlterConfigOpDelete:
			ops = append(ops, groups.GroupConfigOp{Name: c.Name, Delete: true})
		default:
			return fmt.Errorf("%w: %s of group config %s; group configs are not lists, use SET or DELETE", groups.ErrInvalidGroupConfig, c.Op, c.Name)
		}
	}
	if s.cfg.Cluster == nil || validateOnly {
		return s.cfg.Groups.AlterShareGroupConfigs(rr.ResourceName, ops, validateOnly)
	}
	// A cluster keeps group configs in its metadata, as Kafka's
	// controller does: checked here, proposed, stored by every broker.
	ctx, cancel := clusterContext(0)
	defer cancel()
	return s.cfg.Cluster.AlterGroupConfigs(ctx, rr.ResourceName, func(current map[string]string) (map[string]string, error) {
		return s.cfg.Groups.NextShareGroupConfigs(current, ops)
	})
}
