package queues

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vibemq/broker/pebblestore"
)

// TestDeadLetterMoveLargerThanOneBatch pins a bug: the messages one write
// moved into a partition went into one record batch, which the topic
// refuses past its max.message.bytes (17 MiB), and the moves were
// appended with topics.Manager.Append, where each partition's append
// succeeds or fails alone while the source rows ride with the first that
// succeeds. Two 9 MiB messages dead-lettered into one DLQ partition by
// the same Tick, with a small one into another, lost the two large ones:
// their source rows were deleted, their DLQ append refused. (A single
// partition failed the whole Tick at every run instead.) Moves are now
// split into batches under the limit and appended atomically.
func TestDeadLetterMoveLargerThanOneBatch(t *testing.T) {
	en := newEnv(t)
	en.create("bigdlq", &AttributesPatch{Partitions: p32(2), DeadLetter: pstr("none"), MaxMessageBytes: p64(MessageBytesMax)})
	en.create("big", &AttributesPatch{Partitions: p32(2), DeadLetter: pstr("bigdlq"), MaxReceives: p32(1), MaxMessageBytes: p64(MessageBytesMax)})
	large := strings.Repeat("x", 9<<20)
	for range 2 {
		en.send("big", t0, SendMessage{Body: []byte(large), Partition: p32(0)})
	}
	en.send("big", t0, SendMessage{Body: []byte("small"), Partition: p32(1)})
	vis := int64(1000)
	req := ReceiveRequest{MaxMessages: 3, MaxBytes: ReceiveBytesMax, VisibilityTimeout: pms(vis)}
	if _, err := en.e.CheckReceive("big", &req); err != nil {
		t.Fatal(err)
	}
	if got, err := en.e.Receive("big", req, time.UnixMilli(t0)); err != nil || len(got) != 3 {
		t.Fatalf("received %d: %v", len(got), err)
	}
	rep := en.e.Tick(time.UnixMilli(t0 + 1000))
	src, dlq := en.stats("big", t0+1000), en.stats("bigdlq", t0+1000)
	if n := src.Available + src.Inflight + dlq.Available; n != 3 {
		t.Fatalf("after the tick (%+v): %d messages left of 3 (source %+v, DLQ %+v)", rep, n, src, dlq)
	}
	if rep.Errors != 0 || rep.DeadLettered[ReasonMaxReceives] != 3 || dlq.Available != 3 {
		t.Fatalf("tick %+v, DLQ %+v", rep, dlq)
	}
	req.VisibilityTimeout = nil
	if got, err := en.e.Receive("bigdlq", req, time.UnixMilli(t0+1001)); err != nil || len(got) != 3 {
		t.Fatalf("DLQ delivered %d: %v", len(got), err)
	}
	en.restart(t0 + 1002)
	if s := en.stats("bigdlq", t0+1002); s.Inflight != 3 {
		t.Fatalf("DLQ after a restart: %+v", s)
	}
}

// TestFailedTickKeepsItsSweepCursors: a Tick whose write fails (here the
// free-space guard turns low inside its dead-letter append) must leave
// the expiry cursor where it was, so that the next Tick sweeps the same
// expired messages; before, the cursor had already moved past them and
// they stayed in the queue, expired and never dead-lettered, until a
// restart.
func TestFailedTickKeepsItsSweepCursors(t *testing.T) {
	var free atomic.Int64
	free.Store(10 << 30)
	var lowAt atomic.Int64 // the probe call from which the disk reads low; 0: never
	var calls atomic.Int64
	en := &env{t: t, dir: t.TempDir(), freeMin: 64 << 20, probe: func(string) (pebblestore.SpaceReading, error) {
		if n := calls.Add(1); lowAt.Load() > 0 && n >= lowAt.Load() {
			return pebblestore.SpaceReading{Free: 10 << 20, Total: 100 << 30}, nil
		}
		return pebblestore.SpaceReading{Free: free.Load(), Total: 100 << 30}, nil
	}}
	en.open(t0)
	t.Cleanup(func() { en.close() })
	en.create("ttl", &AttributesPatch{OnExpire: pstr("dead_letter"), MaxMessageBytes: p64(MessageBytesMax)})
	large := strings.Repeat("x", 9<<20)
	ttl := int64(1000)
	for range 2 {
		en.send("ttl", t0, SendMessage{Body: []byte(large), TTL: pms(ttl)})
	}
	// The Tick starts with the disk fine; the inline probe of its 18 MiB
	// dead-letter append reads low.
	lowAt.Store(calls.Load() + 1)
	if rep := en.e.Tick(time.UnixMilli(t0 + 1000)); rep.Errors != 1 {
		t.Fatalf("tick with the disk turning low: %+v, want one failed queue", rep)
	}
	lowAt.Store(0)
	if err := en.store.Space().Probe(); err != nil {
		t.Fatal(err)
	}
	rep := en.e.Tick(time.UnixMilli(t0 + 1001))
	if rep.Errors != 0 || rep.DeadLettered[ReasonExpired] != 2 {
		t.Fatalf("the next tick: %+v, want both expired messages dead-lettered", rep)
	}
	if s := en.stats("ttl.dlq", t0+1001); s.Available != 2 {
		t.Fatalf("DLQ %+v", s)
	}
	if s := en.stats("ttl", t0+1001); s.Available != 0 {
		t.Fatalf("source %+v", s)
	}
}
