package compattests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Black-box tests of the event store over the broker's HTTP API and the
// `broker events` CLI (NATIVE-QUEUE.md §4 and §7 "Event store"): restart and
// kill -9 keep acknowledged appends with gap-free positions, concurrent
// optimistic appends, tails over Server-Sent Events, and every bad-input
// class answered with its code and no change.

var esHTTP = &http.Client{Timeout: 30 * time.Second}

type esResp struct {
	Status int
	Body   map[string]any
	Raw    string
}

// esCall sends one request; a transport error is returned, not fatal (the
// broker may be down on purpose).
func esCall(b *brokerProc, method, path, contentType string, body []byte) (esResp, error) {
	req, err := http.NewRequest(method, "http://"+b.HTTPAddr()+path, bytes.NewReader(body))
	if err != nil {
		return esResp{}, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := esHTTP.Do(req)
	if err != nil {
		return esResp{}, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := esResp{Status: resp.StatusCode, Raw: string(raw)}
	_ = json.Unmarshal(raw, &r.Body)
	return r, nil
}

func esMust(t *testing.T, b *brokerProc, method, path string, body any, status int) esResp {
	t.Helper()
	var raw []byte
	ct := ""
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			t.Fatal(err)
		}
		ct = "application/json"
	}
	r, err := esCall(b, method, path, ct, raw)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	if r.Status != status {
		t.Fatalf("%s %s: status %d, want %d: %.400s", method, path, r.Status, status, r.Raw)
	}
	return r
}

type esEvent struct {
	Position int64           `json:"position"`
	Stream   string          `json:"stream"`
	Revision *int64          `json:"revision"`
	ID       string          `json:"id"`
	Type     string          `json:"type"`
	Data     json.RawMessage `json:"data"`
}

type esAppendResult struct {
	FirstPosition int64 `json:"first_position"`
	LastPosition  int64 `json:"last_position"`
	FirstRevision int64 `json:"first_revision"`
	LastRevision  int64 `json:"last_revision"`
	Idempotent    bool  `json:"idempotent"`
}

func esAppendBody(expected any, evs ...map[string]any) map[string]any {
	return map[string]any{"expected_revision": expected, "events": evs}
}

func esDecode(t *testing.T, raw string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(raw), v); err != nil {
		t.Fatalf("decode %.300s: %v", raw, err)
	}
}

// esJSON renders v for comparisons.
func esJSON(v any) string {
	raw, _ := json.Marshal(v)
	return string(raw)
}

// esReadAll reads every event of a store, page by page.
func esReadAll(t *testing.T, b *brokerProc, store string) []esEvent {
	t.Helper()
	var out []esEvent
	from := int64(0)
	for {
		r := esMust(t, b, "GET", fmt.Sprintf("/v1/stores/%s/events?from=%d&limit=1000", store, from), nil, 200)
		var page struct {
			Events       []esEvent `json:"events"`
			NextPosition int64     `json:"next_position"`
			HeadPosition int64     `json:"head_position"`
		}
		esDecode(t, r.Raw, &page)
		out = append(out, page.Events...)
		if page.NextPosition >= page.HeadPosition || page.NextPosition == from {
			return out
		}
		from = page.NextPosition
	}
}

// esCheckGapFree asserts positions 0..n-1 and per-stream revisions from 0.
func esCheckGapFree(t *testing.T, all []esEvent) {
	t.Helper()
	next := map[string]int64{}
	for i, e := range all {
		if e.Position != int64(i) {
			t.Fatalf("event %d has position %d: positions are not gap-free", i, e.Position)
		}
		if e.Revision == nil || *e.Revision != next[e.Stream] {
			t.Fatalf("position %d of stream %s has revision %v, want %d", e.Position, e.Stream, e.Revision, next[e.Stream])
		}
		next[e.Stream]++
	}
}

// brokerCLI runs the broker binary with args and returns its exit code and
// output.
func brokerCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, brokerBin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("run broker %v: %v", args, err)
	}
	return code, out.String(), errOut.String()
}

