package retention

import (
	"context"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rs/zerolog"
	"github.com/vibemq/broker/events"
	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/queues"
	"github.com/vibemq/broker/topics"
)

// Issue 17: deleting a topic issued range deletions that nothing
// compacted (retention alone compacted what it trimmed, and held the
// partition's cleaner lock meanwhile). Every path that deletes data must
// queue its ranges for Store.Reclaim: a topic, DeleteRecords (which now
// deletes the segments below the new start at once), retention, a queue
// with its automatic DLQ, an event store.
func TestEveryDeletionQueuesItsRanges(t *testing.T) {
	store, err := pebblestore.Open("data", pebblestore.Options{FS: vfs.NewMem(), Logger: zerolog.Nop(), MemTableSize: 1 << 20, CacheSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	tm, err := topics.Open(store, topics.Config{Logger: zerolog.Nop(), DefaultPartitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	now := int64(1_800_000_000_000)
	qe, err := queues.Open(store, tm, queues.Config{Logger: zerolog.Nop(), Seed: 1}, time.UnixMilli(now))
	if err != nil {
		t.Fatal(err)
	}
	defer qe.Close()
	es, err := events.Open(store, tm, events.Config{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	// drained checks that step queued ranges and that Reclaim compacts them.
	drained := func(name string, step func()) {
		t.Helper()
		before := store.ReclaimStats().Scheduled
		step()
		if got := store.ReclaimStats().Scheduled; got <= before {
			t.Errorf("%s queued no range for compaction", name)
			return
		}
		res := store.Reclaim(context.Background())
		if res.Err != nil || res.Ranges == 0 || res.More {
			t.Errorf("%s: Reclaim %+v", name, res)
		}
		if st := store.ReclaimStats(); st.Pending != 0 {
			t.Errorf("%s: %d ranges still pending", name, st.Pending)
		}
	}

	segmented := map[string]string{"segment.ms": "10", "retention.ms": "1000"}
	fill := func(name string) *topics.Partition {
		tp, err := tm.CreateTopic(name, 1, segmented, false)
		if err != nil {
			t.Fatal(err)
		}
		p, _ := tp.Partition(0)
		for i := int64(0); i < 4; i++ {
			appendAt(t, tm, p, now+i*100, "k", "v")
		}
		return p
	}
	fill("deleted")
	drained("DeleteTopic", func() {
		if err := tm.DeleteTopic("deleted"); err != nil {
			t.Fatal(err)
		}
	})
	p := fill("records")
	drained("DeleteRecords", func() {
		if low, err := p.DeleteRecordsBefore(2); err != nil || low != 2 {
			t.Fatalf("DeleteRecordsBefore(2): %d %v", low, err)
		}
	})
	drained("retention", func() {
		if res := tm.EnforceRetention(time.UnixMilli(now + 1_000_000)); res.Segments == 0 {
			t.Fatalf("retention deleted nothing: %+v", res)
		}
	})

	body := "m"
	if _, _, err := qe.CreateQueue("q", nil, time.UnixMilli(now)); err != nil {
		t.Fatal(err)
	}
	if _, err := qe.Send("q", queues.SendRequest{Messages: []queues.SendMessage{{Body: []byte(body)}}}, time.UnixMilli(now)); err != nil {
		t.Fatal(err)
	}
	drained("DeleteQueue", func() {
		if err := qe.DeleteQueue("q", true, time.UnixMilli(now)); err != nil {
			t.Fatal(err)
		}
		if _, ok := tm.Topic("q.dlq"); ok {
			t.Fatal("the automatic DLQ outlived its queue")
		}
	})

	st, _, err := es.CreateStore("s", time.UnixMilli(now))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append("a", events.Any, []events.ProposedEvent{{Type: "T", Data: []byte(`{}`)}}, time.UnixMilli(now)); err != nil {
		t.Fatal(err)
	}
	drained("DeleteStore", func() {
		if err := es.DeleteStore("s"); err != nil {
			t.Fatal(err)
		}
	})
}
