package compattests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// Black-box tests of the native queue over the broker's HTTP API
// (NATIVE-QUEUE.md §7: F1, F3, F7, F15, F18), against the real binary and
// its real store, with kill -9 where the case needs a crash.

var queueHTTP = &http.Client{Timeout: 30 * time.Second}

type qResp struct {
	Status int
	Body   map[string]any
	Raw    string
}

func qCall(t *testing.T, b *brokerProc, method, path string, body any) qResp {
	t.Helper()
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, "http://"+b.HTTPAddr()+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := queueHTTP.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := qResp{Status: resp.StatusCode, Raw: string(raw)}
	_ = json.Unmarshal(raw, &r.Body)
	return r
}

func qMust(t *testing.T, b *brokerProc, method, path string, body any, status int) qResp {
	t.Helper()
	r := qCall(t, b, method, path, body)
	if r.Status != status {
		t.Fatalf("%s %s: status %d, want %d: %.400s", method, path, r.Status, status, r.Raw)
	}
	return r
}

type qMsg struct {
	ID         string `json:"id"`
	Receipt    string `json:"receipt"`
	Body       string `json:"body"`
	Deliveries int    `json:"deliveries"`
}

func qReceive(t *testing.T, b *brokerProc, queue string, max int, visibilityMs, waitMs int) []qMsg {
	t.Helper()
	req := map[string]any{"max_messages": max, "wait_ms": waitMs}
	if visibilityMs > 0 {
		req["visibility_timeout_ms"] = visibilityMs
	}
	r := qMust(t, b, "POST", "/v1/queues/"+queue+"/receive", req, 200)
	var out struct {
		Messages []qMsg `json:"messages"`
	}
	if err := json.Unmarshal([]byte(r.Raw), &out); err != nil {
		t.Fatal(err)
	}
	return out.Messages
}

func qSend(t *testing.T, b *brokerProc, queue string, bodies ...string) {
	t.Helper()
	for len(bodies) > 0 {
		n := min(len(bodies), 100)
		var msgs []map[string]any
		for _, s := range bodies[:n] {
			msgs = append(msgs, map[string]any{"body": s})
		}
		r := qMust(t, b, "POST", "/v1/queues/"+queue+"/messages", map[string]any{"messages": msgs}, 200)
		if strings.Contains(r.Raw, `"error"`) {
			t.Fatalf("send: %s", r.Raw)
		}
		bodies = bodies[n:]
	}
}

func qItemStatuses(r qResp) []string {
	var out []string
	res, _ := r.Body["results"].([]any)
	for _, x := range res {
		item := x.(map[string]any)
		if e, ok := item["error"].(map[string]any); ok {
			out = append(out, e["code"].(string))
		} else {
			out = append(out, item["status"].(string))
		}
	}
	return out
}

func qStats(t *testing.T, b *brokerProc, queue string) map[string]any {
	t.Helper()
	return qMust(t, b, "GET", "/v1/queues/"+queue+"/stats", nil, 200).Body
}

func numbered(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%04d", prefix, i)
	}
	return out
}

// TestQueueConcurrentReceivers pins F7 over HTTP: 8 receivers compete for
// 600 messages; no message is handed to two receivers while its lease
// lasts (every delivery is the first, every ack succeeds) and every
// message is acked exactly once.
func TestQueueConcurrentReceivers(t *testing.T) {
	b := startBroker(t)
	qMust(t, b, "PUT", "/v1/queues/work", map[string]any{"visibility_timeout_ms": 60000}, 201)
	const n = 600
	var sendWG sync.WaitGroup
	sendWG.Add(1)
	go func() {
		defer sendWG.Done()
		qSend(t, b, "work", numbered("m", n)...)
	}()
	var mu sync.Mutex
	seen := map[string]int{}
	holder := map[string]int{}
	var wg sync.WaitGroup
	errs := make(chan string, 100)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				done := len(seen) == n
				mu.Unlock()
				if done {
					return
				}
				msgs := qReceive(t, b, "work", 1+w%4, 0, 200)
				var receipts []string
				mu.Lock()
				for _, m := range msgs {
					if h, ok := holder[m.ID]; ok {
						errs <- fmt.Sprintf("%s held by receivers %d and %d at once", m.ID, h, w)
					}
					holder[m.ID] = w
					seen[m.Body]++
					if m.Deliveries != 1 {
						errs <- fmt.Sprintf("%s delivered %d times within its lease", m.ID, m.Deliveries)
					}
					receipts = append(receipts, m.Receipt)
				}
				mu.Unlock()
				if len(receipts) == 0 {
					continue
				}
				r := qMust(t, b, "POST", "/v1/queues/work/ack", map[string]any{"receipts": receipts}, 200)
				for _, s := range qItemStatuses(r) {
					if s != "acked" {
						errs <- "ack: " + s
					}
				}
				mu.Lock()
				for _, m := range msgs {
					delete(holder, m.ID)
				}
				mu.Unlock()
			}
		}()
	}
	sendWG.Wait()
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	for body, c := range seen {
		if c != 1 {
			t.Errorf("%s received %d times", body, c)
		}
	}
	if len(seen) != n {
		t.Fatalf("received %d distinct messages, want %d", len(seen), n)
	}
	st := qStats(t, b, "work")
	if st["available"].(float64) != 0 || st["inflight"].(float64) != 0 {
		t.Fatalf("stats after draining: %v", st)
	}
}

