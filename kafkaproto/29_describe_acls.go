package kafkaproto

// DescribeAcls: v0-3
//
// Behavior:
//   - Lists the ACL bindings the filter selects (KIP-11; patterns KIP-290:
//     ANY compares names exactly over every pattern type, MATCH selects
//     the bindings that apply to the named resource: literal, the "*"
//     wildcard, and prefixes of it), grouped by resource pattern.
//   - Needs DESCRIBE on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
//   - Without an authorizer: SECURITY_DISABLED, as Kafka without
//     authorizer.class.name.
//   - A filter with an UNKNOWN element is INVALID_REQUEST.
//
// Version notes:
//   - v0 has no pattern type: its filter is LITERAL (KIP-290).
//   - v1 adds pattern types; v2 is flexible; v3 adds the USER resource
//     type (KIP-554), refused here like DELEGATION_TOKEN (no such
//     resources on this broker).

import (
	"cmp"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
)

func init() { register(kmsg.DescribeACLs, 0, 3, (*Server).handleDescribeAcls) }

// securityDisabled is Kafka's message when no authorizer is configured.
const securityDisabled = "No Authorizer is configured; set authorizer-enabled to use ACLs."

func (s *Server) handleDescribeAcls(r *request) (reply, error) {
	req := r.kreq.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	a := s.cfg.Authorizer
	f := auth.Filter{
		ResourceType: auth.ResourceType(req.ResourceType), ResourceName: req.ResourceName,
		PatternType: auth.PatternType(req.ResourcePatternType), Principal: req.Principal, Host: req.Host,
		Operation: auth.Operation(req.Operation), Permission: auth.Permission(req.PermissionType),
	}
	if req.Version == 0 {
		f.PatternType = auth.PatternLiteral
	}
	switch {
	case a == nil:
		resp.ErrorCode, resp.ErrorMessage = kerr.SecurityDisabled.Code, kmsg.StringPtr(securityDisabled)
		return reply{resp: resp}, nil
	case !r.allowedCluster(auth.OpDescribe):
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return reply{resp: resp}, nil
	}
	if err := auth.ValidateFilter(f); err != nil {
		resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, errorMessage(err)
		return reply{resp: resp}, nil
	}
	type pattern struct {
		rt   auth.ResourceType
		name string
		pt   auth.PatternType
	}
	byPattern := map[pattern]*kmsg.DescribeACLsResponseResource{}
	for _, b := range a.Describe(f) {
		k := pattern{b.ResourceType, b.ResourceName, b.PatternType}
		res := byPattern[k]
		if res == nil {
			r := kmsg.NewDescribeACLsResponseResource()
			r.ResourceType, r.ResourceName = kmsg.ACLResourceType(b.ResourceType), b.ResourceName
			r.ResourcePatternType = kmsg.ACLResourcePatternType(b.PatternType)
			res = &r
			byPattern[k] = res
		}
		acl := kmsg.NewDescribeACLsResponseResourceACL()
		acl.Principal, acl.Host = b.Principal, b.Host
		acl.Operation, acl.PermissionType = kmsg.ACLOperation(b.Operation), kmsg.ACLPermissionType(b.Permission)
		res.ACLs = append(res.ACLs, acl)
	}
	for _, res := range byPattern {
		resp.Resources = append(resp.Resources, *res)
	}
	slices.SortFunc(resp.Resources, func(x, y kmsg.DescribeACLsResponseResource) int {
		return cmp.Or(cmp.Compare(x.ResourceType, y.ResourceType), cmp.Compare(x.ResourceName, y.ResourceName), cmp.Compare(x.ResourcePatternType, y.ResourcePatternType))
	})
	return reply{resp: resp}, nil
}
