package main

// The http phase: hostile requests against every native route the broker
// lists in /openapi.json (and the health routes): malformed JSON, invalid
// UTF-8, deep nesting, huge Content-Length with a few bytes, bad chunked
// bodies, wrong field types, oversized bodies, path tricks (%2e%2e, double
// slashes, NUL, very long names), wrong methods. Requests are written on
// raw TCP connections so that no client library cleans or fixes them.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const (
	httpQueue  = "tq"
	httpStore  = "ts"
	httpStream = "s"
)

var httpAttackKinds = []string{
	"malformed-json", "invalid-utf8", "deep-nesting", "huge-content-length", "bad-chunked",
	"wrong-types", "oversized-body", "path-trick", "wrong-method", "valid",
}

// httpRoute is one method and path pattern of the native API.
type httpRoute struct {
	method, pattern string
}

var pathParam = regexp.MustCompile(`\{[^}]+\}`)

func runHTTPPhase(ctx context.Context, env *tortureEnv, p *PhaseReport, d time.Duration) error {
	b, err := env.startPhaseBroker(ctx, "http", "")
	if err != nil {
		return err
	}
	p.broker = b
	hc := &http.Client{Timeout: 10 * time.Second}
	base := "http://" + b.httpAddr
	routes, err := nativeRoutes(ctx, hc, base)
	if err != nil {
		return err
	}
	p.count("routes", int64(len(routes)))
	ids := &httpIDs{}
	if err := httpSetup(ctx, hc, base, ids); err != nil {
		return fmt.Errorf("setup: %w", err)
	}

	pid := b.pid()
	idleKiB, _ := procStatusKiB(pid, "VmRSS")
	sampler := startRSSSampler(pid, 50*time.Millisecond)
	stormCtx, stopStorm := context.WithTimeout(ctx, d)
	defer stopStorm()
	var (
		mu        sync.Mutex
		statuses  = map[int]int{}
		bad       []string // 5xx of the broker's own
		perKind   [10]atomic.Int64
		requests  atomic.Int64
		setupErrs atomic.Int64
		setupErr  atomic.Value
	)
	var wg sync.WaitGroup
	// Keep the targets in place: the storm deletes them now and then.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for stormCtx.Err() == nil {
			sleepCtx(stormCtx, 2*time.Second)
			if err := httpSetup(stormCtx, hc, base, ids); err != nil && stormCtx.Err() == nil {
				setupErrs.Add(1)
				setupErr.Store(err.Error())
			}
		}
	}()
	for range env.cfg.httpConns {
		seed := env.rng.Uint64()
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := newRand(seed)
			for n := 0; n < 1_000_000 && stormCtx.Err() == nil; n++ {
				kind := rng.IntN(len(httpAttackKinds))
				if httpAttackKinds[kind] == "oversized-body" && rng.IntN(20) != 0 {
					kind = 0 // 18 MiB bodies: rarely
				}
				route := routes[rng.IntN(len(routes))]
				raw, hold, desc := hostileHTTPRequest(rng, kind, route, b.httpAddr, ids)
				status, body := rawHTTP(b.httpAddr, raw, hold)
				perKind[kind].Add(1)
				requests.Add(1)
				mu.Lock()
				statuses[status]++
				if status >= 500 && status != http.StatusServiceUnavailable && status != http.StatusInsufficientStorage && len(bad) < 20 {
					bad = append(bad, fmt.Sprintf("%d for %s: %.200s", status, desc, body))
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	aliveAfter := b.alive()
	samples, peakKiB, endKiB := sampler.stop()
	hwmKiB, _ := procStatusKiB(pid, "VmHWM")
	peakKiB = max(peakKiB, hwmKiB)
	p.RSS = &RSSReport{Samples: samples, IdleMiB: float64(idleKiB) / 1024, PeakMiB: float64(peakKiB) / 1024, EndMiB: float64(endKiB) / 1024,
		HWMMiB: float64(hwmKiB) / 1024, LimitMiB: float64(env.cfg.rssLimit) / (1 << 20)}
	// After the storm: health, and a queue round trip on a fresh queue.
	st, _, herr := httpJSON(ctx, hc, "GET", base+"/healthz", nil)
	roundTrip := httpRoundTrip(ctx, hc, base)

	for i, k := range httpAttackKinds {
		p.count(k, perKind[i].Load())
	}
	p.count("requests", requests.Load())
	p.count("target re-creation errors", setupErrs.Load())
	if e := setupErr.Load(); e != nil {
		// The storm deletes and changes the targets; a failed re-creation
		// is expected now and then and is no invariant.
		p.note("last target re-creation error: %.300s", e)
	}
	p.Statuses = statuses
	fivexx := 0
	for code, n := range statuses {
		if code >= 500 && code != http.StatusServiceUnavailable && code != http.StatusInsufficientStorage {
			fivexx += n
		}
	}
	p.check("no 5xx of the broker's own (503, 507 allowed)", fivexx == 0, "%d", fivexx)
	for _, s := range bad {
		p.note("5xx: %s", s)
	}
	p.check("broker alive through the storm", aliveAfter && b.alive(), "exit: %v", b.exitErr())
	p.check("peak RSS under --rss-limit", peakKiB*1024 <= env.cfg.rssLimit, "peak %.0f MiB (idle %.0f MiB), limit %.0f MiB",
		p.RSS.PeakMiB, p.RSS.IdleMiB, p.RSS.LimitMiB)
	p.check("GET /healthz after the storm", herr == nil && st == 200, "status %d, %v", st, herr)
	p.check("queue send, receive, ack after the storm", roundTrip == nil, "%v", roundTrip)
	return nil
}

// nativeRoutes reads /openapi.json; the health routes are added.
func nativeRoutes(ctx context.Context, hc *http.Client, base string) ([]httpRoute, error) {
	st, raw, err := httpJSON(ctx, hc, "GET", base+"/openapi.json", nil)
	if err != nil || st != 200 {
		return nil, fmt.Errorf("GET /openapi.json: status %d, %v", st, err)
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("/openapi.json: %w", err)
	}
	routes := []httpRoute{{"GET", "/healthz"}, {"GET", "/readyz"}, {"GET", "/metrics"}, {"GET", "/openapi.json"}}
	for path, ops := range doc.Paths {
		for m := range ops {
			switch m {
			case "get", "put", "post", "patch", "delete", "head":
				routes = append(routes, httpRoute{strings.ToUpper(m), path})
			}
		}
	}
	sort.Slice(routes, func(i, j int) bool {
		return routes[i].pattern+routes[i].method < routes[j].pattern+routes[j].method
	})
	if len(routes) < 10 {
		return nil, fmt.Errorf("/openapi.json lists only %d routes", len(routes))
	}
	return routes, nil
}

// httpIDs are real ids to put into paths.
type httpIDs struct {
	mu        sync.Mutex
	messageID string
	receipt   string
}

// httpSetup (re)creates the queue, store and stream the storm aims at,
// and takes a message id and a receipt.
func httpSetup(ctx context.Context, hc *http.Client, base string, ids *httpIDs) error {
	q := base + "/v1/queues/" + httpQueue
	if st, raw, err := httpJSON(ctx, hc, "PUT", q, map[string]any{"visibility_timeout_ms": 60000}); err != nil || (st != 200 && st != 201 && st != 409) {
		return fmt.Errorf("create queue: %d %v %.200s", st, err, raw)
	}
	if st, raw, err := httpJSON(ctx, hc, "PUT", base+"/v1/stores/"+httpStore, map[string]any{}); err != nil || (st != 200 && st != 201 && st != 409) {
		return fmt.Errorf("create store: %d %v %.200s", st, err, raw)
	}
	ev := map[string]any{"expected_revision": "any", "events": []any{map[string]any{"type": "T", "data": map[string]any{"n": 1}}}}
	if _, _, err := httpJSON(ctx, hc, "POST", base+"/v1/stores/"+httpStore+"/streams/"+httpStream+"/events", ev); err != nil {
		return fmt.Errorf("append: %w", err)
	}
	st, raw, err := httpJSON(ctx, hc, "POST", q+"/messages", map[string]any{"messages": []any{map[string]any{"body": "x"}, map[string]any{"body": "y"}}})
	var sent struct {
		Results []struct {
			ID string `json:"id"`
		} `json:"results"`
	}
	if err != nil || st != 200 || json.Unmarshal(raw, &sent) != nil || len(sent.Results) == 0 {
		return fmt.Errorf("send: %d %v %.200s", st, err, raw)
	}
	st, raw, err = httpJSON(ctx, hc, "POST", q+"/receive", map[string]any{"max_messages": 1})
	var got struct {
		Messages []receivedMessage `json:"messages"`
	}
	if err != nil || st != 200 || json.Unmarshal(raw, &got) != nil {
		return fmt.Errorf("receive: %d %v %.200s", st, err, raw)
	}
	ids.mu.Lock()
	ids.messageID = sent.Results[0].ID
	if len(got.Messages) > 0 {
		ids.receipt = got.Messages[0].Receipt
	}
	ids.mu.Unlock()
	return nil
}

func httpRoundTrip(ctx context.Context, hc *http.Client, base string) error {
	q := base + "/v1/queues/torture-after"
	if st, raw, err := httpJSON(ctx, hc, "PUT", q, map[string]any{}); err != nil || (st != 201 && st != 200) {
		return fmt.Errorf("create: %d %v %.200s", st, err, raw)
	}
	if st, raw, err := httpJSON(ctx, hc, "POST", q+"/messages", map[string]any{"messages": []any{map[string]any{"body": "after"}}}); err != nil || st != 200 {
		return fmt.Errorf("send: %d %v %.200s", st, err, raw)
	}
	st, raw, err := httpJSON(ctx, hc, "POST", q+"/receive", map[string]any{"max_messages": 1, "wait_ms": 1000})
	var got struct {
		Messages []receivedMessage `json:"messages"`
	}
	if err != nil || st != 200 || json.Unmarshal(raw, &got) != nil || len(got.Messages) != 1 {
		return fmt.Errorf("receive: %d %v %.200s", st, err, raw)
	}
	st, raw, err = httpJSON(ctx, hc, "POST", q+"/ack", map[string]any{"receipts": []string{got.Messages[0].Receipt}})
	if err != nil || st != 200 || !strings.Contains(string(raw), `"acked"`) {
		return fmt.Errorf("ack: %d %v %.200s", st, err, raw)
	}
	return nil
}

// fillPath puts names into a route pattern.
func fillPath(rng interface{ IntN(int) int }, pattern string, ids *httpIDs) string {
	ids.mu.Lock()
	messageID, receipt := ids.messageID, ids.receipt
	ids.mu.Unlock()
	return pathParam.ReplaceAllStringFunc(pattern, func(param string) string {
		switch param {
		case "{queue}":
			return httpQueue
		case "{store}":
			return httpStore
		case "{stream}":
			return httpStream
		case "{consumer}":
			return "c"
		case "{id}":
			if rng.IntN(2) == 0 && messageID != "" {
				return messageID
			}
			return "zzz-not-an-id"
		case "{receipt}":
			if receipt != "" {
				return receipt
			}
		}
		return "x"
	})
}

// hostileHTTPRequest builds one raw HTTP/1.1 request of the given kind,
// how long to wait for the answer, and a description for the report.
func hostileHTTPRequest(rng interface {
	IntN(int) int
	Uint32() uint32
}, kind int, route httpRoute, host string, ids *httpIDs) ([]byte, time.Duration, string) {
	method, path := route.method, fillPath(rng, route.pattern, ids)
	if route.pattern == "/v1/admin/backup" && httpAttackKinds[kind] == "valid" {
		kind = 0 // never a real backup: it writes to a directory of the request's choosing
	}
	wait := 15 * time.Second
	headers := "Content-Type: application/json\r\n"
	var body []byte
	bodySet := true
	switch httpAttackKinds[kind] {
	case "malformed-json":
		choices := []string{`{`, `{"messages":[`, `{"a":}`, `nul`, `[1,2`, `"\u12"`, `}{`, `{"max_messages": 1e999}`,
			`{"messages": null}`, `{"messages":[{"body":1}]}`, `{"a":1,"a":2}`, "\x00\x01\x02", `{"body":"` + strings.Repeat("\\", 999) + `"}`, ``}
		body = []byte(choices[rng.IntN(len(choices))])
	case "invalid-utf8":
		body = []byte("{\"messages\":[{\"body\":\"\xff\xfe\xfd\"}],\"events\":[{\"type\":\"\xc0\xaf\",\"data\":\"\xed\xa0\x80\"}],\"x\xff\":1}")
		if rng.IntN(2) == 0 {
			path = strings.Replace(path, httpQueue, "%ff%fe", 1)
		}
	case "deep-nesting":
		depth := 10_000 + rng.IntN(90_000)
		if rng.IntN(2) == 0 {
			body = []byte(strings.Repeat("[", depth) + strings.Repeat("]", depth))
		} else {
			body = []byte(`{"messages":` + strings.Repeat(`{"a":`, depth) + "1" + strings.Repeat("}", depth) + "}")
		}
	case "huge-content-length":
		lengths := []string{"1099511627776", "17825793", "9223372036854775807", "18446744073709551616", "-1", "100000000"}
		req := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: %s\r\n%sContent-Length: %s\r\nConnection: close\r\n\r\n{\"messages\":[",
			method, path, host, headers, lengths[rng.IntN(len(lengths))])
		return []byte(req), time.Duration(300+rng.IntN(1700)) * time.Millisecond, "huge Content-Length " + method + " " + path
	case "bad-chunked":
		chunks := []string{"fffffffffffffff\r\n{}", "zz\r\n{}\r\n0\r\n\r\n", "5\r\n{\"a\":1}\r\n0\r\n\r\n", "-1\r\n", "2\r\n{}\r\n"}
		req := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: %s\r\n%sTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n%s",
			method, path, host, headers, chunks[rng.IntN(len(chunks))])
		return []byte(req), time.Duration(300+rng.IntN(1700)) * time.Millisecond, "bad chunked " + method + " " + path
	case "wrong-types":
		choices := []string{
			`{"max_messages":"ten","wait_ms":-5,"visibility_timeout_ms":1e30,"ack":"x"}`,
			`{"messages":{"body":[]},"atomic":"yes"}`,
			`{"messages":[{"body":"a","delay_ms":-1,"priority":99999999999,"ttl_ms":"x","partition":-7}]}`,
			`{"receipts":[1,2,null,{}]}`,
			`{"events":[{"type":null,"data":"x"}],"expected_revision":"abc"}`,
			`{"visibility_timeout_ms":-1,"max_receives":-2,"dead_letter":7,"partitions":100000}`,
			`{"max_messages":1000000,"wait_ms":3600000}`,
			`{"receipts":["` + strings.Repeat("A", 5000) + `"]}`,
			`[]`, `null`, `"string"`, `12`,
		}
		body = []byte(choices[rng.IntN(len(choices))])
	case "oversized-body":
		body = []byte(`{"messages":[{"body":"` + strings.Repeat("a", 18<<20) + `"}]}`)
	case "path-trick":
		tricks := []func(string) string{
			func(p string) string { return strings.Replace(p, httpQueue, "%2e%2e", 1) },
			func(p string) string { return strings.Replace(p, httpQueue, "..", 1) },
			func(p string) string { return strings.Replace(p, httpQueue, ".", 1) },
			func(p string) string { return strings.Replace(p, "/"+httpQueue, "/", 1) },
			func(p string) string { return strings.Replace(p, httpQueue, "%2F", 1) },
			func(p string) string { return strings.Replace(p, httpQueue, "a%00b", 1) },
			func(p string) string { return strings.Replace(p, httpQueue, strings.Repeat("n", 5000), 1) },
			func(p string) string { return strings.ReplaceAll(p, "/", "//") },
			func(p string) string { return p + "/" },
			func(p string) string { return p + "/../../../admin/storage" },
			func(p string) string { return p + "/%2e%2e/%2e%2e" },
			func(p string) string { return strings.Replace(p, httpStore, "%2e", 1) },
			func(p string) string { return p + "?limit=-1&after=%ff&state=%00&force=maybe" },
			func(p string) string { return "/v1/../v1/queues/" + httpQueue },
		}
		path = tricks[rng.IntN(len(tricks))](path)
		if strings.HasSuffix(path, "/") && rng.IntN(2) == 0 {
			method = "DELETE"
		}
		body = []byte(`{}`)
	case "wrong-method":
		methods := []string{"GET", "PUT", "POST", "PATCH", "DELETE", "HEAD", "OPTIONS", "TRACE", "FOO", "CONNECT"}
		for m := methods[rng.IntN(len(methods))]; ; m = methods[rng.IntN(len(methods))] {
			if m != route.method {
				method = m
				break
			}
		}
		body = []byte(`{}`)
		if method == "GET" || method == "HEAD" {
			bodySet = false
		}
	default: // valid: small well-formed bodies
		choices := []string{`{}`, `{"max_messages":5,"wait_ms":0}`, `{"messages":[{"body":"v"}]}`, `{"receipts":[]}`,
			`{"expected_revision":"any","events":[{"type":"T","data":{}}]}`}
		body = []byte(choices[rng.IntN(len(choices))])
		if method == "GET" || method == "HEAD" || method == "DELETE" {
			bodySet = false
		}
		wait = 25 * time.Second
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n", method, path, host)
	if bodySet {
		b.WriteString(headers)
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(body))
	}
	b.WriteString("\r\n")
	out := []byte(b.String())
	if bodySet {
		out = append(out, body...)
	}
	desc := fmt.Sprintf("%s %s %.80s [%s]", method, trimForReport(path), body, httpAttackKinds[kind])
	return out, wait, desc
}

func trimForReport(s string) string {
	if len(s) > 120 {
		return s[:120] + "..."
	}
	return s
}

// rawHTTP writes req on a new connection and reads the status line and a
// little of the answer within wait. Status 0: no answer.
func rawHTTP(addr string, req []byte, wait time.Duration) (int, string) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return 0, "dial: " + err.Error()
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(wait + 5*time.Second))
	if _, err := c.Write(req); err != nil {
		// The broker may answer and close before reading everything.
		_ = err
	}
	_ = c.SetReadDeadline(time.Now().Add(wait))
	r := bufio.NewReaderSize(c, 4096)
	line, err := r.ReadString('\n')
	if err != nil {
		return 0, ""
	}
	fields := strings.Fields(line)
	if len(fields) < 2 {
		return 0, line
	}
	status, err := strconv.Atoi(fields[1])
	if err != nil {
		return 0, line
	}
	rest := make([]byte, 1024)
	n, _ := r.Read(rest)
	text := string(rest[:n])
	if i := strings.Index(text, "\r\n\r\n"); i >= 0 {
		text = text[i+4:]
	}
	return status, text
}
