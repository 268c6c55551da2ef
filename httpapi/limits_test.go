package httpapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// rawGet sends GET path on c and reads the answer; it returns the error
// of the read (io.EOF when the server closed c unanswered).
func rawGet(c net.Conn, path string) (*http.Response, error) {
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return resp, err
}

// TestMaxConnectionsPerIP pins issue 17 (HTTP side): any number of
// connections from one address was accepted. With MaxConnectionsPerIP 2,
// a third connection is closed unanswered and counted; once one of the two
// closes, a new one is served.
func TestMaxConnectionsPerIP(t *testing.T) {
	reg := prometheus.NewRegistry()
	var logs bytes.Buffer
	_, base := startServer(t, Config{Registry: reg, Logger: zerolog.New(&syncWriter{w: &logs}), MaxConnectionsPerIP: 2}, nil)
	addr := strings.TrimPrefix(base, "http://")
	var conns []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := rawGet(c, "/healthz"); err != nil {
			t.Fatalf("admitted connection: %v", err)
		}
		conns = append(conns, c)
	}
	third, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	if resp, err := rawGet(third, "/healthz"); err == nil {
		t.Fatalf("third connection from one address answered %d; want it closed", resp.StatusCode)
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("third connection neither answered nor closed")
	}
	conns[0].Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_, err = rawGet(c, "/healthz")
		c.Close()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no connection served after one of the two closed: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	conns[1].Close()
	time.Sleep(50 * time.Millisecond)
	metrics := do(t, "GET", base+"/metrics").body
	if !strings.Contains(metrics, `broker_http_connections_refused_total{reason="max_connections_per_ip"} `) {
		t.Errorf("/metrics lacks the refusal:\n%s", metrics)
	}
	if !strings.Contains(logs.String(), "HTTP connection refused") {
		t.Errorf("the refusal was not logged: %s", logs.String())
	}
}

// syncWriter serializes writes of the logger, read by the test.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

// TestMaxStreams: with MaxStreams 1, a second long-lived request is
// answered 503 too_many_streams with Retry-After while the first holds its
// slot, and admitted once it ends.
func TestMaxStreams(t *testing.T) {
	s := New(Config{MaxStreams: 1})
	entered, leave := make(chan struct{}), make(chan struct{})
	s.Handle("GET /hold", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		release, ok := s.acquireStream(w)
		if !ok {
			return
		}
		defer release()
		if r.URL.Query().Has("hold") {
			entered <- struct{}{}
			<-leave
		}
	}))
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/hold?hold", nil))
	}()
	<-entered
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("GET", "/hold", nil))
	var e nativeError
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || rec.Code != 503 || e.Code != "too_many_streams" || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("second stream: %d %q %s; want 503 too_many_streams with Retry-After", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	close(leave)
	<-done
	rec = httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("GET", "/hold", nil))
	if rec.Code != 200 {
		t.Fatalf("stream after the first ended: %d %s", rec.Code, rec.Body)
	}
}

// TestBodyBudget pins issue 17 (HTTP side): bodies in flight were bounded
// only by the number of connections. With a budget of 1.5 MiB, a request
// declaring 1 MiB holds its reservation while its handler runs; another of
// 1 MiB is answered 503 body_memory_exhausted unread, a small one goes
// through, and after the first ends the 1 MiB one is served. A chunked
// body reserves the largest body (1 MiB here) and is cut there.
func TestBodyBudget(t *testing.T) {
	s := New(Config{MaxInflightBodyBytes: 3 << 19})
	entered, leave := make(chan struct{}), make(chan struct{})
	s.Handle("POST /hold", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-leave
	}))
	s.Handle("POST /read", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			return
		}
		_, _ = io.WriteString(w, strings.Repeat("x", int(n%7)))
	}))
	post := func(path string, size int, chunked bool) *httptest.ResponseRecorder {
		var body io.Reader = bytes.NewReader(make([]byte, size))
		if chunked {
			body = io.MultiReader(body) // unknown length
		}
		req := httptest.NewRequest("POST", path, body)
		if chunked {
			req.ContentLength = -1
		}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		return rec
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		post("/hold", 1<<20, false)
	}()
	<-entered
	rec := post("/read", 1<<20, false)
	var e nativeError
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || rec.Code != 503 || e.Code != "body_memory_exhausted" || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("body over the budget: %d %q %s; want 503 body_memory_exhausted with Retry-After", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	if rec := post("/read", 100, false); rec.Code != 200 {
		t.Fatalf("small body beside the holder: %d %s", rec.Code, rec.Body)
	}
	close(leave)
	<-done
	if rec := post("/read", 1<<20, false); rec.Code != 200 {
		t.Fatalf("1 MiB body after the holder ended: %d %s", rec.Code, rec.Body)
	}
	if rec := post("/read", 1<<20, true); rec.Code != 200 {
		t.Fatalf("chunked 1 MiB body: %d %s", rec.Code, rec.Body)
	}
	if rec := post("/read", 1<<20+1, true); rec.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("chunked body over the largest body: %d, want it cut (413)", rec.Code)
	}
	if got := s.bodies.inUse.Load(); got != 0 {
		t.Fatalf("%d bytes still reserved after every request ended", got)
	}
}

// TestBodyBudgetIgnoresUnsentBodies pins the lock-up the budget had: a
// request reserved its declared length before any byte arrived, so a few
// clients declaring large bodies and sending nothing made every honest
// large body 503 until their read timeout. Now a body reserves once its
// first 64 KiB arrived.
func TestBodyBudgetIgnoresUnsentBodies(t *testing.T) {
	s := New(Config{MaxInflightBodyBytes: 3 << 19})
	s.Handle("POST /read", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		_, _ = io.WriteString(w, strconv.FormatInt(n, 10))
	}))
	// Three liars: 1 MiB declared each, nothing sent (their bodies block).
	var liars []*io.PipeWriter
	done := make(chan int, 3)
	for range 3 {
		pr, pw := io.Pipe()
		liars = append(liars, pw)
		req := httptest.NewRequest("POST", "/read", pr)
		req.ContentLength = 1 << 20
		go func() {
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, req)
			done <- rec.Code
		}()
	}
	// Let the three reach the budget (before the fix they reserved at once).
	time.Sleep(300 * time.Millisecond)
	if got := s.bodies.inUse.Load(); got != 0 {
		t.Fatalf("liars reserved %d bytes before sending any", got)
	}
	req := httptest.NewRequest("POST", "/read", bytes.NewReader(make([]byte, 1<<20)))
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	if rec.Code != 200 || rec.Body.String() != strconv.Itoa(1<<20) {
		t.Fatalf("an honest 1 MiB body beside three silent ones: %d %s", rec.Code, rec.Body)
	}
	for _, pw := range liars {
		_ = pw.CloseWithError(io.ErrUnexpectedEOF)
	}
	for range 3 {
		<-done
	}
	if got := s.bodies.inUse.Load(); got != 0 {
		t.Fatalf("%d bytes still reserved after every request ended", got)
	}
}
