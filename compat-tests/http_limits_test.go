package compattests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Black-box tests of the HTTP listener's limits (issue 17, the HTTP side):
// SSE tails whose client stops reading are closed by http-write-timeout,
// connections per IP address, SSE tails and long polls (http-max-streams),
// and the broker-wide budget of request bodies in flight
// (http-max-inflight-body-bytes).

// noKeepAlive is an HTTP client that leaves no idle connection behind, for
// tests that count the broker's HTTP connections.
var noKeepAlive = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// metricsText is GET /metrics without keeping the connection.
func metricsText(t *testing.T, b *brokerProc) string {
	t.Helper()
	resp, err := noKeepAlive.Get("http://" + b.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}

// metricValue returns the value of the series named exactly series (name
// and labels) in /metrics, or -1 when it is absent.
func metricValue(t *testing.T, b *brokerProc, series string) float64 {
	t.Helper()
	for _, line := range strings.Split(metricsText(t, b), "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			var v float64
			if _, err := fmt.Sscan(rest, &v); err == nil {
				return v
			}
		}
	}
	return -1
}

// rawHTTP writes a request on a fresh connection to the broker's HTTP
// listener and returns the connection.
func rawHTTP(t *testing.T, b *brokerProc, request string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", b.HTTPAddr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, request); err != nil {
		t.Fatalf("write request: %v", err)
	}
	return c
}

