package kafkaproto

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
)

// SASLConfig configures authentication on SASL listeners.
//
// A SASL listener serves only ApiVersions, SaslHandshake and
// SaslAuthenticate until the client has authenticated; any other request
// closes the connection, as Kafka's SaslServerAuthenticator does. Frames
// before authentication are bounded by auth.MaxTokenBytes (Kafka
// sasl.server.max.receive.size). A failed exchange answers
// SASL_AUTHENTICATION_FAILED after a delay that grows with the failures
// from the same address, then closes the connection.
type SASLConfig struct {
	// Mechanisms are the enabled mechanisms (Kafka
	// sasl.enabled.mechanisms); default PLAIN, SCRAM-SHA-256, SCRAM-SHA-512.
	Mechanisms []string
	// Credentials holds the users; SASL listeners need it.
	Credentials *auth.Store
	// JWT validates the tokens of OAUTHBEARER (KIP-255); nil when the
	// mechanism is not served. A session ends at its token's exp (KIP-368).
	JWT *auth.JWTValidator
	// MaxReauth is the longest a SASL session lasts before the client must
	// re-authenticate on the same connection (KIP-368, Kafka
	// connections.max.reauth.ms); 0 means sessions never expire.
	MaxReauth time.Duration
	// FailureDelay is the delay of the first failed authentication from an
	// address (Kafka connection.failed.authentication.delay.ms); repeated
	// failures within a minute wait n times as long, at most
	// FailureDelayMax. Default 100ms and 5s.
	FailureDelay    time.Duration
	FailureDelayMax time.Duration
}

func (c *SASLConfig) failureDelay() *auth.FailureDelay {
	if len(c.Mechanisms) == 0 {
		c.Mechanisms = []string{auth.MechanismPlain, auth.ScramSHA256.String(), auth.ScramSHA512.String()}
	}
	if c.FailureDelay <= 0 {
		c.FailureDelay = 100 * time.Millisecond
	}
	if c.FailureDelayMax < c.FailureDelay {
		c.FailureDelayMax = max(5*time.Second, c.FailureDelay)
	}
	return &auth.FailureDelay{Step: c.FailureDelay, Max: c.FailureDelayMax, Window: time.Minute, MaxAddresses: 10000}
}

// saslState is a connection's authentication state. Only the reader
// goroutine touches it (handlers run there), so it needs no lock.
type saslState struct {
	authenticated bool
	// mechanism was chosen by the last SaslHandshake; session is the
	// exchange in progress after it.
	mechanism string
	session   auth.Session
	// raw: the handshake was v0, so the tokens come as bare
	// length-prefixed frames without a Kafka header (KIP-43).
	raw bool
	// reauth: this exchange re-authenticates an authenticated connection
	// (KIP-368); it must keep the principal and the mechanism.
	reauth bool
	// expires ends the session (KIP-368); zero means never.
	expires time.Time
	// closeAfterReply: the reader stops once the current reply is queued;
	// the writer writes it, then closes the connection.
	closeAfterReply bool
}

// preAuthAllowed are the APIs a SASL listener serves before authentication.
func preAuthAllowed(key int16) bool {
	switch kmsg.Key(key) {
	case kmsg.ApiVersions, kmsg.SASLHandshake, kmsg.SASLAuthenticate:
		return true
	}
	return false
}

// maxFrameBytes bounds the next frame: until a SASL client has
// authenticated, auth.MaxTokenBytes.
func (c *conn) maxFrameBytes() int32 {
	if c.listener.Protocol.SASL() && !c.sasl.authenticated {
		return min(c.s.cfg.MaxRequestBytes, auth.MaxTokenBytes)
	}
	return c.s.cfg.MaxRequestBytes
}

// minFrameBytes is 8 (a request header) except for raw SASL tokens.
func (c *conn) minFrameBytes() int32 {
	if c.sasl.raw {
		return 1
	}
	return 8
}

// admit decides whether a decoded request may be served on this
// connection; an error closes it.
func (c *conn) admit(r *request) error {
	if !c.listener.Protocol.SASL() || preAuthAllowed(r.key) {
		return nil
	}
	if !c.sasl.authenticated {
		return fmt.Errorf("%s request before SASL authentication completed: a SASL listener serves only ApiVersions, SaslHandshake and SaslAuthenticate until then; configure the client for SASL (security.protocol=%s)", apiName(r.key), c.listener.Protocol)
	}
	if !c.sasl.expires.IsZero() && !c.s.now().Before(c.sasl.expires) {
		return fmt.Errorf("the SASL session expired (connections-max-reauth) and the client did not re-authenticate (KIP-368)")
	}
	return nil
}

