package httpapi

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/queues"
	"github.com/vibemq/broker/topics"
)

// queueEnv is a real HTTP server over a real Pebble store in a temp dir.
type queueEnv struct {
	t     *testing.T
	store *pebblestore.Store
	tm    *topics.Manager
	e     *queues.Engine
	srv   *Server
	base  string
	now   time.Time
}

func newQueueEnv(t *testing.T) *queueEnv {
	t.Helper()
	store, err := pebblestore.Open(t.TempDir(), pebblestore.Options{Logger: zerolog.Nop(), MemTableSize: 4 << 20, CacheSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	tm, err := topics.Open(store, topics.Config{Logger: zerolog.Nop(), DefaultPartitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	env := &queueEnv{t: t, store: store, tm: tm, now: time.UnixMilli(1_800_000_000_000)}
	env.e, err = queues.Open(store, tm, queues.Config{Logger: zerolog.Nop(), Seed: 1}, env.now)
	if err != nil {
		t.Fatal(err)
	}
	env.srv, env.base = startServer(t, Config{}, func(s *Server) {
		s.RegisterQueues(QueuesConfig{Engine: env.e, Now: func() time.Time { return env.now }})
	})
	t.Cleanup(func() {
		env.e.Close()
		_ = store.Close()
	})
	return env
}

type apiResponse struct {
	status int
	body   map[string]any
	raw    string
}

// code is the top-level error code, or the first item's error code.
func (r apiResponse) code() string {
	if c, ok := r.body["code"].(string); ok {
		return c
	}
	if res, ok := r.body["results"].([]any); ok && len(res) > 0 {
		if item, ok := res[0].(map[string]any); ok {
			if e, ok := item["error"].(map[string]any); ok {
				return e["code"].(string)
			}
			if s, ok := item["status"].(string); ok {
				return s
			}
		}
	}
	return ""
}

func (env *queueEnv) call(method, path, contentType string, body []byte) apiResponse {
	env.t.Helper()
	req, err := http.NewRequest(method, env.base+path, bytes.NewReader(body))
	if err != nil {
		env.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		env.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	out := apiResponse{status: resp.StatusCode, raw: string(raw)}
	_ = json.Unmarshal(raw, &out.body)
	return out
}

func (env *queueEnv) json(method, path, body string) apiResponse {
	env.t.Helper()
	return env.call(method, path, "application/json", []byte(body))
}

func (env *queueEnv) mustJSON(method, path, body string, status int) apiResponse {
	env.t.Helper()
	r := env.json(method, path, body)
	if r.status != status {
		env.t.Fatalf("%s %s %s: status %d, want %d: %s", method, path, body, r.status, status, r.raw)
	}
	return r
}

// digest hashes every key and value of the store.
func (env *queueEnv) digest() string {
	env.t.Helper()
	it, err := env.store.NewIter(nil, nil)
	if err != nil {
		env.t.Fatal(err)
	}
	defer it.Close()
	h := sha256.New()
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.Value()
		if err != nil {
			env.t.Fatal(err)
		}
		h.Write(it.Key())
		h.Write([]byte{0})
		h.Write(v)
		h.Write([]byte{1})
	}
	return hex.EncodeToString(h.Sum(nil))
}

func receiptsOf(t *testing.T, r apiResponse) []string {
	t.Helper()
	msgs, _ := r.body["messages"].([]any)
	var out []string
	for _, m := range msgs {
		out = append(out, m.(map[string]any)["receipt"].(string))
	}
	return out
}

// TestQueueBadInput sends one request per bad-input class of
// NATIVE-QUEUE.md §3.8 that the queue API has, and checks the status, the
// code, and that the store is byte-for-byte unchanged (full-scan digest).
func TestQueueBadInput(t *testing.T) {
	env := newQueueEnv(t)
	env.mustJSON("PUT", "/v1/queues/q", `{"max_message_bytes":100,"priority_levels":2,"dedup_window_ms":60000}`, 201)
	env.mustJSON("PUT", "/v1/queues/tight", `{"max_inflight":1}`, 201)
	env.mustJSON("PUT", "/v1/queues/a", `{"dead_letter":"none"}`, 201)
	env.mustJSON("PUT", "/v1/queues/b", `{"dead_letter":"a"}`, 201)
	env.mustJSON("PUT", "/v1/queues/full", ``, 201)
	if _, err := env.tm.CreateTopic("plain", 1, nil, false); err != nil {
		t.Fatal(err)
	}
	env.mustJSON("POST", "/v1/queues/full/messages", `{"messages":[{"body":"x"}]}`, 200)
	env.mustJSON("POST", "/v1/queues/q/messages", `{"messages":[{"body":"one"},{"body":"two"},{"body":"three"}]}`, 200)
	env.mustJSON("POST", "/v1/queues/tight/messages", `{"messages":[{"body":"1"},{"body":"2"}]}`, 200)
	held := receiptsOf(t, env.mustJSON("POST", "/v1/queues/q/receive", `{"max_messages":1,"visibility_timeout_ms":1000}`, 200))
	env.mustJSON("POST", "/v1/queues/tight/receive", `{}`, 200)
	// An expired lease whose message was received again: a stale receipt.
	env.now = env.now.Add(1500 * time.Millisecond)
	env.e.Tick(env.now)
	// All three, so the first one (reaped, due last) is received again.
	again := receiptsOf(t, env.mustJSON("POST", "/v1/queues/q/receive", `{"max_messages":3,"visibility_timeout_ms":30000}`, 200))
	env.now = env.now.Add(time.Second)
	if len(held) != 1 || len(again) != 3 {
		t.Fatalf("setup: %v %v", held, again)
	}
	// A redrive task running on a.dlq-like queue: a's DLQ role is played by "a" for b.
	env.mustJSON("POST", "/v1/queues/a/redrive", `{"rate_per_sec":1}`, 202)
	otherQueueReceipt := receiptsOf(t, env.mustJSON("POST", "/v1/queues/full/receive", `{"max_messages":1}`, 200))
	_ = otherQueueReceipt

	big := `{"messages":[{"body":"` + strings.Repeat("x", 17<<20) + `"}]}`
	long := strings.Repeat("r", 129)
	headers := make([]string, 65)
	for i := range headers {
		headers[i] = `"h` + strings.Repeat("x", i%5) + string(rune('a'+i%26)) + string(rune('a'+i/26)) + `":"v"`
	}
	cases := []struct {
		name, method, path, ct, body string
		status                       int
		code                         string
	}{
		{"invalid json", "PUT", "/v1/queues/n", "application/json", `{`, 400, "invalid_json"},
		{"wrong type", "PUT", "/v1/queues/n", "application/json", `{"visibility_timeout_ms":"30s"}`, 400, "invalid_json"},
		{"two values", "PUT", "/v1/queues/n", "application/json", `{} {}`, 400, "invalid_json"},
		{"unknown field", "PUT", "/v1/queues/n", "application/json", `{"visibility":1}`, 400, "unknown_field"},
		{"field names are case-sensitive", "PUT", "/v1/queues/n", "application/json", `{"Visibility_Timeout_Ms":5000}`, 400, "unknown_field"},
		{"unknown nested field", "POST", "/v1/queues/q/messages", "application/json", `{"messages":[{"body":"x"},{"bodyy":"x"}]}`, 400, "unknown_field"},
		{"duplicate member", "PUT", "/v1/queues/n", "application/json", `{"max_receives":1,"max_receives":2}`, 400, "invalid_json"},
		{"not an object", "POST", "/v1/queues/q/messages", "application/json", `[{"body":"x"}]`, 400, "invalid_json"},
		{"fraction for an integer", "PUT", "/v1/queues/n", "application/json", `{"visibility_timeout_ms":1500.5}`, 400, "invalid_json"},
		{"invalid utf-8", "POST", "/v1/queues/q/messages", "application/json", "{\"messages\":[{\"body\":\"a\xffb\"}]}", 400, "invalid_json"},
		{"not json", "PUT", "/v1/queues/n", "text/plain", `{}`, 415, "unsupported_media_type"},
		{"no content type", "POST", "/v1/queues/q/messages", "", `{"messages":[{"body":"x"}]}`, 415, "unsupported_media_type"},
		{"too large", "POST", "/v1/queues/q/messages", "application/json", big, 413, "request_too_large"},
		{"invalid name", "PUT", "/v1/queues/bad$name", "application/json", `{}`, 400, "invalid_name"},
		{"name too long", "PUT", "/v1/queues/" + strings.Repeat("n", 250), "application/json", `{}`, 400, "invalid_name"},
		{"reserved name", "PUT", "/v1/queues/a__b", "application/json", `{}`, 400, "reserved_name"},
		{"out of range", "PUT", "/v1/queues/n", "application/json", `{"visibility_timeout_ms":999}`, 400, "out_of_range"},
		{"out of range max", "PUT", "/v1/queues/n", "application/json", `{"max_receives":1001}`, 400, "out_of_range"},
		{"invalid enum", "PUT", "/v1/queues/n", "application/json", `{"on_expire":"explode"}`, 400, "invalid_enum"},
		{"fifo", "PUT", "/v1/queues/n", "application/json", `{"fifo":true}`, 400, "fifo_disabled"},
		{"dead letter not found", "PUT", "/v1/queues/n", "application/json", `{"dead_letter":"ghost"}`, 400, "dead_letter_not_found"},
		{"dead letter cycle", "PATCH", "/v1/queues/a", "application/json", `{"dead_letter":"b"}`, 400, "dead_letter_cycle"},
		{"queue exists", "PUT", "/v1/queues/q", "application/json", `{"max_message_bytes":200}`, 409, "queue_exists"},
		{"topic exists", "PUT", "/v1/queues/plain", "application/json", `{}`, 409, "topic_exists"},
		{"immutable", "PATCH", "/v1/queues/q", "application/json", `{"partitions":2}`, 409, "immutable_field"},
		{"queue not empty", "DELETE", "/v1/queues/full", "", ``, 409, "queue_not_empty"},
		{"queue in use", "DELETE", "/v1/queues/a", "", ``, 409, "queue_in_use"},
		{"queue not found", "GET", "/v1/queues/ghost", "", ``, 404, "queue_not_found"},
		{"send to missing queue", "POST", "/v1/queues/ghost/messages", "application/json", `{"messages":[{"body":"x"}]}`, 404, "queue_not_found"},
		{"no messages", "POST", "/v1/queues/q/messages", "application/json", `{"messages":[]}`, 400, "out_of_range"},
		{"invalid body", "POST", "/v1/queues/q/messages", "application/json", `{"messages":[{"key":"k"}]}`, 200, "invalid_body"},
		{"both bodies", "POST", "/v1/queues/q/messages", "application/json", `{"messages":[{"body":"a","body_base64":"YQ=="}]}`, 200, "invalid_body"},
		{"invalid base64", "POST", "/v1/queues/q/messages", "application/json", `{"messages":[{"body_base64":"%%%"}]}`, 200, "invalid_base64"},
		{"conflicting fields", "POST", "/v1/queues/q/messages", "application/json", `{"messages":[{"body":"a","delay_ms":1,"deliver_at":"2030-01-01T00:00:00Z"}]}`, 200, "conflicting_fields"},
		{"key too long", "POST", "/v1/queues/q/messages", "application/json", `{"messages":[{"body":"a","key":"` + strings.Repeat("k", 1025) + `"}]}`, 200, "out_of_range"},
		{"too many headers", "POST", "/v1/queues/q/messages", "application/json", `{"messages":[{"body":"a","headers":{` + strings.Join(headers, ",") + `}}]}`, 200, "too_many_headers"},
		{"reserved header", "POST", "/v1/queues/q/messages", "application/json", `{"messages":[{"body":"a","headers":{"x-q-dlq-reason":"fake"}}]}`, 200, "reserved_header"},
		{"delay exceeds retention", "POST", "/v1/queues/q/messages", "application/json", `{"messages":[{"body":"a","delay_ms":345600001}]}`, 200, "delay_exceeds_retention"},
		{"priority out of range", "POST", "/v1/queues/q/messages", "application/json", `{"messages":[{"body":"a","priority":2}]}`, 200, "priority_out_of_range"},
		{"ttl out of range", "POST", "/v1/queues/q/messages", "application/json", `{"messages":[{"body":"a","ttl_ms":999}]}`, 200, "out_of_range"},
		{"expire in past", "POST", "/v1/queues/q/messages", "application/json", `{"messages":[{"body":"a","expire_at":"2001-01-01T00:00:00Z"}]}`, 200, "expire_in_past"},
		{"invalid dedup id", "POST", "/v1/queues/q/messages", "application/json", `{"messages":[{"body":"a","dedup_id":"has space"}]}`, 200, "invalid_dedup_id"},
		{"fifo group", "POST", "/v1/queues/q/messages", "application/json", `{"messages":[{"body":"a","group":"g"}]}`, 200, "fifo_disabled"},
		{"invalid partition", "POST", "/v1/queues/q/messages", "application/json", `{"messages":[{"body":"a","partition":1}]}`, 200, "invalid_partition"},
		{"message too large", "POST", "/v1/queues/q/messages", "application/json", `{"messages":[{"body":"` + strings.Repeat("m", 101) + `"}]}`, 200, "message_too_large"},
		{"batch rejected", "POST", "/v1/queues/q/messages", "application/json", `{"atomic":true,"messages":[{"body":"fine"},{"body":"bad","priority":9}]}`, 400, "batch_rejected"},
		{"receive max out of range", "POST", "/v1/queues/q/receive", "application/json", `{"max_messages":1001}`, 400, "out_of_range"},
		{"receive wait out of range", "POST", "/v1/queues/q/receive", "application/json", `{"wait_ms":20001}`, 400, "out_of_range"},
		{"receive visibility", "POST", "/v1/queues/q/receive", "application/json", `{"visibility_timeout_ms":43200001}`, 400, "out_of_range"},
		{"receive encoding", "POST", "/v1/queues/q/receive", "application/json", `{"body_encoding":"hex"}`, 400, "invalid_enum"},
		{"receive acks too many", "POST", "/v1/queues/q/receive", "application/json", `{"ack":[` + strings.Repeat(`"r",`, 1000) + `"r"]}`, 400, "out_of_range"},
		{"receive ack not a list", "POST", "/v1/queues/q/receive", "application/json", `{"ack":"` + held[0] + `"}`, 400, "invalid_json"},
		{"invalid request id", "POST", "/v1/queues/q/receive", "application/json", `{"request_id":"` + long + `"}`, 400, "invalid_request_id"},
		{"empty request id", "POST", "/v1/queues/q/receive", "application/json", `{"request_id":""}`, 400, "invalid_request_id"},
		{"group not found", "POST", "/v1/queues/q/receive", "application/json", `{"group":"other"}`, 404, "group_not_found"},
		{"max inflight", "POST", "/v1/queues/tight/receive", "application/json", `{}`, 429, "max_inflight_reached"},
		{"invalid receipt", "POST", "/v1/queues/q/ack", "application/json", `{"receipts":["not-a-receipt"]}`, 200, "invalid_receipt"},
		{"tampered receipt", "POST", "/v1/queues/q/ack", "application/json", `{"receipts":["` + tamper(again[0]) + `"]}`, 200, "invalid_receipt"},
		{"truncated receipt", "DELETE", "/v1/queues/q/receipts/" + again[0][:20], "", ``, 400, "invalid_receipt"},
		{"wrong queue", "POST", "/v1/queues/q/ack", "application/json", `{"receipts":["` + otherQueueReceipt[0] + `"]}`, 200, "wrong_queue"},
		{"duplicate in request", "POST", "/v1/queues/q/extend", "application/json", `{"receipts":["` + again[0] + `","` + again[0] + `"],"visibility_timeout_ms":1000}`, 200, "extended"},
		{"lease lost", "POST", "/v1/queues/q/ack", "application/json", `{"receipts":["` + held[0] + `"]}`, 200, "lease_lost"},
		{"lease lost single", "DELETE", "/v1/queues/q/receipts/" + held[0], "", ``, 409, "lease_lost"},
		{"visibility too long", "POST", "/v1/queues/q/extend", "application/json", `{"receipts":["` + again[0] + `"],"visibility_timeout_ms":43200000}`, 200, "visibility_too_long"},
		{"no receipts", "POST", "/v1/queues/q/ack", "application/json", `{"receipts":[]}`, 400, "out_of_range"},
		{"nack delay", "POST", "/v1/queues/q/nack", "application/json", `{"receipts":["` + again[0] + `"],"delay_ms":-1}`, 400, "out_of_range"},
		{"invalid id", "GET", "/v1/queues/q/messages/abc", "", ``, 400, "invalid_id"},
		{"message not found", "GET", "/v1/queues/q/messages/0:999", "", ``, 404, "message_not_found"},
		{"delete missing message", "DELETE", "/v1/queues/q/messages/0:999", "", ``, 404, "message_not_found"},
		{"browse state", "GET", "/v1/queues/q/messages?state=lost", "", ``, 400, "invalid_enum"},
		{"browse limit", "GET", "/v1/queues/q/messages?limit=1001", "", ``, 400, "out_of_range"},
		{"list limit", "GET", "/v1/queues?limit=0x", "", ``, 400, "out_of_range"},
		{"redrive conflicting", "POST", "/v1/queues/b/redrive", "application/json", `{"ids":["0:0"],"filter":{"reason":"rejected"}}`, 400, "conflicting_fields"},
		{"redrive rate", "POST", "/v1/queues/b/redrive", "application/json", `{"rate_per_sec":10001}`, 400, "out_of_range"},
		{"redrive ids", "POST", "/v1/queues/b/redrive", "application/json", `{"ids":["zero"]}`, 400, "invalid_id"},
		{"destination not found", "POST", "/v1/queues/b/redrive", "application/json", `{"destination":"ghost"}`, 404, "destination_not_found"},
		{"task running", "POST", "/v1/queues/a/redrive", "application/json", `{}`, 409, "task_already_running"},
		{"task not found", "GET", "/v1/tasks/999", "", ``, 404, "task_not_found"},
		{"task id", "GET", "/v1/tasks/x", "", ``, 404, "task_not_found"},
		{"delete force value", "DELETE", "/v1/queues/q?force=maybe", "", ``, 400, "invalid_enum"},
	}
	for _, c := range cases {
		before := env.digest()
		r := env.call(c.method, c.path, c.ct, []byte(c.body))
		if r.status != c.status {
			t.Errorf("%s: status %d, want %d: %.300s", c.name, r.status, c.status, r.raw)
			continue
		}
		if c.code == "" {
			continue // a setup step
		}
		if got := r.code(); got != c.code {
			t.Errorf("%s: code %q, want %q: %.300s", c.name, got, c.code, r.raw)
		}
		if r.status >= 400 {
			if msg, _ := r.body["message"].(string); msg == "" {
				t.Errorf("%s: no message: %s", c.name, r.raw)
			}
		}
		if c.code == "extended" {
			// The duplicate_in_request item is the second one.
			res := r.body["results"].([]any)
			if e := res[1].(map[string]any)["error"].(map[string]any)["code"]; e != "duplicate_in_request" {
				t.Errorf("%s: second item %v", c.name, res[1])
			}
			continue // the first item legitimately extended its lease
		}
		if after := env.digest(); after != before {
			t.Errorf("%s: the store changed", c.name)
		}
	}
	// The topic_exists class: a queue whose automatic DLQ name is taken by a topic.
	before := env.digest()
	if r := env.json("PUT", "/v1/queues/q.dlq", `{}`); r.status != 409 || r.code() != "queue_exists" {
		t.Errorf("existing DLQ as queue: %d %s", r.status, r.raw)
	}
	if env.digest() != before {
		t.Error("queue_exists changed the store")
	}
}

func tamper(receipt string) string {
	b := []byte(receipt)
	if b[10] == 'A' {
		b[10] = 'B'
	} else {
		b[10] = 'A'
	}
	return string(b)
}

// TestQueueHTTPFlow: the happy path over HTTP, long polling woken by a
// send, and a parked receive answered queue_deleted when its queue goes.
func TestQueueHTTPFlow(t *testing.T) {
	env := newQueueEnv(t)
	env.mustJSON("PUT", "/v1/queues/jobs", `{"visibility_timeout_ms":5000}`, 201)
	env.mustJSON("PUT", "/v1/queues/jobs", `{"visibility_timeout_ms":5000}`, 200)
	r := env.mustJSON("POST", "/v1/queues/jobs/messages", `{"messages":[{"body":"hello","headers":{"k":"v"},"key":"id-1"},{"body_base64":"/wA="}]}`, 200)
	if res := r.body["results"].([]any); res[0].(map[string]any)["id"] != "0:0" || res[1].(map[string]any)["id"] != "0:1" {
		t.Fatalf("send: %s", r.raw)
	}
	r = env.mustJSON("POST", "/v1/queues/jobs/receive", `{"max_messages":10}`, 200)
	msgs := r.body["messages"].([]any)
	if len(msgs) != 2 || msgs[0].(map[string]any)["body"] != "hello" || msgs[1].(map[string]any)["body_base64"] != "/wA=" ||
		msgs[0].(map[string]any)["headers"].(map[string]any)["k"] != "v" {
		t.Fatalf("receive: %s", r.raw)
	}
	rs := receiptsOf(t, r)
	env.mustJSON("POST", "/v1/queues/jobs/ack", `{"receipts":["`+rs[0]+`"]}`, 200)
	if r := env.call("DELETE", "/v1/queues/jobs/receipts/"+rs[1], "", nil); r.status != 204 {
		t.Fatalf("delete receipt: %d %s", r.status, r.raw)
	}
	st := env.mustJSON("GET", "/v1/queues/jobs/stats", "", 200)
	if st.body["available"].(float64) != 0 || st.body["inflight"].(float64) != 0 {
		t.Fatalf("stats %s", st.raw)
	}

	// Long poll: a parked receive is answered by a send.
	var wg sync.WaitGroup
	var polled apiResponse
	wg.Add(1)
	go func() {
		defer wg.Done()
		polled = env.json("POST", "/v1/queues/jobs/receive", `{"wait_ms":10000}`)
	}()
	waitFor(t, func() bool {
		s, _ := env.e.Stats("jobs", time.UnixMilli(0))
		return s.Waiters == 1
	})
	start := time.Now()
	env.mustJSON("POST", "/v1/queues/jobs/messages", `{"messages":[{"body":"wake"}]}`, 200)
	wg.Wait()
	if polled.status != 200 || len(polled.body["messages"].([]any)) != 1 || time.Since(start) > 5*time.Second {
		t.Fatalf("long poll: %d %s", polled.status, polled.raw)
	}

	// A parked receive when its queue is deleted.
	env.mustJSON("PUT", "/v1/queues/gone", `{}`, 201)
	wg.Add(1)
	go func() {
		defer wg.Done()
		polled = env.json("POST", "/v1/queues/gone/receive", `{"wait_ms":10000}`)
	}()
	waitFor(t, func() bool {
		s, _ := env.e.Stats("gone", time.UnixMilli(0))
		return s.Waiters == 1
	})
	if r := env.call("DELETE", "/v1/queues/gone", "", nil); r.status != 204 {
		t.Fatalf("delete: %d %s", r.status, r.raw)
	}
	wg.Wait()
	if polled.status != 404 || polled.code() != "queue_deleted" {
		t.Fatalf("parked receive on a deleted queue: %d %s", polled.status, polled.raw)
	}
	// Shutting down: requests get 503 shutting_down.
	env.e.Close()
	if r := env.json("POST", "/v1/queues/jobs/messages", `{"messages":[{"body":"late"}]}`); r.status != 503 || r.code() != "shutting_down" {
		t.Fatalf("after close: %d %s", r.status, r.raw)
	}
}

// TestQueueReceiveWithAcks: a receive's ack list is settled in the same
// request, its results come back in "acks", and a long poll commits the
// acks before it parks (they are not held hostage by the wait).
func TestQueueReceiveWithAcks(t *testing.T) {
	env := newQueueEnv(t)
	env.mustJSON("PUT", "/v1/queues/w", `{}`, 201)
	env.mustJSON("POST", "/v1/queues/w/messages", `{"messages":[{"body":"1"},{"body":"2"},{"body":"3"}]}`, 200)
	first := receiptsOf(t, env.mustJSON("POST", "/v1/queues/w/receive", `{"max_messages":2}`, 200))
	r := env.mustJSON("POST", "/v1/queues/w/receive", `{"max_messages":2,"ack":["`+first[0]+`","`+first[1]+`","bogus"]}`, 200)
	acks := r.body["acks"].([]any)
	if len(acks) != 3 || acks[0].(map[string]any)["status"] != "acked" || acks[1].(map[string]any)["status"] != "acked" ||
		acks[2].(map[string]any)["error"].(map[string]any)["code"] != "invalid_receipt" {
		t.Fatalf("acks: %s", r.raw)
	}
	msgs := r.body["messages"].([]any)
	if len(msgs) != 1 || msgs[0].(map[string]any)["body"] != "3" {
		t.Fatalf("messages: %s", r.raw)
	}
	last := receiptsOf(t, r)

	var wg sync.WaitGroup
	var polled apiResponse
	wg.Add(1)
	go func() {
		defer wg.Done()
		polled = env.json("POST", "/v1/queues/w/receive", `{"wait_ms":10000,"ack":["`+last[0]+`"]}`)
	}()
	waitFor(t, func() bool {
		s, _ := env.e.Stats("w", time.UnixMilli(0))
		return s.Waiters == 1
	})
	if s, _ := env.e.Stats("w", time.UnixMilli(0)); s.Inflight != 0 || s.Totals.Acked != 3 {
		t.Fatalf("parked with its ack unsettled: %+v", s)
	}
	env.mustJSON("POST", "/v1/queues/w/messages", `{"messages":[{"body":"4"}]}`, 200)
	wg.Wait()
	if polled.status != 200 || len(polled.body["messages"].([]any)) != 1 ||
		polled.body["acks"].([]any)[0].(map[string]any)["status"] != "acked" {
		t.Fatalf("long poll with an ack: %d %s", polled.status, polled.raw)
	}
	// No ack list: no acks field.
	env.mustJSON("POST", "/v1/queues/w/messages", `{"messages":[{"body":"5"}]}`, 200)
	if r := env.mustJSON("POST", "/v1/queues/w/receive", `{}`, 200); r.body["acks"] != nil {
		t.Fatalf("acks without an ack list: %s", r.raw)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// BenchmarkDecodeSendBody: decoding a send of 10 messages of 1 KiB, the
// queue's hottest request (BENCHMARKS.md).
func BenchmarkDecodeSendBody(b *testing.B) {
	msgs := make([]string, 10)
	for i := range msgs {
		msgs[i] = `{"body":"` + strings.Repeat("x", 1024) + `"}`
	}
	body := []byte(`{"messages":[` + strings.Join(msgs, ",") + `]}`)
	b.SetBytes(int64(len(body)))
	w := httptest.NewRecorder()
	for b.Loop() {
		r := httptest.NewRequest("POST", "/v1/queues/q/messages", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		var req sendRequestJSON
		if err := decodeBody(w, r, bodyRule{limit: QueueSendBodyMax}, &req); err != nil || len(req.Messages) != 10 {
			b.Fatal(err)
		}
	}
}

// TestQueueLongPollWithAcksAtMaxInflight pins a bug: a long poll that
// carried acks settled them before parking, but a wake-up while the queue
// was still at max_inflight answered 429 max_inflight_reached, so the
// client lost the results of acks that were committed. A call with
// receipts is never refused with max_inflight_reached: it waits on.
func TestQueueLongPollWithAcksAtMaxInflight(t *testing.T) {
	env := newQueueEnv(t)
	env.mustJSON("PUT", "/v1/queues/w", `{"max_inflight":1}`, 201)
	env.mustJSON("POST", "/v1/queues/w/messages", `{"messages":[{"body":"1"},{"body":"2"}]}`, 200)
	held := receiptsOf(t, env.mustJSON("POST", "/v1/queues/w/receive", `{}`, 200))

	var wg sync.WaitGroup
	var polled apiResponse
	wg.Add(1)
	go func() {
		defer wg.Done()
		polled = env.json("POST", "/v1/queues/w/receive", `{"wait_ms":10000,"ack":["bogus"]}`)
	}()
	waitFor(t, func() bool {
		s, _ := env.e.Stats("w", time.UnixMilli(0))
		return s.Waiters == 1
	})
	// A send wakes the poller while the queue is still at max_inflight.
	env.mustJSON("POST", "/v1/queues/w/messages", `{"messages":[{"body":"3"}]}`, 200)
	time.Sleep(100 * time.Millisecond)
	env.mustJSON("POST", "/v1/queues/w/ack", `{"receipts":["`+held[0]+`"]}`, 200)
	env.mustJSON("POST", "/v1/queues/w/messages", `{"messages":[{"body":"4"}]}`, 200)
	wg.Wait()
	if polled.status != 200 {
		t.Fatalf("long poll with acks at max_inflight: %d %s", polled.status, polled.raw)
	}
	acks, _ := polled.body["acks"].([]any)
	if len(acks) != 1 || acks[0].(map[string]any)["error"].(map[string]any)["code"] != "invalid_receipt" ||
		len(polled.body["messages"].([]any)) != 1 {
		t.Fatalf("long poll with acks at max_inflight: %s", polled.raw)
	}
}

// TestDeclaredLengthIsNotPreallocated: a client that declares a large
// Content-Length and sends a few bytes costs a bounded allocation, not the
// declared size.
func TestDeclaredLengthIsNotPreallocated(t *testing.T) {
	r := httptest.NewRequest("POST", "/v1/queues/q/messages", strings.NewReader(`{"messages":[]}`))
	r.Header.Set("Content-Type", "application/json")
	r.ContentLength = QueueSendBodyMax
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var req sendRequestJSON
	_ = decodeBody(httptest.NewRecorder(), r, bodyRule{limit: QueueSendBodyMax}, &req)
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 4<<20 {
		t.Fatalf("a body of 15 bytes declared as %d allocated %d bytes", QueueSendBodyMax, n)
	}
}

// TestMillisecondsNeverWrap pins the conversion of the queue API's *_ms
// fields to the domain's time.Duration: a count multiplied by 10^6 can
// overflow int64 and wrap into range (18446744103709 ms would become a
// visibility timeout of 29.999 s, 18446744073710 ms a delay of 0). The
// conversion saturates instead, so every such value is refused as the
// same value too large always was.
func TestMillisecondsNeverWrap(t *testing.T) {
	env := newQueueEnv(t)
	env.mustJSON("PUT", "/v1/queues/jobs", "", http.StatusCreated)
	env.mustJSON("POST", "/v1/queues/jobs/messages", `{"messages":[{"body":"a"}]}`, http.StatusOK)
	got := env.mustJSON("POST", "/v1/queues/jobs/receive", `{"max_messages":1}`, http.StatusOK)
	receipt := got.body["messages"].([]any)[0].(map[string]any)["receipt"].(string)
	const (
		wrapsTo30s = "18446744103709" // x 10^6 mod 2^64: 29,999,448,384 ns
		wrapsTo1ms = "18446744073711" // 1,448,384 ns
		wrapsTo0   = "18446744073710" // 448,384 ns
	)
	for _, c := range []struct {
		what, method, path, body string
		status                   int
		code, field              string
	}{
		{"receive visibility", "POST", "/v1/queues/jobs/receive", `{"visibility_timeout_ms":` + wrapsTo30s + `}`, 400, "out_of_range", "visibility_timeout_ms"},
		{"receive wait", "POST", "/v1/queues/jobs/receive", `{"wait_ms":` + wrapsTo1ms + `}`, 400, "out_of_range", "wait_ms"},
		{"send delay", "POST", "/v1/queues/jobs/messages", `{"messages":[{"body":"b","delay_ms":` + wrapsTo0 + `}]}`, 200, "delay_exceeds_retention", "delay_ms"},
		{"send ttl", "POST", "/v1/queues/jobs/messages", `{"messages":[{"body":"b","ttl_ms":` + wrapsTo30s + `}]}`, 200, "out_of_range", "ttl_ms"},
		{"nack delay", "POST", "/v1/queues/jobs/nack", `{"receipts":["` + receipt + `"],"delay_ms":` + wrapsTo0 + `}`, 400, "out_of_range", "delay_ms"},
		{"extend", "POST", "/v1/queues/jobs/extend", `{"receipts":["` + receipt + `"],"visibility_timeout_ms":` + wrapsTo30s + `}`, 400, "out_of_range", "visibility_timeout_ms"},
		{"purge age", "POST", "/v1/queues/jobs/purge", `{"older_than_ms":` + wrapsTo1ms + `}`, 400, "out_of_range", "older_than_ms"},
		{"receive visibility, most negative", "POST", "/v1/queues/jobs/receive", `{"visibility_timeout_ms":-9223372036854775808}`, 400, "out_of_range", "visibility_timeout_ms"},
	} {
		r := env.json(c.method, c.path, c.body)
		if r.status != c.status || r.code() != c.code || !strings.Contains(r.raw, `"field":"`+c.field+`"`) {
			t.Errorf("%s: %d %s, want %d %s on %s", c.what, r.status, r.raw, c.status, c.code, c.field)
		}
	}
	// The message is still leased to its receipt.
	if r := env.mustJSON("POST", "/v1/queues/jobs/extend", `{"receipts":["`+receipt+`"],"visibility_timeout_ms":30000}`, http.StatusOK); r.code() != "extended" {
		t.Fatalf("extend after the refusals: %s", r.raw)
	}
}
