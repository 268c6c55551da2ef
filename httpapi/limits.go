package httpapi

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/vibemq/broker/internal/metrics"
)

// Limits of the HTTP listener (issue 17, the HTTP side; DESIGN.md "HTTP
// connections: limits"): everything a client can make the broker hold is
// bounded: connections (all, and per IP address, refused at accept),
// long-lived requests (SSE tails and long polls, 503 too_many_streams),
// request bodies being read or handled (503 body_memory_exhausted), and
// the time a response write may take (Config.WriteTimeout, per SSE write).

// Defaults of the Config limits.
const (
	DefaultMaxConnections       = 10000
	DefaultMaxConnectionsPerIP  = 1000
	DefaultMaxStreams           = 1000
	DefaultMaxInflightBodyBytes = 256 << 20
	// smallBodyLimit is the body limit of routes that declare none
	// (queue acks, storage admin, ...).
	smallBodyLimit = 1 << 20
)

// limitMetrics are the series of the limits. They exist without a
// Registry too (then nobody scrapes them), so that the code counting has
// no nil checks.
type limitMetrics struct {
	connections        prometheus.Gauge
	connectionsRefused *prometheus.CounterVec
	streams            prometheus.Gauge
	requestsRefused    *prometheus.CounterVec
	bodyMemory         prometheus.Gauge
	bodyMemoryLimit    prometheus.Gauge
	writeTimeouts      prometheus.Counter
}

func newLimitMetrics(reg *prometheus.Registry) *limitMetrics {
	m := &limitMetrics{
		connections: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "broker_http_connections", Help: "Open HTTP connections."}),
		connectionsRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "broker_http_connections_refused_total", Help: "HTTP connections closed at accept, by reason: max_connections (http-max-connections), max_connections_per_ip (http-max-connections-per-ip)."}, []string{"reason"}),
		streams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "broker_http_streams", Help: "Open SSE tails and waiting long polls (bounded by http-max-streams)."}),
		requestsRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "broker_http_requests_refused_total", Help: "HTTP requests answered 503 by a limit, by reason: max_streams (too_many_streams), body_memory (body_memory_exhausted)."}, []string{"reason"}),
		bodyMemory: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "broker_http_body_memory_bytes", Help: "Bytes of HTTP request bodies being read or handled (reserved at their declared size)."}),
		bodyMemoryLimit: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "broker_http_body_memory_limit_bytes", Help: "The HTTP request body budget (http-max-inflight-body-bytes)."}),
		writeTimeouts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "broker_http_stream_write_timeouts_total", Help: "SSE tails ended because a write did not complete within http-write-timeout (the client stopped reading)."}),
	}
	if reg != nil {
		m.connections = metrics.RegisterOrExisting(reg, m.connections)
		m.connectionsRefused = metrics.RegisterOrExisting(reg, m.connectionsRefused)
		m.streams = metrics.RegisterOrExisting(reg, m.streams)
		m.requestsRefused = metrics.RegisterOrExisting(reg, m.requestsRefused)
		m.bodyMemory = metrics.RegisterOrExisting(reg, m.bodyMemory)
		m.bodyMemoryLimit = metrics.RegisterOrExisting(reg, m.bodyMemoryLimit)
		m.writeTimeouts = metrics.RegisterOrExisting(reg, m.writeTimeouts)
	}
	return m
}

// warnLimited logs a warning of the given kind at most once per
// loglimit.Interval, with the number suppressed since the last one.
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

// limitListener refuses connections beyond Config.MaxConnections or
// Config.MaxConnectionsPerIP: they are closed at once, unanswered, counted
// and logged (rate-limited). The count of a connection ends when net/http
// (or a handler that hijacked it) closes it.
type limitListener struct {
	net.Listener
	s *Server

	mu struct {
		sync.Mutex
		open  int
		perIP map[netip.Addr]int
	}
}

func newLimitListener(ln net.Listener, s *Server) *limitListener {
	l := &limitListener{Listener: ln, s: s}
	l.mu.perIP = map[netip.Addr]int{}
	return l
}

// Accept returns the next admitted connection; refused ones are closed
// here and never reach net/http.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if c := l.admit(nc); c != nil {
			return c, nil
		}
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

func (l *limitListener) admit(nc net.Conn) net.Conn {
	cfg := &l.s.cfg
	ip := remoteIP(nc)
	refused := ""
	l.mu.Lock()
	switch {
	case l.mu.open >= cfg.MaxConnections:
		refused = "max_connections"
	case l.mu.perIP[ip] >= cfg.MaxConnectionsPerIP:
		refused = "max_connections_per_ip"
	default:
		l.mu.open++
		l.mu.perIP[ip]++
	}
	l.mu.Unlock()
	m := l.s.limits
	if refused != "" {
		_ = nc.Close()
		m.connectionsRefused.WithLabelValues(refused).Inc()
		l.s.warnLimited("refused_"+refused, func(e *zerolog.Event) {
			e.Str("remote", nc.RemoteAddr().String()).Str("reason", refused).
				Int("max_connections", cfg.MaxConnections).Int("max_connections_per_ip", cfg.MaxConnectionsPerIP).
				Msg("HTTP connection refused: too many connections")
		})
		return nil
	}
	m.connections.Inc()
	return &limitedConn{Conn: nc, release: func() {
		l.mu.Lock()
		l.mu.open--
		if l.mu.perIP[ip]--; l.mu.perIP[ip] <= 0 {
			delete(l.mu.perIP, ip)
		}
		l.mu.Unlock()
		m.connections.Dec()
	}}
}

