package httpapi

import (
	"testing"
	"time"
)

// TestQueueFeaturesBadInput: bad values of the dedup and unclaimed
// attributes and of purge filters, one request each: status, error code,
// details.field, and a store that is byte-for-byte unchanged. Bounds are
// tried one past the limit; the limits themselves are accepted after.
func TestQueueFeaturesBadInput(t *testing.T) {
	env := newQueueEnv(t)
	env.mustJSON("PUT", "/v1/queues/q", `{"dedup_conflict":"reject","max_unclaimed_age_ms":120000}`, 201)
	env.mustJSON("POST", "/v1/queues/q/messages", `{"messages":[{"body":"a","dedup_id":"d-1"},{"body":"b"}]}`, 200)
	cases := []struct {
		name, method, path, ct, body string
		status                       int
		code, field                  string
	}{
		{"dedup_conflict enum", "PUT", "/v1/queues/n", "application/json", `{"dedup_conflict":"maybe"}`, 400, "invalid_enum", "dedup_conflict"},
		{"dedup_conflict empty", "PUT", "/v1/queues/n", "application/json", `{"dedup_conflict":""}`, 400, "invalid_enum", "dedup_conflict"},
		{"dedup_scope enum", "PUT", "/v1/queues/n", "application/json", `{"dedup_scope":"forever"}`, 400, "invalid_enum", "dedup_scope"},
		{"dedup_scope update", "PATCH", "/v1/queues/q", "application/json", `{"dedup_scope":"queue"}`, 400, "invalid_enum", "dedup_scope"},
		{"content_dedup type", "PUT", "/v1/queues/n", "application/json", `{"content_dedup":"yes"}`, 400, "invalid_json", "content_dedup"},
		{"unclaimed negative", "PUT", "/v1/queues/n", "application/json", `{"max_unclaimed_age_ms":-1}`, 400, "out_of_range", "max_unclaimed_age_ms"},
		{"unclaimed past retention", "PUT", "/v1/queues/n", "application/json", `{"max_unclaimed_age_ms":345600001}`, 400, "out_of_range", "max_unclaimed_age_ms"},
		{"unclaimed past short retention", "PUT", "/v1/queues/n", "application/json", `{"retention_ms":60000,"max_unclaimed_age_ms":60001}`, 400, "out_of_range", "max_unclaimed_age_ms"},
		{"retention below unclaimed", "PATCH", "/v1/queues/q", "application/json", `{"retention_ms":119999}`, 400, "out_of_range", "max_unclaimed_age_ms"},
		{"dedup conflict", "POST", "/v1/queues/q/messages", "application/json", `{"messages":[{"body":"other","dedup_id":"d-1"}]}`, 200, "dedup_conflict", "dedup_id"},
		{"dedup conflict in request", "POST", "/v1/queues/q/messages", "application/json", `{"messages":[{"body":"a","dedup_id":"d-1"},{"body":"x","dedup_id":"d-1"}]}`, 200, "", ""},
		{"dedup conflict atomic", "POST", "/v1/queues/q/messages", "application/json", `{"atomic":true,"messages":[{"body":"new","dedup_id":"d-2"},{"body":"other","dedup_id":"d-1"}]}`, 400, "batch_rejected", ""},
		{"purge no states", "POST", "/v1/queues/q/purge", "application/json", `{"states":[]}`, 400, "out_of_range", "states"},
		{"purge unknown state", "POST", "/v1/queues/q/purge", "application/json", `{"states":["ready","lost"]}`, 400, "invalid_enum", "states"},
		{"purge states type", "POST", "/v1/queues/q/purge", "application/json", `{"states":"ready"}`, 400, "invalid_json", "states"},
		{"purge age negative", "POST", "/v1/queues/q/purge", "application/json", `{"older_than_ms":-1}`, 400, "out_of_range", "older_than_ms"},
		{"purge age too large", "POST", "/v1/queues/q/purge", "application/json", `{"older_than_ms":31536000001}`, 400, "out_of_range", "older_than_ms"},
		{"purge unknown field", "POST", "/v1/queues/q/purge", "application/json", `{"state":["ready"]}`, 400, "unknown_field", "state"},
		{"purge not json", "POST", "/v1/queues/q/purge", "text/plain", `{}`, 415, "unsupported_media_type", ""},
		{"purge missing queue", "POST", "/v1/queues/ghost/purge", "application/json", `{"states":["ready"]}`, 404, "queue_not_found", ""},
		{"purge bad name", "POST", "/v1/queues/bad$name/purge", "application/json", `{"states":["ready"]}`, 400, "invalid_name", "name"},
	}
	for _, c := range cases {
		before := env.digest()
		r := env.call(c.method, c.path, c.ct, []byte(c.body))
		if r.status != c.status {
			t.Errorf("%s: status %d, want %d: %.300s", c.name, r.status, c.status, r.raw)
			continue
		}
		if c.name == "dedup conflict in request" {
			// The first item is a duplicate of d-1, the second conflicts with it.
			res := r.body["results"].([]any)
			first, second := res[0].(map[string]any), res[1].(map[string]any)
			if first["duplicate"] != true || second["error"].(map[string]any)["code"] != "dedup_conflict" {
				t.Errorf("%s: %s", c.name, r.raw)
			}
		} else if got := r.code(); got != c.code {
			t.Errorf("%s: code %q, want %q: %.300s", c.name, got, c.code, r.raw)
		}
		if c.field != "" {
			details, _ := r.body["details"].(map[string]any)
			if res, ok := r.body["results"].([]any); ok {
				details, _ = res[0].(map[string]any)["error"].(map[string]any)["details"].(map[string]any)
			}
			if details["field"] != c.field {
				t.Errorf("%s: details.field %v, want %s: %.300s", c.name, details["field"], c.field, r.raw)
			}
		}
		if r.status >= 400 {
			if msg, _ := r.body["message"].(string); msg == "" {
				t.Errorf("%s: no message: %s", c.name, r.raw)
			}
		}
		if after := env.digest(); after != before {
			t.Errorf("%s: the store changed", c.name)
		}
	}
	// The bounds themselves are accepted.
	env.mustJSON("PUT", "/v1/queues/edge", `{"max_unclaimed_age_ms":345600000,"dedup_scope":"in_queue","dedup_conflict":"accept","content_dedup":true}`, 201)
	env.mustJSON("PUT", "/v1/queues/forever", `{"retention_ms":0,"max_unclaimed_age_ms":31536000000}`, 201)
	if r := env.mustJSON("POST", "/v1/queues/q/purge", `{"older_than_ms":31536000000,"states":null}`, 200); r.body["deleted"] != 0.0 {
		t.Fatalf("purge at the age bound: %s", r.raw)
	}
}