// TestQueueKill9BetweenReceiveAndAck pins F1/F3/F18: a broker killed with
// SIGKILL after receives and before their acks loses nothing: leased
// messages stay leased across the crash and come back after the lease with
// delivery 2, stale receipts then get lease_lost, acked messages never
// come back.
func TestQueueKill9BetweenReceiveAndAck(t *testing.T) {
	b := startBroker(t)
	qMust(t, b, "PUT", "/v1/queues/jobs", map[string]any{"visibility_timeout_ms": 2000}, 201)
	qSend(t, b, "jobs", numbered("j", 40)...)
	first := qReceive(t, b, "jobs", 25, 0, 0)
	if len(first) != 25 {
		t.Fatalf("received %d", len(first))
	}
	// Ack five of them before the crash.
	var acked []string
	for _, m := range first[:5] {
		acked = append(acked, m.Receipt)
	}
	qMust(t, b, "POST", "/v1/queues/jobs/ack", map[string]any{"receipts": acked}, 200)
	b.Kill()
	b.Start()
	st := qStats(t, b, "jobs")
	if st["inflight"].(float64) != 20 || st["available"].(float64) != 15 {
		t.Fatalf("after kill -9: %v", st)
	}
	// Within the lease: only the 15 never received.
	rest := qReceive(t, b, "jobs", 100, 60000, 0)
	if len(rest) != 15 {
		t.Fatalf("received %d before the leases ran out, want 15", len(rest))
	}
	// After the lease: the 20 leased-but-unacked, with delivery 2.
	deadline := time.Now().Add(15 * time.Second)
	var again []qMsg
	for len(again) < 20 && time.Now().Before(deadline) {
		again = append(again, qReceive(t, b, "jobs", 100, 60000, 1000)...)
	}
	if len(again) != 20 {
		t.Fatalf("redelivered %d, want 20", len(again))
	}
	want := map[string]bool{}
	for _, m := range first[5:] {
		want[m.Body] = true
	}
	for _, m := range again {
		if !want[m.Body] || m.Deliveries != 2 {
			t.Fatalf("redelivered %s (delivery %d): not one of the leased ones", m.Body, m.Deliveries)
		}
		delete(want, m.Body)
	}
	// The pre-crash receipts are stale now.
	r := qMust(t, b, "POST", "/v1/queues/jobs/ack", map[string]any{"receipts": []string{first[5].Receipt}}, 200)
	if s := qItemStatuses(r); s[0] != "lease_lost" {
		t.Fatalf("stale receipt after redelivery: %v", s)
	}
	var all []string
	for _, m := range append(rest, again...) {
		all = append(all, m.Receipt)
	}
	r = qMust(t, b, "POST", "/v1/queues/jobs/ack", map[string]any{"receipts": all}, 200)
	for _, s := range qItemStatuses(r) {
		if s != "acked" {
			t.Fatalf("final ack: %v", qItemStatuses(r))
		}
	}
	st = qStats(t, b, "jobs")
	if st["inflight"].(float64) != 0 || st["available"].(float64) != 0 {
		t.Fatalf("at the end: %v", st)
	}
}

