package kafkaproto

// SaslAuthenticate: v0-v2
//
// Behavior:
//   - Carries one token of the exchange the last SaslHandshake v1 began
//     (KIP-152): PLAIN in one step, SCRAM in two (RFC 5802).
//   - A failure (wrong password, unknown user, a SCRAM message out of order
//     or with a nonce that is not the one the server sent) answers
//     SASL_AUTHENTICATION_FAILED with a message naming no secret, after a
//     delay that grows with the failures from the same address, and closes
//     the connection. Nothing is stored.
//   - Without a handshake first: ILLEGAL_SASL_STATE, connection closed. On a
//     PLAINTEXT or SSL listener: ILLEGAL_SASL_STATE, connection kept.
//
// Version notes:
//   - v1+: session_lifetime_ms is connections-max-reauth (0 when sessions
//     do not expire); the client re-authenticates before it ends (KIP-368).
//   - v2 is flexible.

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
)

func init() { register(kmsg.SASLAuthenticate, 0, 2, (*Server).handleSaslAuthenticate) }

func (s *Server) handleSaslAuthenticate(r *request) (reply, error) {
	req := r.kreq.(*kmsg.SASLAuthenticateRequest)
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	c := r.c
	if !c.listener.Protocol.SASL() {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		msg := "this listener (" + string(c.listener.Protocol) + ") does not use SASL"
		resp.ErrorMessage = &msg
		return reply{resp: resp}, nil
	}
	if c.sasl.session == nil || c.sasl.raw {
		c.log.Warn().Str("listener", c.listener.Name).Msg("closing connection: SaslAuthenticate without a SaslHandshake v1 before it")
		c.sasl.closeAfterReply = true
		resp.ErrorCode = kerr.IllegalSaslState.Code
		msg := "SaslAuthenticate must follow a SaslHandshake v1"
		resp.ErrorMessage = &msg
		return reply{resp: resp}, nil
	}
	token, err := c.step(req.SASLAuthBytes)
	if err != nil {
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		reason := strings.TrimPrefix(err.Error(), auth.ErrAuthenticationFailed.Error()+": ")
		msg := "Authentication failed with SASL mechanism " + c.sasl.mechanism + ": " + reason
		resp.ErrorMessage = &msg
		return reply{resp: resp}, nil
	}
	resp.SASLAuthBytes = token
	if c.sasl.authenticated && c.sasl.session == nil {
		resp.SessionLifetimeMillis = c.sessionLifetimeMillis()
	}
	return reply{resp: resp}, nil
}
