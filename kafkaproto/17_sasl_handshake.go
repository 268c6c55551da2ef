package kafkaproto

// SaslHandshake: v0-v1
//
// Behavior:
//   - On a SASL listener it chooses the mechanism of the exchange that
//     follows (KIP-43). A mechanism that is not enabled answers
//     UNSUPPORTED_SASL_MECHANISM with the enabled ones and closes the
//     connection, as Kafka's SaslServerAuthenticator does.
//   - On an authenticated connection a v1 handshake starts a
//     re-authentication (KIP-368): same mechanism, and the exchange must
//     end with the same principal.
//   - A handshake while an exchange is in progress, a v0 handshake on an
//     authenticated connection, or a re-authentication with another
//     mechanism answers ILLEGAL_SASL_STATE and closes the connection.
//   - On a PLAINTEXT or SSL listener: ILLEGAL_SASL_STATE with no
//     mechanisms listed, the connection stays (Kafka
//     KafkaApis.handleSaslHandshakeRequest).
//   - OAUTHBEARER (KIP-255) is served when SASLConfig.JWT is set.
//
// Version notes:
//   - v0: the tokens that follow are bare length-prefixed frames (no Kafka
//     header); v1: they come in SaslAuthenticate requests.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.SASLHandshake, 0, 1, (*Server).handleSaslHandshake) }

func (s *Server) handleSaslHandshake(r *request) (reply, error) {
	req := r.kreq.(*kmsg.SASLHandshakeRequest)
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	c := r.c
	if !c.listener.Protocol.SASL() {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return reply{resp: resp}, nil
	}
	resp.SupportedMechanisms = append([]string(nil), s.cfg.SASL.Mechanisms...)
	illegal := func(why string) (reply, error) {
		c.log.Warn().Str("listener", c.listener.Name).Str("mechanism", req.Mechanism).Msg("closing connection: " + why)
		c.sasl.closeAfterReply = true
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return reply{resp: resp}, nil
	}
	switch {
	case c.sasl.session != nil:
		return illegal("SaslHandshake while a SASL exchange is in progress")
	case c.sasl.authenticated && req.Version == 0:
		return illegal("SaslHandshake v0 on an authenticated connection (re-authentication needs v1, KIP-368)")
	case c.sasl.authenticated && req.Mechanism != c.sasl.mechanism:
		return illegal("re-authentication must use the mechanism of the first authentication, " + c.sasl.mechanism)
	}
	if !s.mechanismEnabled(req.Mechanism) {
		c.log.Warn().Str("listener", c.listener.Name).Str("mechanism", req.Mechanism).Strs("enabled", s.cfg.SASL.Mechanisms).
			Msg("closing connection: the client asked for a SASL mechanism that is not enabled")
		c.sasl.closeAfterReply = true
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		return reply{resp: resp}, nil
	}
	sess, ok := s.startSASLSession(req.Mechanism)
	if !ok {
		c.sasl.closeAfterReply = true
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		return reply{resp: resp}, nil
	}
	c.sasl.reauth = c.sasl.authenticated
	c.sasl.mechanism = req.Mechanism
	c.sasl.session = sess
	c.sasl.raw = req.Version == 0
	return reply{resp: resp}, nil
}
