package kafkaproto

// CreateAcls: v0-3
//
// Behavior:
//   - Stores each binding durably (one synced batch for the request) and
//     applies it to every later check (KIP-11). Creating a binding that
//     exists succeeds and changes nothing.
//   - Needs ALTER on the cluster, else every creation is
//     CLUSTER_AUTHORIZATION_FAILED. Without an authorizer every creation
//     is SECURITY_DISABLED.
//   - A binding Kafka would refuse (UNKNOWN or ANY elements, a principal
//     not "User:name", an empty host, a cluster resource not named
//     kafka-cluster) is INVALID_REQUEST with a message saying which field.
//     DELEGATION_TOKEN and USER resources are refused the same way: this
//     broker has no delegation tokens.
//
// Version notes:
//   - v0 bindings are LITERAL (KIP-290 added the pattern type in v1); v2
//     is flexible; v3 adds the USER resource type (KIP-554).

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
)

func init() { register(kmsg.CreateACLs, 0, 3, (*Server).handleCreateAcls) }

func (s *Server) handleCreateAcls(r *request) (reply, error) {
	req := r.kreq.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	if len(req.Creations) > s.cfg.MaxPartitionsPerRequest {
		return reply{}, errors.New("create ACLs request has too many creations")
	}
	a := s.cfg.Authorizer
	fixed, msg := s.aclChangeRefusal(r, "creating ACLs")
	resp.Results = make([]kmsg.CreateACLsResponseResult, len(req.Creations))
	for i := range resp.Results {
		resp.Results[i] = kmsg.NewCreateACLsResponseResult()
		if fixed != 0 {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = fixed, kmsg.StringPtr(msg)
		}
	}
	if fixed != 0 {
		return reply{resp: resp}, nil
	}
	bs := make([]auth.Binding, len(req.Creations))
	for i, c := range req.Creations {
		bs[i] = auth.Binding{
			ResourceType: auth.ResourceType(c.ResourceType), ResourceName: c.ResourceName,
			PatternType: auth.PatternType(c.ResourcePatternType), Principal: c.Principal, Host: c.Host,
			Operation: auth.Operation(c.Operation), Permission: auth.Permission(c.PermissionType),
		}
		if req.Version == 0 {
			bs[i].PatternType = auth.PatternLiteral
		}
	}
	// The batch is synced: write it on the writer goroutine, in order.
	finish := func() {
		errs, err := a.Create(bs)
		for i := range resp.Results {
			switch {
			case err != nil:
				resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = errorCode(err), errorMessage(err)
			case errs[i] != nil:
				resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.InvalidRequest.Code, errorMessage(errs[i])
			}
		}
		if err == nil {
			r.c.log.Info().Str("principal", r.c.principal).Int("bindings", len(bs)).Msg("ACLs created")
		}
	}
	return reply{resp: resp, finish: finish}, nil
}
