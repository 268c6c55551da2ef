package kafkaproto

// DescribeUserScramCredentials: v0
//
// Behavior:
//   - Lists each user's SCRAM mechanisms and iteration counts (KIP-554),
//     never salts or keys. No users named (null) means every user; an
//     empty list means none.
//   - A named user without credentials: RESOURCE_NOT_FOUND; a user named
//     twice: DUPLICATE_RESOURCE, both per user, as Kafka answers.
//   - Kafka requires DESCRIBE on CLUSTER; there is no authorizer yet, so
//     any authenticated client may ask.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
)

func init() {
	register(kmsg.DescribeUserSCRAMCredentials, 0, 0, (*Server).handleDescribeUserScramCredentials)
}

func (s *Server) handleDescribeUserScramCredentials(r *request) (reply, error) {
	req := r.kreq.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	store := s.cfg.SASL.Credentials
	result := func(uc auth.UserCredentials) kmsg.DescribeUserSCRAMCredentialsResponseResult {
		res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		res.User = uc.User
		for _, m := range auth.Mechanisms {
			if it, ok := uc.Mechanisms[m]; ok {
				ci := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
				ci.Mechanism, ci.Iterations = int8(m), int32(it)
				res.CredentialInfos = append(res.CredentialInfos, ci)
			}
		}
		return res
	}
	if !r.allowedCluster(auth.OpDescribe) {
		// Kafka's getErrorResponse: the top-level error and one result
		// per named user, carrying the error and no name. (Kafka 4.2 throws
		// a NullPointerException for a null user list and never answers;
		// we answer the top-level error.)
		msg := kmsg.StringPtr("Authorization failed: describing SCRAM credentials needs DESCRIBE on the cluster")
		resp.ErrorCode, resp.ErrorMessage = kerr.ClusterAuthorizationFailed.Code, msg
		for range min(len(req.Users), s.cfg.MaxPartitionsPerRequest) {
			res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
			res.ErrorCode, res.ErrorMessage = kerr.ClusterAuthorizationFailed.Code, msg
			resp.Results = append(resp.Results, res)
		}
		return reply{resp: resp}, nil
	}
	if req.Users == nil {
		if store != nil {
			for _, uc := range store.Describe(nil) {
				resp.Results = append(resp.Results, result(uc))
			}
		}
		return reply{resp: resp}, nil
	}
	if len(req.Users) > s.cfg.MaxPartitionsPerRequest {
		return reply{}, errTooManyUsers(len(req.Users), s.cfg.MaxPartitionsPerRequest)
	}
	count := map[string]int{}
	for _, u := range req.Users {
		count[u.Name]++
	}
	for _, u := range req.Users {
		switch {
		case count[u.Name] > 1:
			res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
			res.User = u.Name
			res.ErrorCode = kerr.DuplicateResource.Code
			res.ErrorMessage = kmsg.StringPtr("Cannot describe SCRAM credentials for the same user twice in a single request")
			resp.Results = append(resp.Results, res)
			continue
		case store != nil:
			if found := store.Describe([]string{u.Name}); len(found) == 1 {
				resp.Results = append(resp.Results, result(found[0]))
				continue
			}
		}
		res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		res.User = u.Name
		res.ErrorCode = kerr.ResourceNotFound.Code
		res.ErrorMessage = kmsg.StringPtr("Attempt to describe nonexistent user")
		resp.Results = append(resp.Results, res)
	}
	return reply{resp: resp}, nil
}
