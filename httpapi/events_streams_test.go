package httpapi

import (
	"net/http"
	"testing"
)

// TestListStreams: GET /v1/stores/{store}/streams pages through the
// streams by name with a prefix; bad limits and missing stores are 4xx.
func TestListStreams(t *testing.T) {
	env := newEventsEnv(t)
	if got := env.call("PUT", "/v1/stores/s", "", nil); got.status != http.StatusCreated {
		t.Fatalf("create store: %d %s", got.status, got.body)
	}
	for _, s := range []string{"b-2", "a-1", "b-1"} {
		if got := env.appendJSON("/v1/stores/s/streams/"+s+"/events", `{"events":[{"type":"T","data":{}}]}`); got.status != http.StatusCreated {
			t.Fatalf("append to %s: %d %s", s, got.status, got.body)
		}
	}
	var page struct {
		Streams []struct {
			Stream       string `json:"stream"`
			State        string `json:"state"`
			HeadRevision int64  `json:"head_revision"`
			HeadPosition *int64 `json:"head_position"`
		} `json:"streams"`
		Next string `json:"next"`
	}
	got := env.call("GET", "/v1/stores/s/streams?limit=2", "", nil)
	got.decode(t, &page)
	if got.status != 200 || len(page.Streams) != 2 || page.Streams[0].Stream != "a-1" || page.Streams[1].Stream != "b-1" || page.Next != "b-1" ||
		page.Streams[0].HeadPosition == nil || *page.Streams[0].HeadPosition != 1 || page.Streams[0].State != "live" {
		t.Fatalf("page 1: %d %s", got.status, got.body)
	}
	page.Next = ""
	got = env.call("GET", "/v1/stores/s/streams?limit=2&after=b-1", "", nil)
	got.decode(t, &page)
	if len(page.Streams) != 1 || page.Streams[0].Stream != "b-2" || page.Next != "" {
		t.Fatalf("page 2: %s", got.body)
	}
	got = env.call("GET", "/v1/stores/s/streams?prefix=b-", "", nil)
	got.decode(t, &page)
	if len(page.Streams) != 2 || page.Streams[0].Stream != "b-1" {
		t.Fatalf("prefix b-: %s", got.body)
	}
	for _, c := range []struct {
		path   string
		status int
		code   string
	}{
		{"/v1/stores/s/streams?limit=0", 400, "out_of_range"},
		{"/v1/stores/s/streams?limit=1001", 400, "out_of_range"},
		{"/v1/stores/nope/streams", 404, "store_not_found"},
	} {
		if got := env.call("GET", c.path, "", nil); got.status != c.status || got.code(t) != c.code {
			t.Errorf("%s: %d %s", c.path, got.status, got.body)
		}
	}
}