// TestEventsRestartKeepsEvents: events, revisions, positions and event ids
// survive a clean restart; appends continue the positions and revisions;
// a retried append after the restart gets its original positions.
func TestEventsRestartKeepsEvents(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	for i := range 5 {
		for _, stream := range []string{"order-1", "order-2", "order-3"} {
			expected := any(int64(i - 1))
			if i == 0 {
				expected = "no_stream"
			}
			esMust(t, b, "POST", "/v1/stores/shop/streams/"+stream+"/events", esAppendBody(expected,
				map[string]any{"id": fmt.Sprintf("%s-%d", stream, i), "type": "Step", "data": map[string]any{"i": i}},
			), 201)
		}
	}
	before := esReadAll(t, b, "shop")
	esCheckGapFree(t, before)
	b.Restart()
	after := esReadAll(t, b, "shop")
	if esJSON(after) != esJSON(before) {
		t.Fatalf("events changed across the restart:\nbefore %v\nafter  %v", before, after)
	}
	r := esMust(t, b, "POST", "/v1/stores/shop/streams/order-2/events", esAppendBody(4, map[string]any{"type": "After"}), 201)
	var res esAppendResult
	esDecode(t, r.Raw, &res)
	if res.FirstPosition != 15 || res.FirstRevision != 5 {
		t.Fatalf("append after restart: %s", r.Raw)
	}
	r = esMust(t, b, "POST", "/v1/stores/shop/streams/order-1/events", esAppendBody("no_stream",
		map[string]any{"id": "order-1-0", "type": "Step", "data": map[string]any{"i": 0}}), 200)
	esDecode(t, r.Raw, &res)
	if !res.Idempotent || res.FirstPosition != 0 {
		t.Fatalf("retry after restart: %s", r.Raw)
	}
	esCheckGapFree(t, esReadAll(t, b, "shop"))
}

// TestEventsKill9KeepsAcknowledged: four writers append with expected
// revisions while the broker is killed with SIGKILL twice. A writer
// retries an unanswered append with the same event ids. Afterwards every
// acknowledged append is at its acknowledged positions, positions are
// gap-free, each event id is stored once and revisions are contiguous.
func TestEventsKill9KeepsAcknowledged(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	esMust(t, b, "PUT", "/v1/stores/crash", nil, 201)
	type ack struct {
		stream string
		ids    []string
		res    esAppendResult
	}
	var mu sync.Mutex
	var acked []ack
	var stop atomic.Bool
	var wg sync.WaitGroup
	var total atomic.Int64
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stream := fmt.Sprintf("writer-%d", w)
			next := int64(0)
			for i := 0; !stop.Load(); i++ {
				ids := []string{fmt.Sprintf("%s-%d-a", stream, i), fmt.Sprintf("%s-%d-b", stream, i)}
				expected := any(next - 1)
				if next == 0 {
					expected = "no_stream"
				}
				body, _ := json.Marshal(esAppendBody(expected,
					map[string]any{"id": ids[0], "type": "A", "data": i}, map[string]any{"id": ids[1], "type": "B", "data": i}))
				for !stop.Load() {
					r, err := esCall(b, "POST", "/v1/stores/crash/streams/"+stream+"/events", "application/json", body)
					if err != nil || r.Status == 503 {
						time.Sleep(50 * time.Millisecond)
						continue // the broker is down: retry the same append
					}
					if r.Status != 201 && r.Status != 200 {
						t.Errorf("%s append %d: %d %s", stream, i, r.Status, r.Raw)
						return
					}
					var res esAppendResult
					_ = json.Unmarshal([]byte(r.Raw), &res)
					if res.FirstRevision != next {
						t.Errorf("%s append %d got revision %d, want %d", stream, i, res.FirstRevision, next)
						return
					}
					next = res.LastRevision + 1
					mu.Lock()
					acked = append(acked, ack{stream, ids, res})
					mu.Unlock()
					total.Add(2)
					break
				}
			}
		}()
	}
	waitFor := func(n int64) {
		deadline := time.Now().Add(60 * time.Second)
		for total.Load() < n && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	}
	for cycle := range 2 {
		waitFor(int64(200 * (cycle + 1)))
		b.Kill()
		time.Sleep(100 * time.Millisecond)
		b.Start()
	}
	waitFor(total.Load() + 100)
	stop.Store(true)
	wg.Wait()
	if t.Failed() {
		return
	}

	all := esReadAll(t, b, "crash")
	esCheckGapFree(t, all)
	seen := map[string]int{}
	for _, e := range all {
		seen[e.ID]++
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("event id %s is stored %d times", id, n)
		}
	}
	for _, a := range acked {
		for k, id := range a.ids {
			pos := a.res.FirstPosition + int64(k)
			if pos >= int64(len(all)) || all[pos].ID != id || all[pos].Stream != a.stream {
				t.Fatalf("acknowledged event %s at position %d is missing or moved", id, pos)
			}
		}
	}
	t.Logf("%d acknowledged appends, %d events stored", len(acked), len(all))
}

