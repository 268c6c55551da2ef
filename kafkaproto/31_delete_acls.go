package kafkaproto

// DeleteAcls: v0-3
//
// Behavior:
//   - Deletes the bindings each filter selects (the DescribeAcls filter
//     semantics, ANY and MATCH included) in one synced batch and answers,
//     per filter, the bindings it removed (a binding two filters select is
//     listed under both, as Kafka does).
//   - Needs ALTER on the cluster, else every filter is
//     CLUSTER_AUTHORIZATION_FAILED. Without an authorizer:
//     SECURITY_DISABLED. A filter with UNKNOWN elements is
//     INVALID_REQUEST.
//
// Version notes:
//   - v0 filters are LITERAL; v1 adds pattern types (KIP-290); v2 is
//     flexible; v3 adds the USER resource type (KIP-554).

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
)

func init() { register(kmsg.DeleteACLs, 0, 3, (*Server).handleDeleteAcls) }

func (s *Server) handleDeleteAcls(r *request) (reply, error) {
	req := r.kreq.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	if len(req.Filters) > s.cfg.MaxPartitionsPerRequest {
		return reply{}, errors.New("delete ACLs request has too many filters")
	}
	a := s.cfg.Authorizer
	fixed, msg := s.aclChangeRefusal(r, "deleting ACLs")
	resp.Results = make([]kmsg.DeleteACLsResponseResult, len(req.Filters))
	for i := range resp.Results {
		resp.Results[i] = kmsg.NewDeleteACLsResponseResult()
		if fixed != 0 {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = fixed, kmsg.StringPtr(msg)
		}
	}
	if fixed != 0 {
		return reply{resp: resp}, nil
	}
	var filters []auth.Filter
	var idx []int // filters[k] answers resp.Results[idx[k]]
	for i, rf := range req.Filters {
		f := auth.Filter{
			ResourceType: auth.ResourceType(rf.ResourceType), ResourceName: rf.ResourceName,
			PatternType: auth.PatternType(rf.ResourcePatternType), Principal: rf.Principal, Host: rf.Host,
			Operation: auth.Operation(rf.Operation), Permission: auth.Permission(rf.PermissionType),
		}
		if req.Version == 0 {
			f.PatternType = auth.PatternLiteral
		}
		if err := auth.ValidateFilter(f); err != nil {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.InvalidRequest.Code, errorMessage(err)
			continue
		}
		filters = append(filters, f)
		idx = append(idx, i)
	}
	finish := func() {
		deleted, err := a.Delete(filters)
		for k, i := range idx {
			res := &resp.Results[i]
			if err != nil {
				res.ErrorCode, res.ErrorMessage = errorCode(err), errorMessage(err)
				continue
			}
			for _, b := range deleted[k] {
				m := kmsg.NewDeleteACLsResponseResultMatchingACL()
				m.ResourceType, m.ResourceName = kmsg.ACLResourceType(b.ResourceType), b.ResourceName
				m.ResourcePatternType = kmsg.ACLResourcePatternType(b.PatternType)
				m.Principal, m.Host = b.Principal, b.Host
				m.Operation, m.PermissionType = kmsg.ACLOperation(b.Operation), kmsg.ACLPermissionType(b.Permission)
				res.MatchingACLs = append(res.MatchingACLs, m)
			}
		}
		if err == nil {
			n := 0
			for _, d := range deleted {
				n += len(d)
			}
			r.c.log.Info().Str("principal", r.c.principal).Int("bindings", n).Msg("ACLs deleted")
		}
	}
	return reply{resp: resp, finish: finish}, nil
}
