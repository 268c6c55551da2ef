package httpapi

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestEventsConsumersBadInput: every bad-input class of the consumer
// routes and of reads with consumer= gets its status and code and leaves
// the stored events and checkpoints unchanged.
func TestEventsConsumersBadInput(t *testing.T) {
	env := newEventsEnv(t)
	if got := env.appendJSON("/v1/stores/s/streams/a/events", `{"events":[{"type":"T"},{"type":"T"},{"type":"T"}]}`); got.status != 201 {
		t.Fatalf("setup append: %d %s", got.status, got.body)
	}
	if got := env.call("PUT", "/v1/stores/s/consumers/c", "application/json", []byte(`{"start":"first"}`)); got.status != 201 {
		t.Fatalf("setup consumer: %d %s", got.status, got.body)
	}
	if got := env.call("POST", "/v1/stores/s/consumers/c/commit", "application/json", []byte(`{"position":2}`)); got.status != 200 {
		t.Fatalf("setup commit: %d %s", got.status, got.body)
	}
	long := strings.Repeat("x", 129)
	before := env.digest()
	cases := []struct {
		name        string
		method      string
		path        string
		contentType string
		body        string
		status      int
		code        string
	}{
		{"create bad json", "PUT", "/v1/stores/s/consumers/d", "application/json", `{"start":`, 400, "invalid_json"},
		{"create not an object", "PUT", "/v1/stores/s/consumers/d", "application/json", `["first"]`, 400, "invalid_json"},
		{"create start not a string", "PUT", "/v1/stores/s/consumers/d", "application/json", `{"start":1}`, 400, "invalid_json"},
		{"create unknown field", "PUT", "/v1/stores/s/consumers/d", "application/json", `{"from":"first"}`, 400, "unknown_field"},
		{"create media type", "PUT", "/v1/stores/s/consumers/d", "text/plain", `{"start":"first"}`, 415, "unsupported_media_type"},
		{"create bad start", "PUT", "/v1/stores/s/consumers/d", "application/json", `{"start":"yesterday"}`, 400, "invalid_from"},
		{"create bad time", "PUT", "/v1/stores/s/consumers/d", "application/json", `{"start":"time:noon"}`, 400, "invalid_from"},
		{"create negative position", "PUT", "/v1/stores/s/consumers/d", "application/json", `{"start":"pos:-1"}`, 400, "invalid_from"},
		{"create past the end", "PUT", "/v1/stores/s/consumers/d", "application/json", `{"start":"pos:4"}`, 400, "out_of_range"},
		{"create with another start", "PUT", "/v1/stores/s/consumers/c", "application/json", `{"start":"new"}`, 409, "immutable_field"},
		{"create control char name", "PUT", "/v1/stores/s/consumers/a%0Ab", "", ``, 400, "invalid_name"},
		{"create long name", "PUT", "/v1/stores/s/consumers/" + long, "", ``, 400, "invalid_name"},
		{"create bad utf-8 name", "PUT", "/v1/stores/s/consumers/%FF", "", ``, 400, "invalid_name"},
		{"create in unknown store", "PUT", "/v1/stores/nope/consumers/d", "", ``, 404, "store_not_found"},
		{"describe unknown", "GET", "/v1/stores/s/consumers/d", "", ``, 404, "consumer_not_found"},
		{"describe bad name", "GET", "/v1/stores/s/consumers/a%7Fb", "", ``, 400, "invalid_name"},
		{"describe in unknown store", "GET", "/v1/stores/nope/consumers/c", "", ``, 404, "store_not_found"},
		{"list unknown store", "GET", "/v1/stores/nope/consumers", "", ``, 404, "store_not_found"},
		{"delete unknown", "DELETE", "/v1/stores/s/consumers/d", "", ``, 404, "consumer_not_found"},
		{"delete in unknown store", "DELETE", "/v1/stores/nope/consumers/c", "", ``, 404, "store_not_found"},
		{"commit empty body", "POST", "/v1/stores/s/consumers/c/commit", "application/json", ``, 400, "invalid_json"},
		{"commit bad json", "POST", "/v1/stores/s/consumers/c/commit", "application/json", `{"position":`, 400, "invalid_json"},
		{"commit two values", "POST", "/v1/stores/s/consumers/c/commit", "application/json", `{"position":3} {}`, 400, "invalid_json"},
		{"commit unknown field", "POST", "/v1/stores/s/consumers/c/commit", "application/json", `{"position":3,"forced":true}`, 400, "unknown_field"},
		{"commit media type", "POST", "/v1/stores/s/consumers/c/commit", "text/plain", `{"position":3}`, 415, "unsupported_media_type"},
		{"commit without position", "POST", "/v1/stores/s/consumers/c/commit", "application/json", `{"force":true}`, 400, "invalid_body"},
		{"commit null position", "POST", "/v1/stores/s/consumers/c/commit", "application/json", `{"position":null}`, 400, "invalid_body"},
		{"commit string position", "POST", "/v1/stores/s/consumers/c/commit", "application/json", `{"position":"3"}`, 400, "invalid_json"},
		{"commit fractional position", "POST", "/v1/stores/s/consumers/c/commit", "application/json", `{"position":2.5}`, 400, "invalid_json"},
		{"commit bool force", "POST", "/v1/stores/s/consumers/c/commit", "application/json", `{"position":3,"force":"yes"}`, 400, "invalid_json"},
		{"commit negative", "POST", "/v1/stores/s/consumers/c/commit", "application/json", `{"position":-1,"force":true}`, 400, "out_of_range"},
		{"commit past the end", "POST", "/v1/stores/s/consumers/c/commit", "application/json", `{"position":4}`, 400, "out_of_range"},
		{"commit huge", "POST", "/v1/stores/s/consumers/c/commit", "application/json", `{"position":9223372036854775807}`, 400, "out_of_range"},
		{"commit regression", "POST", "/v1/stores/s/consumers/c/commit", "application/json", `{"position":1}`, 409, "checkpoint_regression"},
		{"commit regression, force false", "POST", "/v1/stores/s/consumers/c/commit", "application/json", `{"position":0,"force":false}`, 409, "checkpoint_regression"},
		{"commit unknown consumer", "POST", "/v1/stores/s/consumers/d/commit", "application/json", `{"position":1}`, 404, "consumer_not_found"},
		{"commit bad name", "POST", "/v1/stores/s/consumers/a%0Ab/commit", "application/json", `{"position":1}`, 400, "invalid_name"},
		{"commit in unknown store", "POST", "/v1/stores/nope/consumers/c/commit", "application/json", `{"position":1}`, 404, "store_not_found"},
		{"read with unknown consumer", "GET", "/v1/stores/s/events?consumer=d", "", ``, 404, "consumer_not_found"},
		{"read with unknown consumer and from", "GET", "/v1/stores/s/events?consumer=d&from=first", "", ``, 404, "consumer_not_found"},
		{"read with empty consumer", "GET", "/v1/stores/s/events?consumer=", "", ``, 400, "invalid_name"},
		{"read with consumer, bad from", "GET", "/v1/stores/s/events?consumer=c&from=yesterday", "", ``, 400, "invalid_from"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := env.call(c.method, c.path, c.contentType, []byte(c.body))
			if got.status != c.status || got.code(t) != c.code {
				t.Fatalf("%s %s: %d %s, want %d %s", c.method, c.path, got.status, got.body, c.status, c.code)
			}
			if after := env.digest(); after != before {
				t.Fatalf("the request changed the store:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
	// An SSE tail with an unknown consumer is refused before the stream.
	if got := env.call("GET", "/v1/stores/s/events?consumer=d", "", nil, "Accept", "text/event-stream"); got.status != 404 || got.code(t) != "consumer_not_found" {
		t.Fatalf("SSE with an unknown consumer: %d %s", got.status, got.body)
	}
	// Details.
	var e nativeError
	env.call("POST", "/v1/stores/s/consumers/c/commit", "application/json", []byte(`{"position":1}`)).decode(t, &e)
	if e.Details["position"] != float64(1) || e.Details["current_position"] != float64(2) {
		t.Fatalf("regression details %v", e.Details)
	}
	e = nativeError{}
	env.call("PUT", "/v1/stores/s/consumers/c", "application/json", []byte(`{"start":"3"}`)).decode(t, &e)
	if e.Details["field"] != "start" || e.Details["current"] != "first" || e.Details["requested"] != "pos:3" {
		t.Fatalf("immutable start details %v", e.Details)
	}
}

// TestEventsConsumers: create (201, same start 200, default start first),
// describe with lag, list, read with consumer= from the checkpoint (and
// from= winning over it) without moving it, commit, forced rewind, the SSE
// tail starting at the checkpoint, delete, and the store's deletion
// taking its consumers.
func TestEventsConsumers(t *testing.T) {
	env := newEventsEnv(t)
	env.appendJSON("/v1/stores/s/streams/a/events", `{"events":[{"type":"E0"},{"type":"E1"},{"type":"E2"}]}`)
	var c consumerJSON
	got := env.call("PUT", "/v1/stores/s/consumers/proj", "", nil)
	got.decode(t, &c)
	if got.status != 201 || c.Consumer != "proj" || c.Store != "s" || c.Start != "first" || c.Position != 0 || c.HeadPosition != 3 || c.Lag != 3 || c.CreatedAt == "" {
		t.Fatalf("create: %d %s", got.status, got.body)
	}
	if again := env.call("PUT", "/v1/stores/s/consumers/proj", "application/json", []byte(`{"start":"first"}`)); again.status != 200 {
		t.Fatalf("create again: %d %s", again.status, again.body)
	}
	got = env.call("PUT", "/v1/stores/s/consumers/tail%2F1", "application/json", []byte(`{"start":"new"}`))
	got.decode(t, &c)
	if got.status != 201 || c.Consumer != "tail/1" || c.Position != 3 || c.Lag != 0 {
		t.Fatalf("create at new: %d %s", got.status, got.body)
	}

	read := func(query string) allPageJSON {
		t.Helper()
		var page allPageJSON
		got := env.call("GET", "/v1/stores/s/events?"+query, "", nil)
		if got.status != 200 {
			t.Fatalf("read %s: %d %s", query, got.status, got.body)
		}
		got.decode(t, &page)
		return page
	}
	if page := read("consumer=proj&limit=2"); len(page.Events) != 2 || page.Events[0].Position != 0 || page.NextPosition != 2 {
		t.Fatalf("read with the consumer: %+v", page)
	}
	if page := read("consumer=proj"); len(page.Events) != 3 {
		t.Fatalf("a read moved the checkpoint: %+v", page)
	}
	if page := read("consumer=proj&from=2"); len(page.Events) != 1 || page.Events[0].Position != 2 {
		t.Fatalf("from wins over the consumer: %+v", page)
	}
	got = env.call("POST", "/v1/stores/s/consumers/proj/commit", "application/json", []byte(`{"position":2}`))
	got.decode(t, &c)
	if got.status != 200 || c.Position != 2 || c.Lag != 1 {
		t.Fatalf("commit: %d %s", got.status, got.body)
	}
	if again := env.call("POST", "/v1/stores/s/consumers/proj/commit", "application/json", []byte(`{"position":2}`)); again.status != 200 {
		t.Fatalf("commit again: %d %s", again.status, again.body)
	}
	if page := read("consumer=proj"); len(page.Events) != 1 || page.Events[0].Position != 2 {
		t.Fatalf("read after the commit: %+v", page)
	}
	got = env.call("POST", "/v1/stores/s/consumers/proj/commit", "application/json", []byte(`{"position":1,"force":true}`))
	got.decode(t, &c)
	if got.status != 200 || c.Position != 1 {
		t.Fatalf("forced rewind: %d %s", got.status, got.body)
	}
	got = env.call("GET", "/v1/stores/s/consumers/proj", "", nil)
	got.decode(t, &c)
	if got.status != 200 || c.Position != 1 || c.Lag != 2 || c.UpdatedMs < c.CreatedMs {
		t.Fatalf("describe: %d %s", got.status, got.body)
	}
	var list struct{ Consumers []consumerJSON }
	env.call("GET", "/v1/stores/s/consumers", "", nil).decode(t, &list)
	if len(list.Consumers) != 2 || list.Consumers[0].Consumer != "proj" || list.Consumers[1].Consumer != "tail/1" {
		t.Fatalf("list: %+v", list)
	}

	// SSE with a consumer starts at its checkpoint (not at new).
	req, _ := http.NewRequest("GET", env.base+"/v1/stores/s/events?consumer=proj", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	msgs := readSSEMessages(t, bufio.NewReader(resp.Body), 2)
	resp.Body.Close()
	if msgs[0].id != "1" || msgs[1].id != "2" {
		t.Fatalf("SSE with a consumer: %+v", msgs)
	}

	if del := env.call("DELETE", "/v1/stores/s/consumers/tail%2F1", "", nil); del.status != 204 {
		t.Fatalf("delete: %d %s", del.status, del.body)
	}
	if got := env.call("GET", "/v1/stores/s/consumers/tail%2F1", "", nil); got.status != 404 {
		t.Fatalf("describe after delete: %d %s", got.status, got.body)
	}
	if del := env.call("DELETE", "/v1/stores/s", "", nil); del.status != 204 {
		t.Fatalf("delete store: %d %s", del.status, del.body)
	}
	env.appendJSON("/v1/stores/s/streams/a/events", `{"events":[{"type":"T"}]}`)
	got = env.call("GET", "/v1/stores/s/consumers", "", nil)
	if got.status != 200 || !strings.Contains(string(got.body), `"consumers":[]`) {
		t.Fatalf("consumers of the re-created store: %d %s", got.status, got.body)
	}
	var e struct{ Code string }
	_ = json.Unmarshal(env.call("GET", "/v1/stores/s/consumers/proj", "", nil).body, &e)
	if e.Code != "consumer_not_found" {
		t.Fatalf("the old consumer survived its store: %s", e.Code)
	}
}

// TestUncleanPathNotRedirectedForWrites pins a bug: the router answered a
// path with a "." or ".." segment (or "//") with a 307 to the cleaned
// path, which clients follow with the same method: DELETE
// /v1/stores/s/consumers/.. deleted the store s, a PUT created or fetched
// it. Writes to an unclean path are now 404 not_found; a consumer cannot
// be named ".." (nor reached as %2E%2E).
func TestUncleanPathNotRedirectedForWrites(t *testing.T) {
	env := newEventsEnv(t)
	if got := env.appendJSON("/v1/stores/s/streams/a/events", `{"events":[{"type":"T"}]}`); got.status != 201 {
		t.Fatalf("setup append: %d %s", got.status, got.body)
	}
	before := env.digest()
	for _, c := range []struct{ method, path string }{
		{"DELETE", "/v1/stores/s/consumers/.."},
		{"DELETE", "/v1/stores/s/streams/.."},
		{"DELETE", "/v1/stores//s"},
		{"PUT", "/v1/stores/s/consumers/.."},
		{"POST", "/v1/stores/s/consumers/./x/../../streams/a/events"},
	} {
		got := env.call(c.method, c.path, "application/json", []byte(`{"events":[{"type":"T"}]}`))
		if got.status != 404 || got.code(t) != "not_found" {
			t.Errorf("%s %s: %d %s, want 404 not_found", c.method, c.path, got.status, got.body)
		}
	}
	if after := env.digest(); after != before {
		t.Fatalf("writes to unclean paths changed the stores:\n%s\nwant\n%s", after, before)
	}
	// The name itself is refused since (TestDotNamesRefusedForEveryResource).
	if got := env.call("PUT", "/v1/stores/s/consumers/%2E%2E", "", nil); got.status != 400 || got.code(t) != "invalid_name" {
		t.Fatalf("PUT consumer %%2E%%2E: %d %s, want 400 invalid_name", got.status, got.body)
	}
}
