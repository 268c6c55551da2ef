package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/rs/zerolog"
)

// startServer starts a server on a free port of 127.0.0.1 and stops it at
// the end of the test. register runs before Start.
func startServer(t *testing.T, cfg Config, register func(s *Server)) (*Server, string) {
	t.Helper()
	cfg.Addr = "127.0.0.1:0"
	s := New(cfg)
	if register != nil {
		register(s)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return s, "http://" + s.Addr().String()
}

type response struct {
	status int
	header http.Header
	body   string
}

func do(t *testing.T, method, url string) response {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: string(body)}
}

// decodeError checks that r is a JSON error with code and returns its message.
func decodeError(t *testing.T, r response, code string) string {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	var e nativeError
	if err := json.Unmarshal([]byte(r.body), &e); err != nil {
		t.Fatalf("body %q is not a JSON error: %v", r.body, err)
	}
	if e.Code != code || e.Message == "" {
		t.Errorf("error %+v, want code %q and a message", e, code)
	}
	return e.Message
}

func TestHealthz(t *testing.T) {
	_, base := startServer(t, Config{}, nil)
	r := do(t, "GET", base+"/healthz")
	if r.status != http.StatusOK || strings.TrimSpace(r.body) != `{"status":"ok"}` {
		t.Errorf("GET /healthz = %d %q", r.status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	if r := do(t, "HEAD", base+"/healthz"); r.status != http.StatusOK {
		t.Errorf("HEAD /healthz = %d", r.status)
	}
}

func TestReadyz(t *testing.T) {
	var isReady atomic.Bool
	_, base := startServer(t, Config{Ready: func() error {
		if !isReady.Load() {
			return errors.New("the store is recovering")
		}
		return nil
	}}, nil)

	r := do(t, "GET", base+"/readyz")
	if r.status != http.StatusServiceUnavailable {
		t.Errorf("not ready: status %d", r.status)
	}
	if msg := decodeError(t, r, "not_ready"); msg != "the store is recovering" {
		t.Errorf("message %q", msg)
	}

	isReady.Store(true)
	r = do(t, "GET", base+"/readyz")
	if r.status != http.StatusOK || strings.TrimSpace(r.body) != `{"status":"ok"}` {
		t.Errorf("ready: %d %q", r.status, r.body)
	}
}

func TestReadyzNilReadyAndShutdown(t *testing.T) {
	s := New(Config{Logger: zerolog.Nop()})
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	if rec.Code != http.StatusOK {
		t.Errorf("nil Ready: status %d", rec.Code)
	}
	if err := s.Shutdown(context.Background()); err != nil { // before Start: no-op
		t.Fatal(err)
	}
	rec = httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "shutting down") {
		t.Errorf("after Shutdown: %d %q", rec.Code, rec.Body.String())
	}
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	produced := prometheus.NewCounter(prometheus.CounterOpts{Name: "broker_test_produced_total", Help: "test"})
	reg.MustRegister(produced)
	produced.Add(3)

	_, base := startServer(t, Config{Registry: reg}, nil)
	do(t, "GET", base+"/healthz")
	do(t, "GET", base+"/nope")
	r := do(t, "GET", base+"/metrics")
	if r.status != http.StatusOK {
		t.Fatalf("GET /metrics = %d", r.status)
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type %q", ct)
	}
	for _, want := range []string{
		"broker_test_produced_total 3",
		"go_goroutines ",
		`broker_http_requests_total{code="200",route="GET /healthz"} 1`,
		`broker_http_requests_total{code="404",route="unmatched"} 1`,
		"broker_http_request_duration_seconds_bucket",
		"promhttp_metric_handler_requests_total",
	} {
		if !strings.Contains(r.body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// TestTwoServersOneRegistry: a second server on the same registry reuses
// the request metrics instead of panicking.
func TestTwoServersOneRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	a := New(Config{Registry: reg})
	b := New(Config{Registry: reg})
	for _, s := range []*Server{a, b} {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		if rec.Code != http.StatusOK {
			t.Errorf("GET /metrics = %d", rec.Code)
		}
	}
}

func TestNoRegistryNoMetrics(t *testing.T) {
	s := New(Config{})
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("GET /metrics without a registry = %d, want 404", rec.Code)
	}
}

func TestNotFoundAndMethodNotAllowed(t *testing.T) {
	_, base := startServer(t, Config{}, nil)

	r := do(t, "GET", base+"/v1/nothing")
	if r.status != http.StatusNotFound {
		t.Errorf("unknown path: %d", r.status)
	}
	if msg := decodeError(t, r, "not_found"); !strings.Contains(msg, "/v1/nothing") {
		t.Errorf("message %q does not name the path", msg)
	}

	r = do(t, "POST", base+"/healthz")
	if r.status != http.StatusMethodNotAllowed {
		t.Errorf("POST /healthz: %d", r.status)
	}
	if allow := r.header.Get("Allow"); !strings.Contains(allow, "GET") {
		t.Errorf("Allow %q", allow)
	}
	if msg := decodeError(t, r, "method_not_allowed"); !strings.Contains(msg, "POST") || !strings.Contains(msg, "GET") {
		t.Errorf("message %q", msg)
	}
}

// TestHandle: routes registered before Start are served with their path
// values; registering after Start is a programmer error.
func TestHandle(t *testing.T) {
	s, base := startServer(t, Config{}, func(s *Server) {
		s.Handle("GET /v1/queues/{queue}", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, map[string]string{"queue": r.PathValue("queue")})
		}))
	})
	r := do(t, "GET", base+"/v1/queues/orders")
	if r.status != http.StatusOK || strings.TrimSpace(r.body) != `{"queue":"orders"}` {
		t.Errorf("GET /v1/queues/orders = %d %q", r.status, r.body)
	}
	if r := do(t, "DELETE", base+"/v1/queues/orders"); r.status != http.StatusMethodNotAllowed {
		t.Errorf("DELETE = %d, want 405", r.status)
	}

	defer func() {
		if recover() == nil {
			t.Error("Handle after Start did not panic")
		}
	}()
	s.Handle("GET /late", http.NotFoundHandler())
}

