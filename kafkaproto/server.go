// Package kafkaproto serves the Kafka wire protocol: the TCP listener,
// framing, per-connection request pipelining with in-order responses, and
// one file per API (NN_api_name.go). Domain logic lives in topics/ and the
// other domain packages; this package translates between them and kmsg.
package kafkaproto

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/vibemq/broker/auth"
	"github.com/vibemq/broker/groups"
	"github.com/vibemq/broker/internal/loglimit"
	"github.com/vibemq/broker/queues"
	"github.com/vibemq/broker/topics"
	"github.com/vibemq/broker/txns"
)

// Config configures a Server. Zero values take the documented defaults.
type Config struct {
	Logger zerolog.Logger
	// NodeID is this broker's node ID.
	NodeID int32
	// Rack is reported in Metadata; empty means none.
	Rack string
	// AdvertisedAddr is the host:port clients of Serve's listener (a
	// PLAINTEXT listener) are told to connect to; it may be empty when
	// only ServeListener is used, whose Listener carries its own.
	AdvertisedAddr string
	// SASL configures authentication on SASL_PLAINTEXT and SASL_SSL
	// listeners (sasl.go).
	SASL SASLConfig
	// Authorizer decides every request's operations from the ACLs
	// (authz.go); nil (the default) allows everything, as Kafka without
	// authorizer.class.name, and the ACL APIs answer SECURITY_DISABLED.
	Authorizer *auth.Authorizer
	// Quotas holds the client quotas (DescribeClientQuotas,
	// AlterClientQuotas) and enforces them (quotas.go); nil answers the
	// quota APIs with an error and enforces nothing.
	Quotas *auth.Quotas
	// ClusterID is reported in Metadata and DescribeCluster.
	ClusterID string
	// MaxRequestBytes bounds one request frame (Kafka socket.request.max.bytes); default 100 MiB.
	MaxRequestBytes int32
	// MaxInflightRequests bounds the pipelined requests of one connection
	// whose responses are not yet written; default 64.
	MaxInflightRequests int
	// MaxConnections bounds concurrent client connections; default 10000.
	MaxConnections int
	// MaxConnectionsPerIP bounds the concurrent connections from one IP
	// address (Kafka max.connections.per.ip); default 1000. Refused
	// connections are closed at once, counted and logged (rate-limited).
	MaxConnectionsPerIP int
	// MaxConnectionsPerIPOverrides replaces MaxConnectionsPerIP for the
	// addresses it names (Kafka max.connections.per.ip.overrides).
	MaxConnectionsPerIPOverrides map[netip.Addr]int
	// QueuedMaxRequestBytes bounds the bytes of all requests being read or
	// waiting for their replies, broker-wide (Kafka
	// queued.max.request.bytes); default max(512 MiB, MaxRequestBytes).
	// NewServer refuses a value below MaxRequestBytes: a frame of
	// MaxRequestBytes must always be able to get its memory.
	QueuedMaxRequestBytes int64
	// ConnectionsMaxIdle closes a connection that has no request in
	// progress and no reply outstanding for this long (Kafka
	// connections.max.idle.ms), and one whose peer reads none of its replies
	// for this long; default 10 minutes.
	ConnectionsMaxIdle time.Duration
	// RequestReadTimeout closes a connection whose frame is not complete
	// this long after its first byte, not counting time spent waiting for
	// request memory; default 30 seconds.
	RequestReadTimeout time.Duration
	// MaxPartitionsPerRequest bounds the topic-partitions one request may
	// name; default 100000.
	MaxPartitionsPerRequest int
	// Registerer receives the server's metrics; nil means unregistered.
	Registerer prometheus.Registerer
	// Groups is the consumer group coordinator; nil answers the group APIs
	// with COORDINATOR_NOT_AVAILABLE.
	Groups *groups.Coordinator
	// Txns is the transaction coordinator; nil answers the transaction
	// APIs with COORDINATOR_NOT_AVAILABLE and refuses transactional IDs.
	Txns *txns.Coordinator
	// CrossBrokerTxns is set in a cluster whose transaction coordinator
	// sends markers to other brokers (txns.Config.Markers): a transaction
	// may then hold partitions led elsewhere and of replicated topics, and
	// a partition leader accepts a transactional batch of a transaction
	// coordinated elsewhere (cluster.go). Unset, a transaction may only
	// hold partitions its coordinator leads.
	CrossBrokerTxns bool
	// Queues is the native queue engine: a Produce into a queue's topic
	// appends queue messages through it (queues.Engine.AppendProduced);
	// nil refuses Produce into every owned topic, queues' included.
	Queues *queues.Engine
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Cluster is the cluster's metadata when the broker is one of a
	// cluster (cluster.go); nil (the default) is a single node, which
	// leads every partition and coordinates every group.
	Cluster Cluster
}

