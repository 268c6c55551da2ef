package queues

import (
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"
	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/topics"
)

// walCounters reads the store's WAL fsyncs and the logical bytes written
// to the WAL (the Pebble batches' encoded size) so far.
func walCounters(t *testing.T, s *pebblestore.Store) (fsyncs uint64, bytes uint64) {
	t.Helper()
	m := s.Metrics()
	var pb dto.Metric
	if h := m.LogWriter.FsyncLatency; h != nil {
		if err := h.Write(&pb); err != nil {
			t.Fatal(err)
		}
	}
	return pb.GetHistogram().GetSampleCount(), m.WAL.BytesIn
}

// walSettled returns once the WAL fsync count stayed the same across 20
// ms (or after a second): the fsyncs of writes made before are all
// counted (see walCountersAfter), so none is charged to the next step.
func walSettled(t *testing.T, s *pebblestore.Store) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	last, _ := walCounters(t, s)
	for time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		f, _ := walCounters(t, s)
		if f == last {
			return
		}
		last = f
	}
}

// walCountersAfter is walCounters once at least want fsyncs were counted
// since f0, or after a second: Pebble records an fsync's latency just
// after it releases the writers waiting on it, so the count may lag the
// write's return by a moment (reading it at once put an operation's fsync
// into the next one's count).
func walCountersAfter(t *testing.T, s *pebblestore.Store, f0, want uint64) (fsyncs, bytes uint64) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for {
		fsyncs, bytes = walCounters(t, s)
		if fsyncs >= f0+want || time.Now().After(deadline) {
			return fsyncs, bytes
		}
		time.Sleep(time.Millisecond)
	}
}

// TestWriteCostPerOperation measures what each hot operation of the queue
// writes today, one call at a time: the WAL fsyncs it waits for and the
// bytes of the Pebble batch it applies (the size a Raft entry carrying
// that batch would have). DESIGN.md "Replicating queues and event stores:
// the plan" rests on it: every operation is exactly one synced write, so
// proposing that write as one Raft entry keeps one durability point per
// request. It fails if an operation starts syncing twice (or not at all).
// The bytes are logged, not asserted (they follow the row formats).
func TestWriteCostPerOperation(t *testing.T) {
	en := newEnv(t)
	en.create("q", &AttributesPatch{MaxReceives: p32(100)})
	body := make([]byte, 1024)
	ten := func() []SendMessage {
		msgs := make([]SendMessage, 10)
		for i := range msgs {
			msgs[i] = SendMessage{Body: body}
		}
		return msgs
	}
	now := t0 + 1000
	var receipts []string
	receipts10 := func(msgs []Message) {
		receipts = receipts[:0]
		for _, m := range msgs {
			receipts = append(receipts, m.Receipt)
		}
		if len(receipts) != 10 {
			t.Fatalf("received %d messages, want 10", len(receipts))
		}
	}
	receive := func(ack []string) {
		req := ReceiveRequest{MaxMessages: 10, VisibilityTimeout: pms(30000), Ack: ack}
		if _, err := en.e.CheckReceive("q", &req); err != nil {
			t.Fatal(err)
		}
		msgs, res, err := en.e.AckAndReceive("q", ack, req, time.UnixMilli(now))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Error != nil {
				t.Fatalf("ack riding on receive: %v", r.Error)
			}
		}
		receipts10(msgs)
	}
	ops := []struct {
		name string
		run  func()
	}{
		{"send 10 x 1 KiB", func() { en.send("q", now, ten()...) }},
		{"send 10 more", func() { en.send("q", now, ten()...) }},
		{"receive 10", func() { receive(nil) }},
		{"extend 10", func() {
			if _, err := en.e.Extend("q", ExtendRequest{Receipts: receipts, VisibilityTimeout: 60 * time.Second}, time.UnixMilli(now)); err != nil {
				t.Fatal(err)
			}
		}},
		{"ack 10", func() {
			for _, r := range en.ack("q", now, receipts...) {
				if r.Error != nil {
					t.Fatal(r.Error)
				}
			}
		}},
		{"send 10 (for the next steps)", func() { en.send("q", now, ten()...) }},
		{"receive 10 acking nothing", func() { receive(nil) }},
		{"ack 10 riding on receive 10", func() { receive(append([]string(nil), receipts...)) }},
		{"nack 10 (requeue)", func() {
			if _, err := en.e.Nack("q", NackRequest{Receipts: receipts, Delay: pms(0)}, time.UnixMilli(now)); err != nil {
				t.Fatal(err)
			}
		}},
		{"receive 10 again", func() { receive(nil) }},
		{"nack 10 (reject: dead-letter move)", func() {
			if _, err := en.e.Nack("q", NackRequest{Receipts: receipts, DeadLetter: true}, time.UnixMilli(now)); err != nil {
				t.Fatal(err)
			}
		}},
		{"send 10 (to let them lapse)", func() { en.send("q", now, ten()...) }},
		{"receive 10 with a request_id (memo)", func() {
			req := ReceiveRequest{MaxMessages: 10, VisibilityTimeout: pms(30000), RequestID: pstr("r1")}
			if _, err := en.e.CheckReceive("q", &req); err != nil {
				t.Fatal(err)
			}
			msgs, err := en.e.Receive("q", req, time.UnixMilli(now))
			if err != nil {
				t.Fatal(err)
			}
			receipts10(msgs)
		}},
		{"tick reaping 10 lapsed leases", func() {
			now += 31000
			if rep := en.e.Tick(time.UnixMilli(now)); rep.Reaped != 10 {
				t.Fatalf("tick reaped %d, want 10", rep.Reaped)
			}
		}},
	}
	for _, op := range ops {
		now++
		walSettled(t, en.store) // the fsync of the step before may be counted late
		f0, b0 := walCounters(t, en.store)
		op.run()
		f1, b1 := walCountersAfter(t, en.store, f0, 1)
		t.Logf("%-38s fsyncs %d, WAL bytes %6d", op.name, f1-f0, b1-b0)
		if f1-f0 != 1 {
			t.Errorf("%s: %d WAL fsyncs, want 1 (one synced write per request)", op.name, f1-f0)
		}
	}
}

