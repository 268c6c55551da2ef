package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/vibemq/broker/events"
	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/topics"
)

// eventsEnv is a started server with the event and storage routes on a
// real store in a temp dir.
type eventsEnv struct {
	t    *testing.T
	srv  *Server
	base string
	db   *pebblestore.Store
	tm   *topics.Manager
	es   *events.Service
}

func newEventsEnv(t *testing.T) *eventsEnv {
	t.Helper()
	db, err := pebblestore.Open(t.TempDir(), pebblestore.Options{Logger: zerolog.Nop(), MemTableSize: 4 << 20, CacheSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	tm, err := topics.Open(db, topics.Config{Logger: zerolog.Nop(), DefaultPartitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	es, err := events.Open(db, tm, events.Config{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	env := &eventsEnv{t: t, db: db, tm: tm, es: es}
	// Registered before startServer's cleanup, so it runs after it.
	t.Cleanup(func() { _ = db.Close() })
	env.srv, env.base = startServer(t, Config{Logger: zerolog.Nop()}, func(s *Server) {
		s.RegisterEvents(EventsConfig{Events: es, Heartbeat: 50 * time.Millisecond})
		s.RegisterStorage(StorageConfig{Store: db, Topics: tm, Events: es})
		s.RegisterOpenAPI()
	})
	return env
}

type apiAnswer struct {
	status int
	body   []byte
	header http.Header
}

func (a apiAnswer) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(a.body, v); err != nil {
		t.Fatalf("decode %s: %v", a.body, err)
	}
}

func (a apiAnswer) code(t *testing.T) string {
	t.Helper()
	var e nativeError
	a.decode(t, &e)
	return e.Code
}

func (env *eventsEnv) call(method, path, contentType string, body []byte, header ...string) apiAnswer {
	env.t.Helper()
	req, err := http.NewRequest(method, env.base+path, bytes.NewReader(body))
	if err != nil {
		env.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		env.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return apiAnswer{status: resp.StatusCode, body: raw, header: resp.Header}
}

func (env *eventsEnv) appendJSON(path, body string) apiAnswer {
	env.t.Helper()
	return env.call(http.MethodPost, path, "application/json", []byte(body))
}

// digest is everything a client can read of the store: a bad request
// must leave it unchanged.
func (env *eventsEnv) digest() string {
	env.t.Helper()
	var sb strings.Builder
	for _, st := range env.es.Stores() {
		page, err := st.ReadAll(0, events.MaxReadLimit, 0, nil)
		if err != nil {
			env.t.Fatal(err)
		}
		fmt.Fprintf(&sb, "%s:%d:%d;", st.Name(), st.NextPosition(), len(page.Events))
		streams := map[string]bool{}
		for _, e := range page.Events {
			fmt.Fprintf(&sb, "%d/%s/%d/%s/%s;", e.Position, e.Stream, e.Revision, e.Type, e.Data)
			streams[e.Stream] = true
		}
		for _, e := range page.Events {
			if streams[e.Stream] {
				delete(streams, e.Stream)
				info, err := st.Stream(e.Stream)
				fmt.Fprintf(&sb, "stream %s %+v %v;", e.Stream, info, err)
			}
		}
	}
	for _, st := range env.es.Stores() {
		consumers, err := st.Consumers()
		fmt.Fprintf(&sb, "consumers %s %+v %v;", st.Name(), consumers, err)
	}
	for _, t := range env.tm.Topics() {
		fmt.Fprintf(&sb, "topic %s;", t.Name)
	}
	return sb.String()
}

// TestEventsBadInput: every bad-input class gets its status and code and
// leaves the stored data unchanged.
func TestEventsBadInput(t *testing.T) {
	env := newEventsEnv(t)
	ok := env.appendJSON("/v1/stores/s/streams/a/events", `{"events":[{"type":"T","data":1}]}`)
	if ok.status != http.StatusCreated {
		t.Fatalf("setup append: %d %s", ok.status, ok.body)
	}
	if _, err := env.tm.CreateTopic("plain", 1, nil, false); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("a", events.DefaultMaxEventBytes)
	huge := strings.Repeat("a", int(env.es.Limits().MaxAppendBytes)*2)
	events1001 := "[" + strings.TrimSuffix(strings.Repeat(`{"type":"T"},`, 1001), ",") + "]"
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
		{"bad json", "POST", "/v1/stores/s/streams/a/events", "application/json", `{"events":[`, 400, "invalid_json"},
		{"not an object", "POST", "/v1/stores/s/streams/a/events", "application/json", `[1,2]`, 400, "invalid_json"},
		{"two values", "POST", "/v1/stores/s/streams/a/events", "application/json", `{"events":[{"type":"T"}]} {}`, 400, "invalid_json"},
		{"trailing garbage", "POST", "/v1/stores/s/streams/a/events", "application/json", `{"events":[{"type":"T"}]} }`, 400, "invalid_json"},
		{"empty body", "POST", "/v1/stores/s/streams/a/events", "application/json", ``, 400, "invalid_json"},
		{"wrong type", "POST", "/v1/stores/s/streams/a/events", "application/json", `{"events":{"type":"T"}}`, 400, "invalid_json"},
		{"unknown field", "POST", "/v1/stores/s/streams/a/events", "application/json", `{"events":[{"type":"T"}],"expected":"any"}`, 400, "unknown_field"},
		{"unknown event field", "POST", "/v1/stores/s/streams/a/events", "application/json", `{"events":[{"type":"T","dta":1}]}`, 400, "unknown_field"},
		{"not json media type", "POST", "/v1/stores/s/streams/a/events", "text/plain", `{"events":[{"type":"T"}]}`, 415, "unsupported_media_type"},
		{"form media type", "POST", "/v1/stores/s/streams/a/events", "application/x-www-form-urlencoded", `{"events":[{"type":"T"}]}`, 415, "unsupported_media_type"},
		{"oversized body", "POST", "/v1/stores/s/streams/a/events", "application/json", `{"events":[{"type":"T","data":"` + huge + `"}]}`, 413, "request_too_large"},
		{"event too large", "POST", "/v1/stores/s/streams/a/events", "application/json", `{"events":[{"type":"T","data":"` + big + `"}]}`, 413, "message_too_large"},
		{"no events", "POST", "/v1/stores/s/streams/a/events", "application/json", `{"events":[]}`, 400, "out_of_range"},
		{"too many events", "POST", "/v1/stores/s/streams/a/events", "application/json", `{"events":` + events1001 + `}`, 400, "out_of_range"},
		{"bad revision word", "POST", "/v1/stores/s/streams/a/events", "application/json", `{"expected_revision":"latest","events":[{"type":"T"}]}`, 400, "invalid_expected_revision"},
		{"negative revision", "POST", "/v1/stores/s/streams/a/events", "application/json", `{"expected_revision":-1,"events":[{"type":"T"}]}`, 400, "invalid_expected_revision"},
		{"fractional revision", "POST", "/v1/stores/s/streams/a/events", "application/json", `{"expected_revision":1.5,"events":[{"type":"T"}]}`, 400, "invalid_expected_revision"},
		{"revision object", "POST", "/v1/stores/s/streams/a/events", "application/json", `{"expected_revision":{},"events":[{"type":"T"}]}`, 400, "invalid_expected_revision"},
		{"stale revision", "POST", "/v1/stores/s/streams/a/events", "application/json", `{"expected_revision":5,"events":[{"type":"T"}]}`, 409, "wrong_expected_revision"},
		{"no_stream on existing", "POST", "/v1/stores/s/streams/a/events", "application/json", `{"expected_revision":"no_stream","events":[{"type":"T"}]}`, 409, "wrong_expected_revision"},
		{"exists on missing", "POST", "/v1/stores/s/streams/b/events", "application/json", `{"expected_revision":"exists","events":[{"type":"T"}]}`, 409, "wrong_expected_revision"},
		{"missing type", "POST", "/v1/stores/s/streams/a/events", "application/json", `{"events":[{"data":1}]}`, 400, "invalid_type"},
		{"bad id", "POST", "/v1/stores/s/streams/a/events", "application/json", `{"events":[{"type":"T","id":"a b"}]}`, 400, "invalid_id"},
		{"duplicate id", "POST", "/v1/stores/s/streams/a/events", "application/json", `{"events":[{"type":"T","id":"x"},{"type":"T","id":"x"}]}`, 400, "duplicate_event_id"},
		{"bad base64", "POST", "/v1/stores/s/streams/a/events", "application/json", `{"events":[{"type":"T","data_base64":"!!"}]}`, 400, "invalid_base64"},
		{"data and base64", "POST", "/v1/stores/s/streams/a/events", "application/json", `{"events":[{"type":"T","data":1,"data_base64":"AA=="}]}`, 400, "conflicting_fields"},
		{"reserved stream", "POST", "/v1/stores/s/streams/$all/events", "application/json", `{"events":[{"type":"T"}]}`, 400, "invalid_stream"},
		{"control char stream", "POST", "/v1/stores/s/streams/a%0Ab/events", "application/json", `{"events":[{"type":"T"}]}`, 400, "invalid_stream"},
		{"bad store name", "POST", "/v1/stores/a%20b/streams/a/events", "application/json", `{"events":[{"type":"T"}]}`, 400, "invalid_name"},
		{"reserved store name", "PUT", "/v1/stores/__x", "", ``, 400, "reserved_name"},
		{"store over a topic", "PUT", "/v1/stores/plain", "", ``, 409, "topic_exists"},
		{"append over a topic", "POST", "/v1/stores/plain/streams/a/events", "application/json", `{"events":[{"type":"T"}]}`, 409, "topic_exists"},
		{"unknown stream", "GET", "/v1/stores/s/streams/nope/events", "", ``, 404, "stream_not_found"},
		{"unknown stream info", "GET", "/v1/stores/s/streams/nope", "", ``, 404, "stream_not_found"},
		{"unknown store", "GET", "/v1/stores/nope/events", "", ``, 404, "store_not_found"},
		{"unknown store stream read", "GET", "/v1/stores/nope/streams/a/events", "", ``, 404, "store_not_found"},
		{"delete unknown store", "DELETE", "/v1/stores/nope", "", ``, 404, "store_not_found"},
		{"bad direction", "GET", "/v1/stores/s/streams/a/events?direction=up", "", ``, 400, "invalid_enum"},
		{"bad from_revision", "GET", "/v1/stores/s/streams/a/events?from_revision=-3", "", ``, 400, "invalid_from"},
		{"end forward", "GET", "/v1/stores/s/streams/a/events?from_revision=end", "", ``, 400, "invalid_from"},
		{"bad limit", "GET", "/v1/stores/s/streams/a/events?limit=0", "", ``, 400, "out_of_range"},
		{"big limit", "GET", "/v1/stores/s/events?limit=1001", "", ``, 400, "out_of_range"},
		{"bad from", "GET", "/v1/stores/s/events?from=yesterday", "", ``, 400, "invalid_from"},
		{"bad time", "GET", "/v1/stores/s/events?from=time:noon", "", ``, 400, "invalid_from"},
		{"from past end", "GET", "/v1/stores/s/events?from=99", "", ``, 400, "out_of_range"},
		{"bad wait", "GET", "/v1/stores/s/events?wait_ms=60001", "", ``, 400, "out_of_range"},
		{"both filters", "GET", "/v1/stores/s/events?stream=a&stream_prefix=a", "", ``, 400, "conflicting_fields"},
		{"sse past end", "GET", "/v1/stores/s/events?from=99", "", ``, 400, "out_of_range"},
		{"bad store body", "PUT", "/v1/stores/t", "application/json", `{"x":1}`, 400, "unknown_field"},
		{"delete stream bad hard", "DELETE", "/v1/stores/s/streams/a?hard=yes", "", ``, 400, "invalid_enum"},
		{"delete stream no_stream", "DELETE", "/v1/stores/s/streams/a?expected_revision=no_stream", "", ``, 400, "invalid_expected_revision"},
		{"delete stream negative revision", "DELETE", "/v1/stores/s/streams/a?expected_revision=-1", "", ``, 400, "invalid_expected_revision"},
		{"delete stream bad revision word", "DELETE", "/v1/stores/s/streams/a?hard=true&expected_revision=latest", "", ``, 400, "invalid_expected_revision"},
		{"delete stream stale revision", "DELETE", "/v1/stores/s/streams/a?expected_revision=5", "", ``, 409, "wrong_expected_revision"},
		{"hard delete stream stale revision", "DELETE", "/v1/stores/s/streams/a?hard=true&expected_revision=3", "", ``, 409, "wrong_expected_revision"},
		{"delete unknown stream", "DELETE", "/v1/stores/s/streams/nope", "", ``, 404, "stream_not_found"},
		{"delete stream of unknown store", "DELETE", "/v1/stores/nope/streams/a?hard=true", "", ``, 404, "store_not_found"},
		{"delete reserved stream", "DELETE", "/v1/stores/s/streams/$all", "", ``, 400, "invalid_stream"},
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
	// Details of a conflict.
	got := env.appendJSON("/v1/stores/s/streams/a/events", `{"expected_revision":"3","events":[{"type":"T"}]}`)
	var e nativeError
	got.decode(t, &e)
	if e.Details["current_revision"] != float64(0) || e.Details["expected"] != "3" || e.Details["current_state"] != "exists" {
		t.Fatalf("conflict details %v", e.Details)
	}
}

// TestEventsDeleteStream: DELETE of a stream over HTTP, soft then hard:
// reads answer 404 stream_not_found with the state, the stream's
// description shows it, no_stream restarts a soft-deleted stream with
// revisions continuing, a tombstoned stream answers 409 stream_tombstoned
// to appends and deletes, and the store's positions stay gap-free.
func TestEventsDeleteStream(t *testing.T) {
	env := newEventsEnv(t)
	if got := env.appendJSON("/v1/stores/s/streams/acct/events", `{"expected_revision":"no_stream","events":[{"type":"Opened"},{"type":"Deposited","data":5}]}`); got.status != http.StatusCreated {
		t.Fatalf("append: %d %s", got.status, got.body)
	}
	if got := env.appendJSON("/v1/stores/s/streams/other/events", `{"events":[{"type":"Opened"}]}`); got.status != http.StatusCreated {
		t.Fatalf("append other: %d %s", got.status, got.body)
	}
	var info streamInfoJSON
	del := env.call("DELETE", "/v1/stores/s/streams/acct?expected_revision=1", "", nil)
	del.decode(t, &info)
	if del.status != 200 || info.State != "deleted" || info.HeadRevision != 1 || info.FirstRevision != 2 || info.DeletedAtRevision == nil || *info.DeletedAtRevision != 1 {
		t.Fatalf("soft delete: %d %s", del.status, del.body)
	}
	var e nativeError
	read := env.call("GET", "/v1/stores/s/streams/acct/events", "", nil)
	read.decode(t, &e)
	if read.status != 404 || e.Code != "stream_not_found" || e.Details["state"] != "deleted" {
		t.Fatalf("read a deleted stream: %d %s", read.status, read.body)
	}
	desc := env.call("GET", "/v1/stores/s/streams/acct", "", nil)
	if desc.status != 200 || !strings.Contains(string(desc.body), `"state":"deleted"`) {
		t.Fatalf("describe a deleted stream: %d %s", desc.status, desc.body)
	}
	if again := env.call("DELETE", "/v1/stores/s/streams/acct", "", nil); again.status != 200 || !strings.Contains(string(again.body), `"state":"deleted"`) {
		t.Fatalf("delete again: %d %s", again.status, again.body)
	}
	conflict := env.appendJSON("/v1/stores/s/streams/acct/events", `{"expected_revision":"exists","events":[{"type":"T"}]}`)
	e = nativeError{}
	conflict.decode(t, &e)
	if conflict.status != 409 || e.Code != "wrong_expected_revision" || e.Details["current_state"] != "deleted" || e.Details["current_revision"] != nil {
		t.Fatalf("append expecting exists to a deleted stream: %d %s", conflict.status, conflict.body)
	}
	restart := env.appendJSON("/v1/stores/s/streams/acct/events", `{"expected_revision":"no_stream","events":[{"type":"Reopened"}]}`)
	var ar struct {
		FirstRevision int64 `json:"first_revision"`
		FirstPosition int64 `json:"first_position"`
	}
	restart.decode(t, &ar)
	if restart.status != 201 || ar.FirstRevision != 2 || ar.FirstPosition != 3 {
		t.Fatalf("restart a deleted stream: %d %s", restart.status, restart.body)
	}
	var page streamPageJSON
	read = env.call("GET", "/v1/stores/s/streams/acct/events", "", nil)
	read.decode(t, &page)
	if read.status != 200 || len(page.Events) != 1 || *page.Events[0].Revision != 2 || page.HeadRevision != 2 {
		t.Fatalf("read the restarted stream: %d %s", read.status, read.body)
	}

	hard := env.call("DELETE", "/v1/stores/s/streams/acct?hard=true&expected_revision=2", "", nil)
	info = streamInfoJSON{}
	hard.decode(t, &info)
	if hard.status != 200 || info.State != "tombstoned" || *info.DeletedAtRevision != 2 {
		t.Fatalf("hard delete: %d %s", hard.status, hard.body)
	}
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/v1/stores/s/streams/acct/events", `{"expected_revision":"no_stream","events":[{"type":"T"}]}`},
		{"POST", "/v1/stores/s/streams/acct/events", `{"events":[{"type":"T"}]}`},
		{"DELETE", "/v1/stores/s/streams/acct", ``},
		{"DELETE", "/v1/stores/s/streams/acct?hard=true", ``},
	} {
		ct := ""
		if c.body != "" {
			ct = "application/json"
		}
		got := env.call(c.method, c.path, ct, []byte(c.body))
		if got.status != 409 || got.code(t) != "stream_tombstoned" {
			t.Fatalf("%s %s on a tombstoned stream: %d %s", c.method, c.path, got.status, got.body)
		}
	}
	read = env.call("GET", "/v1/stores/s/streams/acct/events", "", nil)
	e = nativeError{}
	read.decode(t, &e)
	if read.status != 404 || e.Details["state"] != "tombstoned" {
		t.Fatalf("read a tombstoned stream: %d %s", read.status, read.body)
	}
	all := env.call("GET", "/v1/stores/s/events?from=first", "", nil)
	var allPage allPageJSON
	all.decode(t, &allPage)
	if len(allPage.Events) != 4 || allPage.NextPosition != 4 {
		t.Fatalf("store read after the deletes: %s", all.body)
	}
	for i, ev := range allPage.Events {
		if ev.Position != int64(i) {
			t.Fatalf("store positions not gap-free: %s", all.body)
		}
	}
	if got := env.call("GET", "/v1/stores/s/streams/other/events", "", nil); got.status != 200 {
		t.Fatalf("the other stream: %d %s", got.status, got.body)
	}
}

func TestEventsAppendAndRead(t *testing.T) {
	env := newEventsEnv(t)
	if got := env.call("PUT", "/v1/stores/s", "", nil); got.status != http.StatusCreated {
		t.Fatalf("create: %d %s", got.status, got.body)
	}
	if got := env.call("PUT", "/v1/stores/s", "", nil); got.status != http.StatusOK {
		t.Fatalf("create again: %d %s", got.status, got.body)
	}
	res := env.appendJSON("/v1/stores/s/streams/order%2F1/events", `{"expected_revision":"no_stream","events":[
		{"id":"e-1","type":"Placed","data":{"total":10},"metadata":{"user":"u"}},
		{"id":"e-2","type":"Blob","data_base64":"AAEC"}]}`)
	if res.status != http.StatusCreated {
		t.Fatalf("append: %d %s", res.status, res.body)
	}
	var ar struct {
		LastPosition int64    `json:"last_position"`
		LastRevision int64    `json:"last_revision"`
		EventIDs     []string `json:"event_ids"`
	}
	res.decode(t, &ar)
	if ar.LastPosition != 1 || ar.LastRevision != 1 || len(ar.EventIDs) != 2 {
		t.Fatalf("append result %s", res.body)
	}
	retry := env.appendJSON("/v1/stores/s/streams/order%2F1/events", `{"expected_revision":"no_stream","events":[
		{"id":"e-1","type":"Placed","data":{"total":10}},{"id":"e-2","type":"Blob","data_base64":"AAEC"}]}`)
	if retry.status != http.StatusOK || !strings.Contains(string(retry.body), `"idempotent":true`) {
		t.Fatalf("idempotent retry: %d %s", retry.status, retry.body)
	}
	partial := env.appendJSON("/v1/stores/s/streams/order%2F1/events", `{"events":[{"id":"e-2","type":"T"},{"id":"e-3","type":"T"}]}`)
	if partial.status != http.StatusConflict || partial.code(t) != "idempotency_conflict" {
		t.Fatalf("partial retry: %d %s", partial.status, partial.body)
	}
	if got := env.appendJSON("/v1/stores/s/streams/other/events", `{"expected_revision":0,"events":[{"type":"T"}]}`); got.status != http.StatusConflict {
		t.Fatalf("numeric revision on a new stream: %d %s", got.status, got.body)
	}
	if got := env.appendJSON("/v1/stores/s/streams/other/events", `{"events":[{"type":"T"}]}`); got.status != http.StatusCreated {
		t.Fatalf("append other: %d %s", got.status, got.body)
	}

	read := env.call("GET", "/v1/stores/s/streams/order%2F1/events", "", nil)
	var page struct {
		Stream       string
		Events       []eventJSON
		NextRevision int64 `json:"next_revision"`
		HeadRevision int64 `json:"head_revision"`
	}
	read.decode(t, &page)
	if read.status != 200 || page.Stream != "order/1" || len(page.Events) != 2 || page.HeadRevision != 1 || page.NextRevision != 2 {
		t.Fatalf("read stream: %d %s", read.status, read.body)
	}
	if string(page.Events[0].Data) != `{"total":10}` || string(page.Events[0].Metadata) != `{"user":"u"}` || page.Events[0].ID != "e-1" {
		t.Fatalf("event 0: %s", read.body)
	}
	if page.Events[1].DataBase64 == nil || *page.Events[1].DataBase64 != base64.StdEncoding.EncodeToString([]byte{0, 1, 2}) {
		t.Fatalf("binary event: %s", read.body)
	}
	back := env.call("GET", "/v1/stores/s/streams/order%2F1/events?direction=backward&limit=1", "", nil)
	back.decode(t, &page)
	if len(page.Events) != 1 || *page.Events[0].Revision != 1 || page.NextRevision != 0 {
		t.Fatalf("read backward: %s", back.body)
	}
	info := env.call("GET", "/v1/stores/s/streams/order%2F1", "", nil)
	if info.status != 200 || !strings.Contains(string(info.body), `"head_revision":1`) {
		t.Fatalf("stream info: %s", info.body)
	}
	all := env.call("GET", "/v1/stores/s/events?from=first&stream_prefix=order", "", nil)
	var allPage struct {
		Events       []eventJSON
		NextPosition int64 `json:"next_position"`
		HeadPosition int64 `json:"head_position"`
	}
	all.decode(t, &allPage)
	if len(allPage.Events) != 2 || allPage.NextPosition != 3 || allPage.HeadPosition != 3 {
		t.Fatalf("read all filtered: %s", all.body)
	}
	for _, from := range []string{"last", "pos:2", "2", "time:2000-01-01T00:00:00Z", "delta:1h"} {
		got := env.call("GET", "/v1/stores/s/events?from="+from, "", nil)
		got.decode(t, &allPage)
		if got.status != 200 || len(allPage.Events) == 0 {
			t.Fatalf("from=%s: %s", from, got.body)
		}
	}
	list := env.call("GET", "/v1/stores", "", nil)
	if !strings.Contains(string(list.body), `"name":"s"`) {
		t.Fatalf("list: %s", list.body)
	}
	if got := env.call("DELETE", "/v1/stores/s", "", nil); got.status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", got.status, got.body)
	}
	if got := env.call("GET", "/v1/stores/s", "", nil); got.status != http.StatusNotFound {
		t.Fatalf("get deleted: %d", got.status)
	}
}

// TestEventsLongPoll: a read at the end with wait_ms returns as soon as an
// event is appended, and returns empty at the deadline otherwise.
func TestEventsLongPoll(t *testing.T) {
	env := newEventsEnv(t)
	env.appendJSON("/v1/stores/s/streams/a/events", `{"events":[{"type":"T"}]}`)
	start := time.Now()
	empty := env.call("GET", "/v1/stores/s/events?from=new&wait_ms=200", "", nil)
	if empty.status != 200 || !strings.Contains(string(empty.body), `"events":[]`) || time.Since(start) < 190*time.Millisecond {
		t.Fatalf("empty long poll after %v: %s", time.Since(start), empty.body)
	}
	done := make(chan apiAnswer, 1)
	go func() { done <- env.call("GET", "/v1/stores/s/events?from=1&wait_ms=10000&stream=b", "", nil) }()
	time.Sleep(100 * time.Millisecond)
	env.appendJSON("/v1/stores/s/streams/a/events", `{"events":[{"type":"skipped by the filter"}]}`)
	env.appendJSON("/v1/stores/s/streams/b/events", `{"events":[{"type":"Wanted"}]}`)
	select {
	case got := <-done:
		if !strings.Contains(string(got.body), `"type":"Wanted"`) || !strings.Contains(string(got.body), `"next_position":3`) {
			t.Fatalf("long poll: %s", got.body)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the long poll did not wake up")
	}
}

type sseMessage struct{ id, event, data string }

func readSSEMessages(t *testing.T, r *bufio.Reader, n int) []sseMessage {
	t.Helper()
	var out []sseMessage
	var cur sseMessage
	for len(out) < n {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("read SSE after %d messages: %v", len(out), err)
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if cur.data != "" {
				out = append(out, cur)
			}
			cur = sseMessage{}
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

// TestEventsSSE: a tail receives new events as they are appended, a
// reconnect with Last-Event-ID resumes right after, and shutdown ends it.
func TestEventsSSE(t *testing.T) {
	env := newEventsEnv(t)
	env.appendJSON("/v1/stores/s/streams/a/events", `{"events":[{"type":"Old"}]}`)
	open := func(header ...string) (*http.Response, *bufio.Reader) {
		req, _ := http.NewRequest("GET", env.base+"/v1/stores/s/events", nil)
		req.Header.Set("Accept", "text/event-stream")
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("SSE answer %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		return resp, bufio.NewReader(resp.Body)
	}
	resp, rd := open()
	defer resp.Body.Close()
	for i := range 3 {
		env.appendJSON("/v1/stores/s/streams/a/events", fmt.Sprintf(`{"events":[{"type":"New%d","data":%d}]}`, i, i))
	}
	msgs := readSSEMessages(t, rd, 3)
	for i, m := range msgs {
		var ev eventJSON
		if err := json.Unmarshal([]byte(m.data), &ev); err != nil {
			t.Fatal(err)
		}
		if m.id != fmt.Sprint(i+1) || m.event != fmt.Sprintf("New%d", i) || ev.Position != int64(i+1) {
			t.Fatalf("message %d: %+v", i, m)
		}
	}
	// A Last-Event-ID that is not a position, or one past which nothing can
	// follow, is refused before the stream starts.
	for _, id := range []string{"x", "-2", "9223372036854775807"} {
		req, _ := http.NewRequest("GET", env.base+"/v1/stores/s/events", nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Last-Event-ID", id)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e struct{ Code string }
		_ = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != 400 || e.Code != "invalid_from" {
			t.Fatalf("Last-Event-ID %s: %d %s", id, resp.StatusCode, e.Code)
		}
	}
	// Resume after position 1: positions 2 and 3, nothing missed or repeated.
	resp2, rd2 := open("Last-Event-ID", "1")
	defer resp2.Body.Close()
	msgs = readSSEMessages(t, rd2, 2)
	if msgs[0].id != "2" || msgs[1].id != "3" {
		t.Fatalf("resume: %+v", msgs)
	}
	// Heartbeats keep an idle tail alive (50ms in this test).
	if line, _ := rd2.ReadString('\n'); !strings.HasPrefix(line, ": heartbeat") {
		t.Fatalf("idle tail wrote %q, want a heartbeat", line)
	}
	// Shutdown ends the tails promptly.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	start := time.Now()
	if err := env.srv.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown with open tails: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("shutdown took %v", d)
	}
}

// TestStorageRoutes: stats count what was written, verify reports clean,
// compact streams progress, backup refuses a relative or used directory.
func TestStorageRoutes(t *testing.T) {
	env := newEventsEnv(t)
	for i := range 5 {
		env.appendJSON("/v1/stores/s/streams/a/events", fmt.Sprintf(`{"events":[{"type":"T","data":%d}]}`, i))
	}
	var stats StorageStats
	env.call("GET", "/v1/admin/storage", "", nil).decode(t, &stats)
	if stats.Topics != 1 || stats.Messages != 5 || stats.Events == nil || *stats.Events != 5 || stats.Bytes == 0 {
		t.Fatalf("stats %+v", stats)
	}
	var vr VerifyResult
	env.call("POST", "/v1/admin/verify", "", nil).decode(t, &vr)
	if !vr.OK || vr.Batches != 5 {
		t.Fatalf("verify %+v", vr)
	}
	prog := env.call("POST", "/v1/admin/compact", "", nil, "Accept", "application/x-ndjson")
	lines := strings.Split(strings.TrimSpace(string(prog.body)), "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[0], `{"progress"`) || !strings.HasPrefix(lines[len(lines)-1], `{"result"`) {
		t.Fatalf("compact progress: %s", prog.body)
	}
	if got := env.call("POST", "/v1/admin/backup", "application/json", []byte(`{"dir":"relative"}`)); got.status != 400 || got.code(t) != "invalid_path" {
		t.Fatalf("relative backup dir: %d %s", got.status, got.body)
	}
	dir := t.TempDir()
	if got := env.call("POST", "/v1/admin/backup", "application/json", []byte(`{"dir":"`+dir+`/b"}`)); got.status != 201 {
		t.Fatalf("backup: %d %s", got.status, got.body)
	}
	if got := env.call("POST", "/v1/admin/backup", "application/json", []byte(`{"dir":"`+dir+`/b"}`)); got.status != 409 || got.code(t) != "target_not_empty" {
		t.Fatalf("backup over a backup: %d %s", got.status, got.body)
	}
	if err := pebblestore.CheckDataDir(dir + "/b"); err != nil {
		t.Fatalf("backup is not a data dir: %v", err)
	}
}

// TestEventsTailsEndWhenStoreDeleted pins a bug: an SSE tail of a store
// that was deleted went on sending heartbeats forever (the read of a
// deleted store's log past its end is empty, not an error), so a client
// never learned of the deletion and missed every event of a store
// re-created under the name. A long poll that registered after the
// deletion likewise waited its whole wait_ms. Both now end with
// store_not_found.
func TestEventsTailsEndWhenStoreDeleted(t *testing.T) {
	env := newEventsEnv(t)
	env.appendJSON("/v1/stores/s/streams/a/events", `{"events":[{"type":"Old"}]}`)
	req, _ := http.NewRequest("GET", env.base+"/v1/stores/s/events?from=first", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	if msgs := readSSEMessages(t, rd, 1); msgs[0].id != "0" {
		t.Fatalf("first message %+v", msgs[0])
	}
	if got := env.call("DELETE", "/v1/stores/s", "", nil); got.status != http.StatusNoContent {
		t.Fatalf("delete store: %d %s", got.status, got.body)
	}
	env.appendJSON("/v1/stores/s/streams/a/events", `{"events":[{"type":"New"}]}`)

	got := make(chan sseMessage, 1)
	go func() {
		var cur sseMessage
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				close(got)
				return
			}
			line = strings.TrimRight(line, "\n")
			switch {
			case strings.HasPrefix(line, "event: "):
				cur.event = line[7:]
			case strings.HasPrefix(line, "data: "):
				cur.data = line[6:]
			case line == "" && cur.data != "":
				got <- cur
				return
			}
		}
	}()
	select {
	case m, ok := <-got:
		if !ok || m.event != "error" || !strings.Contains(m.data, `"store_not_found"`) {
			t.Fatalf("tail of a deleted store sent %+v (open %v), want an error event store_not_found", m, ok)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the tail of a deleted store is still open, sending only heartbeats")
	}

	// A long poll on a *Store deleted before it registered its waiter.
	env.appendJSON("/v1/stores/t/streams/a/events", `{"events":[{"type":"Old"}]}`)
	st, err := env.es.Store("t")
	if err != nil {
		t.Fatal(err)
	}
	if err := env.es.DeleteStore("t"); err != nil {
		t.Fatal(err)
	}
	api := &eventsAPI{s: &Server{}, svc: env.es, now: time.Now}
	start := time.Now()
	_, err = api.longPoll(context.Background(), st, readAllParams{from: st.NextPosition(), limit: 10, maxBytes: 1 << 20, wait: 2 * time.Second})
	if !errors.Is(err, events.ErrStoreNotFound) || time.Since(start) > time.Second {
		t.Fatalf("long poll of a deleted store: %v after %v, want store not found at once", err, time.Since(start))
	}
}

// TestEventsAppendManyTinyEvents pins a bug: an append body was decoded
// whole before its events were counted, so 12 MiB of "{}," (4 million
// events, 3 bytes each) allocated about 2 GiB before the answer
// out_of_range. The events array is now refused at its first event past
// the limit.
func TestEventsAppendManyTinyEvents(t *testing.T) {
	env := newEventsEnv(t)
	limits := env.es.Limits()
	var b bytes.Buffer
	b.WriteString(`{"events":[{}`)
	for b.Len() < limits.MaxAppendBytes {
		b.WriteString(`,{}`)
	}
	b.WriteString(`]}`)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got := env.call("POST", "/v1/stores/s/streams/a/events", "application/json", b.Bytes())
	runtime.ReadMemStats(&after)
	if got.status != http.StatusBadRequest || got.code(t) != "out_of_range" {
		t.Fatalf("append of %d bytes of empty events: %d %s", b.Len(), got.status, got.body)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16*uint64(b.Len()) {
		t.Fatalf("a %d-byte append body allocated %d MiB", b.Len(), alloc>>20)
	}
	// Within the limit the events still decode strictly.
	for _, c := range []struct{ body, code string }{
		{`{"events":[{"type":"T","dta":1}]}`, "unknown_field"},
		{`{"events":{"type":"T"}}`, "invalid_json"},
		{`{"events":[{"type":1}]}`, "invalid_json"},
		{`{"events":null}`, "out_of_range"},
	} {
		if got := env.appendJSON("/v1/stores/s/streams/a/events", c.body); got.code(t) != c.code {
			t.Errorf("%s: %d %s, want %s", c.body, got.status, got.body, c.code)
		}
	}
	var typeErr nativeError
	env.appendJSON("/v1/stores/s/streams/a/events", `{"events":[{"type":"T"},{"type":1}]}`).decode(t, &typeErr)
	if typeErr.Details["field"] != "events.1.type" {
		t.Errorf("a type error names %v, want events.1.type", typeErr.Details["field"])
	}
	if got := env.appendJSON("/v1/stores/s/streams/a/events", `{"events":[{"type":"T"},{"type":"U","data":[1]}]}`); got.status != http.StatusCreated {
		t.Fatalf("append of two events: %d %s", got.status, got.body)
	}
}
