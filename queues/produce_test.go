package queues

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/vibemq/broker/topics"
)

// Records produced over Kafka into a queue's topic (produce.go).

// produce appends one batch of records, as a Kafka producer with the
// given producer ID (-1 for none) sends it, to partition 0 of topic name
// through AppendProduced, and returns the finished append.
func (en *env) produce(name string, producerID int64, seq int32, now int64, recs ...topics.Record) *topics.Append {
	en.t.Helper()
	raw := en.produceBatch(producerID, seq, now, recs...)
	return en.produceRaw(name, raw, now)
}

func (en *env) produceBatch(producerID int64, seq int32, now int64, recs ...topics.Record) []byte {
	en.t.Helper()
	epoch := int16(-1)
	if producerID < 0 {
		seq = -1
	} else {
		epoch = 0
	}
	for i := range recs {
		recs[i].OffsetDelta = int32(i)
	}
	raw, err := topics.EncodeBatch(topics.BatchHeader{BaseTimestamp: now, MaxTimestamp: now, ProducerID: producerID, ProducerEpoch: epoch, BaseSequence: seq}, recs)
	if err != nil {
		en.t.Fatal(err)
	}
	return raw
}

func (en *env) produceRaw(name string, raw []byte, now int64) *topics.Append {
	en.t.Helper()
	tp, ok := en.tm.Topic(name)
	if !ok {
		en.t.Fatalf("no topic %s", name)
	}
	p, _ := tp.Partition(0)
	a := &topics.Append{Partition: p, Batch: slices.Clone(raw)}
	if err := en.e.AppendProduced([]*topics.Append{a}, time.UnixMilli(now)).Wait(); err != nil {
		en.t.Fatal(err)
	}
	return a
}

// TestProducedRecordsAreMessages: records a Kafka producer appends to a
// queue's topic are queue messages at once (receivable with key, value and
// headers; acquirable by a share member), an idempotent retry adds none,
// and they survive a restart. Before, every Kafka produce into a queue's
// topic was refused (POLICY_VIOLATION) and such records would have had
// no delivery state.
func TestProducedRecordsAreMessages(t *testing.T) {
	en := newEnv(t)
	en.create("q", nil)
	hdr := []topics.RecordHeader{{Key: "trace", Value: []byte("t-1")}}
	raw := en.produceBatch(7, 0, t0, topics.Record{Key: []byte("k1"), Value: []byte("a"), Headers: hdr},
		topics.Record{Value: []byte("b")}, topics.Record{Value: []byte("c")})
	a := en.produceRaw("q", raw, t0)
	if a.Err != nil || a.BaseOffset != 0 || a.Duplicate {
		t.Fatalf("produce: err %v base %d duplicate %v", a.Err, a.BaseOffset, a.Duplicate)
	}
	// The producer's retry of the same batch is the log's duplicate.
	if dup := en.produceRaw("q", raw, t0); dup.Err != nil || !dup.Duplicate || dup.BaseOffset != 0 {
		t.Fatalf("retry: err %v base %d duplicate %v", dup.Err, dup.BaseOffset, dup.Duplicate)
	}
	if s := en.stats("q", t0); s.Available != 3 || s.Totals.Sent != 3 {
		t.Fatalf("stats after produce: available %d sent %d", s.Available, s.Totals.Sent)
	}
	got := en.receive("q", 1, 30000, t0)
	if len(got) != 1 || string(got[0].Body) != "a" || string(got[0].Key) != "k1" || got[0].Headers["trace"] != "t-1" || got[0].Offset != 0 {
		t.Fatalf("receive: %+v", got)
	}
	if l := en.shareAcquire("q", "g\x00m1", 1, t0); leaseOffsets(l) != "0:1/1 " {
		t.Fatalf("share acquire: %s", leaseOffsets(l))
	}
	// Stored with the records: after a restart the rest is still there.
	en.restart(t0 + 1)
	if s := en.stats("q", t0+1); s.Available != 1 || s.Inflight != 2 {
		t.Fatalf("stats after restart: %+v", s)
	}
	if got := en.receive("q", 10, 30000, t0+1); bodies(got) != "c" {
		t.Fatalf("receive after restart: %q", bodies(got))
	}
	// A native send after the produced records continues the log.
	if r := en.send("q", t0+2, body("d")); r[0].Offset != 3 {
		t.Fatalf("send after produce: offset %d", r[0].Offset)
	}
}

// TestProducedRecordsQueueRules: a record the native API would refuse
// fails its whole batch and nothing is written; a dead-letter queue's
// topic refuses Kafka producers; a queue's default delay applies.
func TestProducedRecordsQueueRules(t *testing.T) {
	en := newEnv(t)
	en.create("q", &AttributesPatch{MaxMessageBytes: p64(10), DefaultDelayMs: p64(5000)})
	for _, tc := range []struct {
		rec  topics.Record
		want error
	}{
		{topics.Record{Value: []byte("ok"), Headers: []topics.RecordHeader{{Key: "X-Q-dlq-reason", Value: []byte("forged")}}}, topics.ErrInvalidRecord},
		{topics.Record{Value: make([]byte, 11)}, topics.ErrMessageTooLarge},
		{topics.Record{Key: make([]byte, KeyMax+1), Value: []byte("x")}, topics.ErrInvalidRecord},
		{topics.Record{Value: []byte("x"), Headers: []topics.RecordHeader{{Key: "", Value: []byte("v")}}}, topics.ErrInvalidRecord},
	} {
		a := en.produce("q", -1, 0, t0, topics.Record{Value: []byte("fine")}, tc.rec)
		if !errors.Is(a.Err, tc.want) || a.BaseOffset != -1 {
			t.Fatalf("record %+v: err %v base %d, want %v", tc.rec.Headers, a.Err, a.BaseOffset, tc.want)
		}
	}
	tp, _ := en.tm.Topic("q")
	if p, _ := tp.Partition(0); p.HighWatermark() != 0 {
		t.Fatalf("refused batches wrote records: high watermark %d", p.HighWatermark())
	}
	if en.e.AcceptsProduce("q.dlq") || !en.e.AcceptsProduce("q") || en.e.AcceptsProduce("nope") {
		t.Fatal("AcceptsProduce: want only the queue itself")
	}
	var owned *topics.OwnedError
	if a := en.produce("q.dlq", -1, 0, t0, topics.Record{Value: []byte("x")}); !errors.As(a.Err, &owned) {
		t.Fatalf("produce into the DLQ: %v, want an OwnedError", a.Err)
	}
	if a := en.produce("q", -1, 0, t0, topics.Record{Value: []byte("later")}); a.Err != nil {
		t.Fatal(a.Err)
	}
	if got := en.receive("q", 10, 30000, t0+4999); len(got) != 0 {
		t.Fatalf("received before the default delay: %q", bodies(got))
	}
	if got := en.receive("q", 10, 30000, t0+5000); bodies(got) != "later" {
		t.Fatalf("received after the default delay: %q", bodies(got))
	}
}
