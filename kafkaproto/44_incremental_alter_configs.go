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
//     unknown topic UNKNOWN_TOPIC_OR_PARTITION.
//   - BROKER resources: as in AlterConfigs, static here (INVALID_REQUEST
//     for any change).
//   - validate_only checks everything and changes nothing.
//
// Version notes:
//   - v1 is the flexible version (KIP-482).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/topics"
)

func init() {
	register(kmsg.IncrementalAlterConfigs, 0, 1, (*Server).handleIncrementalAlterConfigs)
}

func (s *Server) handleIncrementalAlterConfigs(r *request) (reply, error) {
	req := r.kreq.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	type resourceKey struct {
		typ  kmsg.ConfigResourceType
		name string
	}
	count := map[resourceKey]int{}
	for _, rr := range req.Resources {
		count[resourceKey{rr.ResourceType, rr.ResourceName}]++
	}
	for _, rr := range req.Resources {
		res := kmsg.NewIncrementalAlterConfigsResponseResource()
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
			code, msg = s.checkAlterRequest(rr.ResourceType, rr.ResourceName, names, func(i int) bool {
				return rr.Configs[i].Value == nil && rr.Configs[i].Op != kmsg.IncrementalAlterConfigOpDelete
			})
		}
		if code == 0 && rr.ResourceType == kmsg.ConfigResourceTypeTopic {
			ops := make([]topics.ConfigOp, len(rr.Configs))
			for i, c := range rr.Configs {
				ops[i] = topics.ConfigOp{Name: c.Name, Op: topics.ConfigOpType(c.Op), Value: c.Value}
			}
			if err := s.topics.AlterTopicConfigs(rr.ResourceName, ops, req.ValidateOnly); err != nil {
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
