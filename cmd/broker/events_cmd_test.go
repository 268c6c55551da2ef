package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestReadSSE(t *testing.T) {
	stream := "retry: 1000\n\n: heartbeat\n\nid: 4\nevent: Placed\ndata: {\"position\":4}\n\nid: 5\ndata: {\"a\":\ndata: 1}\n\n"
	var got []string
	err := readSSE(strings.NewReader(stream), func(id, event string, data []byte) error {
		got = append(got, id+"|"+event+"|"+string(data))
		return nil
	})
	want := []string{`4|Placed|{"position":4}`, "5||{\"a\":\n1}"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("messages %q, want %q", got, want)
	}
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitUnavailable {
		t.Fatalf("end of stream: %v", err)
	}
	err = readSSE(strings.NewReader("event: error\ndata: {\"code\":\"store_not_found\",\"message\":\"gone\"}\n\n"), nil)
	if !errors.As(err, &ee) || ee.code != exitNotFound {
		t.Fatalf("error event: %v", err)
	}
}

// fakeAPI answers every request with status and body.
func fakeAPI(t *testing.T, status int, contentType, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestClientExitCodes: the documented exit codes of the client commands.
func TestClientExitCodes(t *testing.T) {
	notFound := fakeAPI(t, 404, "application/json", `{"code":"stream_not_found","message":"no"}`)
	conflict := fakeAPI(t, 409, "application/json", `{"code":"wrong_expected_revision","message":"no"}`)
	unavailable := fakeAPI(t, 503, "application/json", `{"code":"storage_unavailable","message":"no"}`)
	damaged := fakeAPI(t, 200, "application/x-ndjson",
		`{"progress":{"done":1,"total":2}}`+"\n"+`{"result":{"ok":false,"batches":2,"damaged":[{"topic":"t","partition":0,"offset":5,"key":"10ab","reason":"CRC"}],"damaged_total":1}}`+"\n")
	clean := fakeAPI(t, 200, "application/x-ndjson", `{"result":{"ok":true,"batches":2,"damaged":[],"damaged_total":0}}`+"\n")
	for _, c := range []struct {
		args []string
		want int
		out  string
	}{
		{[]string{"events", "read", "--server", notFound, "s", "x"}, exitNotFound, ""},
		{[]string{"events", "append", "--server", conflict, "--type", "T", "s", "x"}, exitConflict, ""},
		{[]string{"events", "append", "--server", unavailable, "--type", "T", "s", "x"}, exitUnavailable, ""},
		{[]string{"events", "append", "--server", notFound, "s", "x"}, exitUsage, ""},
		{[]string{"events", "append", "--server", notFound, "--type", "T", "--data", "{", "s", "x"}, exitUsage, ""},
		{[]string{"events", "append", "--server", notFound, "--type", "T", "--expected", "-1", "s", "x"}, exitUsage, ""},
		{[]string{"events", "read", "--server", "ftp://x", "s"}, exitUsage, ""},
		{[]string{"events", "delete", "--server", notFound, "s", "x"}, exitNotFound, ""},
		{[]string{"events", "delete", "--server", conflict, "--hard", "s", "x"}, exitConflict, ""},
		{[]string{"events", "delete", "--server", notFound, "s"}, exitUsage, ""},
		{[]string{"events", "delete", "--server", notFound, "--expected", "no_stream", "s", "x"}, exitUsage, ""},
		{[]string{"events", "delete", "--server", notFound, "--expected", "-2", "s", "x"}, exitUsage, ""},
		{[]string{"events", "tail", "--server", notFound, "-o", "yaml", "s"}, exitUsage, ""},
		{[]string{"storage", "verify", "--server", damaged}, exitDamaged, "10ab"},
		{[]string{"storage", "verify", "--server", clean}, exitOK, "no damage found"},
		{[]string{"storage", "stats", "extra-arg"}, exitUsage, ""},
		{[]string{"storage", "restore", "--from", "/nonexistent-backup", "--data-dir", t.TempDir()}, exitFailure, ""},
	} {
		var out, errOut bytes.Buffer
		got := realMain(append([]string{"broker"}, c.args...), &out, &errOut)
		if got != c.want || !strings.Contains(out.String(), c.out) {
			t.Errorf("broker %v: exit %d, want %d\nstdout: %s\nstderr: %s", c.args, got, c.want, out.String(), errOut.String())
		}
	}
}

// TestProgressBarOnlyOnTerminal: nothing is drawn when the writer is not a
// terminal; on one, the bar is redrawn in place.
func TestProgressBarOnlyOnTerminal(t *testing.T) {
	var buf bytes.Buffer
	p := newProgressBar(&buf, "verify", "batches")
	p.update(5, 10)
	p.done()
	if buf.Len() != 0 {
		t.Fatalf("drew on a non-terminal: %q", buf.String())
	}
	p.enabled = true
	p.update(5, 10)
	p.update(10, 10)
	p.done()
	if s := buf.String(); !strings.Contains(s, "\rverify [###############...............]  50%  5/10 batches") || !strings.HasSuffix(s, "\n") {
		t.Fatalf("bar %q", s)
	}
}

// TestLongPollTimeout: a long poll gets room beyond its wait, and
// --timeout 0 (none) is never replaced by a finite one.
func TestLongPollTimeout(t *testing.T) {
	for _, c := range []struct{ wait, timeout, want time.Duration }{
		{0, 30 * time.Second, 30 * time.Second},
		{20 * time.Second, 30 * time.Second, 30 * time.Second},
		{30 * time.Second, 30 * time.Second, 35 * time.Second},
		{time.Minute, 0, 0},
		{0, 0, 0},
	} {
		if got := longPollTimeout(c.wait, c.timeout); got != c.want {
			t.Errorf("wait %v timeout %v: %v, want %v", c.wait, c.timeout, got, c.want)
		}
	}
}

// TestEventsDeleteCommand: `broker events delete` sends DELETE to the
// stream's path (escaped) with hard and expected_revision, and prints
// what the broker answered.
func TestEventsDeleteCommand(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Method+" "+r.URL.EscapedPath()+"?"+r.URL.RawQuery)
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("hard") == "true" {
			_, _ = w.Write([]byte(`{"stream":"a/1","state":"tombstoned","head_revision":4,"first_revision":5,"deleted_at_revision":4}`))
			return
		}
		_, _ = w.Write([]byte(`{"stream":"a/1","state":"deleted","head_revision":4,"first_revision":5,"deleted_at_revision":4}`))
	}))
	t.Cleanup(srv.Close)
	for _, c := range []struct {
		args []string
		out  string
	}{
		{[]string{"events", "delete", "--server", srv.URL, "bank", "a/1"}, "stream bank/a/1 deleted at revision 4; an append with --expected no_stream or any starts it again at revision 5"},
		{[]string{"events", "delete", "--server", srv.URL, "--hard", "--expected", "4", "bank", "a/1"}, "stream bank/a/1 tombstoned at revision 4: it takes no more events"},
		{[]string{"events", "delete", "--server", srv.URL, "-o", "json", "--expected", "exists", "bank", "a/1"}, `"state": "deleted"`},
	} {
		var out, errOut bytes.Buffer
		if code := realMain(append([]string{"broker"}, c.args...), &out, &errOut); code != exitOK || !strings.Contains(out.String(), c.out) {
			t.Errorf("broker %v: exit %d\nstdout: %s\nstderr: %s\nwant %q", c.args, code, out.String(), errOut.String(), c.out)
		}
	}
	want := []string{
		"DELETE /v1/stores/bank/streams/a%2F1?",
		"DELETE /v1/stores/bank/streams/a%2F1?expected_revision=4&hard=true",
		"DELETE /v1/stores/bank/streams/a%2F1?expected_revision=exists",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("requests %q, want %q", got, want)
	}
}
