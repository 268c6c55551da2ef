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
//     UNKNOWN_TOPIC_OR_PARTITION.
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
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.AlterConfigs, 0, 2, (*Server).handleAlterConfigs) }

func (s *Server) handleAlterConfigs(r *request) (reply, error) {
	req := r.kreq.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	type resourceKey struct {
		typ  kmsg.ConfigResourceType
		name string
	}
	count := map[resourceKey]int{}
	for _, rr := range req.Resources {
		count[resourceKey{rr.ResourceType, rr.ResourceName}]++
	}
	for _, rr := range req.Resources {
		res := kmsg.NewAlterConfigsResponseResource()
		res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
		names := make([]string, len(rr.Configs))
		for i, c := range rr.Configs {
			names[i] = c.Name
		}
		var code int16
		var msg string
		switch {
		case count[resourceKey{rr.ResourceType, rr.ResourceName}] > 1:
			code, msg = kerr.InvalidRequest.Code, "duplicate resource"
		default:
			code, msg = s.checkAlterRequest(rr.ResourceType, rr.ResourceName, names, func(i int) bool { return rr.Configs[i].Value == nil })
		}
		if code == 0 && rr.ResourceType == kmsg.ConfigResourceTypeTopic {
			configs := make(map[string]string, len(rr.Configs))
			for _, c := range rr.Configs {
				configs[c.Name] = *c.Value
			}
			if err := s.topics.ReplaceTopicConfigs(rr.ResourceName, configs, req.ValidateOnly); err != nil {
				code, msg = errorCode(err), err.Error()
			}
		}
		res.ErrorCode = code
		if code != 0 {
			res.ErrorMessage = &msg
		}
		resp.Resources = append(resp.Resources, res)
	}
	return reply{resp: resp}, nil
}

// checkAlterRequest applies the request-level rules shared by AlterConfigs
// and IncrementalAlterConfigs (Kafka ConfigAdminManager.preprocess) and
// answers broker resources. It returns 0 when a topic resource may proceed.
func (s *Server) checkAlterRequest(typ kmsg.ConfigResourceType, name string, names []string, isNull func(int) bool) (int16, string) {
	seen := make(map[string]bool, len(names))
	for i, n := range names {
		if seen[n] {
			return kerr.InvalidRequest.Code, "error due to duplicate config keys"
		}
		seen[n] = true
		if isNull(i) {
			return kerr.InvalidRequest.Code, "null value not supported for : " + n
		}
	}
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		if name == "" {
			return kerr.InvalidRequest.Code, "default topic resources are not allowed"
		}
		return 0, ""
	case kmsg.ConfigResourceTypeBroker:
		if code, msg := s.checkBrokerResource(name); code != 0 {
			return code, msg
		}
		if len(names) == 0 {
			return 0, ""
		}
		return kerr.InvalidRequest.Code, "broker configs cannot be changed at runtime on this broker; set them in its configuration file, environment or flags and restart it"
	}
	return kerr.InvalidRequest.Code, "unsupported config resource type " + typ.String()
}
