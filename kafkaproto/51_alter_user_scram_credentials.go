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
	if s.saslServed.Load() && r.c.principal == auth.Anonymous {
		r.c.log.Warn().Str("listener", r.c.listener.Name).Msg("AlterUserScramCredentials refused: an unauthenticated client may not change credentials while SASL is enabled")
		resp.Results = refuseScramAlter(req, "an unauthenticated client may not change SCRAM credentials while a SASL listener is enabled; connect to a SASL listener")
		return reply{resp: resp}, nil
	}
	if !r.allowedCluster(auth.OpAlter) {
		resp.Results = refuseScramAlter(req, "Authorization failed: changing SCRAM credentials needs ALTER on the cluster")
		return reply{resp: resp}, nil
	}
	a := &scramAlter{store: s.cfg.SASL.Credentials, users: map[string]*scramUserResult{}, seen: map[string]bool{}}
	for _, d := range req.Deletions {
		a.delete(d.Name, d.Mechanism)
	}
	for _, up := range req.Upsertions {
		a.upsert(up)
	}
	a.apply(r.c)
	resp.Results = a.results()
	return reply{resp: resp}, nil
}

// refuseScramAlter answers every user of req CLUSTER_AUTHORIZATION_FAILED,
// once each.
func refuseScramAlter(req *kmsg.AlterUserSCRAMCredentialsRequest, msg string) []kmsg.AlterUserSCRAMCredentialsResponseResult {
	var out []kmsg.AlterUserSCRAMCredentialsResponseResult
	seen := map[string]bool{}
	add := func(user string) {
		if seen[user] {
			return
		}
		seen[user] = true
		res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		res.User, res.ErrorCode = user, kerr.ClusterAuthorizationFailed.Code
		res.ErrorMessage = kmsg.StringPtr(msg)
		out = append(out, res)
	}
	for _, d := range req.Deletions {
		add(d.Name)
	}
	for _, u := range req.Upsertions {
		add(u.Name)
	}
	return out
}

// scramUserResult is one user's outcome: its first error, or the changes
// to apply.
type scramUserResult struct {
	code    int16
	message string
	changes []auth.Change
}

// fail keeps the user's first error.
func (u *scramUserResult) fail(code int16, msg string) {
	if u.code == 0 {
		u.code, u.message = code, msg
	}
}

// scramAlter collects an AlterUserScramCredentials request's changes by
// user, in request order; a user with any error changes nothing (Kafka's
// rule).
type scramAlter struct {
	store *auth.Store
	order []string
	users map[string]*scramUserResult
	seen  map[string]bool // user NUL mechanism
}

func (a *scramAlter) get(name string) *scramUserResult {
	u, ok := a.users[name]
	if !ok {
		u = &scramUserResult{}
		a.users[name] = u
		a.order = append(a.order, name)
	}
	return u
}

// check validates a user and mechanism, recording the error on u.
func (a *scramAlter) check(u *scramUserResult, name string, mechanism int8) bool {
	m := auth.Mechanism(mechanism)
	key := name + "\x00" + string(rune(mechanism))
	switch {
	case a.store == nil:
		u.fail(kerr.UnsupportedSaslMechanism.Code, "the broker has no credential store")
	case name == "" || auth.CheckUser(name) != nil:
		u.fail(kerr.UnacceptableCredential.Code, "Username must not be empty nor longer than 256 bytes")
	case m != auth.ScramSHA256 && m != auth.ScramSHA512:
		u.fail(kerr.UnsupportedSaslMechanism.Code, fmt.Sprintf("Unknown SCRAM mechanism %d", mechanism))
	case a.seen[key]:
		u.fail(kerr.DuplicateResource.Code, "A user credential cannot be altered twice in the same request")
	default:
		a.seen[key] = true
		return true
	}
	return false
}

func (a *scramAlter) delete(name string, mechanism int8) {
	u := a.get(name)
	if !a.check(u, name, mechanism) {
		return
	}
	m := auth.Mechanism(mechanism)
	if _, ok := a.store.Lookup(name, m); !ok {
		u.fail(kerr.ResourceNotFound.Code, "Attempt to delete a user credential that does not exist")
		return
	}
	u.changes = append(u.changes, auth.Change{User: name, Mechanism: m, Delete: true})
}

func (a *scramAlter) upsert(up kmsg.AlterUserSCRAMCredentialsRequestUpsertion) {
	u := a.get(up.Name)
	if !a.check(u, up.Name, up.Mechanism) {
		return
	}
	m := auth.Mechanism(up.Mechanism)
	switch {
	case up.Iterations < auth.MinIterations:
		u.fail(kerr.UnacceptableCredential.Code, fmt.Sprintf("Too few iterations: at least %d", auth.MinIterations))
		return
	case up.Iterations > auth.MaxIterations:
		u.fail(kerr.UnacceptableCredential.Code, fmt.Sprintf("Too many iterations: at most %d", auth.MaxIterations))
		return
	}
	cred, err := auth.CredentialFromSaltedPassword(m, up.Salt, int(up.Iterations), up.SaltedPassword)
	if err != nil {
		u.fail(kerr.UnacceptableCredential.Code, err.Error())
		return
	}
	u.changes = append(u.changes, auth.Change{User: up.Name, Mechanism: m, Credential: cred})
}

// apply stores the changes of every user without an error, atomically;
// a failed store fails every user.
func (a *scramAlter) apply(c *conn) {
	var changes []auth.Change
	for _, name := range a.order {
		if u := a.users[name]; u.code == 0 {
			changes = append(changes, u.changes...)
		}
	}
	if len(changes) == 0 {
		return
	}
	if err := a.store.Apply(changes); err != nil {
		code, msg := kerr.UnknownServerError.Code, err.Error()
		if errors.Is(err, auth.ErrNoCredential) {
			code = kerr.ResourceNotFound.Code
		}
		for _, name := range a.order {
			a.users[name].fail(code, msg)
		}
		c.log.Error().Err(err).Msg("storing SCRAM credentials failed")
		return
	}
	for _, ch := range changes {
		c.log.Info().Str("user", ch.User).Str("mechanism", ch.Mechanism.String()).Bool("deleted", ch.Delete).
			Str("by", c.principal).Msg("SCRAM credential changed")
	}
}

func (a *scramAlter) results() []kmsg.AlterUserSCRAMCredentialsResponseResult {
	out := make([]kmsg.AlterUserSCRAMCredentialsResponseResult, 0, len(a.order))
	for _, name := range a.order {
		u := a.users[name]
		res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		res.User = name
		res.ErrorCode = u.code
		if u.code != 0 {
			res.ErrorMessage = kmsg.StringPtr(u.message)
		}
		out = append(out, res)
	}
	return out
}
