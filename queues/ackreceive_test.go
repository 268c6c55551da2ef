package queues

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vibemq/broker/pebblestore"
)

// ackReceive runs AckAndReceive as the HTTP handler does.
func (en *env) ackReceive(name string, n int, now int64, receipts ...string) ([]Message, []ItemResult) {
	en.t.Helper()
	req := ReceiveRequest{MaxMessages: n, Ack: receipts}
	if _, err := en.e.CheckReceive(name, &req); err != nil {
		en.t.Fatal(err)
	}
	msgs, res, err := en.e.AckAndReceive(name, req.Ack, req, time.UnixMilli(now))
	if err != nil {
		en.t.Fatalf("ack and receive: %v", err)
	}
	return msgs, res
}

// TestAckAndReceive: the acks of one call settle exactly as Ack would
// (acked, lease_lost, invalid_receipt, duplicate_in_request, in order), the
// new leases follow in the same write, and both survive a restart.
func TestAckAndReceive(t *testing.T) {
	en := newEnv(t)
	en.create("q", nil)
	en.send("q", t0, body("a"), body("b"))
	en.send("q", t0+500, body("c"), body("d"))
	first := en.receive("q", 2, 1000, t0+500)
	if bodies(first) != "a,b" {
		t.Fatalf("first receive %s", bodies(first))
	}
	// Both leases lapse; a and b are ready again, due at t0+1500, after c
	// and d. a's receipt is a late ack of an available message: it must be
	// settled and not leased by the same call, even with room for all.
	en.e.Tick(time.UnixMilli(t0 + 1500))
	msgs, res := en.ackReceive("q", 10, t0+1500, first[0].Receipt)
	if len(res) != 1 || codeOf(res[0]) != "acked" {
		t.Fatalf("late ack of a: %+v", res)
	}
	if bodies(msgs) != "c,d,b" {
		t.Fatalf("after acking a: leased %s, want c,d,b", bodies(msgs))
	}
	c, d, b := msgs[0], msgs[1], msgs[2]
	msgs, res = en.ackReceive("q", 10, t0+1501, c.Receipt, first[1].Receipt, "garbage", c.Receipt, d.Receipt)
	want := []string{"acked", CodeLeaseLost, CodeInvalidReceipt, CodeDuplicateInRequest, "acked"}
	if len(res) != len(want) {
		t.Fatalf("results %+v", res)
	}
	for i, w := range want {
		if codeOf(res[i]) != w || res[i].Index != i {
			t.Fatalf("result %d: %+v, want %s", i, res[i], w)
		}
	}
	if len(msgs) != 0 {
		t.Fatalf("leased %s from an empty queue", bodies(msgs))
	}
	s := en.stats("q", t0+1501)
	if s.Inflight != 1 || s.Available != 0 || s.Totals.Acked != 3 {
		t.Fatalf("stats %+v", s)
	}
	en.send("q", t0+1502, body("e"))
	msgs, res = en.ackReceive("q", 10, t0+1502, b.Receipt)
	if codeOf(res[0]) != "acked" || bodies(msgs) != "e" {
		t.Fatalf("ack b, lease e: %s %+v", bodies(msgs), res)
	}
	en.restart(t0 + 1503)
	s = en.stats("q", t0+1503)
	if s.Inflight != 1 || s.Available != 0 { // totals are counters since start
		t.Fatalf("after restart %+v", s)
	}
	if r := en.ack("q", t0+1504, b.Receipt); codeOf(r[0]) != CodeNotFound {
		t.Fatalf("acked before restart, acked again: %+v", r[0])
	}
	if r := en.ack("q", t0+1504, msgs[0].Receipt); codeOf(r[0]) != "acked" {
		t.Fatalf("lease taken with an ack, after restart: %+v", r[0])
	}
}

// TestAckAndReceiveMaxInflight: at max_inflight a plain receive is refused,
// but one that acks gets its acks settled and the room they free.
func TestAckAndReceiveMaxInflight(t *testing.T) {
	en := newEnv(t)
	en.create("q", &AttributesPatch{MaxInflight: p64(2)})
	en.send("q", t0, body("a"), body("b"), body("c"), body("d"))
	got := en.receive("q", 5, 0, t0)
	if len(got) != 2 {
		t.Fatalf("leased %d with max_inflight 2", len(got))
	}
	req := ReceiveRequest{MaxMessages: 5}
	if _, err := en.e.Receive("q", req, time.UnixMilli(t0)); AsError(err) == nil || AsError(err).Code != CodeMaxInflightReached {
		t.Fatalf("receive at max_inflight: %v", err)
	}
	msgs, res := en.ackReceive("q", 5, t0+1, got[0].Receipt)
	if codeOf(res[0]) != "acked" || bodies(msgs) != "c" {
		t.Fatalf("ack one at max_inflight: %s %+v", bodies(msgs), res)
	}
	// Acks that settle nothing free nothing: no messages, no error.
	msgs, res = en.ackReceive("q", 5, t0+2, got[0].Receipt)
	if codeOf(res[0]) != CodeNotFound || len(msgs) != 0 {
		t.Fatalf("repeated ack at max_inflight: %s %+v", bodies(msgs), res)
	}
}

