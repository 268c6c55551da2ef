package queues

import (
	"runtime"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/topics"
)

// Allocation budgets of the queue's hot path (issue 14): a send of 10
// messages of 1 KiB, and a receive of 10 that acks the previous 10 in the
// same write (AckAndReceive), each with its group-committed fsync wait.
// Allocation counts are deterministic where times are not, so a change
// that adds allocations per message fails here, not in a noisy load run.
// The budgets are today's counts rounded up a little; lower them when a
// change removes allocations. testing.AllocsPerRun counts every
// goroutine's allocations: the store is fresh, with a memtable (64 MiB)
// far larger than what a run writes, so no flush or compaction runs.

// openHotPathEngine opens an engine on a fresh store with one queue "q",
// for the allocation budgets and the hot-path benchmarks.
func openHotPathEngine(t testing.TB) *Engine {
	t.Helper()
	s, err := pebblestore.Open(t.TempDir(), pebblestore.Options{Logger: zerolog.Nop(), MemTableSize: 64 << 20, CacheSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	tm, err := topics.Open(s, topics.Config{Logger: zerolog.Nop(), DefaultPartitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	e, err := Open(s, tm, Config{Logger: zerolog.Nop(), Seed: 1}, time.UnixMilli(t0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	if _, _, err := e.CreateQueue("q", nil, time.UnixMilli(t0)); err != nil {
		t.Fatal(err)
	}
	return e
}

func tenMessages() []SendMessage {
	body := make([]byte, 1024)
	msgs := make([]SendMessage, 10)
	for i := range msgs {
		msgs[i] = SendMessage{Body: body}
	}
	return msgs
}

// TestSendAllocs bounds the allocations of one send of 10 x 1 KiB:
// prepare, the dedup check, the record batch, the Pebble batch with the
// state, ready and expiry rows, its apply, the fsync wait and the ready
// buffer's inserts.
func TestSendAllocs(t *testing.T) {
	if raceEnabled || invariantsEnabled {
		t.Skip("-race and the invariants build change allocation counts")
	}
	e := openHotPathEngine(t)
	msgs := tenMessages()
	now := int64(t0)
	send := func() {
		now++
		res, err := e.Send("q", SendRequest{Messages: msgs}, time.UnixMilli(now))
		if err != nil || len(res) != 10 || res[9].Error != nil {
			t.Fatalf("send: %v %+v", err, res)
		}
	}
	send()
	got := testing.AllocsPerRun(100, send)
	t.Logf("%.1f allocations per send of 10", got)
	if budget := float64(sendAllocsBudget); got > budget {
		t.Errorf("%.1f allocations per send of 10, budget %.0f: a change added allocations to the send path (BENCHMARKS.md)", got, budget)
	}
}

// TestReceiveAckAllocs bounds the allocations of one receive of 10 that
// acks the 10 of the previous receive: the receipts' checks, the state
// rows read and rewritten, the lease and ready keys, the fsync wait, the
// records read from the log and the new receipts. The queue is refilled
// by a send outside the count.
func TestReceiveAckAllocs(t *testing.T) {
	if raceEnabled || invariantsEnabled {
		t.Skip("-race and the invariants build change allocation counts")
	}
	e := openHotPathEngine(t)
	msgs := tenMessages()
	now := int64(t0)
	var receipts []string
	var total float64
	const runs = 100
	for i := range runs + 1 {
		now++
		if _, err := e.Send("q", SendRequest{Messages: msgs}, time.UnixMilli(now)); err != nil {
			t.Fatal(err)
		}
		var got []Message
		allocs := mallocsOf(func() {
			var err error
			var acks []ItemResult
			got, acks, err = e.AckAndReceive("q", receipts, ReceiveRequest{MaxMessages: 10, MaxBytes: ReceiveBytesDefault}, time.UnixMilli(now))
			if err != nil || len(got) != 10 {
				t.Fatalf("received %d: %v", len(got), err)
			}
			for _, a := range acks {
				if a.Status != "acked" {
					t.Fatalf("ack: %+v", a)
				}
			}
		})
		if i > 0 { // the first receive has nothing to ack
			total += float64(allocs)
		}
		receipts = receipts[:0]
		for _, m := range got {
			receipts = append(receipts, m.Receipt)
		}
	}
	got := total / runs
	t.Logf("%.1f allocations per receive of 10 with 10 acks", got)
	if budget := float64(receiveAckAllocsBudget); got > budget {
		t.Errorf("%.1f allocations per receive+ack of 10, budget %.0f: a change added allocations to the receive path (BENCHMARKS.md)", got, budget)
	}
}

// mallocsOf runs f once and returns the heap allocations made meanwhile
// (by every goroutine, as testing.AllocsPerRun counts).
func mallocsOf(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.Mallocs - before.Mallocs
}

// Counted 2026-12-01 (go1.26.8, pebble v2 as in go.mod): 90 per send of
// 10 and 232.5 per receive+ack of 10 (receipts with pooled MAC states).
const (
	sendAllocsBudget       = 95.0
	receiveAckAllocsBudget = 245.0
)
