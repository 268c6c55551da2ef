package httpapi

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/vibemq/broker/events"
	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/queues"
	"github.com/vibemq/broker/topics"
)

// newGuardedEnv is a server with the queue and event routes over a store
// whose free space the test sets (limit 64 MiB).
func newGuardedEnv(t *testing.T) (env *queueEnv, setFree func(int64)) {
	t.Helper()
	var free atomic.Int64
	free.Store(10 << 30)
	store, err := pebblestore.Open(t.TempDir(), pebblestore.Options{Logger: zerolog.Nop(), MemTableSize: 4 << 20, CacheSize: 8 << 20,
		FreeSpaceMin: 64 << 20, FreeSpaceProbe: func(string) (pebblestore.SpaceReading, error) {
			return pebblestore.SpaceReading{Free: free.Load(), Total: 100 << 30}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	tm, err := topics.Open(store, topics.Config{Logger: zerolog.Nop(), DefaultPartitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	env = &queueEnv{t: t, store: store, tm: tm, now: time.UnixMilli(1_800_000_000_000)}
	env.e, err = queues.Open(store, tm, queues.Config{Logger: zerolog.Nop(), Seed: 1}, env.now)
	if err != nil {
		t.Fatal(err)
	}
	es, err := events.Open(store, tm, events.Config{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	_, env.base = startServer(t, Config{}, func(s *Server) {
		s.RegisterQueues(QueuesConfig{Engine: env.e, Now: func() time.Time { return env.now }})
		s.RegisterEvents(EventsConfig{Events: es, Now: func() time.Time { return env.now }})
	})
	t.Cleanup(func() {
		env.e.Close()
		_ = store.Close()
	})
	return env, func(n int64) {
		free.Store(n)
		if err := store.Space().Probe(); err != nil {
			t.Fatal(err)
		}
	}
}

func wantStorageFullAnswer(t *testing.T, what string, r apiResponse) {
	t.Helper()
	if r.status != http.StatusInsufficientStorage || r.code() != "storage_full" {
		t.Fatalf("%s: %d %s, want 507 storage_full", what, r.status, r.raw)
	}
	msg, _ := r.body["message"].(string)
	details, _ := r.body["details"].(map[string]any)
	if !strings.Contains(msg, "10.0 MiB free") || !strings.Contains(msg, "disk-free-min) is 64.0 MiB") ||
		details["free_bytes"] != float64(10<<20) || details["min_bytes"] != float64(64<<20) || details["resume_bytes"] != float64(80<<20) {
		t.Fatalf("%s: %s, want the free space and the limit in message and details", what, r.raw)
	}
}

// TestNativeWritesWhileDiskLow pins the fix for a broker that crashed when
// its disk filled up (Pebble panics on a failed WAL write) and for the
// storage_full of NATIVE-QUEUE.md that could never be answered: while the
// free space is below disk-free-min, queue sends, redrives and event
// appends answer 507 storage_full saying how much is free and the limit,
// and change nothing in the store (an append to a new store does not
// create it); an idempotent retry of a written append is answered; reads, receives, acks, stream and queue deletions go on;
// writes are accepted again once space is back.
func TestNativeWritesWhileDiskLow(t *testing.T) {
	env, setFree := newGuardedEnv(t)
	env.mustJSON("PUT", "/v1/queues/jobs", `{}`, http.StatusCreated)
	env.mustJSON("PUT", "/v1/queues/scratch", `{}`, http.StatusCreated)
	env.mustJSON("POST", "/v1/queues/jobs/messages", `{"messages":[{"body":"a"},{"body":"b"}]}`, http.StatusOK)
	env.mustJSON("POST", "/v1/stores/shop/streams/order-1/events", `{"events":[{"id":"e-1","type":"Placed","data":{"n":1}}]}`, http.StatusCreated)
	env.mustJSON("POST", "/v1/stores/shop/streams/order-2/events", `{"events":[{"type":"Placed","data":{"n":2}}]}`, http.StatusCreated)
	setFree(10 << 20)
	before := env.digest()

	wantStorageFullAnswer(t, "send", env.json("POST", "/v1/queues/jobs/messages", `{"messages":[{"body":"refused"}]}`))
	wantStorageFullAnswer(t, "append", env.json("POST", "/v1/stores/shop/streams/order-1/events", `{"events":[{"type":"Paid","data":{}}]}`))
	wantStorageFullAnswer(t, "append to a new store", env.json("POST", "/v1/stores/fresh/streams/s/events", `{"events":[{"type":"T","data":{}}]}`))
	wantStorageFullAnswer(t, "redrive", env.json("POST", "/v1/queues/jobs.dlq/redrive", `{}`))
	// Bad requests are still told what is wrong with them.
	if r := env.json("POST", "/v1/queues/jobs/messages", `{"messages":[]}`); r.status != http.StatusBadRequest {
		t.Fatalf("invalid send while low: %d %s", r.status, r.raw)
	}
	// A retry of an append that was written is answered: it writes nothing.
	if r := env.mustJSON("POST", "/v1/stores/shop/streams/order-1/events", `{"events":[{"id":"e-1","type":"Placed","data":{"n":1}}]}`, http.StatusOK); !strings.Contains(r.raw, `"idempotent":true`) {
		t.Fatalf("idempotent retry while low: %s", r.raw)
	}
	if after := env.digest(); after != before {
		t.Fatal("refused writes changed the store")
	}
	if r := env.json("GET", "/v1/stores/fresh", ""); r.status != http.StatusNotFound {
		t.Fatalf("the refused append created its store: %d %s", r.status, r.raw)
	}

	// Reads and the small writes that free space or settle work.
	if r := env.mustJSON("GET", "/v1/stores/shop/streams/order-1/events", "", http.StatusOK); !strings.Contains(r.raw, `"Placed"`) {
		t.Fatalf("stream read while low: %s", r.raw)
	}
	r := env.mustJSON("POST", "/v1/queues/jobs/receive", `{"max_messages":1}`, http.StatusOK)
	receipts := receiptsOf(t, r)
	if len(receipts) != 1 {
		t.Fatalf("receive while low: %s", r.raw)
	}
	if r := env.mustJSON("POST", "/v1/queues/jobs/ack", `{"receipts":["`+receipts[0]+`"]}`, http.StatusOK); r.code() != "acked" {
		t.Fatalf("ack while low: %s", r.raw)
	}
	env.mustJSON("DELETE", "/v1/stores/shop/streams/order-2", "", http.StatusOK)
	env.mustJSON("POST", "/v1/queues/jobs/purge", `{}`, http.StatusOK)
	if r := env.json("DELETE", "/v1/queues/scratch", ""); r.status != http.StatusOK && r.status != http.StatusNoContent {
		t.Fatalf("queue delete while low: %d %s", r.status, r.raw)
	}

	// Space is back.
	setFree(1 << 30)
	env.mustJSON("POST", "/v1/queues/jobs/messages", `{"messages":[{"body":"c"}]}`, http.StatusOK)
	if r := env.mustJSON("POST", "/v1/stores/shop/streams/order-1/events", `{"events":[{"type":"Paid","data":{}}]}`, http.StatusCreated); !strings.Contains(r.raw, `"first_revision":1`) {
		t.Fatalf("append after space returned: %s", r.raw)
	}
}