// limitedConn gives its slot back on the first Close.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// CloseWrite lets net/http half-close the connection before it closes one
// whose request body it did not read (a 413, a 503 of the body budget), so
// that the client reads the answer instead of a reset.
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// counter is a non-blocking semaphore: reserve succeeds only while the
// total stays within capacity.
type counter struct {
	capacity int64
	inUse    atomic.Int64
}

func (c *counter) tryReserve(n int64) bool {
	for {
		cur := c.inUse.Load()
		if cur+n > c.capacity {
			return false
		}
		if c.inUse.CompareAndSwap(cur, cur+n) {
			return true
		}
	}
}

func (c *counter) release(n int64) { c.inUse.Add(-n) }

// noteBodyLimit records the body limit of a route group, so that the body
// budget is never smaller than the largest body a route accepts: a body of
// the largest size always fits once the others are done. Call while
// registering routes (before Start).
func (s *Server) noteBodyLimit(n int64) {
	s.maxBodyBytes = max(s.maxBodyBytes, n)
	s.bodies.capacity = max(s.bodies.capacity, s.maxBodyBytes)
}

// bodyCharge is what a request reserves of the body budget: its declared
// length, or for a body of unknown length (chunked) the largest body any
// route accepts; never more than that, since no route reads more.
func (s *Server) bodyCharge(r *http.Request) int64 {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return 0
	}
	if r.ContentLength < 0 {
		return s.maxBodyBytes
	}
	return min(r.ContentLength, s.maxBodyBytes)
}

// bodyPreReadBytes is how much of a larger body must have arrived before
// it reserves its declared size in the budget (as the Kafka listener
// reserves a frame once its first 64 KiB arrived): headers that declare a
// large body and send nothing reserve nothing, so a few such clients cannot
// lock every honest large body out of the budget.
const bodyPreReadBytes = 64 << 10

// reserveBody reserves r's body in the budget, or answers 503
// body_memory_exhausted (with Retry-After) and returns ok false. A body of
// unknown length is cut at what it reserved. A body larger than
// bodyPreReadBytes reserves once its first bodyPreReadBytes arrived (the
// server's read timeout bounds the wait); a body that ends or fails before
// then costs what was read.
func (s *Server) reserveBody(w http.ResponseWriter, r *http.Request) (release func(), ok bool) {
	charge := s.bodyCharge(r)
	if charge == 0 {
		return func() {}, true
	}
	// net/http decides how to end a connection whose body the handler did
	// not finish by the type of r.Body (its own body type: close it when
	// much is left); a refusal hands it back, or the server would wait to
	// discard the rest of a body the client may never send.
	orig := r.Body
	if r.ContentLength < 0 || r.ContentLength > charge {
		r.Body = http.MaxBytesReader(w, r.Body, charge)
	}
	if charge > bodyPreReadBytes {
		prefix := make([]byte, bodyPreReadBytes)
		n, err := io.ReadFull(r.Body, prefix)
		r.Body = prefixedBody{Reader: io.MultiReader(bytes.NewReader(prefix[:n]), r.Body), Closer: r.Body}
		if err != nil {
			// The body ended (or the client failed) within the prefix:
			// the handler sees the same end or error after the bytes read.
			charge = int64(n)
		}
	}
	if !s.bodies.tryReserve(charge) {
		r.Body = orig
		s.limits.requestsRefused.WithLabelValues("body_memory").Inc()
		s.warnLimited("refused_body_memory", func(e *zerolog.Event) {
			e.Str("remote", r.RemoteAddr).Int64("body_bytes", charge).Int64("max_inflight_body_bytes", s.bodies.capacity).
				Msg("HTTP request refused: the request body budget is used up")
		})
		writeError(w, newNativeError("body_memory_exhausted",
			"the broker is handling %d bytes of request bodies, and this one (%d bytes) would exceed its budget of %d; retry later",
			s.bodies.inUse.Load(), charge, s.bodies.capacity).with("limit", s.bodies.capacity))
		return nil, false
	}
	s.limits.bodyMemory.Add(float64(charge))
	return func() {
		r.Body = orig
		s.bodies.release(charge)
		s.limits.bodyMemory.Sub(float64(charge))
	}, true
}

// prefixedBody is a request body whose first bytes were read ahead.
type prefixedBody struct {
	io.Reader
	io.Closer
}

// acquireStream admits a long-lived request (an SSE tail, a long poll
// that may wait) or answers 503 too_many_streams (with Retry-After) and
// returns ok false. The caller calls release when the request ends.
func (s *Server) acquireStream(w http.ResponseWriter) (release func(), ok bool) {
	if !s.streams.tryReserve(1) {
		s.limits.requestsRefused.WithLabelValues("max_streams").Inc()
		writeError(w, newNativeError("too_many_streams",
			"the broker already serves %d SSE tails and long polls (http-max-streams); retry later, or poll without waiting",
			s.streams.capacity).with("limit", s.streams.capacity))
		return nil, false
	}
	s.limits.streams.Inc()
	return func() {
		s.streams.release(1)
		s.limits.streams.Dec()
	}, true
}

// streamWriteFailed records why a stream's write failed: a missed write
// deadline (the client stopped reading) is counted and logged
// (rate-limited); a closed connection is the client's normal goodbye.
func (s *Server) streamWriteFailed(r *http.Request, err error) {
	var ne net.Error
	if !errors.Is(err, os.ErrDeadlineExceeded) && !(errors.As(err, &ne) && ne.Timeout()) {
		return
	}
	s.limits.writeTimeouts.Inc()
	s.warnLimited("stream_write_timeout", func(e *zerolog.Event) {
		e.Str("remote", r.RemoteAddr).Str("path", r.URL.Path).Dur("write_timeout", s.cfg.WriteTimeout).
			Msg("SSE tail closed: the client read nothing for http-write-timeout")
	})
}
