package queues

import "testing"

// ackReceive runs AckAndReceive as the HTTP handler does.
func (en *env) ackReceive(name string, n int, now int64, receipts ...string) ([]Message, []ItemResult) {
	en.t.Helper()
	req := ReceiveRequest{MaxMessages: n, Ack: receipts}
	if _, err := en.e.CheckReceive(name, &req); err != nil {
		en.t.Fatal(err)
	}
	msgs, res, err := en.e.AckAndReceive(name, req.Ack, req, now)
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
	en.e.Tick(t0 + 1500)
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
	if _, err := en.e.Receive("q", req, t0); AsError(err) == nil || AsError(err).Code != CodeMaxInflightReached {
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