func (en *env) receiveID(name, id string, n int, vis int64, now int64) []Message {
	en.t.Helper()
	req := ReceiveRequest{MaxMessages: n, RequestID: &id, VisibilityTimeout: pms(vis)}
	if _, err := en.e.CheckReceive(name, &req); err != nil {
		en.t.Fatal(err)
	}
	msgs, err := en.e.Receive(name, req, time.UnixMilli(now))
	if err != nil {
		en.t.Fatalf("receive: %v", err)
	}
	return msgs
}

func receiptList(msgs []Message) string {
	var out []string
	for _, m := range msgs {
		out = append(out, m.Receipt)
	}
	return strings.Join(out, ",")
}

// TestReceiveRequestIDRetry: a retried receive with the same request_id
// gets the first attempt's still-leased messages with the same receipts
// and leases nothing more, across a restart; once its leases have run out
// the id leases afresh, and Tick sweeps the dead memo.
func TestReceiveRequestIDRetry(t *testing.T) {
	en := newEnv(t)
	en.create("q", nil)
	en.send("q", t0, body("a"), body("b"), body("c"))
	first := en.receiveID("q", "r1", 2, 10_000, t0)
	if bodies(first) != "a,b" {
		t.Fatalf("first attempt: %s", bodies(first))
	}
	again := en.receiveID("q", "r1", 2, 10_000, t0+1)
	if bodies(again) != "a,b" || receiptList(again) != receiptList(first) || again[1].Deliveries != 1 {
		t.Fatalf("retry: %s %s (deliveries %d)", bodies(again), receiptList(again), again[1].Deliveries)
	}
	if s := en.stats("q", t0+1); s.Inflight != 2 || s.Available != 1 {
		t.Fatalf("a retry leased more: %+v", s)
	}
	// Another id is another request.
	if other := en.receiveID("q", "r2", 2, 10_000, t0+2); bodies(other) != "c" {
		t.Fatalf("second request: %s", bodies(other))
	}
	// Acked messages drop out of a retry.
	en.ack("q", t0+3, first[0].Receipt)
	if again := en.receiveID("q", "r1", 2, 10_000, t0+4); bodies(again) != "b" || again[0].Receipt != first[1].Receipt {
		t.Fatalf("retry after an ack: %s", bodies(again))
	}
	en.restart(t0 + 5)
	if again := en.receiveID("q", "r1", 2, 10_000, t0+6); bodies(again) != "b" || again[0].Receipt != first[1].Receipt {
		t.Fatalf("retry after a restart: %s", bodies(again))
	}
	q, _ := en.e.queueByName("q")
	if _, err := en.store.Get(memoKey(q.id, "r2")); err != nil {
		t.Fatalf("memo r2 after the restart: %v", err)
	}
	// The leases run out (b and c back); the memos are dead and swept.
	en.e.Tick(time.UnixMilli(t0 + 10_002))
	for _, id := range []string{"r1", "r2"} {
		if _, err := en.store.Get(memoKey(q.id, id)); !errors.Is(err, pebblestore.ErrNotFound) {
			t.Fatalf("dead memo %s after a sweep: %v", id, err)
		}
	}
	// r1 leases afresh.
	fresh := en.receiveID("q", "r1", 5, 10_000, t0+10_003)
	if bodies(fresh) != "b,c" || fresh[0].Deliveries != 2 || fresh[0].Receipt == first[1].Receipt {
		t.Fatalf("after the memo died: %s (deliveries %d)", bodies(fresh), fresh[0].Deliveries)
	}
	en.e.Tick(time.UnixMilli(t0 + 20_002)) // a sweep; r1's new memo lives until t0+20_003
	if _, err := en.store.Get(memoKey(q.id, "r1")); err != nil {
		t.Fatalf("live memo r1: %v", err)
	}
	if _, err := en.e.Purge("q", time.UnixMilli(t0+20_001)); err != nil {
		t.Fatal(err)
	}
	en.send("q", t0+20_002, body("d"))
	if got := en.receiveID("q", "r1", 5, 10_000, t0+20_002); bodies(got) != "d" {
		t.Fatalf("after a purge the memo must be gone: %s", bodies(got))
	}
}

