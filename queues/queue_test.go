package queues

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/topics"
)

// t0 is the fake clock's start (Unix ms); tests move time by passing
// later values. Nothing here sleeps.
const t0 = int64(1_800_000_000_000)

type env struct {
	t     *testing.T
	dir   string
	store *pebblestore.Store
	tm    *topics.Manager
	e     *Engine
	// freeMin and probe configure the store's free-space guard (off by
	// default).
	freeMin int64
	probe   pebblestore.SpaceProbe
}

func newEnv(t *testing.T) *env {
	t.Helper()
	en := &env{t: t, dir: t.TempDir()}
	en.open(t0)
	t.Cleanup(func() { en.close() })
	return en
}

func (en *env) open(now int64) {
	en.t.Helper()
	s, err := pebblestore.Open(en.dir, pebblestore.Options{Logger: zerolog.Nop(), MemTableSize: 4 << 20, CacheSize: 8 << 20,
		FreeSpaceMin: en.freeMin, FreeSpaceProbe: en.probe})
	if err != nil {
		en.t.Fatal(err)
	}
	tm, err := topics.Open(s, topics.Config{Logger: zerolog.Nop(), DefaultPartitions: 1})
	if err != nil {
		en.t.Fatal(err)
	}
	e, err := Open(s, tm, Config{Logger: zerolog.Nop(), Seed: 1}, time.UnixMilli(now))
	if err != nil {
		en.t.Fatal(err)
	}
	en.store, en.tm, en.e = s, tm, e
}

func (en *env) close() {
	if en.e != nil {
		en.e.Close()
		_ = en.store.Close()
		en.e = nil
	}
}

// restart closes and reopens everything on the same directory.
func (en *env) restart(now int64) {
	en.close()
	en.open(now)
}

func p32(v int32) *int32 { return &v }
func p64(v int64) *int64 { return &v }

// pms is a duration of ms milliseconds, by pointer.
func pms(ms int64) *time.Duration { d := time.Duration(ms) * time.Millisecond; return &d }
func pstr(v string) *string       { return &v }

func (en *env) create(name string, patch *AttributesPatch) {
	en.t.Helper()
	if _, _, err := en.e.CreateQueue(name, patch, time.UnixMilli(t0)); err != nil {
		en.t.Fatalf("create %s: %v", name, err)
	}
}

func (en *env) send(name string, now int64, msgs ...SendMessage) []SendResult {
	en.t.Helper()
	res, err := en.e.Send(name, SendRequest{Messages: msgs}, time.UnixMilli(now))
	if err != nil {
		en.t.Fatalf("send: %v", err)
	}
	for _, r := range res {
		if r.Error != nil {
			en.t.Fatalf("send item %d: %v", r.Index, r.Error)
		}
	}
	return res
}

func body(s string) SendMessage { return SendMessage{Body: []byte(s)} }

func (en *env) receive(name string, n int, vis int64, now int64) []Message {
	en.t.Helper()
	req := ReceiveRequest{MaxMessages: n}
	if vis > 0 {
		req.VisibilityTimeout = pms(vis)
	}
	if _, err := en.e.CheckReceive(name, &req); err != nil {
		en.t.Fatal(err)
	}
	msgs, err := en.e.Receive(name, req, time.UnixMilli(now))
	if err != nil {
		en.t.Fatalf("receive: %v", err)
	}
	return msgs
}

func bodies(msgs []Message) string {
	var out []string
	for _, m := range msgs {
		out = append(out, string(m.Body))
	}
	return strings.Join(out, ",")
}

func (en *env) ack(name string, now int64, receipts ...string) []ItemResult {
	en.t.Helper()
	res, err := en.e.Ack(name, receipts, time.UnixMilli(now))
	if err != nil {
		en.t.Fatalf("ack: %v", err)
	}
	return res
}

func codeOf(r ItemResult) string {
	if r.Error != nil {
		return r.Error.Code
	}
	return r.Status
}

func (en *env) stats(name string, now int64) Stats {
	en.t.Helper()
	s, err := en.e.Stats(name, time.UnixMilli(now))
	if err != nil {
		en.t.Fatal(err)
	}
	return s
}

