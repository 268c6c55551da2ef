package httpapi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/vibemq/broker/events"
	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/topics"
)

// openStoreForShutdown opens a store in a temp dir for a test that
// closes it itself after Shutdown, with closeDB (whose error says whether
// a handler still held an iterator); the test's cleanup closes it only if
// the test did not get that far.
func openStoreForShutdown(t *testing.T) (db *pebblestore.Store, closeDB func() error) {
	t.Helper()
	db, err := pebblestore.Open(t.TempDir(), pebblestore.Options{Logger: zerolog.Nop(), MemTableSize: 4 << 20, CacheSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	open := true
	t.Cleanup(func() {
		if open {
			_ = db.Close()
		}
	})
	return db, func() error {
		open = false
		return db.Close()
	}
}

// TestShutdownDeadlineWaitsForHandlers pins a crash at shutdown: past its
// deadline Shutdown closed the connections and returned at once while
// their handlers still ran, and the broker then closed the store under a
// handler holding an iterator ("closing the store: leaked iterators", a
// read of freed memory). Shutdown now answers DeadlineExceeded only once
// the handler returned, and the store then closes cleanly.
func TestShutdownDeadlineWaitsForHandlers(t *testing.T) {
	db, closeDB := openStoreForShutdown(t)
	release := make(chan struct{})
	entered := make(chan struct{})
	finished := make(chan struct{})
	s := New(Config{Addr: "127.0.0.1:0", Logger: zerolog.Nop()})
	s.Handle("GET /stuck", http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		defer close(finished)
		it, err := db.NewIter(nil, nil)
		if err != nil {
			t.Error(err)
			return
		}
		close(entered)
		// Blocked where a closed connection is not seen (a lock, a disk).
		<-release
		it.First()
		_ = it.Close()
	}))
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	clientErr := make(chan error, 1)
	go func() {
		resp, err := http.Get("http://" + s.Addr().String() + "/stuck")
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		clientErr <- err
	}()
	<-entered

	type result struct {
		err      error
		finished bool // the handler had returned when Shutdown did
	}
	shutdownDone := make(chan result, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	go func() {
		err := s.Shutdown(ctx)
		select {
		case <-finished:
			shutdownDone <- result{err, true}
		default:
			shutdownDone <- result{err, false}
		}
	}()
	// Past the deadline the connection is closed: the client sees it.
	if err := <-clientErr; err == nil {
		t.Fatal("the stuck request was answered; want its connection closed at the deadline")
	}
	close(release)
	r := <-shutdownDone
	if !r.finished {
		t.Fatal("Shutdown returned while a handler still held a store iterator")
	}
	if !errors.Is(r.err, context.DeadlineExceeded) {
		t.Errorf("Shutdown past its deadline = %v, want DeadlineExceeded", r.err)
	}
	if err := closeDB(); err != nil {
		t.Fatalf("closing the store after Shutdown: %v", err)
	}
}

// TestShutdownCutsTailBlockedInWrite pins the other half of that crash: an
// SSE tail whose client reads nothing sat in a write for up to the write
// timeout (30s by default), so Shutdown ran out its grace, and past it
// returned with the tail still running. Shutdown now closes the
// connection of a tail in a write at once: it returns within its grace,
// with no handler left, and the store closes cleanly.
func TestShutdownCutsTailBlockedInWrite(t *testing.T) {
	db, closeDB := openStoreForShutdown(t)
	tm, err := topics.Open(db, topics.Config{Logger: zerolog.Nop(), DefaultPartitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	es, err := events.Open(db, tm, events.Config{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{Addr: "127.0.0.1:0", Logger: zerolog.Nop(), WriteTimeout: 10 * time.Minute})
	s.RegisterEvents(EventsConfig{Events: es})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	st, _, err := es.CreateStore("feed", time.Now())
	if err != nil {
		t.Fatal(err)
	}

	// The stalled tail: reads the answer's headers, then nothing.
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = io.WriteString(c, "GET /v1/stores/feed/events?from=first HTTP/1.1\r\nHost: broker\r\nAccept: text/event-stream\r\n\r\n")
	if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("stalled tail: %v %v", resp, err)
	}
	// 31 MiB of events: far more than the socket buffers hold.
	data := []byte(`"` + strings.Repeat("x", 1000<<10) + `"`)
	for i := range 8 {
		evs := make([]events.ProposedEvent, 4)
		for j := range evs {
			evs[j] = events.ProposedEvent{Type: "big", Data: data}
		}
		if _, err := st.Append(fmt.Sprint("s", i), events.ExpectedRevision{}, evs, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	// Wait until the tail is blocked in a write.
	for !tailBlockedInWrite(s) {
		time.Sleep(10 * time.Millisecond)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown with a tail blocked in a write: %v (want the tail cut at once)", err)
	}
	if n := s.handlers.running(); n != 0 {
		t.Fatalf("%d handlers still run after Shutdown", n)
	}
	if err := closeDB(); err != nil {
		t.Fatalf("closing the store after Shutdown: %v", err)
	}
}

// tailBlockedInWrite reports whether an SSE tail of s has been in one
// write for a while (its client reads nothing).
func tailBlockedInWrite(s *Server) bool {
	s.tails.Lock()
	defer s.tails.Unlock()
	for t := range s.tails.set {
		t.mu.Lock()
		blocked := t.mu.writing && time.Since(t.mu.since) > 500*time.Millisecond
		t.mu.Unlock()
		if blocked {
			return true
		}
	}
	return false
}

// TestShutdownEndsQueueLongPoll pins a slow shutdown: a queue receive
// waiting (wait_ms up to 5 minutes) did not see the server's shutdown and
// held it for its whole grace. It now answers at once with what it found.
func TestShutdownEndsQueueLongPoll(t *testing.T) {
	env := newQueueEnv(t)
	env.mustJSON("PUT", "/v1/queues/q", `{"receive_wait_max_ms":300000}`, 201)
	got := make(chan apiResponse, 1)
	go func() {
		got <- env.json("POST", "/v1/queues/q/receive", `{"max_messages":1,"wait_ms":300000}`)
	}()
	for env.srv.streams.inUse.Load() == 0 { // the receive waits
		time.Sleep(10 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := env.srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown with a waiting receive: %v (want the wait ended at once)", err)
	}
	r := <-got
	if msgs, _ := r.body["messages"].([]any); r.status != 200 || len(msgs) != 0 {
		t.Fatalf("the receive ended by shutdown answered %d %s, want 200 without messages", r.status, r.raw)
	}
}
