package queues

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vibemq/broker/pebblestore"
)

// newEnvWithDisk is newEnv over a store whose free space is free's value
// (limit 64 MiB); setFree changes it and probes.
func newEnvWithDisk(t *testing.T) (en *env, setFree func(int64)) {
	t.Helper()
	var free atomic.Int64
	free.Store(10 << 30)
	en = &env{t: t, dir: t.TempDir(), freeMin: 64 << 20, probe: func(string) (pebblestore.SpaceReading, error) {
		return pebblestore.SpaceReading{Free: free.Load(), Total: 100 << 30}, nil
	}}
	en.open(t0)
	t.Cleanup(func() { en.close() })
	return en, func(n int64) {
		free.Store(n)
		if err := en.store.Space().Probe(); err != nil {
			t.Fatal(err)
		}
	}
}

func wantStorageFull(t *testing.T, what string, err *Error) {
	t.Helper()
	se := pebblestore.Classify(err)
	if err == nil || se == nil || se.Class != pebblestore.StorageFull {
		t.Fatalf("%s: %v, want a full store", what, err)
	}
	var space *pebblestore.SpaceError
	if !errors.As(err, &space) || !strings.Contains(err.Message, "10.0 MiB free") || !strings.Contains(err.Message, "64.0 MiB") ||
		space.Free != 10<<20 || space.Min != 64<<20 || space.Resume != 80<<20 {
		t.Fatalf("%s: %q %+v, want the free space and the limit", what, err.Message, space)
	}
}

// TestQueueWritesWhileDiskLow pins the fix for a broker that crashed when
// its disk filled up: while the free-space guard is low, sends, rejects,
// nacks past max_receives and redrives (everything that appends a
// message) answer storage_full and change nothing; receives, acks, plain
// nacks and deletions go on; a lease that runs out on a message due for
// the DLQ keeps it in flight (not redelivered past its limit) until space
// is back, when it moves.
func TestQueueWritesWhileDiskLow(t *testing.T) {
	en, setFree := newEnvWithDisk(t)
	en.create("jobs", &AttributesPatch{MaxReceives: p32(2), VisibilityTimeoutMs: p64(1000)})
	en.create("scratch", nil)
	en.send("jobs", t0, body("a"), body("b"), body("c"))
	en.send("scratch", t0, body("x"))
	hwm := func(name string) int64 {
		s := en.stats(name, t0)
		return s.Partitions[0].HighWatermark
	}
	setFree(10 << 20)

	_, err := en.e.Send("jobs", SendRequest{Messages: []SendMessage{body("refused")}}, time.UnixMilli(t0))
	wantStorageFull(t, "send", AsError(err))
	if s := en.stats("jobs", t0); s.Available != 3 || hwm("jobs") != 3 {
		t.Fatalf("a refused send changed the queue: %+v", s)
	}

	got := en.receive("jobs", 3, 0, t0)
	if bodies(got) != "a,b,c" {
		t.Fatalf("receive while low: %s", bodies(got))
	}
	if r := en.ack("jobs", t0, got[0].Receipt); codeOf(r[0]) != "acked" {
		t.Fatalf("ack while low: %+v", r[0])
	}
	// b: a plain nack requeues (delivery 1 of 2).
	res, err := en.e.Nack("jobs", NackRequest{Receipts: []string{got[1].Receipt}, Delay: pms(0)}, time.UnixMilli(t0))
	if err != nil || codeOf(res[0]) != "requeued" {
		t.Fatalf("nack while low: %v %+v", err, res)
	}
	// c: reject (to the DLQ) is refused; the lease stays.
	res, err = en.e.Nack("jobs", NackRequest{Receipts: []string{got[2].Receipt}, DeadLetter: true}, time.UnixMilli(t0))
	if err != nil {
		t.Fatal(err)
	}
	wantStorageFull(t, "reject", res[0].Error)
	// b again (delivery 2 = max_receives): its nack would dead-letter it.
	b := en.receive("jobs", 1, 0, t0+1)
	if bodies(b) != "b" || b[0].Deliveries != 2 {
		t.Fatalf("redelivery of b: %+v", b)
	}
	res, err = en.e.Nack("jobs", NackRequest{Receipts: []string{b[0].Receipt}}, time.UnixMilli(t0+1))
	if err != nil {
		t.Fatal(err)
	}
	wantStorageFull(t, "nack past max_receives", res[0].Error)
	if s := en.stats("jobs", t0+1); s.Inflight != 2 || s.DLQDepth != 0 {
		t.Fatalf("refused moves changed the queue: %+v", s)
	}
	_, err = en.e.Redrive("jobs.dlq", RedriveRequest{}, time.UnixMilli(t0+1))
	wantStorageFull(t, "redrive", AsError(err))

	// Both leases run out: b is due for the DLQ (deferred, stays in
	// flight); c has one delivery left and is requeued.
	rep := en.e.Tick(time.UnixMilli(t0 + 1001))
	if rep.DeadLetterDeferred != 1 || rep.Requeued != 1 || rep.Errors != 0 || len(rep.DeadLettered) != 0 {
		t.Fatalf("tick while low: %+v", rep)
	}
	c := en.receive("jobs", 10, 0, t0+1001)
	if bodies(c) != "c" {
		t.Fatalf("after the tick: received %s, want only c (b waits for the DLQ)", bodies(c))
	}
	if r := en.ack("jobs", t0+1001, c[0].Receipt); codeOf(r[0]) != "acked" {
		t.Fatalf("ack of c: %+v", r[0])
	}
	if rep := en.e.Tick(time.UnixMilli(t0 + 1001 + deadLetterRetryMs)); rep.DeadLetterDeferred != 1 {
		t.Fatalf("second tick while low: %+v", rep)
	}
	if s := en.stats("jobs.dlq", t0); s.Available != 0 || hwm("jobs.dlq") != 0 {
		t.Fatalf("the DLQ got a message while the disk was low: %+v", s)
	}

	// Deletions work: purge, delete.
	if n, err := en.e.Purge("scratch", time.UnixMilli(t0)); err != nil || n != 1 {
		t.Fatalf("purge while low: %d %v", n, err)
	}
	if err := en.e.DeleteQueue("scratch", true, time.UnixMilli(t0)); err != nil {
		t.Fatalf("delete while low: %v", err)
	}

	// Space is back: the deferred move happens at its next try, sends work.
	setFree(1 << 30)
	rep = en.e.Tick(time.UnixMilli(t0 + 1001 + 2*deadLetterRetryMs))
	if rep.DeadLetterDeferred != 0 || rep.DeadLettered[ReasonMaxReceives] != 1 {
		t.Fatalf("tick after space returned: %+v", rep)
	}
	if s := en.stats("jobs.dlq", t0); s.Available != 1 {
		t.Fatalf("DLQ after space returned: %+v", s)
	}
	en.send("jobs", t0+20000, body("d"))
	if s := en.stats("jobs", t0+20000); hwm("jobs") != 4 || s.Totals.Sent != 4 {
		t.Fatalf("send after space returned: hwm %d, %+v", hwm("jobs"), s)
	}
	if st := en.store.Space().Stats(); st.Refused < 4 {
		t.Fatalf("refusals counted %d", st.Refused)
	}
}