// handleRawToken serves one bare SASL token after a v0 SaslHandshake. A
// failure closes the connection without a reply (v0 has no error
// channel); false means stop reading.
func (c *conn) handleRawToken(token []byte) bool {
	reply, err := c.step(token)
	if err != nil {
		return false
	}
	c.beginRequest()
	c.replies <- queued{raw: reply, rawReply: true}
	return true
}

// writeRawToken writes a bare SASL token (v0 handshake) with its length
// prefix, and flushes: the client waits for it before sending more.
func (c *conn) writeRawToken(bw *bufio.Writer, buf []byte, broken *bool, token []byte) []byte {
	buf = binary.BigEndian.AppendUint32(buf[:0], uint32(len(token)))
	buf = append(buf, token...)
	c.s.metrics.bytesOut.Add(float64(len(buf)))
	_ = c.setWriteDeadline()
	if _, err := bw.Write(buf); err != nil {
		c.writeFailed(err, broken)
	} else if err := bw.Flush(); err != nil {
		c.writeFailed(err, broken)
	}
	return buf
}

// step runs one token of the exchange in progress and, when it completes,
// marks the connection authenticated. A failure is logged, slowed and
// returned; the caller answers it and closes.
func (c *conn) step(token []byte) ([]byte, error) {
	sess := c.sasl.session
	if sess == nil {
		return nil, c.authFailed("", fmt.Errorf("%w: SaslAuthenticate before SaslHandshake", auth.ErrAuthenticationFailed))
	}
	reply, done, err := sess.Step(token)
	if err != nil {
		c.sasl.session = nil
		return nil, c.authFailed(sess.User(), err)
	}
	if !done {
		return reply, nil
	}
	c.sasl.session = nil
	c.sasl.raw = false
	principal := auth.UserPrincipal(sess.User())
	if c.sasl.reauth && principal != c.principal {
		return nil, c.authFailed(sess.User(), fmt.Errorf("%w: re-authentication must keep the principal %s", auth.ErrAuthenticationFailed, c.principal))
	}
	c.s.authFailures.Succeeded(c.ip)
	c.sasl.authenticated = true
	c.principal = principal
	c.sasl.expires = time.Time{}
	if c.s.cfg.SASL.MaxReauth > 0 {
		c.sasl.expires = c.s.now().Add(c.s.cfg.SASL.MaxReauth)
	}
	if exp, ok := sess.(interface{ Expires() time.Time }); ok && !exp.Expires().IsZero() {
		// A token's session ends with the token (KIP-368): the client
		// re-authenticates with a fresh one before exp.
		if c.sasl.expires.IsZero() || exp.Expires().Before(c.sasl.expires) {
			c.sasl.expires = exp.Expires()
		}
	}
	c.log.Debug().Str("principal", principal).Str("mechanism", c.sasl.mechanism).Bool("reauthentication", c.sasl.reauth).Msg("SASL authentication succeeded")
	c.sasl.reauth = false
	return reply, nil
}

// sessionLifetimeMillis is SaslAuthenticate v1's session_lifetime_ms.
func (c *conn) sessionLifetimeMillis() int64 {
	if c.sasl.expires.IsZero() {
		return 0
	}
	return max(1, c.sasl.expires.Sub(c.s.now()).Milliseconds())
}

// authFailed logs a failed exchange (address, user, mechanism and reason,
// never a secret), waits the per-address delay and marks the connection to
// close after its reply.
func (c *conn) authFailed(user string, err error) error {
	delay := c.s.authFailures.Failed(c.ip, c.s.now())
	c.s.metrics.authFailures.Inc()
	c.log.Warn().Str("listener", c.listener.Name).Str("mechanism", c.sasl.mechanism).Str("principal", auth.UserPrincipal(user)).
		Str("reason", err.Error()).Dur("delay", delay).Msg("closing connection: SASL authentication failed")
	c.sasl.closeAfterReply = true
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-c.stop:
	}
	if !errors.Is(err, auth.ErrAuthenticationFailed) {
		err = fmt.Errorf("%w: %v", auth.ErrAuthenticationFailed, err)
	}
	return err
}

// startSASLSession begins the server side of mechanism; false when the
// broker cannot serve it.
func (s *Server) startSASLSession(mechanism string) (auth.Session, bool) {
	if mechanism == auth.MechanismOAuthBearer {
		if s.cfg.SASL.JWT == nil {
			return nil, false
		}
		return auth.NewOAuthBearerSession(s.cfg.SASL.JWT, s.now), true
	}
	return auth.StartSession(s.cfg.SASL.Credentials, mechanism)
}

// mechanismEnabled reports whether name is one of the enabled mechanisms.
func (s *Server) mechanismEnabled(name string) bool {
	for _, m := range s.cfg.SASL.Mechanisms {
		if m == name {
			return true
		}
	}
	return false
}
