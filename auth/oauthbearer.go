package auth

import (
	"bytes"
	"strings"
	"time"
)

// MechanismOAuthBearer is KIP-255's SASL mechanism (RFC 7628).
const MechanismOAuthBearer = "OAUTHBEARER"

// OAuthBearerSession is the server side of OAUTHBEARER: one client message
// (RFC 7628 section 3.1: a GS2 header, then key=value pairs separated by
// 0x01, "auth=Bearer <JWT>" among them), checked by a JWTValidator at the
// time now gives.
//
// A rejected token ends the exchange at once with the failure (the broker
// answers SASL_AUTHENTICATION_FAILED). RFC 7628 and Kafka's
// OAuthBearerSaslServer first send an error challenge that the client
// acknowledges with 0x01; every client then fails the same way.
type OAuthBearerSession struct {
	validator *JWTValidator
	now       func() time.Time
	user      string
	expires   time.Time
	done      bool
}

// NewOAuthBearerSession starts an OAUTHBEARER exchange.
func NewOAuthBearerSession(v *JWTValidator, now func() time.Time) *OAuthBearerSession {
	return &OAuthBearerSession{validator: v, now: now}
}

// User is the token's principal once it was accepted.
func (s *OAuthBearerSession) User() string { return s.user }

// Expires is the accepted token's exp: the session ends then (KIP-368).
func (s *OAuthBearerSession) Expires() time.Time { return s.expires }

// Step checks the client's one message.
func (s *OAuthBearerSession) Step(token []byte) ([]byte, bool, error) {
	if s.done {
		return nil, false, failed("the OAUTHBEARER exchange has already ended")
	}
	s.done = true
	authzid, bearer, err := parseOAuthBearer(token)
	if err != nil {
		return nil, false, err
	}
	t, err := s.validator.Validate(bearer, s.now())
	if err != nil {
		return nil, false, err
	}
	if authzid != "" && authzid != t.User {
		return nil, false, failed("the authorization id differs from the token's principal")
	}
	s.user, s.expires = t.User, t.Expires
	return nil, true, nil
}

// parseOAuthBearer reads "n,a=authzid,\x01auth=Bearer token\x01...\x01".
func parseOAuthBearer(msg []byte) (authzid, token string, err error) {
	gs2, rest, ok := bytes.Cut(msg, []byte{1})
	if !ok || !bytes.HasSuffix(rest, []byte{1, 1}) && !bytes.Equal(rest, []byte{1}) {
		return "", "", failed("the OAUTHBEARER message is not a GS2 header and 0x01-separated key=value pairs")
	}
	parts := strings.Split(string(gs2), ",")
	if len(parts) != 3 || (parts[0] != "n" && parts[0] != "y") || parts[2] != "" {
		return "", "", failed("the OAUTHBEARER GS2 header is not n,[a=authzid],")
	}
	if parts[1] != "" {
		if !strings.HasPrefix(parts[1], "a=") {
			return "", "", failed("the OAUTHBEARER GS2 header's authzid is not a=name")
		}
		authzid = parts[1][2:]
	}
	for _, kv := range strings.Split(string(rest), "\x01") {
		k, v, _ := strings.Cut(kv, "=")
		if k != "auth" {
			continue
		}
		scheme, tok, ok := strings.Cut(v, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
			return "", "", failed("the OAUTHBEARER auth value is not \"Bearer <token>\"")
		}
		return authzid, strings.TrimSpace(tok), nil
	}
	return "", "", failed("the OAUTHBEARER message has no auth=Bearer <token>")
}
