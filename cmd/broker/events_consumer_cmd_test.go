package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestEventsConsumerCommands: each `broker events consumer` subcommand
// sends its request (path escaped, body) and prints the answer; bad
// arguments are usage errors before any request.
func TestEventsConsumerCommands(t *testing.T) {
	info := `{"consumer":"proj/1","store":"bank","start":"first","position":4,"head_position":10,"first_position":0,"lag":6,"truncated":false,"created_at":"2025-01-01T00:00:00.000Z","updated_at":"2025-01-01T00:00:01.000Z"}`
	url, requests := recordingAPI(t, map[string]string{
		"PUT /v1/stores/bank/consumers/proj/1":         "201 " + info,
		"PUT /v1/stores/bank/consumers/old":            "200 " + strings.Replace(info, "proj/1", "old", 1),
		"GET /v1/stores/bank/consumers/proj/1":         "200 " + info,
		"GET /v1/stores/bank/consumers":                `200 {"consumers":[` + info + `]}`,
		"POST /v1/stores/bank/consumers/proj/1/commit": "200 " + info,
		"DELETE /v1/stores/bank/consumers/proj/1":      "200 {}",
	})
	for _, c := range []struct {
		args  []string
		exit  int
		out   string
		calls []string // "METHOD path body"
	}{
		{[]string{"create", "--start", "pos:4", "bank", "proj/1"}, exitOK, "created consumer bank/proj/1 at position 4; head 10, lag 6; start first",
			[]string{`PUT /v1/stores/bank/consumers/proj/1 {"start":"pos:4"}`}},
		{[]string{"create", "bank", "old"}, exitOK, "exists: consumer bank/old at position 4",
			[]string{`PUT /v1/stores/bank/consumers/old {"start":"first"}`}},
		{[]string{"describe", "-o", "json", "bank", "proj/1"}, exitOK, `"lag": 6`, []string{`GET /v1/stores/bank/consumers/proj/1 null`}},
		{[]string{"list", "bank"}, exitOK, "proj/1", []string{`GET /v1/stores/bank/consumers null`}},
		{[]string{"commit", "bank", "proj/1", "4"}, exitOK, "committed: consumer bank/proj/1 at position 4",
			[]string{`POST /v1/stores/bank/consumers/proj/1/commit {"force":false,"position":4}`}},
		{[]string{"commit", "--force", "bank", "proj/1", "0"}, exitOK, "committed",
			[]string{`POST /v1/stores/bank/consumers/proj/1/commit {"force":true,"position":0}`}},
		{[]string{"delete", "bank", "proj/1"}, exitOK, "consumer bank/proj/1 deleted", []string{`DELETE /v1/stores/bank/consumers/proj/1 null`}},
		{[]string{"describe", "bank", "ghost"}, exitNotFound, "", []string{`GET /v1/stores/bank/consumers/ghost null`}},
		{[]string{"commit", "bank", "proj/1", "-1"}, exitUsage, "", nil},
		{[]string{"commit", "bank", "proj/1", "x"}, exitUsage, "", nil},
		{[]string{"commit", "bank", "proj/1"}, exitUsage, "", nil},
		{[]string{"create", "bank"}, exitUsage, "", nil},
		{[]string{"list", "-o", "yaml", "bank"}, exitUsage, "", nil},
		{[]string{"delete", "bank", "a", "b"}, exitUsage, "", nil},
	} {
		var out, errOut bytes.Buffer
		args := append([]string{"broker", "events", "consumer", c.args[0], "--server", url}, c.args[1:]...)
		code := realMain(args, &out, &errOut)
		if code != c.exit || !strings.Contains(out.String(), c.out) {
			t.Errorf("broker %v: exit %d, want %d\nstdout: %s\nstderr: %s", c.args, code, c.exit, out.String(), errOut.String())
		}
		var calls []string
		for _, r := range requests() {
			calls = append(calls, r.method+" "+r.path+" "+jsonOf(r.body))
		}
		if strings.Join(calls, "\n") != strings.Join(c.calls, "\n") {
			t.Errorf("broker %v: requests\n%s\nwant\n%s", c.args, strings.Join(calls, "\n"), strings.Join(c.calls, "\n"))
		}
	}

	// Conflicts exit 4: another start, a regression.
	conflict := fakeAPI(t, 409, "application/json", `{"code":"checkpoint_regression","message":"no"}`)
	for _, args := range [][]string{
		{"commit", "--server", conflict, "bank", "c", "1"},
		{"create", "--server", conflict, "--start", "new", "bank", "c"},
	} {
		var out, errOut bytes.Buffer
		if code := realMain(append([]string{"broker", "events", "consumer"}, args...), &out, &errOut); code != exitConflict {
			t.Errorf("broker events consumer %v: exit %d, want %d\nstderr: %s", args, code, exitConflict, errOut.String())
		}
	}
}

