package kafkaproto

// DescribeClientQuotas: v0-1
//
// Behavior:
//   - Lists the client quota entities the filter selects with their values
//     (KIP-546, Kafka's ClientQuotasImage.describe): each component names
//     an entity type (user, client-id, ip) and matches an exact name, the
//     type's default entity, or any entity that has the type; strict leaves
//     out entities with types the filter does not name; no component and
//     not strict lists every entity.
//   - A filter naming a type twice, an exact match without a name, a
//     default or any match with one, an unknown match type, or ip with user
//     or client-id is INVALID_REQUEST; an unknown entity type is
//     UNSUPPORTED_VERSION; each with Kafka's message.
//   - Needs DESCRIBE_CONFIGS on the cluster, else
//     CLUSTER_AUTHORIZATION_FAILED (KafkaApis.handleDescribeClientQuotasRequest).
//
// Version notes:
//   - v1 is flexible.

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
)

func init() {
	register(kmsg.DescribeClientQuotas, 0, 1, (*Server).handleDescribeClientQuotas)
}

// noQuotas is the answer of a server built without a quota store.
const noQuotas = "client quotas are not served: the broker has no quota store"

func (s *Server) handleDescribeClientQuotas(r *request) (reply, error) {
	req := r.kreq.(*kmsg.DescribeClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	switch {
	case !r.allowedCluster(auth.OpDescribeConfigs):
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		resp.ErrorMessage = kmsg.StringPtr("Authorization failed: describing client quotas needs DESCRIBE_CONFIGS on the cluster")
		return reply{resp: resp}, nil
	case s.cfg.Quotas == nil:
		resp.ErrorCode, resp.ErrorMessage = kerr.UnknownServerError.Code, kmsg.StringPtr(noQuotas)
		return reply{resp: resp}, nil
	}
	f := auth.QuotaFilter{Strict: req.Strict}
	for _, c := range req.Components {
		f.Components = append(f.Components, auth.QuotaFilterComponent{Type: c.EntityType, Match: auth.QuotaMatch(c.MatchType), Name: c.Match})
	}
	entries, err := s.cfg.Quotas.Describe(f)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
		return reply{resp: resp}, nil
	}
	resp.Entries = make([]kmsg.DescribeClientQuotasResponseEntry, 0, len(entries))
	for _, e := range entries {
		re := kmsg.NewDescribeClientQuotasResponseEntry()
		for _, p := range e.Entity {
			ent := kmsg.NewDescribeClientQuotasResponseEntryEntity()
			ent.Type, ent.Name = p.Type, p.Name
			re.Entity = append(re.Entity, ent)
		}
		keys := make([]string, 0, len(e.Values))
		for k := range e.Values {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v := kmsg.NewDescribeClientQuotasResponseEntryValue()
			v.Key, v.Value = k, e.Values[k]
			re.Values = append(re.Values, v)
		}
		resp.Entries = append(resp.Entries, re)
	}
	return reply{resp: resp}, nil
}
