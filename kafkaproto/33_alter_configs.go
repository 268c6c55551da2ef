package kafkaproto

// AlterConfigs: v0-v2
//
// Behavior:
//   - TOPIC resources: the configs given become the topic's whole set of
//     explicit configs, as Kafka's legacy AlterConfigs does (configs left
//     out return to their defaults). The result is validated as a whole
//     (unknown names, types, ranges, allowed values, min.compaction.lag.ms
//     <= max.compaction.lag.ms) with INVALID_CONFIG and the reason, then
//     stored in the topic catalog; retention, compaction and produce
//     validation use it at once. A null value, a config named twice or an
//     empty topic name gets INVALID_REQUEST; an unknown topic
//     UNKNOWN_TOPIC_OR_PARTITION; a topic owned by a queue or an event store
//     POLICY_VIOLATION with a message naming the owner (validate_only too).
//   - BROKER resources (this node's ID or ""): broker settings are static
//     here (configuration file, flags, environment), so any change gets
//     INVALID_REQUEST saying so; an empty change succeeds. Another node's
//     ID gets INVALID_REQUEST.
//   - A resource named twice in one request gets INVALID_REQUEST; other
//     resource types INVALID_REQUEST.
//   - validate_only checks everything and changes nothing.
//
// Version notes:
//   - Deprecated by IncrementalAlterConfigs (KIP-339) but still sent by
//     older tools and sarama's AlterConfig. v1 changes only throttling; v2
//     is the flexible version.

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
	"github.com/vibemq/broker/groups"
)

func init() { register(kmsg.AlterConfigs, 0, 2, (*Server).handleAlterConfigs) }

func (s *Server) handleAlterConfigs(r *request) (reply, error) {
	req := r.kreq.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	rs := make([]alterResource, len(req.Resources))
	for i, rr := range req.Resources {
		rs[i] = alterResource{
			typ: rr.ResourceType, name: rr.ResourceName, configs: len(rr.Configs),
			config: func(j int) (string, bool) { return rr.Configs[j].Name, rr.Configs[j].Value == nil },
			apply: func() error {
				if rr.ResourceType == kmsg.ConfigResourceTypeGroupConfig {
					return fmt.Errorf("%w: group configs are changed with IncrementalAlterConfigs (kafka-configs --alter --entity-type groups)", groups.ErrInvalidRequest)
				}
				configs := make(map[string]string, len(rr.Configs))
				for _, c := range rr.Configs {
					configs[c.Name] = *c.Value
				}
				if s.clusterTopic(rr.ResourceName) {
					return s.alterClusterTopicConfigs(rr.ResourceName, req.ValidateOnly,
						func(map[string]string) (map[string]string, error) {
							return s.topics.NextTopicConfigs(nil, configs, nil)
						})
				}
				return s.topics.ReplaceTopicConfigs(rr.ResourceName, configs, req.ValidateOnly)
			},
		}
	}
	s.alterConfigs(r, rs, func(rr alterResource, code int16, msg *string) {
		res := kmsg.NewAlterConfigsResponseResource()
		res.ResourceType, res.ResourceName = rr.typ, rr.name
		res.ErrorCode, res.ErrorMessage = code, msg
		resp.Resources = append(resp.Resources, res)
	})
	return reply{resp: resp}, nil
}

// alterResource is one resource of an AlterConfigs or
// IncrementalAlterConfigs request.
type alterResource struct {
	typ     kmsg.ConfigResourceType
	name    string
	configs int
	// config returns the name of config i and whether its value is a null
	// the operation does not allow.
	config func(i int) (name string, null bool)
	// apply changes (with validate_only, only checks) a topic resource's
	// configs once the request-level checks passed.
	apply func() error
}

// alterConfigs answers each resource in order with its error code and,
// when the code is not 0, its message: a resource named twice gets
// INVALID_REQUEST, then checkAlterRequest, then apply for topics.
func (s *Server) alterConfigs(r *request, rs []alterResource, answer func(rr alterResource, code int16, msg *string)) {
	type resourceKey struct {
		typ  kmsg.ConfigResourceType
		name string
	}
	count := map[resourceKey]int{}
	for _, rr := range rs {
		count[resourceKey{rr.typ, rr.name}]++
	}
	for _, rr := range rs {
		code, msg := kerr.InvalidRequest.Code, "duplicate resource"
		if count[resourceKey{rr.typ, rr.name}] == 1 {
			code, msg = alterConfigsAuthorized(r, rr)
		}
		if code == 0 {
			code, msg = s.checkAlterRequest(rr)
		}
		if code == 0 && (rr.typ == kmsg.ConfigResourceTypeTopic || rr.typ == kmsg.ConfigResourceTypeGroupConfig) {
			if err := rr.apply(); err != nil {
				code, msg = errorCode(err), err.Error()
			}
		}
		var message *string
		if code != 0 {
			message = &msg
		}
		answer(rr, code, message)
	}
}

// alterConfigsAuthorized is the ALTER_CONFIGS check on a topic or the
// cluster (a broker resource), KafkaApis' before any other check of the
// resource.
func alterConfigsAuthorized(r *request, rr alterResource) (int16, string) {
	switch {
	case rr.typ == kmsg.ConfigResourceTypeTopic && !r.allowedTopic(auth.OpAlterConfigs, rr.name):
		return kerr.TopicAuthorizationFailed.Code, "Authorization failed."
	case rr.typ == kmsg.ConfigResourceTypeBroker && !r.allowedCluster(auth.OpAlterConfigs):
		return kerr.ClusterAuthorizationFailed.Code, "Authorization failed."
	case rr.typ == kmsg.ConfigResourceTypeGroupConfig && !r.allowedGroup(auth.OpAlterConfigs, rr.name):
		return kerr.GroupAuthorizationFailed.Code, "Authorization failed."
	}
	return 0, ""
}

// checkAlterRequest applies the request-level rules shared by AlterConfigs
// and IncrementalAlterConfigs (Kafka ConfigAdminManager.preprocess) and
// answers broker resources. It returns 0 when a topic resource may proceed.
func (s *Server) checkAlterRequest(rr alterResource) (int16, string) {
	seen := make(map[string]bool, rr.configs)
	for i := range rr.configs {
		n, null := rr.config(i)
		if seen[n] {
			return kerr.InvalidRequest.Code, "error due to duplicate config keys"
		}
		seen[n] = true
		if null {
			return kerr.InvalidRequest.Code, "null value not supported for : " + n
		}
	}
	switch rr.typ {
	case kmsg.ConfigResourceTypeTopic:
		if rr.name == "" {
			return kerr.InvalidRequest.Code, "default topic resources are not allowed"
		}
		return 0, ""
	case kmsg.ConfigResourceTypeGroupConfig:
		if rr.name == "" {
			return kerr.InvalidRequest.Code, "a group resource needs a group name"
		}
		if s.cfg.Groups == nil {
			return kerr.CoordinatorNotAvailable.Code, "the group coordinator is not running"
		}
		return 0, ""
	case kmsg.ConfigResourceTypeBroker:
		if code, msg := s.checkBrokerResource(rr.name); code != 0 {
			return code, msg
		}
		if rr.configs == 0 {
			return 0, ""
		}
		return kerr.InvalidRequest.Code, "broker configs cannot be changed at runtime on this broker; set them in its configuration file, environment or flags and restart it"
	}
	return kerr.InvalidRequest.Code, "unsupported config resource type " + rr.typ.String()
}
