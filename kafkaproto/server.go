// Package kafkaproto serves the Kafka wire protocol: the TCP listener,
// framing, per-connection request pipelining with in-order responses, and
// one file per API (NN_api_name.go). Domain logic lives in topics/ and the
// other domain packages; this package translates between them and kmsg.
package kafkaproto

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/vibemq/broker/groups"
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
	// AdvertisedAddr is the host:port clients are told to connect to.
	AdvertisedAddr string
	// ClusterID is reported in Metadata and DescribeCluster.
	ClusterID string
	// MaxRequestBytes bounds one request frame (Kafka socket.request.max.bytes); default 100 MiB.
	MaxRequestBytes int32
	// MaxInflightRequests bounds the pipelined requests of one connection
	// whose responses are not yet written; default 64.
	MaxInflightRequests int
	// MaxConnections bounds concurrent client connections; default 10000.
	MaxConnections int
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
	// Now is the clock; nil means time.Now.
	Now func() time.Time
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

	advertisedHost string
	advertisedPort int32

	sessions *fetchSessions
	metrics  *metrics

	closing chan struct{} // closed by Shutdown: long polls return early

	mu struct {
		sync.Mutex
		listeners map[net.Listener]struct{}
		conns     map[*conn]struct{}
		shutdown  bool
	}
	connCount atomic.Int64
	wg        sync.WaitGroup // every goroutine the server starts
}

// NewServer builds a Server over the topic manager.
func NewServer(cfg Config, tm *topics.Manager) (*Server, error) {
	cfg.setDefaults()
	host, portStr, err := net.SplitHostPort(cfg.AdvertisedAddr)
	if err != nil {
		return nil, fmt.Errorf("kafkaproto: advertised address %q is not host:port: %w", cfg.AdvertisedAddr, err)
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("kafkaproto: advertised port %q is not a port number", portStr)
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		return nil, fmt.Errorf("kafkaproto: advertised address %q has no host clients can reach; set the advertised address to a reachable host:port", cfg.AdvertisedAddr)
	}
	s := &Server{
		cfg:            cfg,
		log:            cfg.Logger.With().Str("component", "kafka").Logger(),
		topics:         tm,
		advertisedHost: host,
		advertisedPort: int32(port),
		closing:        make(chan struct{}),
	}
	s.sessions = newFetchSessions(1000)
	s.metrics = newMetrics(cfg.Registerer)
	s.mu.listeners = map[net.Listener]struct{}{}
	s.mu.conns = map[*conn]struct{}{}
	return s, nil
}

// ErrServerClosed is returned by Serve after Shutdown.
var ErrServerClosed = errors.New("kafkaproto: server closed")

// Serve accepts connections on ln until Shutdown. It always returns a non-nil error.
func (s *Server) Serve(ln net.Listener) error {
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
		if int(s.connCount.Load()) >= s.cfg.MaxConnections {
			s.log.Warn().Str("remote", nc.RemoteAddr().String()).Int("max_connections", s.cfg.MaxConnections).Msg("connection refused: too many connections")
			_ = nc.Close()
			continue
		}
		s.startConn(nc)
	}
}

func (s *Server) startConn(nc net.Conn) {
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
		_ = tc.SetKeepAlive(true)
	}
	c := newConn(s, nc)
	s.mu.Lock()
	if s.mu.shutdown {
		s.mu.Unlock()
		_ = nc.Close()
		return
	}
	s.mu.conns[c] = struct{}{}
	s.mu.Unlock()
	s.connCount.Add(1)
	s.metrics.connections.Inc()
	s.goTracked(c.readLoop)
	s.goTracked(func() {
		c.writeLoop()
		s.mu.Lock()
		delete(s.mu.conns, c)
		s.mu.Unlock()
		s.connCount.Add(-1)
		s.metrics.connections.Dec()
	})
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
