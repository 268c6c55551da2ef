package httpapi

import (
	"testing"
)

// TestStrictDecoderOnEveryRoute pins the switch of the event store,
// consumer and storage routes from encoding/json to the one strict
// decoder (JSON v2, decodeBody): before it, a duplicate member was
// accepted (the last one won) and a member name matched in any case
// ("Events" for "events"). Both are now refused with the documented 400
// codes, invalid_json and unknown_field, and nothing is written.
func TestStrictDecoderOnEveryRoute(t *testing.T) {
	env := newEventsEnv(t)
	if got := env.appendJSON("/v1/stores/s/streams/a/events", `{"events":[{"type":"T"}]}`); got.status != 201 {
		t.Fatalf("append: %d %s", got.status, got.body)
	}
	env.call("PUT", "/v1/stores/s/consumers/c", "", nil)
	before := env.digest()
	for _, c := range []struct {
		name, method, path, body, code string
	}{
		{"append duplicate member", "POST", "/v1/stores/s/streams/a/events", `{"events":[{"type":"T"}],"events":[{"type":"U"}]}`, "invalid_json"},
		{"append duplicate event member", "POST", "/v1/stores/s/streams/a/events", `{"events":[{"type":"T","type":"U"}]}`, "invalid_json"},
		{"append wrong case", "POST", "/v1/stores/s/streams/a/events", `{"Events":[{"type":"T"}]}`, "unknown_field"},
		{"append event wrong case", "POST", "/v1/stores/s/streams/a/events", `{"events":[{"Type":"T"}]}`, "unknown_field"},
		{"commit duplicate member", "POST", "/v1/stores/s/consumers/c/commit", `{"position":0,"position":1}`, "invalid_json"},
		{"commit wrong case", "POST", "/v1/stores/s/consumers/c/commit", `{"Position":1}`, "unknown_field"},
		{"consumer wrong case", "PUT", "/v1/stores/s/consumers/d", `{"Start":"first"}`, "unknown_field"},
		{"backup wrong case", "POST", "/v1/admin/backup", `{"DIR":"/tmp/never"}`, "unknown_field"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := env.call(c.method, c.path, "application/json", []byte(c.body))
			if got.status != 400 || got.code(t) != c.code {
				t.Fatalf("%s %s %s: %d %s, want 400 %s", c.method, c.path, c.body, got.status, got.body, c.code)
			}
			if after := env.digest(); after != before {
				t.Fatal("a refused request changed the store")
			}
		})
	}
}
