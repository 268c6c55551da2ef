package httpapi

import (
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/vibemq/broker/internal/queuemodel"
)

// TestQueueLinearizable: six clients send, receive, ack, nack (delay 0)
// and extend concurrently on one queue of a real server (HTTP over TCP,
// Pebble in a temp dir), using each other's receipts, current and stale;
// the server's clock is frozen, so no lease expires. Porcupine must find
// the history linearizable under internal/queuemodel's model (its package
// comment and TESTING.md state the semantics; its tests show the model
// refusing hand-made bad histories).
func TestQueueLinearizable(t *testing.T) {
	env := newQueueEnv(t)
	checkQueueLinearizable(t, env, []string{env.base})
}

// TestQueueLinearizableTwoListeners: the same over two HTTP servers (two
// listeners) of one engine, each client on one of them.
func TestQueueLinearizableTwoListeners(t *testing.T) {
	env := newQueueEnv(t)
	_, second := startServer(t, Config{}, func(s *Server) {
		s.RegisterQueues(QueuesConfig{Engine: env.e, Now: func() time.Time { return env.now }})
	})
	checkQueueLinearizable(t, env, []string{env.base, second})
}

func checkQueueLinearizable(t *testing.T, env *queueEnv, bases []string) {
	env.mustJSON("PUT", "/v1/queues/lin", `{"max_receives":0,"visibility_timeout_ms":600000,"dead_letter":"none"}`, 201)
	w := &queuemodel.Workload{Bases: bases, Queue: "lin", Clients: 6, Ops: 150, Seed: 7}
	start := time.Now()
	history, errs := w.Run()
	if len(errs) > 0 {
		t.Fatalf("%d unexpected answers, first: %v", len(errs), errs[0])
	}
	ran := time.Since(start)
	res, report := queuemodel.Check(history, 20*time.Second)
	kinds := queuemodel.Summary(history)
	t.Logf("%d operations in %v: %v; porcupine: %v in %v", len(history), ran.Round(time.Millisecond), kinds, res, (time.Since(start) - ran).Round(time.Millisecond))
	if res != porcupine.Ok {
		t.Fatalf("the queue's history is not linearizable (%v); %s", res, report)
	}
	// The history exercised every rule: refusals of stale receipts and
	// successes of each kind, and no operation without an answer.
	for _, k := range []string{"send", "receive", "receive:empty", "ack:ok", "ack:refused", "nack:ok", "nack:refused", "extend:ok"} {
		if kinds[k] == 0 {
			t.Errorf("no %s in the history: the test did not exercise it", k)
		}
	}
	for k, n := range kinds {
		if strings.HasSuffix(k, ":unknown") {
			t.Errorf("%d operations %s without an answer from a healthy server", n, k)
		}
	}
}