// TestQueueFeaturesHTTP: the dedup attributes, max_unclaimed_age_ms and
// purge filters over HTTP.
func TestQueueFeaturesHTTP(t *testing.T) {
	env := newQueueEnv(t)
	r := env.mustJSON("PUT", "/v1/queues/q", `{"content_dedup":true,"dedup_conflict":"reject","dedup_scope":"in_queue","max_unclaimed_age_ms":60000,"dedup_window_ms":30000}`, 201)
	attrs := r.body["attributes"].(map[string]any)
	if attrs["content_dedup"] != true || attrs["dedup_conflict"] != "reject" || attrs["dedup_scope"] != "in_queue" || attrs["max_unclaimed_age_ms"] != 60000.0 {
		t.Fatalf("attributes %s", r.raw)
	}
	env.mustJSON("PUT", "/v1/queues/q", `{"content_dedup":true,"dedup_conflict":"reject","dedup_scope":"in_queue","max_unclaimed_age_ms":60000,"dedup_window_ms":30000}`, 200)
	if r := env.json("PUT", "/v1/queues/q", `{}`); r.status != 409 || r.code() != "queue_exists" {
		t.Fatalf("create with defaults: %d %s", r.status, r.raw)
	}
	// Defaults of a plain queue.
	r = env.mustJSON("PUT", "/v1/queues/plain", `{}`, 201)
	if a := r.body["attributes"].(map[string]any); a["content_dedup"] != false || a["dedup_conflict"] != "accept" || a["dedup_scope"] != "window" || a["max_unclaimed_age_ms"] != 0.0 {
		t.Fatalf("defaults %s", r.raw)
	}

	r = env.mustJSON("POST", "/v1/queues/q/messages", `{"messages":[{"body":"same"},{"body":"same"},{"body":"x","dedup_id":"k"},{"body":"y","dedup_id":"k"}]}`, 200)
	res := r.body["results"].([]any)
	item := func(i int) map[string]any { return res[i].(map[string]any) }
	if item(1)["duplicate"] != true || item(1)["id"] != item(0)["id"] || item(2)["id"] != "0:1" || item(3)["error"].(map[string]any)["code"] != "dedup_conflict" {
		t.Fatalf("send %s", r.raw)
	}
	// Past the window but still queued: a duplicate (in_queue).
	env.now = env.now.Add(45 * time.Second)
	env.e.Tick(env.now)
	r = env.mustJSON("POST", "/v1/queues/q/messages", `{"messages":[{"body":"same"}]}`, 200)
	if dup := r.body["results"].([]any)[0].(map[string]any); dup["duplicate"] != true || dup["id"] != "0:0" {
		t.Fatalf("queued original after the window: %s", r.raw)
	}
	// Never received: to the DLQ as unclaimed after 60 s.
	env.now = env.now.Add(15 * time.Second)
	env.e.Tick(env.now)
	r = env.mustJSON("GET", "/v1/queues/q/dlq", "", 200)
	msgs := r.body["messages"].([]any)
	if len(msgs) != 2 || msgs[0].(map[string]any)["dead_letter"].(map[string]any)["reason"] != "unclaimed" {
		t.Fatalf("dlq %s", r.raw)
	}
	// Dead-lettered: no longer queued, and the window is over: new.
	r = env.mustJSON("POST", "/v1/queues/q/messages", `{"messages":[{"body":"same"}]}`, 200)
	if r.body["results"].([]any)[0].(map[string]any)["duplicate"] == true {
		t.Fatalf("after dead-lettering: %s", r.raw)
	}

	env.mustJSON("POST", "/v1/queues/plain/messages", `{"messages":[{"body":"held"},{"body":"ready"},{"body":"later","delay_ms":60000}]}`, 200)
	held := receiptsOf(t, env.mustJSON("POST", "/v1/queues/plain/receive", `{}`, 200))
	env.now = env.now.Add(time.Second)
	if r := env.mustJSON("POST", "/v1/queues/plain/purge", `{"states":["ready","delayed"],"older_than_ms":2000}`, 200); r.body["deleted"] != 0.0 {
		t.Fatalf("too young: %s", r.raw)
	}
	if r := env.mustJSON("POST", "/v1/queues/plain/purge", `{"states":["ready","delayed"]}`, 200); r.body["deleted"] != 2.0 {
		t.Fatalf("ready and delayed: %s", r.raw)
	}
	if r := env.mustJSON("POST", "/v1/queues/plain/ack", `{"receipts":["`+held[0]+`"]}`, 200); r.code() != "acked" {
		t.Fatalf("the leased message was kept: %s", r.raw)
	}
	env.mustJSON("POST", "/v1/queues/plain/messages", `{"messages":[{"body":"a"},{"body":"b"}]}`, 200)
	receiptsOf(t, env.mustJSON("POST", "/v1/queues/plain/receive", `{}`, 200))
	if r := env.call("POST", "/v1/queues/plain/purge", "", nil); r.status != 200 || r.body["deleted"] != 2.0 {
		t.Fatalf("empty body purges everything: %d %s", r.status, r.raw)
	}
	st := env.mustJSON("GET", "/v1/queues/plain/stats", "", 200)
	if st.body["available"] != 0.0 || st.body["inflight"] != 0.0 {
		t.Fatalf("stats %s", st.raw)
	}
}
