package httpapi

import (
	"encoding/json"
	"io"
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

// failureEnv is a server with the queue, event, admin and storage routes
// over one real store in a temp dir, holding a queue "jobs" with one
// message and an event store "s" with one event in stream "a".
type failureEnv struct {
	t       *testing.T
	base    string
	store   *pebblestore.Store
	setFree func(int64)
}

func newFailureEnv(t *testing.T) *failureEnv {
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
	now := time.UnixMilli(1_800_000_000_000)
	engine, err := queues.Open(store, tm, queues.Config{Logger: zerolog.Nop(), Seed: 1}, now)
	if err != nil {
		t.Fatal(err)
	}
	es, err := events.Open(store, tm, events.Config{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		engine.Close()
		_ = store.Close()
	})
	clock := func() time.Time { return now }
	_, base := startServer(t, Config{Logger: zerolog.Nop()}, func(s *Server) {
		s.RegisterQueues(QueuesConfig{Engine: engine, Now: clock})
		s.RegisterEvents(EventsConfig{Events: es, Now: clock})
		s.RegisterAdmin(AdminConfig{Topics: tm, Now: clock})
		s.RegisterStorage(StorageConfig{Store: store, Topics: tm, Events: es})
	})
	env := &failureEnv{t: t, base: base, store: store, setFree: func(n int64) {
		free.Store(n)
		if err := store.Space().Probe(); err != nil {
			t.Fatal(err)
		}
	}}
	for _, c := range []struct{ method, path, body string }{
		{"PUT", "/v1/queues/jobs", ""},
		{"POST", "/v1/queues/jobs/messages", `{"messages":[{"body":"one"}]}`},
		{"POST", "/v1/stores/s/streams/a/events", `{"events":[{"type":"T","data":1}]}`},
	} {
		if status, _, raw := env.do(c.method, c.path, c.body); status/100 != 2 {
			t.Fatalf("%s %s: %d %s", c.method, c.path, status, raw)
		}
	}
	return env
}

// do sends one request (a JSON body when body is not empty) and returns
// the status, the error code and the raw answer.
func (env *failureEnv) do(method, path, body string) (int, string, string) {
	env.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, env.base+path, rd)
	if err != nil {
		env.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		env.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var e struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(raw, &e)
	return resp.StatusCode, e.Code, string(raw)
}

// overwrite damages the value of every key under each prefix (a table of
// pebblestore/keys.go): it flips the last byte of a record batch (its
// CRC-32C no longer matches), and replaces any other row with bytes no
// decoder accepts.
func (env *failureEnv) overwrite(prefixes ...byte) {
	env.t.Helper()
	b := env.store.NewBatch()
	n := 0
	for _, p := range prefixes {
		it, err := env.store.NewIter([]byte{p}, []byte{p + 1})
		if err != nil {
			env.t.Fatal(err)
		}
		for ok := it.First(); ok; ok = it.Next() {
			v, err := it.Value()
			if err != nil {
				env.t.Fatal(err)
			}
			damaged := []byte{0xde, 0xad}
			if p == pebblestore.PrefixBatch {
				damaged = append([]byte(nil), v...)
				damaged[len(damaged)-1] ^= 0xff
			}
			b.Set(append([]byte(nil), it.Key()...), damaged)
			n++
		}
		if err := it.Close(); err != nil {
			env.t.Fatal(err)
		}
	}
	if n == 0 {
		env.t.Fatalf("no keys under %x", prefixes)
	}
	if err := b.Commit(); err != nil {
		env.t.Fatal(err)
	}
}

// TestStorageFailureClassesAnswerAlike pins the one classification of
// store failures (pebblestore.Classify) and its one mapping
// (storageError): before, queues and httpapi each classified a failure
// their own way, and the answer depended on the route. A corrupt row was
// 503 storage_unavailable on the queue routes and on an event append that
// met it in the store, 500 storage_corrupt on an event read, 500 internal
// on an admin route; an admin route knew a store failure only by
// topics.IsStorageError or txns.ErrStorage. Now each class gets one
// answer, on every route: a full disk 507 storage_full (with the guard's
// details), corruption 500 storage_corrupt, a failed or closed store 503
// storage_unavailable.
func TestStorageFailureClassesAnswerAlike(t *testing.T) {
	t.Run("full", func(t *testing.T) {
		env := newFailureEnv(t)
		env.setFree(10 << 20)
		for _, c := range []struct{ what, method, path, body string }{
			{"queue send", "POST", "/v1/queues/jobs/messages", `{"messages":[{"body":"two"}]}`},
			{"event append", "POST", "/v1/stores/s/streams/a/events", `{"events":[{"type":"T"}]}`},
			{"event append to a new store", "POST", "/v1/stores/new/streams/a/events", `{"events":[{"type":"T"}]}`},
		} {
			status, code, raw := env.do(c.method, c.path, c.body)
			if status != http.StatusInsufficientStorage || code != "storage_full" || !strings.Contains(raw, `"free_bytes":10485760`) {
				t.Errorf("%s: %d %s, want 507 storage_full with the guard's details", c.what, status, raw)
			}
		}
	})

	t.Run("corruption", func(t *testing.T) {
		env := newFailureEnv(t)
		// Every stored record batch (the queue's and the event store's
		// topics) and every queue delivery state.
		env.overwrite(pebblestore.PrefixBatch, pebblestore.PrefixQueueState)
		for _, c := range []struct{ what, method, path, body string }{
			{"queue receive", "POST", "/v1/queues/jobs/receive", `{"max_messages":1}`},
			{"queue browse", "GET", "/v1/queues/jobs/messages", ""},
			{"event read", "GET", "/v1/stores/s/events", ""},
			{"stream read", "GET", "/v1/stores/s/streams/a/events", ""},
			{"admin records", "GET", "/v1/admin/topics/jobs/partitions/0/records", ""},
		} {
			status, code, raw := env.do(c.method, c.path, c.body)
			if status != http.StatusInternalServerError || code != "storage_corrupt" {
				t.Errorf("%s: %d %s, want 500 storage_corrupt", c.what, status, raw)
			}
		}
	})

	t.Run("closed", func(t *testing.T) {
		env := newFailureEnv(t)
		if err := env.store.Close(); err != nil {
			t.Fatal(err)
		}
		// A send answers each message: the item fails.
		status, _, raw := env.do("POST", "/v1/queues/jobs/messages", `{"messages":[{"body":"two"}]}`)
		if status != http.StatusOK || !strings.Contains(raw, `"error":{"code":"storage_unavailable"`) {
			t.Errorf("queue send: %d %s, want the item's error storage_unavailable", status, raw)
		}
		for _, c := range []struct{ what, method, path, body string }{
			{"queue receive", "POST", "/v1/queues/jobs/receive", `{"max_messages":1}`},
			{"event append", "POST", "/v1/stores/s/streams/a/events", `{"events":[{"type":"T"}]}`},
			{"event read", "GET", "/v1/stores/s/events", ""},
			{"admin topic create", "POST", "/v1/admin/topics", `{"name":"fresh","partitions":1}`},
			{"admin records", "GET", "/v1/admin/topics/jobs/partitions/0/records", ""},
			{"storage compact", "POST", "/v1/admin/compact", ""},
		} {
			status, code, raw := env.do(c.method, c.path, c.body)
			if status != http.StatusServiceUnavailable || code != "storage_unavailable" {
				t.Errorf("%s: %d %s, want 503 storage_unavailable", c.what, status, raw)
			}
		}
	})
}
