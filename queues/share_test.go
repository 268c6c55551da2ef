package queues

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// Kafka share-group leases on a queue (share.go), with the fake clock.

func (en *env) shareAcquire(name, owner string, n int, now int64) []ShareLease {
	en.t.Helper()
	got, wait, err := en.e.ShareAcquire(name, ShareAcquireRequest{Owner: owner, MaxMessages: n, MaxBytes: 1 << 20, Lock: 3 * time.Second}, time.UnixMilli(now))
	if err != nil {
		en.t.Fatalf("share acquire: %v", err)
	}
	if err := wait(); err != nil {
		en.t.Fatalf("share acquire wait: %v", err)
	}
	return got
}

func (en *env) shareSettle(name, owner string, now int64, items ...ShareSettle) error {
	en.t.Helper()
	wait, err := en.e.ShareSettle(name, ShareSettleRequest{Owner: owner, Items: items, Lock: 3 * time.Second, Reason: "rejected by " + owner}, time.UnixMilli(now))
	if err != nil {
		return err
	}
	return wait()
}

func leaseOffsets(ls []ShareLease) string {
	s := ""
	for _, l := range ls {
		s += fmt.Sprintf("%d:%d/%d ", l.Partition, l.Offset, l.Deliveries)
	}
	return s
}

func isCode(err error, code string) bool {
	var qe *Error
	return errors.As(err, &qe) && qe.Code == code
}

// TestShareAcquireExclusiveWithReceive: a message a Kafka member holds is
// never received natively, and the reverse; only the owner settles it.
func TestShareAcquireExclusiveWithReceive(t *testing.T) {
	en := newEnv(t)
	en.create("q", nil)
	en.send("q", t0, body("a"), body("b"), body("c"))
	got := en.shareAcquire("q", "g/m1", 2, t0)
	if leaseOffsets(got) != "0:0/1 0:1/1 " {
		t.Fatalf("acquired %s", leaseOffsets(got))
	}
	if msgs := en.receive("q", 10, 0, t0); bodies(msgs) != "c" {
		t.Fatalf("native receive got %q, want only c", bodies(msgs))
	}
	if more := en.shareAcquire("q", "g/m2", 10, t0); len(more) != 0 {
		t.Fatalf("a second member acquired %s", leaseOffsets(more))
	}
	// Another member's, or a natively held message, cannot be settled.
	if err := en.shareSettle("q", "g/m2", t0, ShareSettle{Offset: 0, Outcome: ShareAccept}); !isCode(err, CodeNotInflight) {
		t.Fatalf("settle by another member: %v", err)
	}
	if err := en.shareSettle("q", "g/m1", t0, ShareSettle{Offset: 0, Outcome: ShareAccept}, ShareSettle{Offset: 2, Outcome: ShareAccept}); !isCode(err, CodeNotInflight) {
		t.Fatalf("settle of a native lease: %v", err)
	}
	// All or nothing: offset 0 is still held.
	if err := en.shareSettle("q", "g/m1", t0, ShareSettle{Offset: 0, Outcome: ShareAccept}, ShareSettle{Offset: 1, Outcome: ShareAccept}); err != nil {
		t.Fatal(err)
	}
	if s := en.stats("q", t0); s.Inflight != 1 || s.Available != 0 || s.Totals.Acked != 2 {
		t.Fatalf("stats %+v", s)
	}
	if ps, err := en.e.SharePending("q"); err != nil || fmt.Sprint(ps) != "[{0 2 1 1}]" {
		t.Fatalf("pending %v %v, want start 2 with 1 message, leased (natively)", ps, err)
	}
}

// TestShareReleaseRejectRenew: RELEASE requeues at once (no backoff) and
// dead-letters at max_receives, REJECT dead-letters with the reason,
// RENEW moves the lock; an expired lock is reaped by Tick and the message
// goes to a native receiver.
func TestShareReleaseRejectRenew(t *testing.T) {
	en := newEnv(t)
	en.create("q", &AttributesPatch{MaxReceives: p32(2), ExpiryBackoffMs: p64(0)})
	en.send("q", t0, body("rel"), body("rej"), body("renew"))
	got := en.shareAcquire("q", "g/m", 3, t0)
	if len(got) != 3 {
		t.Fatalf("acquired %s", leaseOffsets(got))
	}
	if err := en.shareSettle("q", "g/m", t0+10,
		ShareSettle{Offset: 0, Outcome: ShareRelease}, ShareSettle{Offset: 1, Outcome: ShareReject}, ShareSettle{Offset: 2, Outcome: ShareRenew}); err != nil {
		t.Fatal(err)
	}
	again := en.shareAcquire("q", "g/m", 3, t0+10)
	if leaseOffsets(again) != "0:0/2 " {
		t.Fatalf("after release: %s, want offset 0 again at delivery 2", leaseOffsets(again))
	}
	if err := en.shareSettle("q", "g/m", t0+20, ShareSettle{Offset: 0, Outcome: ShareRelease}); err != nil {
		t.Fatal(err)
	}
	dl, _, err := en.e.Browse("q.dlq", BrowseRequest{}, time.UnixMilli(t0+20))
	if err != nil || len(dl) != 2 {
		t.Fatalf("dlq %v %+v", err, dl)
	}
	reasons := map[string]string{}
	for _, m := range dl {
		reasons[string(m.Body)] = m.DeadLetter.Reason + "|" + m.DeadLetter.Detail
	}
	if reasons["rej"] != ReasonRejected+"|rejected by g/m" || reasons["rel"] != ReasonMaxReceives+"|" {
		t.Fatalf("dead letters %v", reasons)
	}
	// The renewed lock ends at t0+10+3000: not reaped at t0+3000.
	en.e.Tick(time.UnixMilli(t0 + 3000))
	if msgs := en.receive("q", 10, 0, t0+3000); len(msgs) != 0 {
		t.Fatalf("renewed message received natively: %q", bodies(msgs))
	}
	en.e.Tick(time.UnixMilli(t0 + 3010))
	msgs := en.receive("q", 10, 0, t0+3010)
	if bodies(msgs) != "renew" || msgs[0].Deliveries != 2 {
		t.Fatalf("after the lock expired: %+v", msgs)
	}
	if err := en.shareSettle("q", "g/m", t0+3010, ShareSettle{Offset: 2, Outcome: ShareAccept}); !isCode(err, CodeNotInflight) {
		t.Fatalf("ack after the lock expired: %v", err)
	}
}

