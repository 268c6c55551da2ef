package kafkaproto

// AlterUserScramCredentials: v0
//
// Behavior:
//   - Upserts and deletes SCRAM credentials (KIP-554). The client sends the
//     salted password; the broker keeps salt, iterations, StoredKey and
//     ServerKey (RFC 5802), never a password.
//   - Checked per user, as Kafka does: an empty name or an iteration count
//     outside 4096-16384 is UNACCEPTABLE_CREDENTIAL, an unknown mechanism
//     UNSUPPORTED_SASL_MECHANISM, a user+mechanism named twice
//     DUPLICATE_RESOURCE, deleting a credential that does not exist
//     RESOURCE_NOT_FOUND. The changes of the users without errors are
//     written in one durable batch; a storage failure fails them all.
//   - Kafka requires ALTER on CLUSTER. There is no authorizer yet: while
//     some listener requires SASL, an unauthenticated client (User:ANONYMOUS,
//     e.g. on a PLAINTEXT listener beside it) gets
//     CLUSTER_AUTHORIZATION_FAILED for every user, so that it cannot mint
//     itself credentials; any authenticated client may change them
//     (DESIGN.md, "Deviations from Apache Kafka").

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
)

func init() {
	register(kmsg.AlterUserSCRAMCredentials, 0, 0, (*Server).handleAlterUserScramCredentials)
}

func errTooManyUsers(n, limit int) error {
	return fmt.Errorf("%w: %d users in one request, more than %d", errFrame, n, limit)
}

func (s *Server) handleAlterUserScramCredentials(r *request) (reply, error) {
	req := r.kreq.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	if n := len(req.Deletions) + len(req.Upsertions); n > s.cfg.MaxPartitionsPerRequest {
		return reply{}, errTooManyUsers(n, s.cfg.MaxPartitionsPerRequest)
	}
	store := s.cfg.SASL.Credentials
	if s.saslServed.Load() && r.c.principal == auth.Anonymous {
		r.c.log.Warn().Str("listener", r.c.listener.Name).Msg("AlterUserScramCredentials refused: an unauthenticated client may not change credentials while SASL is enabled")
		seen := map[string]bool{}
		add := func(user string) {
			if seen[user] {
				return
			}
			seen[user] = true
			res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			res.User, res.ErrorCode = user, kerr.ClusterAuthorizationFailed.Code
			res.ErrorMessage = kmsg.StringPtr("an unauthenticated client may not change SCRAM credentials while a SASL listener is enabled; connect to a SASL listener")
			resp.Results = append(resp.Results, res)
		}
		for _, d := range req.Deletions {
			add(d.Name)
		}
		for _, u := range req.Upsertions {
			add(u.Name)
		}
		return reply{resp: resp}, nil
	}
	type userResult struct {
		code    int16
		message string
		changes []auth.Change
	}
	var order []string
	users := map[string]*userResult{}
	seen := map[string]bool{} // user NUL mechanism
	get := func(name string) *userResult {
		u, ok := users[name]
		if !ok {
			u = &userResult{}
			users[name] = u
			order = append(order, name)
		}
		return u
	}
	fail := func(u *userResult, code int16, msg string) {
		if u.code == 0 {
			u.code, u.message = code, msg
		}
	}
	check := func(u *userResult, name string, mechanism int8) bool {
		m := auth.Mechanism(mechanism)
		switch {
		case store == nil:
			fail(u, kerr.UnsupportedSaslMechanism.Code, "the broker has no credential store")
		case name == "" || auth.CheckUser(name) != nil:
			fail(u, kerr.UnacceptableCredential.Code, "Username must not be empty nor longer than 256 bytes")
		case m != auth.ScramSHA256 && m != auth.ScramSHA512:
			fail(u, kerr.UnsupportedSaslMechanism.Code, fmt.Sprintf("Unknown SCRAM mechanism %d", mechanism))
		case seen[name+"\x00"+string(rune(mechanism))]:
			fail(u, kerr.DuplicateResource.Code, "A user credential cannot be altered twice in the same request")
		default:
			seen[name+"\x00"+string(rune(mechanism))] = true
			return true
		}
		return false
	}
	for _, d := range req.Deletions {
		u := get(d.Name)
		if !check(u, d.Name, d.Mechanism) {
			continue
		}
		m := auth.Mechanism(d.Mechanism)
		if _, ok := store.Lookup(d.Name, m); !ok {
			fail(u, kerr.ResourceNotFound.Code, "Attempt to delete a user credential that does not exist")
			continue
		}
		u.changes = append(u.changes, auth.Change{User: d.Name, Mechanism: m, Delete: true})
	}
	for _, up := range req.Upsertions {
		u := get(up.Name)
		if !check(u, up.Name, up.Mechanism) {
			continue
		}
		m := auth.Mechanism(up.Mechanism)
		switch {
		case up.Iterations < auth.MinIterations:
			fail(u, kerr.UnacceptableCredential.Code, fmt.Sprintf("Too few iterations: at least %d", auth.MinIterations))
			continue
		case up.Iterations > auth.MaxIterations:
			fail(u, kerr.UnacceptableCredential.Code, fmt.Sprintf("Too many iterations: at most %d", auth.MaxIterations))
			continue
		}
		cred, err := auth.CredentialFromSaltedPassword(m, up.Salt, int(up.Iterations), up.SaltedPassword)
		if err != nil {
			fail(u, kerr.UnacceptableCredential.Code, err.Error())
			continue
		}
		u.changes = append(u.changes, auth.Change{User: up.Name, Mechanism: m, Credential: cred})
	}
	var changes []auth.Change
	for _, name := range order {
		if u := users[name]; u.code == 0 {
			changes = append(changes, u.changes...)
		}
	}
	if len(changes) > 0 {
		if err := store.Apply(changes); err != nil {
			code, msg := kerr.UnknownServerError.Code, err.Error()
			if errors.Is(err, auth.ErrNoCredential) {
				code = kerr.ResourceNotFound.Code
			}
			for _, name := range order {
				fail(users[name], code, msg)
			}
			r.c.log.Error().Err(err).Msg("storing SCRAM credentials failed")
		} else {
			for _, ch := range changes {
				r.c.log.Info().Str("user", ch.User).Str("mechanism", ch.Mechanism.String()).Bool("deleted", ch.Delete).
					Str("by", r.c.principal).Msg("SCRAM credential changed")
			}
		}
	}
	for _, name := range order {
		u := users[name]
		res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		res.User = name
		res.ErrorCode = u.code
		if u.code != 0 {
			res.ErrorMessage = kmsg.StringPtr(u.message)
		}
		resp.Results = append(resp.Results, res)
	}
	return reply{resp: resp}, nil
}