// BenchmarkQueueRecover measures the restart recovery of one queue with
// a backlog (Open: the catalog, one scan of the queue's state rows for
// its counters and leases, memos): the work a replica would do to take a
// queue over at a failover if failover is the restart path (DESIGN.md
// "Replicating queues and event stores: the plan"). Reported per
// message of the backlog; a tenth of the messages are leased.
func BenchmarkQueueRecover(b *testing.B) {
	for _, backlog := range []int{10_000, 100_000} {
		b.Run("messages="+itoa(backlog), func(b *testing.B) {
			en := &env{dir: b.TempDir()}
			en.openB(b, t0)
			defer en.close()
			if _, _, err := en.e.CreateQueue("q", nil, time.UnixMilli(t0)); err != nil {
				b.Fatal(err)
			}
			body := make([]byte, 1024)
			msgs := make([]SendMessage, 1000)
			for i := range msgs {
				msgs[i] = SendMessage{Body: body}
			}
			for sent := 0; sent < backlog; sent += len(msgs) {
				res, err := en.e.Send("q", SendRequest{Messages: msgs}, time.UnixMilli(t0+1))
				if err != nil || res[len(res)-1].Error != nil {
					b.Fatal(err, res[len(res)-1].Error)
				}
			}
			for leased := 0; leased < backlog/10; leased += ReceiveMessagesMax {
				req := ReceiveRequest{MaxMessages: ReceiveMessagesMax, VisibilityTimeout: pms(600_000)}
				if _, err := en.e.CheckReceive("q", &req); err != nil {
					b.Fatal(err)
				}
				if _, err := en.e.Receive("q", req, time.UnixMilli(t0+2)); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				en.close()
				en.openB(b, t0+3)
			}
			b.StopTimer()
			info, err := en.e.GetQueue("q")
			if err != nil || info.Available+info.Inflight != int64(backlog) || info.Inflight != int64(backlog/10) {
				b.Fatalf("recovered %+v, %v; want %d messages, %d in flight", info, err, backlog, backlog/10)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(backlog), "ns/message")
		})
	}
}

// openB is env.open for a benchmark.
func (en *env) openB(b *testing.B, now int64) {
	b.Helper()
	s, err := pebblestore.Open(en.dir, pebblestore.Options{Logger: zerolog.Nop(), MemTableSize: 64 << 20, CacheSize: 64 << 20})
	if err != nil {
		b.Fatal(err)
	}
	tm, err := topics.Open(s, topics.Config{Logger: zerolog.Nop(), DefaultPartitions: 1})
	if err != nil {
		b.Fatal(err)
	}
	e, err := Open(s, tm, Config{Logger: zerolog.Nop(), Seed: 1}, time.UnixMilli(now))
	if err != nil {
		b.Fatal(err)
	}
	en.store, en.tm, en.e = s, tm, e
}