// TestEventsConcurrentExpectedRevision: eight HTTP writers race for each
// revision of one stream; exactly one wins each round, the others get 409
// wrong_expected_revision, and positions stay gap-free.
func TestEventsConcurrentExpectedRevision(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	esMust(t, b, "PUT", "/v1/stores/race", nil, 201)
	const writers, rounds = 8, 25
	wins := make([]atomic.Int32, rounds)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				expected := any(r - 1)
				if r == 0 {
					expected = "no_stream"
				}
				body, _ := json.Marshal(esAppendBody(expected, map[string]any{"type": "T", "data": map[string]any{"w": w, "r": r}}))
				resp, err := esCall(b, "POST", "/v1/stores/race/streams/contended/events", "application/json", body)
				if err != nil {
					t.Error(err)
					return
				}
				switch {
				case resp.Status == 201:
					wins[r].Add(1)
				case resp.Status == 409 && resp.Body["code"] == "wrong_expected_revision":
				default:
					t.Errorf("writer %d round %d: %d %s", w, r, resp.Status, resp.Raw)
					return
				}
				// Next round only once this one has a durable winner (a
				// loser can see the winner's append before its fsync ends:
				// until then reads answer 404 or the previous head).
				for {
					s, err := esCall(b, "GET", "/v1/stores/race/streams/contended", "", nil)
					if err != nil {
						t.Error(err)
						return
					}
					if h, ok := s.Body["head_revision"].(float64); ok && int(h) >= r {
						break
					}
					time.Sleep(time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	for r := range rounds {
		if n := wins[r].Load(); n != 1 {
			t.Fatalf("round %d had %d winners", r, n)
		}
	}
	all := esReadAll(t, b, "race")
	if len(all) != rounds {
		t.Fatalf("%d events, want %d", len(all), rounds)
	}
	esCheckGapFree(t, all)
}

// esLockedBuffer is a bytes.Buffer that a child process writes while the
// test reads it.
type esLockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *esLockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *esLockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type esSSE struct{ id, event, data string }

func esReadSSE(t *testing.T, rd *bufio.Reader, n int) []esSSE {
	t.Helper()
	var out []esSSE
	var cur esSSE
	for len(out) < n {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("SSE after %d messages: %v", len(out), err)
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if cur.data != "" {
				out = append(out, cur)
			}
			cur = esSSE{}
		case strings.HasPrefix(line, "id: "):
			cur.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			cur.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			cur.data = line[6:]
		}
	}
	return out
}

// TestEventsSSETail: an SSE tail receives events as they are appended; the
// CLI tail resumes across a broker restart after the last event it
// printed, missing and repeating nothing.
func TestEventsSSETail(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	esMust(t, b, "PUT", "/v1/stores/feed", nil, 201)
	req, _ := http.NewRequest("GET", "http://"+b.HTTPAddr()+"/v1/stores/feed/events", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := (&http.Client{}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("SSE: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	rd := bufio.NewReader(resp.Body)
	for i := range 3 {
		esMust(t, b, "POST", "/v1/stores/feed/streams/s/events", esAppendBody("any", map[string]any{"type": fmt.Sprintf("E%d", i), "data": i}), 201)
	}
	got := esReadSSE(t, rd, 3)
	for i, m := range got {
		var ev esEvent
		esDecode(t, m.data, &ev)
		if m.id != fmt.Sprint(i) || m.event != fmt.Sprintf("E%d", i) || ev.Position != int64(i) || string(ev.Data) != fmt.Sprint(i) {
			t.Fatalf("message %d: %+v", i, m)
		}
	}
	resp.Body.Close()

	// The CLI tail from position 3, for 4 events, across a restart.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out, errOut esLockedBuffer
	cmd := exec.CommandContext(ctx, brokerBin, "events", "tail", "--server", b.HTTPAddr(), "--from", "3", "-n", "4", "-o", "json", "feed")
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for i := 3; i < 5; i++ {
		esMust(t, b, "POST", "/v1/stores/feed/streams/s/events", esAppendBody("any", map[string]any{"type": "T", "data": i}), 201)
	}
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(out.String(), "\n") < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	b.Restart()
	for i := 5; i < 7; i++ {
		esMust(t, b, "POST", "/v1/stores/feed/streams/s/events", esAppendBody("any", map[string]any{"type": "T", "data": i}), 201)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("events tail: %v\n%s", err, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("tail printed %d lines:\n%s", len(lines), out.String())
	}
	for i, line := range lines {
		var ev esEvent
		esDecode(t, line, &ev)
		if ev.Position != int64(i+3) || string(ev.Data) != fmt.Sprint(i+3) {
			t.Fatalf("tail line %d: %s", i, line)
		}
	}
}

// esDigest is everything a client can read of the event stores.
func esDigest(t *testing.T, b *brokerProc) string {
	t.Helper()
	var sb strings.Builder
	list := esMust(t, b, "GET", "/v1/stores", nil, 200)
	sb.WriteString(list.Raw)
	var stores struct {
		Stores []struct{ Name string } `json:"stores"`
	}
	esDecode(t, list.Raw, &stores)
	for _, s := range stores.Stores {
		sb.WriteString(esJSON(esReadAll(t, b, s.Name)))
	}
	return sb.String()
}

// TestEventsBadInput: each bad-input class of the event API gets its
// status and code, and the stored events do not change.
func TestEventsBadInput(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	esMust(t, b, "POST", "/v1/stores/s/streams/a/events", esAppendBody("no_stream", map[string]any{"type": "T", "data": 1}), 201)
	before := esDigest(t, b)
	oversized := `{"events":[{"type":"T","data":"` + strings.Repeat("x", 13<<20) + `"}]}`
	tooLargeEvent := `{"events":[{"type":"T","data":"` + strings.Repeat("x", 1<<20) + `"}]}`
	const path = "/v1/stores/s/streams/a/events"
	for _, c := range []struct {
		name, method, path, contentType, body string
		status                                int
		code                                  string
	}{
		{"bad json", "POST", path, "application/json", `{"events":[{"type":`, 400, "invalid_json"},
		{"unknown field", "POST", path, "application/json", `{"events":[{"type":"T"}],"stream":"a"}`, 400, "unknown_field"},
		{"not json", "POST", path, "text/plain", `hello`, 415, "unsupported_media_type"},
		{"oversized body", "POST", path, "application/json", oversized, 413, "request_too_large"},
		{"event too large", "POST", path, "application/json", tooLargeEvent, 413, "message_too_large"},
		{"bad revision", "POST", path, "application/json", `{"expected_revision":"newest","events":[{"type":"T"}]}`, 400, "invalid_expected_revision"},
		{"negative revision", "POST", path, "application/json", `{"expected_revision":-5,"events":[{"type":"T"}]}`, 400, "invalid_expected_revision"},
		{"stale revision", "POST", path, "application/json", `{"expected_revision":3,"events":[{"type":"T"}]}`, 409, "wrong_expected_revision"},
		{"no events", "POST", path, "application/json", `{"events":[]}`, 400, "out_of_range"},
		{"missing type", "POST", path, "application/json", `{"events":[{"data":1}]}`, 400, "invalid_type"},
		{"duplicate ids", "POST", path, "application/json", `{"events":[{"type":"T","id":"x"},{"type":"T","id":"x"}]}`, 400, "duplicate_event_id"},
		{"reserved stream", "POST", "/v1/stores/s/streams/$x/events", "application/json", `{"events":[{"type":"T"}]}`, 400, "invalid_stream"},
		{"unknown stream", "GET", "/v1/stores/s/streams/nope/events", "", ``, 404, "stream_not_found"},
		{"unknown store", "GET", "/v1/stores/nope/events", "", ``, 404, "store_not_found"},
		{"bad from", "GET", "/v1/stores/s/events?from=tomorrow", "", ``, 400, "invalid_from"},
		{"bad limit", "GET", "/v1/stores/s/streams/a/events?limit=5000", "", ``, 400, "out_of_range"},
	} {
		r, err := esCall(b, c.method, c.path, c.contentType, []byte(c.body))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if r.Status != c.status || r.Body["code"] != c.code {
			t.Fatalf("%s: %d %.300s, want %d %s", c.name, r.Status, r.Raw, c.status, c.code)
		}
		if msg, _ := r.Body["message"].(string); msg == "" {
			t.Fatalf("%s: no message in %s", c.name, r.Raw)
		}
		if after := esDigest(t, b); after != before {
			t.Fatalf("%s changed the stored events:\nbefore %s\nafter  %s", c.name, before, after)
		}
	}
}

// TestEventsCLI: `broker events` appends and reads, and its exit codes say
// what happened: 4 on a wrong expected revision, 3 for an unknown stream,
// 6 when the broker cannot be reached, 2 on bad usage.
func TestEventsCLI(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	srv := []string{"--server", "http://" + b.HTTPAddr()}
	run := func(want int, args ...string) string {
		t.Helper()
		code, out, errOut := brokerCLI(t, args...)
		if code != want {
			t.Fatalf("broker %v: exit %d, want %d\nstdout: %s\nstderr: %s", args, code, want, out, errOut)
		}
		return out
	}
	args := func(cmd ...string) []string {
		sub := append([]string{"events"}, cmd[0])
		sub = append(sub, srv...)
		return append(sub, cmd[1:]...)
	}
	run(0, args("append", "--type", "Opened", "--data", `{"owner":"ann"}`, "--expected", "no_stream", "--id", "acct-1-0", "bank", "acct-1")...)
	run(0, args("append", "--type", "Deposited", "--data", `{"amount":5}`, "--expected", "0", "bank", "acct-1")...)
	run(4, args("append", "--type", "Deposited", "--data", `{"amount":5}`, "--expected", "0", "bank", "acct-1")...)
	out := run(0, args("append", "--type", "Opened", "--data", `{"owner":"ann"}`, "--expected", "no_stream", "--id", "acct-1-0", "-o", "json", "bank", "acct-1")...)
	if !strings.Contains(out, `"idempotent": true`) {
		t.Fatalf("idempotent retry through the CLI: %s", out)
	}
	out = run(0, args("read", "bank", "acct-1")...)
	if !strings.Contains(out, "Opened") || !strings.Contains(out, "Deposited") {
		t.Fatalf("read table: %s", out)
	}
	out = run(0, args("read", "-o", "json", "--from", "first", "bank")...)
	var page struct {
		Events []esEvent `json:"events"`
	}
	esDecode(t, out, &page)
	if len(page.Events) != 2 {
		t.Fatalf("read json: %s", out)
	}
	run(3, args("read", "bank", "nope")...)
	run(2, args("append", "bank", "acct-1")...) // no --type
	run(6, "events", "read", "--server", freeAddr(t), "bank")
}

// TestEventsDeleteStreamCLI: `broker events delete` soft-deletes a stream
// (reads exit 3, an append expecting the old revision exits 4, no_stream
// starts it again with revisions continuing), the deletion survives a
// restart, --hard tombstones it (appends exit 4 for good), and the store's
// positions stay gap-free with every event, deleted ones included.
func TestEventsDeleteStreamCLI(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	srv := []string{"--server", "http://" + b.HTTPAddr()}
	run := func(want int, cmd ...string) string {
		t.Helper()
		args := append(append([]string{"events", cmd[0]}, srv...), cmd[1:]...)
		code, out, errOut := brokerCLI(t, args...)
		if code != want {
			t.Fatalf("broker %v: exit %d, want %d\nstdout: %s\nstderr: %s", args, code, want, out, errOut)
		}
		return out
	}
	run(0, "append", "--type", "Opened", "--expected", "no_stream", "bank", "acct-1")
	run(0, "append", "--type", "Deposited", "--data", `{"amount":5}`, "--expected", "0", "bank", "acct-1")
	run(0, "append", "--type", "Opened", "bank", "acct-2")
	run(4, "delete", "--expected", "0", "bank", "acct-1") // stale revision: nothing deleted
	run(0, "read", "bank", "acct-1")
	if out := run(0, "delete", "--expected", "1", "bank", "acct-1"); !strings.Contains(out, "deleted at revision 1") {
		t.Fatalf("delete: %s", out)
	}
	run(3, "read", "bank", "acct-1")
	run(3, "delete", "bank", "nope")
	run(4, "append", "--type", "Deposited", "--expected", "1", "bank", "acct-1")
	b.Restart()
	srv = []string{"--server", "http://" + b.HTTPAddr()}
	run(3, "read", "bank", "acct-1")
	out := run(0, "append", "--type", "Reopened", "--expected", "no_stream", "-o", "json", "bank", "acct-1")
	var res esAppendResult
	esDecode(t, out, &res)
	if res.FirstRevision != 2 || res.FirstPosition != 3 {
		t.Fatalf("append after the delete: %s", out)
	}
	out = run(0, "read", "-o", "json", "bank", "acct-1")
	var page struct {
		Events []esEvent `json:"events"`
	}
	esDecode(t, out, &page)
	if len(page.Events) != 1 || *page.Events[0].Revision != 2 {
		t.Fatalf("read after restarting the stream: %s", out)
	}
	if out := run(0, "delete", "--hard", "--expected", "2", "bank", "acct-1"); !strings.Contains(out, "tombstoned at revision 2") {
		t.Fatalf("hard delete: %s", out)
	}
	b.Restart()
	srv = []string{"--server", "http://" + b.HTTPAddr()}
	run(4, "append", "--type", "T", "--expected", "no_stream", "bank", "acct-1")
	run(4, "delete", "bank", "acct-1")
	run(3, "read", "bank", "acct-1")
	run(0, "read", "bank", "acct-2")
	all := esReadAll(t, b, "bank")
	esCheckGapFree(t, all)
	if len(all) != 4 {
		t.Fatalf("%d events in the store, want 4: %s", len(all), esJSON(all))
	}
}