// TestShareAcquireOrder: priority first, delayed messages wait, partitions
// not asked for are skipped and stay for others.
func TestShareAcquireOrder(t *testing.T) {
	en := newEnv(t)
	en.create("q", &AttributesPatch{PriorityLevels: p32(3), Partitions: p32(2)})
	p := func(v int32) *int32 { return &v }
	en.send("q", t0,
		SendMessage{Body: []byte("low"), Partition: p(0)},
		SendMessage{Body: []byte("late"), Partition: p(0), Priority: p(2), Delay: pms(5000)},
		SendMessage{Body: []byte("high1"), Partition: p(1), Priority: p(2)},
		SendMessage{Body: []byte("high0"), Partition: p(0), Priority: p(2)})
	got, wait, err := en.e.ShareAcquire("q", ShareAcquireRequest{Owner: "g/m", Partitions: []int32{0}, MaxMessages: 10, MaxBytes: 1 << 20, Lock: 3 * time.Second}, time.UnixMilli(t0))
	if err != nil || wait() != nil {
		t.Fatal(err)
	}
	if leaseOffsets(got) != "0:2/1 0:0/1 " {
		t.Fatalf("partition 0 at t0: %s, want high0 (offset 2) then low (0)", leaseOffsets(got))
	}
	if msgs := en.receive("q", 10, 0, t0); bodies(msgs) != "high1" {
		t.Fatalf("native receive after: %q, want the skipped partition-1 message", bodies(msgs))
	}
	if got := en.shareAcquire("q", "g/m", 10, t0+5000); leaseOffsets(got) != "0:1/1 " {
		t.Fatalf("after the delay: %s", leaseOffsets(got))
	}
}

// TestShareLeaseSurvivesRestart: the owner is in the state row: after a
// restart the owner still settles what it holds, nobody else gets it
// before the lock expires, and releasing an owner finds its leases.
func TestShareLeaseSurvivesRestart(t *testing.T) {
	en := newEnv(t)
	en.create("q", &AttributesPatch{ExpiryBackoffMs: p64(0)})
	en.send("q", t0, body("a"), body("b"), body("c"))
	if got := en.shareAcquire("q", "g/m", 3, t0); len(got) != 3 {
		t.Fatalf("acquired %s", leaseOffsets(got))
	}
	en.restart(t0 + 100)
	if msgs := en.receive("q", 10, 0, t0+100); len(msgs) != 0 {
		t.Fatalf("received %q while a member holds them", bodies(msgs))
	}
	if err := en.shareSettle("q", "g/m", t0+100, ShareSettle{Offset: 0, Outcome: ShareAccept}); err != nil {
		t.Fatalf("ack after restart: %v", err)
	}
	wait, err := en.e.ShareReleaseOwner("q", "g/m", time.UnixMilli(t0+200))
	if err != nil || wait() != nil {
		t.Fatal(err)
	}
	if msgs := en.receive("q", 10, 0, t0+200); bodies(msgs) != "b,c" {
		t.Fatalf("after the owner's release: %q", bodies(msgs))
	}
	// Lock expiry after a restart: a new lease, then restart, then Tick.
	en.send("q", t0+300, body("d"))
	if got := en.shareAcquire("q", "g/m", 3, t0+300); leaseOffsets(got) != "0:3/1 " {
		t.Fatalf("acquired %s", leaseOffsets(got))
	}
	en.restart(t0 + 400)
	en.e.Tick(time.UnixMilli(t0 + 3300))
	if msgs := en.receive("q", 10, 0, t0+3300); bodies(msgs) != "d" || msgs[0].Deliveries != 2 {
		t.Fatalf("after the lock expired across a restart: %+v", msgs)
	}
}
