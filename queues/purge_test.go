package queues

import "time"
import "testing"

func (en *env) purge(name string, req PurgeRequest, now int64) int64 {
	en.t.Helper()
	n, err := en.e.PurgeMatching(name, req, time.UnixMilli(now))
	if err != nil {
		en.t.Fatalf("purge %+v: %v", req, err)
	}
	return n
}

// TestPurgeByStateAndAge: purge with states and older_than_ms deletes only
// the messages that match (leased ones only when inflight is listed), in
// steps smaller than the queue; counters agree with the store (also after
// a restart); an empty request still deletes everything.
func TestPurgeByStateAndAge(t *testing.T) {
	old := purgeChunk
	purgeChunk = 2
	t.Cleanup(func() { purgeChunk = old })
	en := newEnv(t)
	en.create("q", &AttributesPatch{RetainAckedMs: p64(600000), PriorityLevels: p32(2), DedupWindowMs: p64(600000)})
	en.send("q", t0, body("old-held"), withID("old-acked", "d-1"), body("old-ready"), SendMessage{Body: []byte("old-delayed"), Delay: pms(100000)})
	got := en.receive("q", 2, 300000, t0)
	if bodies(got) != "old-held,old-acked" {
		t.Fatalf("receive %s", bodies(got))
	}
	oldHeld := got[0].Receipt
	en.ack("q", t0, got[1].Receipt)
	en.send("q", t0+50000, SendMessage{Body: []byte("new-held"), Priority: p32(1)}, body("new-ready"), SendMessage{Body: []byte("new-delayed"), Delay: pms(100000)})
	got = en.receive("q", 1, 300000, t0+50000)
	if bodies(got) != "new-held" {
		t.Fatalf("receive %s", bodies(got))
	}
	newHeld := got[0].Receipt
	now := t0 + 60000

	for _, c := range []struct {
		req   PurgeRequest
		code  string
		field string
	}{
		{PurgeRequest{States: []string{}}, CodeOutOfRange, "states"},
		{PurgeRequest{States: []string{"ready", "lost"}}, CodeInvalidEnum, "states"},
		{PurgeRequest{OlderThan: -1 * time.Millisecond}, CodeOutOfRange, "older_than_ms"},
		{PurgeRequest{OlderThan: (RetentionMaxMs + 1) * time.Millisecond}, CodeOutOfRange, "older_than_ms"},
	} {
		_, err := en.e.PurgeMatching("q", c.req, time.UnixMilli(now))
		if e := AsError(err); e == nil || e.Code != c.code || e.Details["field"] != c.field {
			t.Errorf("purge %+v: %v, want %s on %s", c.req, err, c.code, c.field)
		}
	}
	if _, err := en.e.PurgeMatching("ghost", PurgeRequest{}, time.UnixMilli(now)); AsError(err).Code != CodeQueueNotFound {
		t.Errorf("purge of a missing queue: %v", err)
	}

	if n := en.purge("q", PurgeRequest{States: []string{"delayed"}, OlderThan: 30000 * time.Millisecond}, now); n != 1 {
		t.Fatalf("old delayed: %d", n)
	}
	if n := en.purge("q", PurgeRequest{States: []string{"ready"}}, now); n != 2 {
		t.Fatalf("ready: %d", n)
	}
	if s := en.stats("q", now); s.Available != 1 || s.Inflight != 2 || s.Retained != 1 {
		t.Fatalf("after purging ready and old delayed: %+v", s)
	}
	// Every state, sent at least 30 s ago: the old leased and the old acked.
	if n := en.purge("q", PurgeRequest{OlderThan: 60000 * time.Millisecond}, now); n != 2 {
		t.Fatalf("older than 60 s: %d", n)
	}
	if r := en.ack("q", now, oldHeld); codeOf(r[0]) != CodeNotFound {
		t.Fatalf("receipt of a purged leased message: %+v", r[0])
	}
	if s := en.stats("q", now); s.Available != 1 || s.Inflight != 1 || s.Retained != 0 {
		t.Fatalf("after the age purge: %+v", s)
	}
	// The leased message stays unless inflight is listed.
	if n := en.purge("q", PurgeRequest{States: []string{"ready", "acked"}}, now); n != 0 {
		t.Fatalf("nothing matches: %d", n)
	}
	en.restart(now)
	if s := en.stats("q", now); s.Available != 1 || s.Inflight != 1 {
		t.Fatalf("counters rebuilt after restart: %+v", s)
	}
	if n := en.purge("q", PurgeRequest{States: []string{"inflight", "ready"}}, now); n != 1 {
		t.Fatalf("inflight: %d", n)
	}
	if r := en.ack("q", now, newHeld); codeOf(r[0]) != CodeNotFound {
		t.Fatalf("receipt of a purged leased message: %+v", r[0])
	}
	if got := en.receive("q", 10, 0, now); len(got) != 0 {
		t.Fatalf("a purged message was received: %s", bodies(got))
	}
	if n := en.purge("q", PurgeRequest{}, now); n != 1 {
		t.Fatalf("everything: %d", n)
	}
	if s := en.stats("q", now+200000); s.Available != 0 || s.Inflight != 0 || s.Retained != 0 || s.Delayed != 0 {
		t.Fatalf("after purging everything: %+v", s)
	}
	// Dedup entries outlive a purge.
	if r := en.sendItems("q", now, withID("again", "d-1")); itemCode(r[0]) != "duplicate" {
		t.Fatalf("dedup after purge: %+v", r)
	}
	// Nothing left for the maintenance to trip over.
	if rep := en.e.Tick(time.UnixMilli(now + 400000)); rep.Errors != 0 || rep.Reaped != 0 {
		t.Fatalf("tick after purge: %+v", rep)
	}
}