// TestLifecycle: send, receive, ack, nack with a delay, delayed visibility.
func TestLifecycle(t *testing.T) {
	en := newEnv(t)
	en.create("jobs", nil)
	en.send("jobs", t0, body("a"), body("b"), body("c"))
	got := en.receive("jobs", 2, 0, t0)
	if bodies(got) != "a,b" || got[0].Deliveries != 1 {
		t.Fatalf("received %s (deliveries %d)", bodies(got), got[0].Deliveries)
	}
	if r := en.ack("jobs", t0, got[0].Receipt); codeOf(r[0]) != "acked" {
		t.Fatalf("ack: %+v", r[0])
	}
	res, err := en.e.Nack("jobs", NackRequest{Receipts: []string{got[1].Receipt}, Delay: pms(5000), Reason: "busy"}, time.UnixMilli(t0))
	if err != nil || codeOf(res[0]) != "requeued" {
		t.Fatalf("nack: %v %+v", err, res)
	}
	if got := en.receive("jobs", 10, 0, t0+1); bodies(got) != "c" {
		t.Fatalf("before the nack delay: %s", bodies(got))
	}
	if got := en.receive("jobs", 10, 0, t0+4999); len(got) != 0 {
		t.Fatalf("still delayed: %s", bodies(got))
	}
	got = en.receive("jobs", 10, 0, t0+5000)
	if bodies(got) != "b" || got[0].Deliveries != 2 || got[0].LastError != "busy" || got[0].Nacks != 1 {
		t.Fatalf("after the delay: %+v", got)
	}
	s := en.stats("jobs", t0+5000)
	if s.Inflight != 2 || s.Available != 0 || s.Totals.Acked != 1 || s.DLQ != "jobs.dlq" {
		t.Fatalf("stats %+v", s)
	}
	// Acking twice: the message is gone.
	if r := en.ack("jobs", t0, got[0].Receipt); codeOf(r[0]) != "acked" {
		t.Fatalf("%+v", r)
	}
	if r := en.ack("jobs", t0, got[0].Receipt); codeOf(r[0]) != CodeNotFound {
		t.Fatalf("second ack: %+v", r)
	}
}