// TestEventsReadWithConsumer: `events read --consumer` sends consumer= and
// no from (the checkpoint is the start) unless --from is given; a stream
// read refuses --consumer.
func TestEventsReadWithConsumer(t *testing.T) {
	var mu sync.Mutex
	var queries []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		queries = append(queries, r.URL.RawQuery)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"events":[],"next_position":3,"head_position":3,"first_position":0,"truncated":false}`))
	}))
	t.Cleanup(srv.Close)
	for _, args := range [][]string{
		{"--consumer", "proj", "bank"},
		{"--consumer", "proj", "--from", "2", "bank"},
	} {
		var out, errOut bytes.Buffer
		if code := realMain(append([]string{"broker", "events", "read", "--server", srv.URL}, args...), &out, &errOut); code != exitOK {
			t.Fatalf("read %v: exit %d: %s", args, code, errOut.String())
		}
	}
	var out, errOut bytes.Buffer
	if code := realMain([]string{"broker", "events", "read", "--server", srv.URL, "--consumer", "proj", "bank", "stream"}, &out, &errOut); code != exitUsage {
		t.Fatalf("stream read with --consumer: exit %d", code)
	}
	want := []string{"consumer=proj&limit=100", "consumer=proj&from=2&limit=100"}
	if strings.Join(queries, " ") != strings.Join(want, " ") {
		t.Fatalf("queries %q, want %q", queries, want)
	}
}

// TestEventsConsumerDotNames pins a bug: a consumer (or stream) named "."
// or ".." went into the path as is, Go's ServeMux answered the unclean
// path with a 307 to the cleaned one, and the client followed it with the
// same method: `broker events consumer delete bank ..` sent DELETE
// /v1/stores/bank and deleted the store. Dot segments are now escaped, so
// the request reaches the consumer (or stream) route.
func TestEventsConsumerDotNames(t *testing.T) {
	var mu sync.Mutex
	var hits []string
	hit := func(route string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			hits = append(hits, route+" "+r.PathValue("consumer")+r.PathValue("stream"))
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{}`))
		}
	}
	mux := http.NewServeMux()
	mux.Handle("DELETE /v1/stores/{store}", hit("delete-store"))
	mux.Handle("DELETE /v1/stores/{store}/consumers/{consumer}", hit("delete-consumer"))
	mux.Handle("DELETE /v1/stores/{store}/streams/{stream}", hit("delete-stream"))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"events", "consumer", "delete", "--server", srv.URL, "bank", ".."}, "delete-consumer .."},
		{[]string{"events", "consumer", "delete", "--server", srv.URL, "bank", "."}, "delete-consumer ."},
		{[]string{"events", "delete", "--server", srv.URL, "bank", ".."}, "delete-stream .."},
	} {
		mu.Lock()
		hits = nil
		mu.Unlock()
		var out, errOut bytes.Buffer
		realMain(append([]string{"broker"}, c.args...), &out, &errOut)
		mu.Lock()
		got := strings.Join(hits, ", ")
		mu.Unlock()
		if got != c.want {
			t.Errorf("broker %v reached %q, want %q\nstdout: %s\nstderr: %s", c.args, got, c.want, out.String(), errOut.String())
		}
	}
}