// readAnswer reads one HTTP response from c within limit; its error is
// returned (io.EOF or a reset when the broker closed c unanswered, a
// timeout when it did not answer).
func readAnswer(c net.Conn, limit time.Duration) (status int, header http.Header, body string, err error) {
	_ = c.SetReadDeadline(time.Now().Add(limit))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(raw), err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestHTTPStalledSSETailClosed pins issue 17 (HTTP side): an SSE tail had
// no write deadline, so a client that stopped reading held its stream's
// goroutine and buffers forever. With --http-write-timeout 2s, a tail whose
// client stops reading while 14 MiB of events are appended is closed by the broker within seconds: the write timeout is
// counted in broker_http_stream_write_timeouts_total and logged, and the
// client, reading again, gets the end of the connection (EOF or reset)
// before all the events. A tail that keeps reading stays open and receives
// every event, and one more appended afterwards.
func TestHTTPStalledSSETailClosed(t *testing.T) {
	t.Parallel()
	b := startBroker(t, withArgs("--http-write-timeout", "2s"))
	esMust(t, b, "PUT", "/v1/stores/feed", nil, 201)

	// The stalled tail: a raw connection that reads the answer's headers,
	// then nothing. (Its receive buffer keeps the default size: a tiny one
	// makes the kernel trickle the rest to it by zero-window probes after
	// the broker closed, too slowly to see the end.)
	c, err := net.DialTimeout("tcp", b.HTTPAddr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = io.WriteString(c, "GET /v1/stores/feed/events HTTP/1.1\r\nHost: broker\r\nAccept: text/event-stream\r\n\r\n")
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	stalled := bufio.NewReaderSize(c, 4096)
	resp, err := http.ReadResponse(stalled, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("stalled tail: %v %v", resp, err)
	}

	// The reading tail counts the events it receives.
	req, _ := http.NewRequest("GET", "http://"+b.HTTPAddr()+"/v1/stores/feed/events", nil)
	req.Header.Set("Accept", "text/event-stream")
	reading, err := (&http.Client{}).Do(req)
	if err != nil || reading.StatusCode != 200 {
		t.Fatalf("reading tail: %v %v", reading, err)
	}
	defer reading.Body.Close()
	var received atomic.Int64
	var sawMarker atomic.Bool
	readDone := make(chan error, 1)
	go func() {
		rd := bufio.NewReaderSize(reading.Body, 1<<20)
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				readDone <- err
				return
			}
			if strings.HasPrefix(line, "data: ") {
				received.Add(1)
				if strings.Contains(line, `"marker"`) {
					sawMarker.Store(true)
				}
			}
		}
	}()

	// Rounds of 4 appends of 4 events of 900 KiB (14 MiB, far more than the
	// socket buffers: 4 MiB of send buffer at most by default), each
	// followed by up to 4s (2 x the write timeout) for the broker to give
	// up; another round only if it did not (buffers tuned larger).
	const perAppend = 4
	big := strings.Repeat("x", 900<<10)
	total := 0
	var filled, closed time.Time // after the first 14 MiB; when the broker gave up
	for i := 0; i < 16 && closed.IsZero(); i++ {
		var evs []map[string]any
		for range perAppend {
			evs = append(evs, map[string]any{"type": "big", "data": map[string]any{"i": total, "pad": big}})
			total++
		}
		esMust(t, b, "POST", "/v1/stores/feed/streams/s/events", esAppendBody("any", evs...), 201)
		if i%4 != 3 {
			continue
		}
		if filled.IsZero() {
			filled = time.Now()
		}
		for wait := time.Now().Add(4 * time.Second); time.Now().Before(wait); time.Sleep(100 * time.Millisecond) {
			if metricValue(t, b, "broker_http_stream_write_timeouts_total") >= 1 {
				closed = time.Now()
				break
			}
		}
	}

	// The broker gives up on the stalled tail about 2s after its write
	// blocked.
	if closed.IsZero() {
		t.Fatalf("the stalled SSE tail was not closed after %d MiB of events were appended (--http-write-timeout 2s): no write timeout in /metrics", total*900>>10)
	}
	t.Logf("stalled tail closed within %v of the first 14 MiB appended (%d events in all)", closed.Sub(filled).Round(100*time.Millisecond), total)
	if !strings.Contains(b.Log(), "SSE tail closed") {
		t.Error("the write timeout was not logged")
	}

	// Reading again, the stalled client gets what was in flight, then the
	// end of the connection; not every event.
	_ = c.SetReadDeadline(time.Now().Add(15 * time.Second))
	rest, err := io.ReadAll(resp.Body)
	if isTimeout(err) {
		t.Fatalf("stalled tail still open after the write timeout: read %d bytes, then nothing for 15s", len(rest))
	}
	if n := bytes.Count(rest, []byte("\ndata: ")); n >= total {
		t.Errorf("the stalled tail received all %d events; it should have been cut", n)
	}
	t.Logf("stalled tail: %d bytes after resuming, then %v", len(rest), err)

	// The reading tail got everything and is still open.
	deadline := time.Now().Add(15 * time.Second)
	for received.Load() < int64(total) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if got := received.Load(); got != int64(total) {
		t.Fatalf("the reading tail received %d events, want %d", got, total)
	}
	esMust(t, b, "POST", "/v1/stores/feed/streams/s/events", esAppendBody("any", map[string]any{"type": "marker", "data": "marker"}), 201)
	for !sawMarker.Load() {
		select {
		case err := <-readDone:
			t.Fatalf("the reading tail ended: %v", err)
		default:
		}
		if time.Now().After(deadline.Add(5 * time.Second)) {
			t.Fatal("the reading tail did not receive the event appended after the stalled one was closed")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if v := metricValue(t, b, "broker_http_stream_write_timeouts_total"); v != 1 {
		t.Errorf("broker_http_stream_write_timeouts_total = %v, want 1 (only the stalled tail)", v)
	}
	reading.Body.Close()
	b.Stop()
}

// TestHTTPMaxConnectionsPerIP pins issue 17 (HTTP side): the HTTP listener
// accepted any number of connections. With --http-max-connections-per-ip 3,
// a fourth connection from 127.0.0.1 is closed unanswered, counted in
// broker_http_connections_refused_total and logged; once one of the three
// closes, a new connection is served again.
func TestHTTPMaxConnectionsPerIP(t *testing.T) {
	t.Parallel()
	b := startBroker(t, withArgs("--http-max-connections-per-ip", "3"))
	// The harness's readiness probe may have left a keep-alive connection
	// in the default transport.
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	time.Sleep(300 * time.Millisecond)
	get := "GET /healthz HTTP/1.1\r\nHost: broker\r\n\r\n"
	var conns []net.Conn
	for i := range 3 {
		c := rawHTTP(t, b, get)
		if status, _, _, err := readAnswer(c, 10*time.Second); err != nil || status != 200 {
			t.Fatalf("connection %d: %d %v", i+1, status, err)
		}
		conns = append(conns, c)
	}
	fourth := rawHTTP(t, b, get)
	if status, _, _, err := readAnswer(fourth, 10*time.Second); err == nil {
		t.Fatalf("fourth connection from one address was answered %d; want it closed", status)
	} else if isTimeout(err) {
		t.Fatal("fourth connection from one address neither answered nor closed within 10s; want it closed")
	}
	for i, c := range conns { // the admitted ones still work
		_, _ = io.WriteString(c, get)
		if status, _, _, err := readAnswer(c, 10*time.Second); err != nil || status != 200 {
			t.Fatalf("admitted connection %d after the refusal: %d %v", i+1, status, err)
		}
	}
	conns[0].Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c := rawHTTP(t, b, get)
		status, _, _, err := readAnswer(c, 5*time.Second)
		c.Close()
		if err == nil && status == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no connection served within 10s after one of the three closed: %d %v", status, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	conns[1].Close()
	conns[2].Close()
	time.Sleep(200 * time.Millisecond)
	if v := metricValue(t, b, `broker_http_connections_refused_total{reason="max_connections_per_ip"}`); v < 1 {
		t.Errorf("broker_http_connections_refused_total{reason=\"max_connections_per_ip\"} = %v, want at least 1", v)
	}
	if !strings.Contains(b.Log(), "HTTP connection refused: too many connections") {
		t.Error("the refusal was not logged")
	}
	b.Stop()
}

// TestHTTPMaxStreams pins issue 17 (HTTP side): SSE tails and long polls
// were unbounded. With --http-max-streams 2, while an SSE tail and a queue
// receive long poll wait, a third long poll (a store read with wait_ms) is
// answered at once 503 too_many_streams with Retry-After; a read without
// wait_ms still works; once the tail ends, the long poll is served.
func TestHTTPMaxStreams(t *testing.T) {
	t.Parallel()
	b := startBroker(t, withArgs("--http-max-streams", "2"))
	esMust(t, b, "PUT", "/v1/stores/s", nil, 201)
	qMust(t, b, "PUT", "/v1/queues/q", map[string]any{}, 201)

	req, _ := http.NewRequest("GET", "http://"+b.HTTPAddr()+"/v1/stores/s/events", nil)
	req.Header.Set("Accept", "text/event-stream")
	tail, err := (&http.Client{}).Do(req)
	if err != nil || tail.StatusCode != 200 {
		t.Fatalf("SSE tail: %v %v", tail, err)
	}
	defer tail.Body.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	var pollStatus atomic.Int64
	go func() {
		defer wg.Done()
		resp, err := noKeepAlive.Post("http://"+b.HTTPAddr()+"/v1/queues/q/receive", "application/json",
			strings.NewReader(`{"max_messages": 1, "wait_ms": 20000}`))
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			pollStatus.Store(int64(resp.StatusCode))
		}
	}()
	defer wg.Wait()
	// Until both wait (the gauge is new with the limit: without it, a
	// fixed pause).
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if metricValue(t, b, "broker_http_streams") == 2 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}

	start := time.Now()
	r := esMust(t, b, "GET", "/v1/stores/s/events?wait_ms=5000", nil, 503)
	if code, _ := r.Body["code"].(string); code != "too_many_streams" {
		t.Errorf("third stream: code %q, want too_many_streams: %s", code, r.Raw)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("third stream answered after %v, want at once", d)
	}
	resp, err := noKeepAlive.Get("http://" + b.HTTPAddr() + "/v1/stores/s/events?wait_ms=5000")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Errorf("third stream: %d, Retry-After %q; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	esMust(t, b, "GET", "/v1/stores/s/events", nil, 200) // no wait: not a stream

	tail.Body.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := esCall(b, "GET", "/v1/stores/s/events?wait_ms=200", "", nil)
		if err == nil && r.Status == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("long poll still refused 10s after the SSE tail closed: %+v %v", r, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if v := metricValue(t, b, `broker_http_requests_refused_total{reason="max_streams"}`); v < 1 {
		t.Errorf(`broker_http_requests_refused_total{reason="max_streams"} = %v, want at least 1`, v)
	}
	// End the receive long poll with a message.
	qMust(t, b, "POST", "/v1/queues/q/messages", map[string]any{"messages": []map[string]any{{"body": "x"}}}, 200)
	wg.Wait()
	if s := pollStatus.Load(); s != 200 {
		t.Errorf("the waiting receive ended with %d, want 200", s)
	}
	b.Stop()
}

// TestHTTPBodyBudget pins issue 17 (HTTP side): request bodies in flight
// were bounded only by the number of connections. With
// --http-max-inflight-body-bytes 32MiB, three appends declaring 10 MiB whose
// bodies trickle in hold 30 MiB: ten more declaring 10 MiB are answered at
// once 503 body_memory_exhausted with Retry-After, unread, while a small
// append goes through; once the three end, a real 6 MB append is stored.
func TestHTTPBodyBudget(t *testing.T) {
	t.Parallel()
	b := startBroker(t, withArgs("--http-max-inflight-body-bytes", "32MiB"))
	esMust(t, b, "PUT", "/v1/stores/big", nil, 201)
	large := "POST /v1/stores/big/streams/s/events HTTP/1.1\r\nHost: broker\r\nContent-Type: application/json\r\n" +
		"Content-Length: 10485760\r\n\r\n" + `{"expected_revision": "any", "events": [{"type": "t", "data": "` + strings.Repeat("y", 128<<10)
	// Each sends 128 KiB of its 10 MiB: a body reserves its declared size
	// once its first 64 KiB arrived (headers alone reserve nothing,
	// TestHTTPBodyBudgetIgnoresUnsentBodies).
	var holders []net.Conn
	for range 3 {
		holders = append(holders, rawHTTP(t, b, large))
	}
	// Until the three bodies are reserved (without the budget: a pause).
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if metricValue(t, b, "broker_http_body_memory_bytes") == 3*10485760 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for i, h := range holders {
		if _, _, _, err := readAnswer(h, 100*time.Millisecond); !isTimeout(err) {
			t.Fatalf("holder %d was answered before its body arrived: %v", i, err)
		}
	}
	if v := metricValue(t, b, "broker_http_body_memory_bytes"); v != 3*10485760 {
		t.Errorf("broker_http_body_memory_bytes = %v, want %d (three 10 MiB bodies)", v, 3*10485760)
	}

	var refusedWG sync.WaitGroup
	errs := make(chan string, 10)
	for i := range 10 {
		c := rawHTTP(t, b, large)
		refusedWG.Add(1)
		go func() {
			defer refusedWG.Done()
			status, header, body, err := readAnswer(c, 5*time.Second)
			switch {
			case err != nil && isTimeout(err):
				errs <- fmt.Sprintf("request %d over the budget was not answered within 5s (its body is being read)", i)
			case err != nil:
				errs <- fmt.Sprintf("request %d over the budget: %v", i, err)
			case status != 503 || header.Get("Retry-After") == "" || !strings.Contains(body, `"body_memory_exhausted"`):
				errs <- fmt.Sprintf("request %d over the budget: %d Retry-After %q %s; want 503 body_memory_exhausted", i, status, header.Get("Retry-After"), body)
			}
		}()
	}
	refusedWG.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	esMust(t, b, "POST", "/v1/stores/big/streams/small/events", esAppendBody("any", map[string]any{"type": "t", "data": 1}), 201)

	for _, h := range holders {
		h.Close()
	}
	deadline := time.Now().Add(10 * time.Second)
	for metricValue(t, b, "broker_http_body_memory_bytes") != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the closed holders' body memory was not given back within 10s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	var evs []map[string]any
	for range 6 {
		evs = append(evs, map[string]any{"type": "t", "data": strings.Repeat("z", 1000000)})
	}
	body, _ := json.Marshal(esAppendBody("any", evs...))
	r, err := esCall(b, "POST", "/v1/stores/big/streams/large/events", "application/json", body)
	if err != nil || r.Status != 201 {
		t.Fatalf("a %d-byte append after the holders ended: %d %v %.300s", len(body), r.Status, err, r.Raw)
	}
	if v := metricValue(t, b, `broker_http_requests_refused_total{reason="body_memory"}`); v != 10 {
		t.Errorf(`broker_http_requests_refused_total{reason="body_memory"} = %v, want 10`, v)
	}
	b.Stop()
}

// TestHTTPShutdownWithTails pins a crash at shutdown (seen in CI at the end
// of TestHTTPStalledSSETailClosed: "HTTP shutdown: context deadline
// exceeded" 15s after SIGTERM, then "closing the store: leaked
// iterators"). A tail behind by more than one page (4 MiB) re-read the
// same batch forever (events ReadAll ignored its byte bound), ignoring
// shutdown; a tail blocked in a write to a client that reads nothing held
// the shutdown for the write timeout; and past the grace the broker closed
// the store under the handlers still running. Now a lagging tail gets
// every event, and SIGTERM ends both tails at once: the broker exits
// within the grace, closing the store cleanly.
func TestHTTPShutdownWithTails(t *testing.T) {
	t.Parallel()
	b := startBroker(t, withArgs("--http-write-timeout", "10m"))
	esMust(t, b, "PUT", "/v1/stores/feed", nil, 201)
	big := strings.Repeat("x", 900<<10)
	const total = 16 // 14 MiB: far more than the socket buffers
	for i := 0; i < total; i += 4 {
		var evs []map[string]any
		for j := range 4 {
			evs = append(evs, map[string]any{"type": "big", "data": map[string]any{"i": i + j, "pad": big}})
		}
		esMust(t, b, "POST", "/v1/stores/feed/streams/s/events", esAppendBody("any", evs...), 201)
	}

	// The stalled tail: reads the answer's headers, then nothing.
	c, err := net.DialTimeout("tcp", b.HTTPAddr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = io.WriteString(c, "GET /v1/stores/feed/events?from=first HTTP/1.1\r\nHost: broker\r\nAccept: text/event-stream\r\n\r\n")
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("stalled tail: %v %v", resp, err)
	}

	// The lagging tail starts at the first of the 16 events.
	req, _ := http.NewRequest("GET", "http://"+b.HTTPAddr()+"/v1/stores/feed/events?from=first", nil)
	req.Header.Set("Accept", "text/event-stream")
	reading, err := (&http.Client{}).Do(req)
	if err != nil || reading.StatusCode != 200 {
		t.Fatalf("lagging tail: %v %v", reading, err)
	}
	defer reading.Body.Close()
	got := make(chan int, 1)
	go func() {
		rd := bufio.NewReaderSize(reading.Body, 1<<20)
		n := 0
		for n < total {
			line, err := rd.ReadString('\n')
			if err != nil {
				break
			}
			if strings.HasPrefix(line, "data: ") {
				n++
			}
		}
		got <- n
	}()
	select {
	case n := <-got:
		if n != total {
			t.Fatalf("the lagging tail ended after %d events, want %d", n, total)
		}
	case <-time.After(2 * time.Minute): // a hang detector, not a timing goal
		t.Fatal("the lagging tail did not receive the 16 events in 2 minutes: it is stuck")
	}

	// SIGTERM with both tails open, the stalled one in a write (10m write
	// timeout): the broker ends them at once and closes the store.
	b.Stop()
	log := b.Log()
	for _, bad := range []string{"did not finish in time", "leaked iterators", "store is left open", "closing the store"} {
		if strings.Contains(log, bad) {
			t.Errorf("the broker log says %q at shutdown", bad)
		}
	}
}