// TestLeaseFencing pins NATIVE-QUEUE F3/F4/F5: after a lease expires and
// the message is received again, the old receipt gets lease_lost (never a
// silent success); a late ack without a new receive still succeeds; an
// extend after expiry is not_inflight.
func TestLeaseFencing(t *testing.T) {
	en := newEnv(t)
	en.create("q", nil)
	en.send("q", t0, body("x"), body("y"))
	a := en.receive("q", 2, 1000, t0)
	if len(a) != 2 {
		t.Fatalf("got %d", len(a))
	}
	// Not expired yet: nothing to receive, nothing reaped.
	if rep := en.e.Tick(time.UnixMilli(t0 + 999)); rep.Reaped != 0 {
		t.Fatalf("reaped early: %+v", rep)
	}
	if got := en.receive("q", 2, 0, t0+999); len(got) != 0 {
		t.Fatalf("leased twice: %s", bodies(got))
	}
	if rep := en.e.Tick(time.UnixMilli(t0 + 1000)); rep.Reaped != 2 || rep.Requeued != 2 {
		t.Fatalf("reap: %+v", rep)
	}
	res, _ := en.e.Extend("q", ExtendRequest{Receipts: []string{a[0].Receipt}, VisibilityTimeout: 5000 * time.Millisecond}, time.UnixMilli(t0+1001))
	if codeOf(res[0]) != CodeNotInflight {
		t.Fatalf("extend after expiry: %+v", res[0])
	}
	b := en.receive("q", 1, 0, t0+1001) // gets x again
	if bodies(b) != "x" || b[0].Deliveries != 2 {
		t.Fatalf("redelivery: %+v", b)
	}
	if r := en.ack("q", t0+1002, a[0].Receipt); codeOf(r[0]) != CodeLeaseLost {
		t.Fatalf("stale ack: %+v", r[0])
	}
	if r := en.ack("q", t0+1002, b[0].Receipt); codeOf(r[0]) != "acked" {
		t.Fatalf("current ack: %+v", r[0])
	}
	// y was reaped but not received again: the late ack of its first lease counts.
	if r := en.ack("q", t0+1003, a[1].Receipt); codeOf(r[0]) != "acked" {
		t.Fatalf("late ack: %+v", r[0])
	}
	if got := en.receive("q", 5, 0, t0+2000); len(got) != 0 {
		t.Fatalf("acked message came back: %s", bodies(got))
	}
	s := en.stats("q", t0+2000)
	if s.Available != 0 || s.Inflight != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// TestExtendBounds: extend counts from now and a lease may not last past
// 12 hours from its receive (visibility_too_long, not clamped).
func TestExtendBounds(t *testing.T) {
	en := newEnv(t)
	en.create("q", nil)
	en.send("q", t0, body("x"))
	m := en.receive("q", 1, 30000, t0)[0]
	res, _ := en.e.Extend("q", ExtendRequest{Receipts: []string{m.Receipt}, VisibilityTimeout: 60000 * time.Millisecond}, time.UnixMilli(t0+20000))
	if codeOf(res[0]) != "extended" || !res[0].LeaseTill.Equal(time.UnixMilli(t0+80000)) {
		t.Fatalf("extend: %+v", res[0])
	}
	// The old deadline no longer reaps it.
	if rep := en.e.Tick(time.UnixMilli(t0 + 30000)); rep.Reaped != 0 {
		t.Fatalf("reaped at the old deadline: %+v", rep)
	}
	res, _ = en.e.Extend("q", ExtendRequest{Receipts: []string{m.Receipt}, VisibilityTimeout: VisibilityMaxMs * time.Millisecond}, time.UnixMilli(t0+70000))
	if codeOf(res[0]) != CodeVisibilityTooLong {
		t.Fatalf("extend past 12h: %+v", res[0])
	}
	if _, err := en.e.Extend("q", ExtendRequest{Receipts: []string{m.Receipt}, VisibilityTimeout: 999 * time.Millisecond}, time.UnixMilli(t0)); AsError(err).Code != CodeOutOfRange {
		t.Fatalf("visibility below 1 s: %v", err)
	}
	if rep := en.e.Tick(time.UnixMilli(t0 + 80000)); rep.Reaped != 1 {
		t.Fatalf("reap at the new deadline: %+v", rep)
	}
}

// TestMaxReceivesDeadLetters pins F11: a message whose leases keep running
// out goes to the DLQ at max_receives, with its story in record headers,
// and leaves the source.
func TestMaxReceivesDeadLetters(t *testing.T) {
	en := newEnv(t)
	en.create("work", &AttributesPatch{MaxReceives: p32(3)})
	en.send("work", t0, body("poison"))
	now := t0
	for i := 1; i <= 3; i++ {
		got := en.receive("work", 1, 1000, now)
		if len(got) != 1 || got[0].Deliveries != uint32(i) {
			t.Fatalf("receive %d: %+v", i, got)
		}
		now += 1000
		en.e.Tick(time.UnixMilli(now))
	}
	if s := en.stats("work", now); s.Available+s.Inflight != 0 || s.DLQDepth != 1 || s.Totals.DeadLettered[ReasonMaxReceives] != 1 {
		t.Fatalf("source stats %+v", s)
	}
	msgs, _, err := en.e.Browse("work.dlq", BrowseRequest{}, time.UnixMilli(now))
	if err != nil || len(msgs) != 1 {
		t.Fatalf("browse dlq: %v %+v", err, msgs)
	}
	d := msgs[0]
	if string(d.Body) != "poison" || d.DeadLetter == nil || d.DeadLetter.Reason != ReasonMaxReceives ||
		d.DeadLetter.SourceQueue != "work" || d.DeadLetter.SourceID != "0:0" || d.DeadLetter.Deliveries != 3 ||
		d.Headers[HeaderDLQExpiries] != "3" || d.DeadLetter.FailedAt != formatHeaderTime(now) {
		t.Fatalf("dead letter %+v %+v", d, d.DeadLetter)
	}
	// Browsing takes no lease: the message is still there.
	if msgs, _, _ := en.e.Browse("work.dlq", BrowseRequest{State: "ready"}, time.UnixMilli(now)); len(msgs) != 1 {
		t.Fatal("browse consumed the message")
	}
}

// TestRejectAndNackLimit: nack dead_letter:true moves at once with the
// reason; plain nacks back off and dead-letter at max_receives.
func TestRejectAndNackLimit(t *testing.T) {
	en := newEnv(t)
	en.create("q", &AttributesPatch{MaxReceives: p32(2), Backoff: &BackoffPatch{Jitter: new(float64)}})
	en.send("q", t0, body("bad"), body("flaky"))
	got := en.receive("q", 2, 0, t0)
	res, err := en.e.Nack("q", NackRequest{Receipts: []string{got[0].Receipt}, DeadLetter: true, Reason: "schema v3"}, time.UnixMilli(t0))
	if err != nil || codeOf(res[0]) != "dead_lettered" {
		t.Fatalf("reject: %v %+v", err, res)
	}
	res, _ = en.e.Nack("q", NackRequest{Receipts: []string{got[1].Receipt}}, time.UnixMilli(t0))
	if codeOf(res[0]) != "requeued" || !res[0].VisibleAt.Equal(time.UnixMilli(t0+1000)) {
		t.Fatalf("first nack backs off 1 s: %+v", res[0])
	}
	got = en.receive("q", 1, 0, t0+1000)
	res, _ = en.e.Nack("q", NackRequest{Receipts: []string{got[0].Receipt}}, time.UnixMilli(t0+1000))
	if codeOf(res[0]) != "dead_lettered" {
		t.Fatalf("nack at the limit: %+v", res[0])
	}
	msgs, _, _ := en.e.Browse("q.dlq", BrowseRequest{}, time.UnixMilli(t0+1000))
	if len(msgs) != 2 || msgs[0].DeadLetter.Reason != ReasonRejected || msgs[0].DeadLetter.Detail != "schema v3" || msgs[1].DeadLetter.Reason != ReasonMaxReceives {
		t.Fatalf("dlq: %+v", msgs)
	}
	// A plain nack of a message that is not held.
	res, _ = en.e.Nack("q", NackRequest{Receipts: []string{got[0].Receipt}}, time.UnixMilli(t0+1000))
	if codeOf(res[0]) != CodeNotFound {
		t.Fatalf("nack of a dead-lettered message: %+v", res[0])
	}
}

// TestTTLAndPriority pins F22 and F24: a TTL-expired message with
// on_expire=dead_letter goes to the DLQ as expired; higher priorities are
// received first, delayed ones once due.
func TestTTLAndPriority(t *testing.T) {
	en := newEnv(t)
	en.create("q", &AttributesPatch{OnExpire: pstr("dead_letter"), PriorityLevels: p32(4)})
	en.send("q", t0, SendMessage{Body: []byte("short"), TTL: pms(1000)})
	en.send("q", t0, SendMessage{Body: []byte("p3-late"), Priority: p32(3), Delay: pms(10000)},
		SendMessage{Body: []byte("p0"), Priority: p32(0)}, SendMessage{Body: []byte("p3"), Priority: p32(3)})
	rep := en.e.Tick(time.UnixMilli(t0 + 1000))
	if rep.DeadLettered[ReasonExpired] != 1 {
		t.Fatalf("ttl tick: %+v", rep)
	}
	if got := en.receive("q", 10, 0, t0+1000); bodies(got) != "p3,p0" {
		t.Fatalf("order: %s", bodies(got))
	}
	en.send("q", t0+2000, SendMessage{Body: []byte("p1"), Priority: p32(1)})
	if got := en.receive("q", 10, 0, t0+10000); bodies(got) != "p3-late,p1" {
		t.Fatalf("after the delay: %s", bodies(got))
	}
	msgs, _, _ := en.e.Browse("q.dlq", BrowseRequest{}, time.UnixMilli(t0+10000))
	if len(msgs) != 1 || msgs[0].DeadLetter.Reason != ReasonExpired || string(msgs[0].Body) != "short" {
		t.Fatalf("dlq %+v", msgs)
	}
}

// TestDedup pins F20: the same dedup id within the window is a duplicate
// answering the original id; after the window it is new.
func TestDedup(t *testing.T) {
	en := newEnv(t)
	en.create("q", &AttributesPatch{DedupWindowMs: p64(60000)})
	first := en.send("q", t0, SendMessage{Body: []byte("a"), DedupID: pstr("order-1")})
	dup := en.send("q", t0+1000, SendMessage{Body: []byte("a"), DedupID: pstr("order-1")}, SendMessage{Body: []byte("b"), DedupID: pstr("order-2")}, SendMessage{Body: []byte("b"), DedupID: pstr("order-2")})
	if !dup[0].Duplicate || dup[0].ID != first[0].ID || dup[1].Duplicate || !dup[2].Duplicate || dup[2].ID != dup[1].ID {
		t.Fatalf("dedup: %+v %+v", first, dup)
	}
	en.e.Tick(time.UnixMilli(t0 + 60001))
	again := en.send("q", t0+60001, SendMessage{Body: []byte("a"), DedupID: pstr("order-1")})
	if again[0].Duplicate {
		t.Fatalf("after the window: %+v", again)
	}
	if s := en.stats("q", t0+60001); s.Available != 3 {
		t.Fatalf("stats %+v", s)
	}
}

// TestRestartKeepsLeasesAndDLQ: queues, leases (with their receipts),
// delayed messages and the DLQ survive a restart.
func TestRestartKeepsLeasesAndDLQ(t *testing.T) {
	en := newEnv(t)
	en.create("q", nil)
	en.send("q", t0, body("held"), body("dead"), SendMessage{Body: []byte("later"), Delay: pms(60000)})
	got := en.receive("q", 2, 30000, t0)
	res, _ := en.e.Nack("q", NackRequest{Receipts: []string{got[1].Receipt}, DeadLetter: true}, time.UnixMilli(t0))
	if codeOf(res[0]) != "dead_lettered" {
		t.Fatalf("%+v", res)
	}
	en.restart(t0 + 1000)
	s := en.stats("q", t0+1000)
	if s.Inflight != 1 || s.Available != 1 || s.Delayed != 1 || s.DLQDepth != 1 {
		t.Fatalf("after restart %+v", s)
	}
	if got2 := en.receive("q", 5, 0, t0+1000); len(got2) != 0 {
		t.Fatalf("lease not kept: %s", bodies(got2))
	}
	en.e.Tick(time.UnixMilli(t0 + 30000))
	again := en.receive("q", 5, 0, t0+30000)
	if bodies(again) != "held" || again[0].Deliveries != 2 {
		t.Fatalf("after the lease: %+v", again)
	}
	if r := en.ack("q", t0+30001, got[0].Receipt); codeOf(r[0]) != CodeLeaseLost {
		t.Fatalf("old receipt: %+v", r[0])
	}
	if got := en.receive("q", 5, 0, t0+60000); bodies(got) != "later" {
		t.Fatalf("delayed: %s", bodies(got))
	}
}

// TestRedriveExactlyOnce pins F15: a rate-limited redrive, interrupted by
// restarts, moves every message exactly once.
func TestRedriveExactlyOnce(t *testing.T) {
	en := newEnv(t)
	en.create("src", &AttributesPatch{MaxReceives: p32(1)})
	const n = 250
	var msgs []SendMessage
	for i := range n {
		msgs = append(msgs, body(fmt.Sprintf("m%03d", i)))
	}
	en.send("src", t0, msgs...)
	now := t0
	for {
		got := en.receive("src", 100, 0, now)
		if len(got) == 0 {
			break
		}
		var rs []string
		for _, m := range got {
			rs = append(rs, m.Receipt)
		}
		if _, err := en.e.Nack("src", NackRequest{Receipts: rs, DeadLetter: true}, time.UnixMilli(now)); err != nil {
			t.Fatal(err)
		}
	}
	if s := en.stats("src.dlq", now); s.Available != n {
		t.Fatalf("dlq %+v", s)
	}
	task, err := en.e.Redrive("src.dlq", RedriveRequest{RatePerSec: func() *int { v := 100; return &v }()}, time.UnixMilli(now))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := en.e.Redrive("src.dlq", RedriveRequest{}, time.UnixMilli(now)); AsError(err).Code != CodeTaskAlreadyRunning {
		t.Fatalf("second redrive: %v", err)
	}
	for i := 0; i < 10; i++ {
		now += 500
		rep := en.e.Tick(time.UnixMilli(now))
		if rep.RedriveMoved > 100 {
			t.Fatalf("rate exceeded: %d in one tick", rep.RedriveMoved)
		}
		if i%3 == 1 {
			en.restart(now) // crash-equivalent: every step was one synced batch
		}
		if tk, _ := en.e.Task(task.ID); tk.State == taskDone {
			break
		}
	}
	tk, _ := en.e.Task(task.ID)
	if tk.State != taskDone || tk.Moved != n {
		t.Fatalf("task %+v", tk)
	}
	seen := map[string]int{}
	for {
		got := en.receive("src", 100, 0, now)
		if len(got) == 0 {
			break
		}
		for _, m := range got {
			seen[string(m.Body)]++
			if m.Headers[HeaderRedrivenFrom] != "src.dlq" || m.Headers[HeaderDLQReason] != "" || m.Deliveries != 1 {
				t.Fatalf("redriven message %+v", m)
			}
		}
	}
	if len(seen) != n {
		t.Fatalf("redriven %d distinct, want %d", len(seen), n)
	}
	for b, c := range seen {
		if c != 1 {
			t.Fatalf("%s redriven %d times", b, c)
		}
	}
	if s := en.stats("src.dlq", now); s.Available != 0 {
		t.Fatalf("dlq after %+v", s)
	}
}

// TestReadyBufferRefill exercises the in-memory ready buffer with a tiny
// size: trims, refills from Pebble, and interleaved sends keep order and
// lose nothing.
func TestReadyBufferRefill(t *testing.T) {
	old := readyBufferSize
	readyBufferSize = 4
	t.Cleanup(func() { readyBufferSize = old })
	en := newEnv(t)
	en.create("q", nil)
	var want []string
	for i := range 50 {
		b := fmt.Sprintf("%02d", i)
		want = append(want, b)
		en.send("q", t0, body(b))
	}
	var got []string
	for len(got) < 50 {
		msgs := en.receive("q", 3, 0, t0)
		if len(msgs) == 0 {
			t.Fatalf("stuck after %d: %v", len(got), got)
		}
		for _, m := range msgs {
			got = append(got, string(m.Body))
			en.ack("q", t0, m.Receipt)
		}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("order\n got %v\nwant %v", got, want)
	}
}

// TestConcurrentReceivers: 8 receivers racing over one queue never hold
// the same message at once, and every message is acked exactly once.
func TestConcurrentReceivers(t *testing.T) {
	en := newEnv(t)
	en.create("q", nil)
	const n = 400
	var msgs []SendMessage
	for i := range n {
		msgs = append(msgs, body(fmt.Sprintf("%d", i)))
	}
	en.send("q", t0, msgs[:200]...)
	var mu sync.Mutex
	held := map[string]bool{}
	acked := map[string]int{}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for empty := 0; empty < 50; {
				got, err := en.e.Receive("q", ReceiveRequest{MaxMessages: 1 + w%3, MaxBytes: ReceiveBytesDefault}, time.UnixMilli(t0))
				if err != nil {
					errs <- err
					return
				}
				if len(got) == 0 {
					empty++
					continue
				}
				var rs []string
				mu.Lock()
				for _, m := range got {
					if held[m.ID] {
						errs <- fmt.Errorf("message %s leased twice", m.ID)
					}
					held[m.ID] = true
					rs = append(rs, m.Receipt)
				}
				mu.Unlock()
				mu.Lock()
				for _, m := range got {
					delete(held, m.ID)
					acked[string(m.Body)]++
				}
				mu.Unlock()
				res, err := en.e.Ack("q", rs, time.UnixMilli(t0))
				if err != nil {
					errs <- err
					return
				}
				for _, r := range res {
					if r.Status != "acked" {
						errs <- fmt.Errorf("ack %+v", r)
					}
				}
			}
		}()
	}
	en.send("q", t0, msgs[200:]...)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Drain whatever the workers gave up on.
	for {
		got := en.receive("q", 100, 0, t0)
		if len(got) == 0 {
			break
		}
		for _, m := range got {
			acked[string(m.Body)]++
			en.ack("q", t0, m.Receipt)
		}
	}
	if len(acked) != n {
		t.Fatalf("acked %d distinct of %d", len(acked), n)
	}
	var dups []string
	for b, c := range acked {
		if c != 1 {
			dups = append(dups, b)
		}
	}
	sort.Strings(dups)
	if len(dups) > 0 {
		t.Fatalf("delivered more than once: %v", dups)
	}
}

