package httpapi

import (
	"strings"
	"testing"
)

// dotNameEncodings spell "." and ".." with percent-encoding: the router
// decodes them into the path value, so only the domains' name rules can
// refuse them.
var dotNameEncodings = []string{"%2e", "%2E", "%2e%2e", "%2E%2E", "%2E.", ".%2e", "%2e."}

// Issue 17 part 5: PUT /v1/stores/s/consumers/%2e%2e created a consumer
// named "..", a name no client can address without escaping it (a plain
// ".." segment is resolved away, and some clients resolve %2e%2e too).
// Every native resource now refuses "." and "..", however the path spelled
// them, with the code its invalid names have (invalid_name; invalid_stream
// for streams), and nothing is created.
func TestDotNamesRefusedForEveryResource(t *testing.T) {
	t.Run("queues", func(t *testing.T) {
		env := newQueueEnv(t)
		before := env.digest()
		for _, enc := range dotNameEncodings {
			if got := env.json("PUT", "/v1/queues/"+enc, `{}`); got.status != 400 || got.code() != "invalid_name" {
				t.Errorf("PUT /v1/queues/%s: %d %s, want 400 invalid_name", enc, got.status, got.raw)
			}
		}
		if after := env.digest(); after != before {
			t.Fatalf("refused names created something:\n%s\nwant\n%s", after, before)
		}
		if got := env.json("GET", "/v1/queues", ""); got.status != 200 || len(got.body["queues"].([]any)) != 0 {
			t.Fatalf("queues after refusals: %d %s", got.status, got.raw)
		}
	})
	t.Run("events", func(t *testing.T) {
		env := newEventsEnv(t)
		if got := env.appendJSON("/v1/stores/s/streams/a/events", `{"events":[{"type":"T"}]}`); got.status != 201 {
			t.Fatalf("setup append: %d %s", got.status, got.body)
		}
		before := env.digest()
		for _, enc := range dotNameEncodings {
			for _, c := range []struct{ method, path, body, code string }{
				{"PUT", "/v1/stores/" + enc, ``, "invalid_name"},
				{"POST", "/v1/stores/" + enc + "/streams/a/events", `{"events":[{"type":"T"}]}`, "invalid_name"},
				{"POST", "/v1/stores/s/streams/" + enc + "/events", `{"events":[{"type":"T"}]}`, "invalid_stream"},
				{"PUT", "/v1/stores/s/consumers/" + enc, ``, "invalid_name"},
				{"POST", "/v1/stores/s/consumers/" + enc + "/commit", `{"position":0}`, "invalid_name"},
			} {
				ct := ""
				if c.body != "" {
					ct = "application/json"
				}
				got := env.call(c.method, c.path, ct, []byte(c.body))
				if got.status != 400 || got.code(t) != c.code {
					t.Errorf("%s %s: %d %s, want 400 %s", c.method, c.path, got.status, got.body, c.code)
				}
			}
		}
		if after := env.digest(); after != before {
			t.Fatalf("refused names created something:\n%s\nwant\n%s", after, before)
		}
		if got := env.call("GET", "/v1/stores/s/consumers", "", nil); got.status != 200 || !strings.Contains(string(got.body), `"consumers":[]`) {
			t.Fatalf("consumers after refusals: %d %s", got.status, got.body)
		}
	})
}