func (c *Config) setDefaults() {
	if c.MaxRequestBytes <= 0 {
		c.MaxRequestBytes = 100 << 20
	}
	if c.MaxInflightRequests <= 0 {
		c.MaxInflightRequests = 64
	}
	if c.MaxConnections <= 0 {
		c.MaxConnections = 10000
	}
	if c.MaxConnectionsPerIP <= 0 {
		c.MaxConnectionsPerIP = 1000
	}
	if c.QueuedMaxRequestBytes <= 0 {
		c.QueuedMaxRequestBytes = max(512<<20, int64(c.MaxRequestBytes))
	}
	if c.ConnectionsMaxIdle <= 0 {
		c.ConnectionsMaxIdle = 10 * time.Minute
	}
	if c.RequestReadTimeout <= 0 {
		c.RequestReadTimeout = 30 * time.Second
	}
	if c.MaxPartitionsPerRequest <= 0 {
		c.MaxPartitionsPerRequest = 100000
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.ClusterID == "" {
		c.ClusterID = "broker-cluster"
	}
}

// Server is the Kafka protocol front end of the broker.
type Server struct {
	cfg    Config
	log    zerolog.Logger
	topics *topics.Manager

	// plaintext is the listener Serve serves (from AdvertisedAddr).
	plaintext *Listener
	// authFailures slows repeated SASL failures from one address.
	authFailures *auth.FailureDelay
	// saslServed: some listener requires SASL, so anonymous clients (of a
	// PLAINTEXT listener beside it) may not change credentials.
	saslServed atomic.Bool

	sessions *fetchSessions
	metrics  *metrics
	memory   *requestMemory
	logLimit loglimit.Limiter

	closing chan struct{} // closed by Shutdown: long polls return early

	mu struct {
		sync.Mutex
		listeners map[net.Listener]struct{}
		conns     map[*conn]struct{}
		shutdown  bool
		// perIP counts open connections by remote address (Unmap'ped).
		perIP map[netip.Addr]int
	}
	wg sync.WaitGroup // every goroutine the server starts
}

// NewServer builds a Server over the topic manager.
func NewServer(cfg Config, tm *topics.Manager) (*Server, error) {
	cfg.setDefaults()
	if cfg.QueuedMaxRequestBytes < int64(cfg.MaxRequestBytes) {
		return nil, fmt.Errorf("kafkaproto: the request memory budget (%d bytes) is smaller than the largest request (%d bytes), which could then never be read; raise the budget or lower the largest request size", cfg.QueuedMaxRequestBytes, cfg.MaxRequestBytes)
	}
	var plaintext *Listener
	if cfg.AdvertisedAddr != "" {
		plaintext = &Listener{Name: string(Plaintext), Protocol: Plaintext, AdvertisedAddr: cfg.AdvertisedAddr}
		if err := plaintext.validate(); err != nil {
			return nil, err
		}
	}
	s := &Server{
		cfg:          cfg,
		log:          cfg.Logger.With().Str("component", "kafka").Logger(),
		topics:       tm,
		plaintext:    plaintext,
		authFailures: cfg.SASL.failureDelay(),
		closing:      make(chan struct{}),
	}
	s.sessions = newFetchSessions(1000)
	s.memory = newRequestMemory(cfg.QueuedMaxRequestBytes)
	s.metrics = newMetrics(cfg.Registerer, s.memory)
	s.mu.perIP = map[netip.Addr]int{}
	s.mu.listeners = map[net.Listener]struct{}{}
	s.mu.conns = map[*conn]struct{}{}
	return s, nil
}

// ErrServerClosed is returned by Serve after Shutdown.
var ErrServerClosed = errors.New("kafkaproto: server closed")

// Serve accepts connections on ln as a PLAINTEXT listener advertised at
// Config.AdvertisedAddr, until Shutdown. It always returns a non-nil error.
func (s *Server) Serve(ln net.Listener) error {
	if s.plaintext == nil {
		_ = ln.Close()
		return errors.New("kafkaproto: Serve needs Config.AdvertisedAddr; use ServeListener")
	}
	return s.serve(ln, s.plaintext)
}

func (s *Server) serve(ln net.Listener, l *Listener) error {
	if l.TLS != nil {
		ln = tls.NewListener(ln, l.TLS)
	}
	s.mu.Lock()
	if s.mu.shutdown {
		s.mu.Unlock()
		_ = ln.Close()
		return ErrServerClosed
	}
	s.mu.listeners[ln] = struct{}{}
	s.mu.Unlock()
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			down := s.mu.shutdown
			s.mu.Unlock()
			if down {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		s.startConn(nc, l)
	}
}

// remoteIP is the address connections are counted by: the peer's IP, with
// IPv4-mapped IPv6 addresses unmapped.
func remoteIP(nc net.Conn) netip.Addr {
	if ta, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		return ta.AddrPort().Addr().Unmap()
	}
	return netip.Addr{} // not TCP (tests): all such connections share one count
}

