// Package httpapi is the broker's HTTP listener: health and readiness
// probes, Prometheus metrics, and (added by later work) the native JSON API
// for queues, dead-letter queues and events. Handlers register with
// Server.Handle before Start. Every error response is JSON
// {"code": "...", "message": "..."}.
package httpapi

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	stdlog "log"
	"net"
	"net/http"
	"path"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/vibemq/broker/internal/metrics"

	"github.com/vibemq/broker/internal/loglimit"
)

// Defaults of the Config timeouts and limits.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = 30 * time.Second
	DefaultWriteTimeout      = 30 * time.Second
	DefaultIdleTimeout       = 2 * time.Minute
	DefaultMaxHeaderBytes    = 64 << 10
)

// Config configures a Server. Zero durations and sizes take the defaults.
type Config struct {
	// Addr is the host:port to listen on; port 0 picks a free port.
	Addr string
	// TLS, when set, serves HTTPS (the broker's ssl-* files, http-tls).
	TLS *tls.Config
	// Logger receives server errors and, at debug level, one line per
	// request.
	Logger zerolog.Logger
	// Registry is served on GET /metrics and receives the server's own
	// request metrics. The caller registers the Go and process collectors.
	// Nil disables /metrics.
	Registry *prometheus.Registry
	// Ready reports whether the broker can take traffic; GET /readyz
	// answers 503 with its error. Nil means always ready.
	Ready func() error

	// ReadHeaderTimeout bounds reading the request headers (default 10s).
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading the whole request (default 30s).
	ReadTimeout time.Duration
	// WriteTimeout bounds writing the response (default 30s): an ordinary
	// response from the end of its request headers, a long poll's answer
	// after its wait, and each write of an SSE tail (event, heartbeat), so
	// that a client that stops reading is disconnected.
	WriteTimeout time.Duration
	// IdleTimeout closes idle keep-alive connections (default 2m).
	IdleTimeout time.Duration
	// MaxHeaderBytes caps the request header size (default 64KiB).
	MaxHeaderBytes int

	// MaxConnections caps the open connections (default 10000), and
	// MaxConnectionsPerIP those from one IP address (default 1000);
	// further connections are closed at accept.
	MaxConnections      int
	MaxConnectionsPerIP int
	// MaxStreams caps the SSE tails and long polls open at once (default
	// 1000); further ones are answered 503 too_many_streams.
	MaxStreams int
	// MaxInflightBodyBytes is the budget for request bodies being read or
	// handled, all connections together (default 256MiB); a request whose
	// body would exceed it is answered 503 body_memory_exhausted. It is
	// raised to the largest body a route accepts.
	MaxInflightBodyBytes int64

	// Auth is HTTP authentication (auth.go); the zero value serves every
	// route to anyone, as before issue 12.
	Auth AuthConfig
}