func TestPanicIsJSON500(t *testing.T) {
	var logs bytes.Buffer
	s := New(Config{Logger: zerolog.New(&logs)})
	s.Handle("GET /boom", http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }))
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("GET", "/boom", nil))
	if rec.Code != http.StatusInternalServerError {
		t.Errorf("status %d", rec.Code)
	}
	decodeError(t, response{status: rec.Code, header: rec.Header(), body: rec.Body.String()}, "internal")
	if !strings.Contains(logs.String(), "boom") {
		t.Errorf("panic not logged: %q", logs.String())
	}
}

func TestStartErrors(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	s := New(Config{Addr: taken.Addr().String()})
	if err := s.Start(); err == nil || !strings.Contains(err.Error(), taken.Addr().String()) {
		t.Errorf("Start on a taken port = %v, want an error naming the address", err)
	}
	if s.Addr() != nil {
		t.Errorf("Addr after a failed Start = %v", s.Addr())
	}
	if err := New(Config{}).Start(); err == nil {
		t.Error("Start without an address succeeded")
	}

	s2, _ := startServer(t, Config{}, nil)
	if err := s2.Start(); err == nil {
		t.Error("second Start succeeded")
	}
}

// TestShutdownWaitsForRequests: Shutdown lets a request in flight finish,
// then the port is closed.
func TestShutdownWaitsForRequests(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	s := New(Config{Addr: "127.0.0.1:0"})
	s.Handle("GET /slow", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		close(entered)
		<-release
		writeJSON(w, http.StatusOK, statusBody{Status: "done"})
	}))
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	base := "http://" + s.Addr().String()

	got := make(chan response, 1)
	go func() {
		resp, err := http.Get(base + "/slow")
		if err != nil {
			got <- response{status: -1, body: err.Error()}
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		got <- response{status: resp.StatusCode, body: string(body)}
	}()
	<-entered

	shutdownDone := make(chan error, 1)
	go func() { shutdownDone <- s.Shutdown(context.Background()) }()
	select {
	case err := <-shutdownDone:
		t.Fatalf("Shutdown returned with a request in flight: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if r := <-got; r.status != http.StatusOK {
		t.Errorf("in-flight request: %d %q", r.status, r.body)
	}
	if err := <-shutdownDone; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if _, err := net.DialTimeout("tcp", s.Addr().String(), time.Second); err == nil {
		t.Error("port still accepts connections after Shutdown")
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Errorf("second Shutdown: %v", err)
	}
}

func TestMaxHeaderBytes(t *testing.T) {
	_, base := startServer(t, Config{MaxHeaderBytes: 1 << 10}, nil)
	req, err := http.NewRequest("GET", base+"/healthz", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Big", strings.Repeat("a", 64<<10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("oversized header: %d, want 431", resp.StatusCode)
	}
}

func TestDefaults(t *testing.T) {
	s := New(Config{})
	if s.httpSrv.ReadHeaderTimeout != DefaultReadHeaderTimeout || s.httpSrv.ReadTimeout != DefaultReadTimeout ||
		s.httpSrv.WriteTimeout != DefaultWriteTimeout || s.httpSrv.IdleTimeout != DefaultIdleTimeout ||
		s.httpSrv.MaxHeaderBytes != DefaultMaxHeaderBytes {
		t.Errorf("defaults not applied: %+v", s.httpSrv)
	}
}