// TestQueueRestartKeepsState: a clean restart keeps queues with their
// attributes, delayed messages, leases (the receipt still acks) and the
// DLQ with its dead-letter headers.
func TestQueueRestartKeepsState(t *testing.T) {
	b := startBroker(t)
	qMust(t, b, "PUT", "/v1/queues/orders", map[string]any{"max_receives": 3, "visibility_timeout_ms": 60000}, 201)
	qSend(t, b, "orders", "keep", "reject-me")
	qMust(t, b, "POST", "/v1/queues/orders/messages", map[string]any{"messages": []any{map[string]any{"body": "later", "delay_ms": 600000}}}, 200)
	msgs := qReceive(t, b, "orders", 2, 0, 0)
	if len(msgs) != 2 {
		t.Fatalf("received %d", len(msgs))
	}
	r := qMust(t, b, "POST", "/v1/queues/orders/nack", map[string]any{"receipts": []string{msgs[1].Receipt}, "dead_letter": true, "reason": "bad schema"}, 200)
	if s := qItemStatuses(r); s[0] != "dead_lettered" {
		t.Fatalf("reject: %v", s)
	}
	b.Restart()
	q := qMust(t, b, "GET", "/v1/queues/orders", nil, 200).Body
	if attrs := q["attributes"].(map[string]any); attrs["max_receives"].(float64) != 3 || q["dead_letter_queue"] != "orders.dlq" {
		t.Fatalf("queue after restart: %v", q)
	}
	st := qStats(t, b, "orders")
	if st["inflight"].(float64) != 1 || st["delayed"].(float64) != 1 || st["dead_letter_depth"].(float64) != 1 {
		t.Fatalf("stats after restart: %v", st)
	}
	dlq := qMust(t, b, "GET", "/v1/queues/orders/dlq", nil, 200)
	ms := dlq.Body["messages"].([]any)
	if len(ms) != 1 {
		t.Fatalf("dlq: %s", dlq.Raw)
	}
	dl := ms[0].(map[string]any)["dead_letter"].(map[string]any)
	if dl["reason"] != "rejected" || dl["detail"] != "bad schema" || dl["source_queue"] != "orders" {
		t.Fatalf("dead letter: %v", dl)
	}
	r = qMust(t, b, "POST", "/v1/queues/orders/ack", map[string]any{"receipts": []string{msgs[0].Receipt}}, 200)
	if s := qItemStatuses(r); s[0] != "acked" {
		t.Fatalf("ack with a pre-restart receipt: %v", s)
	}
}