func (c *Config) applyDefaults() {
	if c.ReadHeaderTimeout <= 0 {
		c.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if c.ReadTimeout <= 0 {
		c.ReadTimeout = DefaultReadTimeout
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.MaxHeaderBytes <= 0 {
		c.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if c.MaxConnections <= 0 {
		c.MaxConnections = DefaultMaxConnections
	}
	if c.MaxConnectionsPerIP <= 0 {
		c.MaxConnectionsPerIP = DefaultMaxConnectionsPerIP
	}
	if c.MaxStreams <= 0 {
		c.MaxStreams = DefaultMaxStreams
	}
	if c.MaxInflightBodyBytes <= 0 {
		c.MaxInflightBodyBytes = DefaultMaxInflightBodyBytes
	}
}

// Server is the HTTP listener. Create it with New, add routes with Handle,
// then Start; Shutdown stops it.
type Server struct {
	cfg     Config
	log     zerolog.Logger
	mux     *http.ServeMux
	httpSrv *http.Server
	metrics *requestMetrics // nil without a Registry
	limits  *limitMetrics   // never nil (limits.go)
	auth    *authState      // never nil (auth.go)

	logLimit loglimit.Limiter
	// maxBodyBytes is the largest body a route accepts (noteBodyLimit);
	// set before Start, read-only after.
	maxBodyBytes int64
	// bodies is the request body budget, streams the count of SSE tails
	// and long polls; their capacities are set before Start.
	bodies  counter
	streams counter

	// shuttingDown makes /readyz fail once Shutdown begins.
	shuttingDown atomic.Bool
	// stopping is closed when Shutdown begins: tails end and long polls
	// answer with what they have (shutdown.go).
	stopping chan struct{}
	stopOnce sync.Once
	// handlers counts the running handlers; Shutdown returns only once
	// none runs.
	handlers inflight
	// tails are the running SSE tails, which stop cuts off.
	tails struct {
		sync.Mutex
		set     map[*sseWriter]struct{}
		stopped bool
	}

	mu struct {
		sync.Mutex
		started  bool
		listener net.Listener
		// served is closed when the Serve goroutine returns.
		served chan struct{}
	}
}

// New returns a server with the health, readiness and metrics routes.
func New(cfg Config) *Server {
	cfg.applyDefaults()
	s := &Server{
		cfg:      cfg,
		log:      cfg.Logger,
		mux:      http.NewServeMux(),
		stopping: make(chan struct{}),
	}
	s.httpSrv = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
		ErrorLog:          stdlog.New(logWriter{s.log}, "", 0),
		ConnContext:       connContext,
	}
	if cfg.Registry != nil {
		s.metrics = newRequestMetrics(cfg.Registry)
	}
	s.limits = newLimitMetrics(cfg.Registry)
	var reg prometheus.Registerer
	if cfg.Registry != nil {
		reg = cfg.Registry
	}
	s.auth = newAuthState(&s.cfg.Auth, reg)
	s.maxBodyBytes = smallBodyLimit
	s.bodies.capacity = max(cfg.MaxInflightBodyBytes, s.maxBodyBytes)
	s.streams.capacity = int64(cfg.MaxStreams)
	s.registerHealthRoutes()
	s.registerAuthRoutes()
	return s
}

// Handle registers h for pattern, a Go 1.22 ServeMux pattern such as
// "POST /v1/queues/{queue}/messages". It panics after Start, and on a
// pattern that conflicts with another, like http.ServeMux.Handle.
func (s *Server) Handle(pattern string, h http.Handler) {
	s.mu.Lock()
	started := s.mu.started
	s.mu.Unlock()
	if started {
		panic(fmt.Sprintf("httpapi: Handle(%q) called after Start", pattern))
	}
	s.mux.Handle(pattern, s.authorized(pattern, h))
}

// Start listens on Config.Addr and serves in a goroutine. A listen error
// is returned here; Start may be called once.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.started {
		return errors.New("httpapi: Start called twice")
	}
	if s.cfg.Addr == "" {
		return errors.New("httpapi: no listen address; set Config.Addr, e.g. localhost:8080")
	}
	listener, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("httpapi: %w", err) // names the address
	}
	s.mu.started = true
	s.mu.listener = listener
	s.limits.bodyMemoryLimit.Set(float64(s.bodies.capacity))
	var limited net.Listener = newLimitListener(listener, s)
	if s.cfg.TLS != nil {
		limited = tls.NewListener(limited, s.cfg.TLS)
	}
	s.mu.served = make(chan struct{})
	served := s.mu.served
	go func() {
		defer close(served)
		if err := s.httpSrv.Serve(limited); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error().Err(err).Str("addr", listener.Addr().String()).Msg("HTTP listener failed")
		}
	}()
	s.log.Info().Str("addr", listener.Addr().String()).Msg("HTTP listener started")
	return nil
}

// Addr returns the address the server listens on, or nil before Start.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.listener == nil {
		return nil
	}
	return s.mu.listener.Addr()
}

// Shutdown stops accepting connections, fails /readyz, ends the SSE tails
// and long polls at once (a tail blocked in a write loses its
// connection), and waits for the requests in flight until ctx is done;
// then it closes the remaining connections and returns ctx's error.
// Either way it returns only once every handler has returned, so the
// caller may then close what the handlers use (the store). A handler that
// ignores its closed connection (blocked on a lock, a disk) keeps
// Shutdown waiting: bound the wait outside if needed. It is safe to call
// before Start and more than once.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shuttingDown.Store(true)
	s.stop()
	s.mu.Lock()
	started, served := s.mu.started, s.mu.served
	s.mu.Unlock()
	if !started {
		return nil
	}
	err := s.httpSrv.Shutdown(ctx)
	if err != nil {
		_ = s.httpSrv.Close()
	}
	<-served
	// Close does not wait for the handlers of the connections it closed.
	s.handlers.wait()
	if err != nil {
		return fmt.Errorf("httpapi: shutdown: %w", err)
	}
	return nil
}

