package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// recordedRequest is one request a recordingAPI received.
type recordedRequest struct {
	method, path string
	body         map[string]any
}

// recordingAPI answers from routes ("METHOD /path" -> status and body) and
// records every request; an unknown route is 404.
func recordingAPI(t *testing.T, routes map[string]string) (string, func() []recordedRequest) {
	t.Helper()
	var mu sync.Mutex
	var got []recordedRequest
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		rec := recordedRequest{method: r.Method, path: r.URL.Path}
		if len(raw) > 0 {
			if err := json.Unmarshal(raw, &rec.body); err != nil {
				t.Errorf("%s %s: body %q is not a JSON object", r.Method, r.URL.Path, raw)
			}
		}
		mu.Lock()
		got = append(got, rec)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		answer, ok := routes[r.Method+" "+r.URL.Path]
		if !ok {
			w.WriteHeader(404)
			_, _ = w.Write([]byte(`{"code":"queue_not_found","message":"no"}`))
			return
		}
		status, body, _ := strings.Cut(answer, " ")
		w.WriteHeader(map[string]int{"200": 200, "201": 201}[status])
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []recordedRequest {
		mu.Lock()
		defer mu.Unlock()
		out := got
		got = nil
		return out
	}
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestQueueCreateDedupFlags: the dedup and unclaimed flags of queue create
// become the attributes of the PUT.
func TestQueueCreateDedupFlags(t *testing.T) {
	url, requests := recordingAPI(t, map[string]string{"PUT /v1/queues/q": `201 {"name":"q","kind":"queue","dead_letter_queue":"q.dlq","attributes":{}}`})
	var out, errOut bytes.Buffer
	code := realMain([]string{"broker", "queue", "create", "--server", url, "--content-dedup", "--dedup-conflict", "reject",
		"--dedup-scope", "in_queue", "--max-unclaimed-age", "1m", "--dedup-window", "0s", "q"}, &out, &errOut)
	if code != exitOK || !strings.Contains(out.String(), "queue q created") {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out.String(), errOut.String())
	}
	reqs := requests()
	want := `{"content_dedup":true,"dedup_conflict":"reject","dedup_scope":"in_queue","dedup_window_ms":0,"max_unclaimed_age_ms":60000}`
	if len(reqs) != 1 || reqs[0].method != "PUT" || jsonOf(reqs[0].body) != want {
		t.Fatalf("requests %+v, want one PUT with %s", reqs, want)
	}
}

// TestQueuePurgeFlags: --state and --older-than of queue purge and dlq
// purge become the purge body; without them the body is {} (everything);
// a bad state is a usage error before any request.
func TestQueuePurgeFlags(t *testing.T) {
	url, requests := recordingAPI(t, map[string]string{
		"POST /v1/queues/q/purge":     `200 {"deleted":3}`,
		"POST /v1/queues/q.dlq/purge": `200 {"deleted":1}`,
		"GET /v1/queues/q":            `200 {"name":"q","kind":"queue","dead_letter_queue":"q.dlq"}`,
	})
	for _, c := range []struct {
		args  []string
		exit  int
		out   string
		calls []string // "METHOD path body"
	}{
		{[]string{"queue", "purge", "--state", "ready,delayed", "--state", "inflight", "--older-than", "1h", "q"}, exitOK,
			"purged 3 messages (ready/delayed/inflight, older than 1h0m0s) from q",
			[]string{`POST /v1/queues/q/purge {"older_than_ms":3600000,"states":["ready","delayed","inflight"]}`}},
		{[]string{"queue", "purge", "q"}, exitOK, "purged 3 messages from q", []string{`POST /v1/queues/q/purge {}`}},
		{[]string{"queue", "purge", "-o", "json", "--state", "acked", "q"}, exitOK, `"deleted": 3`, []string{`POST /v1/queues/q/purge {"states":["acked"]}`}},
		{[]string{"dlq", "purge", "--older-than", "24h", "q"}, exitOK, "purged 1 messages (older than 24h0m0s) from q.dlq",
			[]string{`GET /v1/queues/q null`, `POST /v1/queues/q.dlq/purge {"older_than_ms":86400000}`}},
		{[]string{"queue", "purge", "--state", "lost", "q"}, exitUsage, "", nil},
		{[]string{"dlq", "purge", "--state", "ready,gone", "q"}, exitUsage, "", nil},
		{[]string{"queue", "purge", "--older-than", "-1s", "q"}, exitUsage, "", nil},
		{[]string{"queue", "purge", "--state", "ready", "ghost"}, exitNotFound, "", []string{`POST /v1/queues/ghost/purge {"states":["ready"]}`}},
	} {
		var out, errOut bytes.Buffer
		args := append([]string{"broker", c.args[0], c.args[1], "--server", url}, c.args[2:]...)
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
}