// startConn admits nc, or refuses it when the broker or its address has
// too many connections.
func (s *Server) startConn(nc net.Conn, l *Listener) {
	ip := remoteIP(nc)
	s.mu.Lock()
	if s.mu.shutdown {
		s.mu.Unlock()
		_ = nc.Close()
		return
	}
	refused := ""
	switch {
	case len(s.mu.conns) >= s.cfg.MaxConnections:
		refused = "max_connections"
	case s.mu.perIP[ip] >= s.maxConnectionsFrom(ip):
		refused = "max_connections_per_ip"
	}
	if refused != "" {
		s.mu.Unlock()
		_ = nc.Close()
		s.metrics.connectionsRefused.WithLabelValues(refused).Inc()
		s.warnLimited("refused_"+refused, func(e *zerolog.Event) {
			e.Str("remote", nc.RemoteAddr().String()).Str("reason", refused).
				Int("max_connections", s.cfg.MaxConnections).Int("max_connections_per_ip", s.maxConnectionsFrom(ip)).
				Msg("connection refused: too many connections")
		})
		return
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
		_ = tc.SetKeepAlive(true)
	}
	c := newConn(s, nc, ip, l)
	s.mu.conns[c] = struct{}{}
	s.mu.perIP[ip]++
	s.mu.Unlock()
	s.metrics.connections.Inc()
	s.goTracked(c.readLoop)
	s.goTracked(func() {
		c.writeLoop()
		s.mu.Lock()
		delete(s.mu.conns, c)
		if s.mu.perIP[c.ip]--; s.mu.perIP[c.ip] <= 0 {
			delete(s.mu.perIP, c.ip)
		}
		s.mu.Unlock()
		s.metrics.connections.Dec()
	})
}

// maxConnectionsFrom is the connection limit of one address: its override,
// else max-connections-per-ip.
func (s *Server) maxConnectionsFrom(ip netip.Addr) int {
	if n, ok := s.cfg.MaxConnectionsPerIPOverrides[ip]; ok {
		return n
	}
	return s.cfg.MaxConnectionsPerIP
}

// warnLimited logs a warning of the given kind at most once per
// loglimit.Interval, reporting how many were suppressed since the last one
// (nats-server RateLimitWarnf): a flood of refused or stalled connections
// must not flood the log.
func (s *Server) warnLimited(kind string, msg func(e *zerolog.Event)) {
	ok, suppressed := s.logLimit.Allow(kind, time.Now())
	if !ok {
		return
	}
	e := s.log.Warn()
	if suppressed > 0 {
		e = e.Int("suppressed_since_last", suppressed)
	}
	msg(e)
}

// goTracked starts a goroutine that Shutdown waits for.
func (s *Server) goTracked(f func()) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
}

// Shutdown stops accepting connections, stops reading new requests, lets
// in-flight requests finish and write their responses (long polls return
// early), then closes every connection. When ctx ends first, connections
// are closed at once.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.mu.shutdown {
		s.mu.Unlock()
		return nil
	}
	s.mu.shutdown = true
	for ln := range s.mu.listeners {
		_ = ln.Close()
	}
	for c := range s.mu.conns {
		c.stopReading()
	}
	s.mu.Unlock()
	close(s.closing)

	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		for c := range s.mu.conns {
			_ = c.nc.Close()
		}
		s.mu.Unlock()
		<-done
		return ctx.Err()
	}
}

func (s *Server) now() time.Time { return s.cfg.Now() }