// ServeHTTP routes r. Unmatched paths and methods get JSON 404 and 405
// errors; a panicking handler gets a JSON 500.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.handlers.add()
	defer s.handlers.done() // the last deferred call: after the recovery
	start := time.Now()
	sw := &statusWriter{ResponseWriter: w}
	_, pattern := s.mux.Handler(r)
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.Error().Str("method", r.Method).Str("path", r.URL.Path).Str("panic", fmt.Sprint(v)).
				Bytes("stack", debug.Stack()).Msg("HTTP handler panicked")
			if !sw.wroteHeader {
				writeError(sw, newNativeError("internal", "internal error; see the broker log"))
			}
		}
		route := pattern
		if route == "" {
			route = "unmatched"
		}
		elapsed := time.Since(start)
		if s.metrics != nil {
			s.metrics.observe(route, sw.status(), elapsed)
		}
		s.log.Debug().Str("method", r.Method).Str("path", r.URL.Path).Str("route", route).
			Int("status", sw.status()).Dur("duration", elapsed).Msg("HTTP request")
	}()
	if r.Method != http.MethodGet && r.Method != http.MethodHead && !isCleanPath(r.URL.EscapedPath()) {
		// The mux would answer with a 307 to the cleaned path, which
		// clients follow with the same method: DELETE
		// /v1/stores/s/consumers/.. would delete the store s.
		pattern = ""
		writeError(sw, newNativeError("not_found", "%s", "no route for "+r.URL.Path+
			": the path has an empty, . or .. segment (escape a name . or .. as %2E or %2E%2E)"))
		return
	}
	authed, ok := s.authenticate(sw, r, pattern)
	if !ok {
		return
	}
	r = authed
	if pattern == "" {
		s.serveUnmatched(sw, r)
		return
	}
	release, ok := s.reserveBody(sw, r)
	if !ok {
		return
	}
	defer release()
	s.mux.ServeHTTP(sw, r)
}

// isCleanPath reports whether the mux serves p without redirecting to a
// cleaned form: no empty, "." or ".." segment (a trailing slash is kept).
func isCleanPath(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	c := path.Clean(p)
	return c == p || (c != "/" && c+"/" == p)
}

// serveUnmatched answers a request no pattern matched. The mux's own
// answer (404, 405 with Allow, or a redirect to a cleaned path) is
// recorded and rewritten as JSON for the error cases.
func (s *Server) serveUnmatched(w http.ResponseWriter, r *http.Request) {
	rec := &recorder{header: make(http.Header)}
	s.mux.ServeHTTP(rec, r)
	switch rec.code {
	case http.StatusNotFound:
		writeError(w, newNativeError("not_found", "no route for %s", r.URL.Path))
	case http.StatusMethodNotAllowed:
		allow := rec.header.Get("Allow")
		w.Header().Set("Allow", allow)
		writeError(w, newNativeError("method_not_allowed",
			"method %s is not allowed on %s; use %s", r.Method, r.URL.Path, strings.ReplaceAll(allow, ", ", " or ")))
	default:
		for k, v := range rec.header {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.code)
		_, _ = w.Write(rec.body)
	}
}

// writeJSON writes v as the JSON body with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		body = []byte(`{"code":"internal","message":"cannot encode the response"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

// statusWriter remembers the status written through it. Unwrap lets
// http.ResponseController reach the connection (flush, deadlines).
type statusWriter struct {
	http.ResponseWriter
	code        int
	wroteHeader bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wroteHeader {
		w.code = code
		w.wroteHeader = true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) status() int {
	if !w.wroteHeader {
		return http.StatusOK
	}
	return w.code
}

// recorder captures the small responses of the mux's fallback handlers.
type recorder struct {
	header http.Header
	code   int
	body   []byte
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	r.body = append(r.body, p...)
	return len(p), nil
}

// requestMetrics counts requests by route pattern (bounded cardinality).
type requestMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newRequestMetrics(reg *prometheus.Registry) *requestMetrics {
	return &requestMetrics{
		requests: metrics.RegisterOrExisting(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "broker_http_requests_total",
			Help: "HTTP requests served, by route pattern and status code.",
		}, []string{"route", "code"})),
		duration: metrics.RegisterOrExisting(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "broker_http_request_duration_seconds",
			Help:    "Time to serve HTTP requests, by route pattern.",
			Buckets: prometheus.DefBuckets,
		}, []string{"route"})),
	}
}

func (m *requestMetrics) observe(route string, status int, elapsed time.Duration) {
	m.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
	m.duration.WithLabelValues(route).Observe(elapsed.Seconds())
}

// logWriter sends net/http's server errors (TLS handshakes, panics it
// recovered itself) to the logger.
type logWriter struct{ log zerolog.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	w.log.Warn().Msg(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