// TestReceiveMemoDecode: a memo round-trips and damaged bytes are
// corruption, never a panic.
func TestReceiveMemoDecode(t *testing.T) {
	r := receiveMemo{deadline: 42, items: []memoItem{{m: msgKey{1, 7}, epoch: 3}, {m: msgKey{0, 1 << 40}, epoch: 1}}}
	got, err := decodeMemo(r.encode())
	if err != nil || got.deadline != 42 || len(got.items) != 2 || got.items[1] != r.items[1] {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	for _, bad := range [][]byte{nil, make([]byte, 9), append(r.encode(), 0)} {
		if _, err := decodeMemo(bad); !errors.Is(err, pebblestore.ErrCorruption) {
			t.Fatalf("decode %x: %v", bad, err)
		}
	}
}

// TestReceiveRetryAtMaxInflight pins a bug: a retried receive whose first
// attempt filled max_inflight was refused with max_inflight_reached
// instead of answered from its memo, so the client never learned its
// leases (they only lapsed).
func TestReceiveRetryAtMaxInflight(t *testing.T) {
	en := newEnv(t)
	en.create("q", &AttributesPatch{MaxInflight: p64(2)})
	en.send("q", t0, body("a"), body("b"), body("c"))
	first := en.receiveID("q", "r1", 2, 10_000, t0)
	if bodies(first) != "a,b" {
		t.Fatalf("first attempt: %s", bodies(first))
	}
	again := en.receiveID("q", "r1", 2, 10_000, t0+1)
	if bodies(again) != "a,b" || receiptList(again) != receiptList(first) {
		t.Fatalf("retry at max_inflight: %s", bodies(again))
	}
	// Another request is still refused.
	req := ReceiveRequest{MaxMessages: 1, RequestID: pstr("r2")}
	if _, err := en.e.Receive("q", req, time.UnixMilli(t0+2)); AsError(err) == nil || AsError(err).Code != CodeMaxInflightReached {
		t.Fatalf("new request at max_inflight: %v", err)
	}
}

// TestReceiveRetryAcksItsOwnMessages pins a bug: a receive that replays a
// memo and acks some of the memo's messages in the same call answered
// them again, with the receipts it had just settled (stale on arrival:
// the client processes them twice).
func TestReceiveRetryAcksItsOwnMessages(t *testing.T) {
	en := newEnv(t)
	en.create("q", nil)
	en.send("q", t0, body("a"), body("b"))
	first := en.receiveID("q", "r1", 2, 10_000, t0)
	if bodies(first) != "a,b" {
		t.Fatalf("first attempt: %s", bodies(first))
	}
	req := ReceiveRequest{MaxMessages: 2, RequestID: pstr("r1"), Ack: []string{first[0].Receipt}}
	if _, err := en.e.CheckReceive("q", &req); err != nil {
		t.Fatal(err)
	}
	msgs, res, err := en.e.AckAndReceive("q", req.Ack, req, time.UnixMilli(t0+1))
	if err != nil || codeOf(res[0]) != "acked" {
		t.Fatalf("ack a with the retry: %v %+v", err, res)
	}
	if bodies(msgs) != "b" {
		t.Fatalf("the retry answered %s, want b only (a was acked by the same call)", bodies(msgs))
	}
}

// TestReceiveStorageErrorKeepsReady: a receive that fails reading a
// message's state after it leased others in memory (nothing written) must
// leave every message receivable; the ready buffer's popped entries are
// still in Pebble only and must be reloaded, not lost until a restart.
func TestReceiveStorageErrorKeepsReady(t *testing.T) {
	en := newEnv(t)
	en.create("q", nil)
	res := en.send("q", t0, body("a"), body("b"), body("c"))
	q, qerr := en.e.queueByName("q")
	if qerr != nil {
		t.Fatal(qerr)
	}
	m, perr := parseID(res[1].ID)
	if perr != nil {
		t.Fatal(perr)
	}
	key := stateKey(q.id, m)
	good, err := en.store.Get(key)
	if err != nil {
		t.Fatal(err)
	}
	put := func(v []byte) {
		b := en.store.NewBatch()
		b.Set(key, v)
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	put([]byte{0xff}) // b's state row cannot be decoded: a storage failure
	req := ReceiveRequest{MaxMessages: 3}
	if _, err := en.e.Receive("q", req, time.UnixMilli(t0+1)); err == nil {
		t.Fatal("receive over an unreadable state row succeeded")
	}
	put(good)
	if got := bodies(en.receive("q", 3, 0, t0+2)); got != "a,b,c" {
		t.Fatalf("after the failure the queue leases %q, want a,b,c", got)
	}
}