// TestQueueExpiryAndUnclaimedWaitWhileDiskLow: TTL expiry into the DLQ
// and the unclaimed sweep copy messages, so they wait while the disk is
// low (the expired message is not delivered meanwhile), and happen once
// space is back.
func TestQueueExpiryAndUnclaimedWaitWhileDiskLow(t *testing.T) {
	en, setFree := newEnvWithDisk(t)
	en.create("ttl", &AttributesPatch{OnExpire: pstr("dead_letter")})
	en.create("stale", &AttributesPatch{MaxUnclaimedAgeMs: p64(1000)})
	en.send("ttl", t0, SendMessage{Body: []byte("short"), TTL: pms(1000)})
	en.send("stale", t0, body("nobody"))
	setFree(10 << 20)
	rep := en.e.Tick(time.UnixMilli(t0 + 2000))
	if len(rep.DeadLettered) != 0 || rep.Errors != 0 {
		t.Fatalf("tick while low: %+v", rep)
	}
	if got := en.receive("ttl", 10, 0, t0+2000); len(got) != 0 {
		t.Fatalf("an expired message was delivered: %s", bodies(got))
	}
	for _, q := range []string{"ttl.dlq", "stale.dlq"} {
		if s := en.stats(q, t0); s.Available != 0 {
			t.Fatalf("%s got a message while low: %+v", q, s)
		}
	}
	setFree(1 << 30)
	rep = en.e.Tick(time.UnixMilli(t0 + 3000))
	if rep.DeadLettered[ReasonExpired] != 1 || rep.DeadLettered[ReasonUnclaimed] != 1 {
		t.Fatalf("tick after space returned: %+v", rep)
	}
}
