package kafkaproto

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/rs/zerolog"
	"github.com/vibemq/broker/auth"
)

// SecurityProtocol is a Kafka listener's security protocol
// (org.apache.kafka.common.security.auth.SecurityProtocol).
type SecurityProtocol string

const (
	Plaintext     SecurityProtocol = "PLAINTEXT"
	SSL           SecurityProtocol = "SSL"
	SASLPlaintext SecurityProtocol = "SASL_PLAINTEXT"
	SASLSSL       SecurityProtocol = "SASL_SSL"
)

// ParseSecurityProtocol parses a protocol name.
func ParseSecurityProtocol(s string) (SecurityProtocol, bool) {
	switch p := SecurityProtocol(s); p {
	case Plaintext, SSL, SASLPlaintext, SASLSSL:
		return p, true
	}
	return "", false
}

// TLS reports whether the protocol runs over TLS.
func (p SecurityProtocol) TLS() bool { return p == SSL || p == SASLSSL }

// SASL reports whether the protocol requires SASL authentication.
func (p SecurityProtocol) SASL() bool { return p == SASLPlaintext || p == SASLSSL }

// Listener is one Kafka listener (Kafka listeners / advertised.listeners):
// its name, its security protocol and the address clients that connect to
// it are told to use in Metadata, FindCoordinator and DescribeCluster.
type Listener struct {
	Name           string
	Protocol       SecurityProtocol
	AdvertisedAddr string // host:port
	// TLS serves SSL and SASL_SSL listeners; it must be nil otherwise.
	// The principal of an SSL client comes from its certificate's subject
	// (PrincipalMapper), or is User:ANONYMOUS without one.
	TLS *tls.Config
	// PrincipalMapper maps an SSL client's certificate subject to a user
	// name; nil means the whole DN.
	PrincipalMapper *auth.PrincipalMapper

	host string
	port int32
}

// validate checks the listener and splits its advertised address.
func (l *Listener) validate() error {
	if _, ok := ParseSecurityProtocol(string(l.Protocol)); !ok {
		return fmt.Errorf("kafkaproto: listener %s has unknown security protocol %q; use PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", l.Name, l.Protocol)
	}
	if l.Protocol.TLS() != (l.TLS != nil) {
		return fmt.Errorf("kafkaproto: listener %s (%s) needs a TLS configuration exactly when its protocol is SSL or SASL_SSL", l.Name, l.Protocol)
	}
	host, port, err := splitAdvertised(l.AdvertisedAddr)
	if err != nil {
		return fmt.Errorf("kafkaproto: listener %s: %w", l.Name, err)
	}
	l.host, l.port = host, port
	return nil
}

func splitAdvertised(addr string) (string, int32, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("advertised address %q is not host:port: %w", addr, err)
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return "", 0, fmt.Errorf("advertised port %q is not a port number", portStr)
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		return "", 0, fmt.Errorf("advertised address %q has no host clients can reach; set the advertised address to a reachable host:port", addr)
	}
	return host, int32(port), nil
}

// ServeListener accepts connections on ln for the listener l until
// Shutdown. It always returns a non-nil error.
func (s *Server) ServeListener(ln net.Listener, l Listener) error {
	if err := l.validate(); err != nil {
		_ = ln.Close()
		return err
	}
	if l.Protocol.SASL() && s.cfg.SASL.Credentials == nil {
		_ = ln.Close()
		return fmt.Errorf("kafkaproto: listener %s is %s but the server has no credential store", l.Name, l.Protocol)
	}
	if l.Protocol.SASL() {
		s.saslServed.Store(true)
	}
	return s.serve(ln, &l)
}

// advertised is the host and port of the listener the connection came in on.
func (c *conn) advertised() (string, int32) { return c.listener.host, c.listener.port }

// errTLSOnPlaintext marks a client that began a TLS handshake on a
// plaintext listener.
var errTLSOnPlaintext = errors.New("a TLS handshake arrived on a plaintext listener")

// looksLikeTLS reports whether a frame's first bytes are a TLS record
// header (handshake content type 0x16, version 3.x): the "size" would be
// hundreds of MiB, so without this check the client would only see the
// size refusal.
func looksLikeTLS(b []byte) bool { return len(b) >= 2 && b[0] == 0x16 && b[1] == 0x03 }

// startTLS runs the TLS handshake of a TLS listener's connection within
// request-read-timeout and takes the principal from a client certificate.
// false means the connection must close (the reason is logged).
func (c *conn) startTLS() bool {
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		return true
	}
	_ = tc.SetDeadline(time.Now().Add(c.s.cfg.RequestReadTimeout))
	err := tc.Handshake()
	_ = tc.SetDeadline(time.Time{})
	if err != nil {
		c.s.metrics.badRequests.Inc()
		c.s.warnLimited("tls_handshake", func(e *zerolog.Event) {
			e.Str("remote", c.nc.RemoteAddr().String()).Str("listener", c.listener.Name).Err(err).
				Msg("closing connection: TLS handshake failed (a plaintext client on a TLS listener, an untrusted or missing client certificate, or no common TLS version)")
		})
		return false
	}
	if c.listener.Protocol == SSL {
		if certs := tc.ConnectionState().PeerCertificates; len(certs) > 0 {
			dn := auth.SubjectDN(certs[0])
			name := dn
			if c.listener.PrincipalMapper != nil {
				if name, err = c.listener.PrincipalMapper.Map(dn); err != nil {
					c.log.Warn().Str("subject", dn).Err(err).Msg("closing connection: the client certificate's subject maps to no principal; fix ssl-principal-mapping-rules")
					return false
				}
			}
			c.principal = auth.UserPrincipal(name)
			c.log.Debug().Str("listener", c.listener.Name).Str("subject", dn).Str("principal", c.principal).Msg("TLS client certificate accepted")
		}
	}
	return true
}
