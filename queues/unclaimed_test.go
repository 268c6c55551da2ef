package queues

import (
	"fmt"
	"testing"
	"time"
)

// TestUnclaimed pins F23: with max_unclaimed_age_ms a ready message that
// nobody ever received is dead-lettered with reason unclaimed once it has
// been ready that long (a delayed one counts from its due time); nacked
// and reaped messages, which were received, never are.
func TestUnclaimed(t *testing.T) {
	en := newEnv(t)
	en.create("q", &AttributesPatch{MaxUnclaimedAgeMs: p64(60000), PriorityLevels: p32(2), MaxReceives: p32(0)})
	en.send("q", t0, body("nacked"), body("reaped"), body("never"), SendMessage{Body: []byte("delayed"), Delay: pms(30000)})
	got := en.receive("q", 2, 1000, t0)
	if bodies(got) != "nacked,reaped" {
		t.Fatalf("receive %s", bodies(got))
	}
	if res, err := en.e.Nack("q", NackRequest{Receipts: []string{got[0].Receipt}, Delay: pms(0)}, time.UnixMilli(t0)); err != nil || codeOf(res[0]) != "requeued" {
		t.Fatalf("nack: %v %+v", err, res)
	}
	deadAt := map[string]int64{}
	seen := 0
	for now := t0; now <= t0+200000; now += 1000 {
		if now == t0+70000 {
			en.restart(now) // the cursors start over; nothing is moved twice
		}
		if now == t0+30000 {
			en.send("q", now, SendMessage{Body: []byte("late-p1"), Priority: p32(1)})
		}
		en.e.Tick(time.UnixMilli(now))
		msgs, _, err := en.e.Browse("q.dlq", BrowseRequest{}, time.UnixMilli(now))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs[seen:] {
			deadAt[string(m.Body)] = now - t0
			if m.DeadLetter == nil || m.DeadLetter.Reason != ReasonUnclaimed || m.DeadLetter.Deliveries != 0 || m.DeadLetter.Detail == "" {
				t.Fatalf("dead letter %+v %+v", m, m.DeadLetter)
			}
		}
		seen = len(msgs)
	}
	want := map[string]int64{"never": 60000, "delayed": 90000, "late-p1": 90000}
	if fmt.Sprint(deadAt) != fmt.Sprint(want) {
		t.Fatalf("dead-lettered at %v, want %v", deadAt, want)
	}
	s := en.stats("q", t0+200000)
	if s.Available != 2 || s.Totals.DeadLettered[ReasonUnclaimed] != 2 { // totals count since the restart
		t.Fatalf("stats %+v", s)
	}
	// The survivors are the two that were received once.
	left := en.receive("q", 10, 0, t0+200000)
	if bodies(left) != "nacked,reaped" || left[0].Deliveries != 2 || left[1].Deliveries != 2 {
		t.Fatalf("left %+v", left)
	}
}

// TestUnclaimedCursor: more than one tick's budget of nacked messages in
// front of a never-received one does not hide it (the sweep resumes where
// it stopped instead of starting over), and turning the attribute off
// stops the sweep.
func TestUnclaimedCursor(t *testing.T) {
	en := newEnv(t)
	en.create("q", &AttributesPatch{MaxUnclaimedAgeMs: p64(60000), MaxReceives: p32(0)})
	n := tickBudget + 200
	var msgs []SendMessage
	for i := range n {
		msgs = append(msgs, body(fmt.Sprintf("n%d", i)))
	}
	en.send("q", t0, msgs[:n/2]...)
	en.send("q", t0, msgs[n/2:]...)
	var rs []string
	for len(rs) < n {
		for _, m := range en.receive("q", min(n-len(rs), ReceiveMessagesMax), 0, t0) {
			rs = append(rs, m.Receipt)
		}
	}
	for i := 0; i < n; i += BatchMessagesMax {
		if _, err := en.e.Nack("q", NackRequest{Receipts: rs[i:min(i+BatchMessagesMax, n)], Delay: pms(0)}, time.UnixMilli(t0)); err != nil {
			t.Fatal(err)
		}
	}
	en.send("q", t0, body("fresh"))
	var at int64
	for now := t0 + 60000; now <= t0+65000 && at == 0; now += 1000 {
		if rep := en.e.Tick(time.UnixMilli(now)); rep.DeadLettered[ReasonUnclaimed] > 0 {
			if rep.DeadLettered[ReasonUnclaimed] != 1 {
				t.Fatalf("tick %+v", rep)
			}
			at = now - t0
		}
	}
	if at != 61000 {
		t.Fatalf("fresh dead-lettered at %d, want 61000 (the second run of the sweep)", at)
	}
	if s := en.stats("q", t0+65000); s.Available != int64(n) {
		t.Fatalf("stats %+v", s)
	}
	if _, err := en.e.UpdateQueue("q", &AttributesPatch{MaxUnclaimedAgeMs: p64(0)}, time.UnixMilli(t0)); err != nil {
		t.Fatal(err)
	}
	en.send("q", t0+65000, body("kept"))
	if rep := en.e.Tick(time.UnixMilli(t0 + 300000)); rep.DeadLettered[ReasonUnclaimed] != 0 {
		t.Fatalf("sweep ran while off: %+v", rep)
	}
}