// TestQueueRedriveSurvivesKill9 pins F15: a rate-limited redrive killed
// mid-way resumes after restart and moves every message exactly once.
func TestQueueRedriveSurvivesKill9(t *testing.T) {
	b := startBroker(t)
	qMust(t, b, "PUT", "/v1/queues/src", map[string]any{}, 201)
	const n = 300
	qSend(t, b, "src", numbered("r", n)...)
	for moved := 0; moved < n; {
		msgs := qReceive(t, b, "src", 100, 0, 0)
		var rs []string
		for _, m := range msgs {
			rs = append(rs, m.Receipt)
		}
		qMust(t, b, "POST", "/v1/queues/src/nack", map[string]any{"receipts": rs, "dead_letter": true}, 200)
		moved += len(msgs)
	}
	if st := qStats(t, b, "src.dlq"); st["available"].(float64) != n {
		t.Fatalf("dlq: %v", st)
	}
	task := qMust(t, b, "POST", "/v1/queues/src.dlq/redrive", map[string]any{"rate_per_sec": 100}, 202).Body
	id := fmt.Sprint(task["id"])
	time.Sleep(1200 * time.Millisecond) // part of the way
	b.Kill()
	b.Start()
	mid := qMust(t, b, "GET", "/v1/tasks/"+id, nil, 200).Body
	if mid["state"] != "running" && mid["state"] != "done" {
		t.Fatalf("task after the crash: %v", mid)
	}
	deadline := time.Now().Add(20 * time.Second)
	var final map[string]any
	for time.Now().Before(deadline) {
		final = qMust(t, b, "GET", "/v1/tasks/"+id, nil, 200).Body
		if final["state"] == "done" {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if final["state"] != "done" || final["moved"].(float64) != n {
		t.Fatalf("task: %v", final)
	}
	seen := map[string]int{}
	for {
		msgs := qReceive(t, b, "src", 100, 0, 0)
		if len(msgs) == 0 {
			break
		}
		var rs []string
		for _, m := range msgs {
			seen[m.Body]++
			rs = append(rs, m.Receipt)
		}
		qMust(t, b, "POST", "/v1/queues/src/ack", map[string]any{"receipts": rs}, 200)
	}
	if len(seen) != n {
		t.Fatalf("redriven %d distinct, want %d", len(seen), n)
	}
	for body, c := range seen {
		if c != 1 {
			t.Fatalf("%s redriven %d times", body, c)
		}
	}
	if st := qStats(t, b, "src.dlq"); st["available"].(float64) != 0 {
		t.Fatalf("dlq after redrive: %v", st)
	}
}

// TestQueueAckOnReceiveAndRetrySurviveKill9: over the real binary, a
// receive that acks the previous batch settles those acks and takes its
// new leases in one durable write, and a receive retried with its
// request_id after a kill -9 gets the same messages and receipts back,
// leasing nothing more.
func TestQueueAckOnReceiveAndRetrySurviveKill9(t *testing.T) {
	b := startBroker(t)
	qMust(t, b, "PUT", "/v1/queues/work", map[string]any{"visibility_timeout_ms": 60000}, 201)
	qSend(t, b, "work", numbered("w", 30)...)
	first := qReceive(t, b, "work", 10, 0, 0)
	if len(first) != 10 {
		t.Fatalf("received %d", len(first))
	}
	var receipts []string
	for _, m := range first {
		receipts = append(receipts, m.Receipt)
	}
	r := qMust(t, b, "POST", "/v1/queues/work/receive",
		map[string]any{"max_messages": 10, "ack": receipts, "request_id": "batch-2"}, 200)
	var second struct {
		Messages []qMsg `json:"messages"`
		Acks     []struct {
			Status string `json:"status"`
		} `json:"acks"`
	}
	if err := json.Unmarshal([]byte(r.Raw), &second); err != nil {
		t.Fatal(err)
	}
	if len(second.Acks) != 10 || len(second.Messages) != 10 {
		t.Fatalf("ack-and-receive: %d acks, %d messages: %.300s", len(second.Acks), len(second.Messages), r.Raw)
	}
	for _, a := range second.Acks {
		if a.Status != "acked" {
			t.Fatalf("ack results: %+v", second.Acks)
		}
	}
	b.Kill()
	b.Start()
	st := qStats(t, b, "work")
	if st["inflight"].(float64) != 10 || st["available"].(float64) != 10 {
		t.Fatalf("after kill -9: %v (want the 10 acks and the 10 new leases kept)", st)
	}
	// The response was "lost": the client retries with the same request id.
	r = qMust(t, b, "POST", "/v1/queues/work/receive", map[string]any{"max_messages": 10, "request_id": "batch-2"}, 200)
	var retry struct {
		Messages []qMsg `json:"messages"`
	}
	if err := json.Unmarshal([]byte(r.Raw), &retry); err != nil {
		t.Fatal(err)
	}
	if len(retry.Messages) != 10 {
		t.Fatalf("retry got %d messages", len(retry.Messages))
	}
	for i, m := range retry.Messages {
		if m.Receipt != second.Messages[i].Receipt || m.Deliveries != 1 {
			t.Fatalf("retry message %d: %+v, want %+v", i, m, second.Messages[i])
		}
	}
	if st := qStats(t, b, "work"); st["inflight"].(float64) != 10 || st["available"].(float64) != 10 {
		t.Fatalf("a retry leased more: %v", st)
	}
	// The acked ones never come back; the rest drain normally.
	rest := qReceive(t, b, "work", 100, 0, 0)
	if len(rest) != 10 {
		t.Fatalf("drain: %d, want the 10 never received", len(rest))
	}
	seen := map[string]bool{}
	for _, m := range append(append([]qMsg{}, second.Messages...), rest...) {
		seen[m.Body] = true
	}
	for _, m := range first {
		if seen[m.Body] {
			t.Fatalf("acked message %s delivered again", m.Body)
		}
	}
}