// TestCreateRules: names, attribute ranges, idempotent create, DLQ checks,
// delete rules.
func TestCreateRules(t *testing.T) {
	en := newEnv(t)
	for name, code := range map[string]string{"": CodeInvalidName, "..": CodeInvalidName, "a b": CodeInvalidName, "a__b": CodeReservedName, strings.Repeat("x", 250): CodeInvalidName} {
		if _, _, err := en.e.CreateQueue(name, nil, time.UnixMilli(t0)); AsError(err).Code != code {
			t.Errorf("create %q: %v, want %s", name, err, code)
		}
	}
	if _, _, err := en.e.CreateQueue("q", &AttributesPatch{VisibilityTimeoutMs: p64(999)}, time.UnixMilli(t0)); AsError(err).Code != CodeOutOfRange {
		t.Errorf("visibility: %v", err)
	}
	if _, _, err := en.e.CreateQueue("q", &AttributesPatch{DeadLetter: pstr("nope")}, time.UnixMilli(t0)); AsError(err).Code != CodeDeadLetterNotFound {
		t.Errorf("dlq: %v", err)
	}
	if _, _, err := en.e.CreateQueue("q", &AttributesPatch{DeadLetter: pstr("q")}, time.UnixMilli(t0)); AsError(err).Code != CodeDeadLetterCycle {
		t.Errorf("self dlq: %v", err)
	}
	en.create("q", nil)
	if _, created, err := en.e.CreateQueue("q", nil, time.UnixMilli(t0)); err != nil || created {
		t.Errorf("same create: %v %v", created, err)
	}
	if _, _, err := en.e.CreateQueue("q", &AttributesPatch{MaxReceives: p32(9)}, time.UnixMilli(t0)); AsError(err).Code != CodeQueueExists {
		t.Errorf("other create: %v", err)
	}
	if _, err := en.tm.CreateTopic("plain", 1, nil, false); err != nil {
		t.Fatal(err)
	}
	if _, _, err := en.e.CreateQueue("plain", nil, time.UnixMilli(t0)); AsError(err).Code != CodeTopicExists {
		t.Errorf("topic exists: %v", err)
	}
	if err := en.e.DeleteQueue("q.dlq", false, time.UnixMilli(t0)); AsError(err).Code != CodeQueueInUse {
		t.Errorf("delete dlq in use: %v", err)
	}
	en.send("q", t0, body("x"))
	if err := en.e.DeleteQueue("q", false, time.UnixMilli(t0)); AsError(err).Code != CodeQueueNotEmpty {
		t.Errorf("delete non-empty: %v", err)
	}
	if _, err := en.e.UpdateQueue("q", &AttributesPatch{Partitions: p32(2)}, time.UnixMilli(t0)); AsError(err).Code != CodeImmutableField {
		t.Errorf("partitions: %v", err)
	}
	if err := en.e.DeleteQueue("q", true, time.UnixMilli(t0)); err != nil {
		t.Fatal(err)
	}
	if _, err := en.e.GetQueue("q.dlq"); AsError(err).Code != CodeQueueNotFound {
		t.Errorf("empty auto DLQ kept: %v", err)
	}
	if _, ok := en.tm.Topic("q"); ok {
		t.Error("topic kept")
	}
}
