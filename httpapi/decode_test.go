package httpapi

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
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

// TestBodyWithoutContentTypeRefused pins the closing of a cross-site
// request hole: the event, consumer and storage routes read a body
// without Content-Type as JSON, so a page of any other site could make a
// browser append events, create consumers or start a backup (a CORS
// "simple request" needs no preflight). Every route now answers such a
// body 415 unsupported_media_type, as the queue and admin routes did, and
// writes nothing.
func TestBodyWithoutContentTypeRefused(t *testing.T) {
	env := newEventsEnv(t)
	if got := env.appendJSON("/v1/stores/s/streams/a/events", `{"events":[{"type":"T"}]}`); got.status != 201 {
		t.Fatalf("append: %d %s", got.status, got.body)
	}
	env.call("PUT", "/v1/stores/s/consumers/c", "", nil)
	before := env.digest()
	backupDir := filepath.Join(t.TempDir(), "backup")
	for _, c := range []struct {
		name, method, path, contentType, body string
	}{
		{"events append", "POST", "/v1/stores/s/streams/a/events", "", `{"events":[{"type":"T"}]}`},
		{"events append to a new store", "POST", "/v1/stores/new/streams/a/events", "", `{"events":[{"type":"T"}]}`},
		{"events append as text/plain", "POST", "/v1/stores/s/streams/a/events", "text/plain", `{"events":[{"type":"T"}]}`},
		{"consumer create", "PUT", "/v1/stores/s/consumers/d", "", `{"start":"first"}`},
		{"consumer commit", "POST", "/v1/stores/s/consumers/c/commit", "", `{"position":1}`},
		{"store create", "PUT", "/v1/stores/other", "", `{}`},
		{"storage backup", "POST", "/v1/admin/backup", "", `{"dir":"` + backupDir + `"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := env.call(c.method, c.path, c.contentType, []byte(c.body))
			if got.status != 415 || got.code(t) != "unsupported_media_type" {
				t.Fatalf("%s %s without a JSON Content-Type: %d %s, want 415 unsupported_media_type", c.method, c.path, got.status, got.body)
			}
			if after := env.digest(); after != before {
				t.Fatal("a refused request changed the store")
			}
			if _, err := os.Stat(backupDir); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("the backup directory exists after a refused backup: %v", err)
			}
		})
	}
	// The same bodies with a JSON type are served.
	if got := env.call("POST", "/v1/stores/s/streams/a/events", "application/json", []byte(`{"events":[{"type":"T"}]}`)); got.status != 201 {
		t.Fatalf("append with application/json: %d %s", got.status, got.body)
	}
	if got := env.call("PUT", "/v1/stores/s/consumers/d", "application/json; charset=utf-8", []byte(`{"start":"first"}`)); got.status != 201 {
		t.Fatalf("consumer create with application/json: %d %s", got.status, got.body)
	}
}
