package compattests

// Kafka producers writing a native queue's topic (issue 10 part 3: "records
// produced over Kafka into a queue's topic become queue messages"): an
// idempotent franz-go producer and kcat -P write the queue, HTTP receivers
// and a franz-go share consumer get the records as messages, a restart
// keeps them; the queue's DLQ still refuses Kafka producers and a
// transaction cannot include the queue. This broker only: Apache Kafka has
// no native queues.

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// qFullMsg is a received message with what a Kafka record carries.
type qFullMsg struct {
	Receipt   string            `json:"receipt"`
	Partition int32             `json:"partition"`
	Offset    int64             `json:"offset"`
	Body      string            `json:"body"`
	Key       *string           `json:"key"`
	Headers   map[string]string `json:"headers"`
}

// qReceiveAll receives (and acks) until n messages came or 20 s passed.
func qReceiveAll(t *testing.T, b *brokerProc, queue string, n int) []qFullMsg {
	t.Helper()
	var out []qFullMsg
	deadline := time.Now().Add(20 * time.Second)
	for len(out) < n && time.Now().Before(deadline) {
		r := qMust(t, b, "POST", "/v1/queues/"+queue+"/receive", map[string]any{"max_messages": n - len(out), "wait_ms": 1000}, 200)
		var got struct{ Messages []qFullMsg }
		if err := json.Unmarshal([]byte(r.Raw), &got); err != nil {
			t.Fatal(err)
		}
		var receipts []string
		for _, m := range got.Messages {
			receipts = append(receipts, m.Receipt)
		}
		if len(receipts) > 0 {
			qMust(t, b, "POST", "/v1/queues/"+queue+"/ack", map[string]any{"receipts": receipts}, 200)
		}
		out = append(out, got.Messages...)
	}
	if len(out) != n {
		t.Fatalf("received %d messages of %d", len(out), n)
	}
	return out
}

func qBodies(msgs []qFullMsg) string {
	var s []string
	for _, m := range msgs {
		s = append(s, m.Body)
	}
	slices.Sort(s)
	return strings.Join(s, ",")
}

// TestKafkaProduceIntoQueue pins the change from "produce into a queue's
// topic is refused (POLICY_VIOLATION)" to "it becomes queue messages".
func TestKafkaProduceIntoQueue(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	qMust(t, b, "PUT", "/v1/queues/jobs", map[string]any{"partitions": 2}, 201)

	// An idempotent franz-go producer (kgo's default): key, value, headers.
	producer := newClient(t, b.Addr())
	var recs []*kgo.Record
	for i := range 20 {
		recs = append(recs, &kgo.Record{Topic: "jobs", Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("v%02d", i)),
			Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte(fmt.Sprintf("t%d", i))}}})
	}
	if err := producer.ProduceSync(testCtx(t, opTimeout), recs...).FirstErr(); err != nil {
		t.Fatalf("kgo produce into a queue: %v", err)
	}
	byValue := map[string]*kgo.Record{}
	for _, r := range recs {
		if r.ProducerID < 0 {
			t.Fatalf("the producer is not idempotent (producer ID %d)", r.ProducerID)
		}
		byValue[string(r.Value)] = r
	}
	for _, m := range qReceiveAll(t, b, "jobs", 20) {
		r := byValue[m.Body]
		if r == nil || m.Key == nil || *m.Key != string(r.Key) || m.Headers["trace"] != string(r.Headers[0].Value) ||
			m.Partition != r.Partition || m.Offset != r.Offset {
			t.Fatalf("received %+v for the record %+v", m, r)
		}
		delete(byValue, m.Body)
	}

	// kcat -P (librdkafka), key:value lines.
	if kcatPath(t) != "" {
		runKcat(t, "a:one\nb:two\n", "-P", "-b", b.Addr(), "-t", "jobs", "-K", ":")
		got := qReceiveAll(t, b, "jobs", 2)
		if qBodies(got) != "one,two" {
			t.Fatalf("received after kcat -P: %s", qBodies(got))
		}
	}

	// A share consumer gets Kafka-produced records and settles them.
	if err := producer.ProduceSync(testCtx(t, opTimeout), &kgo.Record{Topic: "jobs", Value: []byte("s1")}, &kgo.Record{Topic: "jobs", Value: []byte("s2")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	share := newClient(t, b.Addr(), kgo.ShareGroup("workers"), kgo.ConsumeTopics("jobs"), kgo.FetchMaxWait(500*time.Millisecond))
	var shared []string
	ctx := testCtx(t, opTimeout)
	for len(shared) < 2 && ctx.Err() == nil {
		fs := share.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			shared = append(shared, string(r.Value))
			r.Ack(kgo.AckAccept)
		})
		if err := share.FlushAcks(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if slices.Sort(shared); strings.Join(shared, ",") != "s1,s2" {
		t.Fatalf("share consumer got %v", shared)
	}
	share.Close()
	if st := qStats(t, b, "jobs"); st["available"] != float64(0) || st["inflight"] != float64(0) {
		t.Fatalf("stats after the share consumer: %v", st)
	}

	// Durable with the records: a restart keeps them.
	if err := producer.ProduceSync(testCtx(t, opTimeout), &kgo.Record{Topic: "jobs", Value: []byte("r1")}, &kgo.Record{Topic: "jobs", Value: []byte("r2")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	producer.Close()
	b.Restart()
	if got := qReceiveAll(t, b, "jobs", 2); qBodies(got) != "r1,r2" {
		t.Fatalf("received after the restart: %s", qBodies(got))
	}

	// The DLQ's topic still refuses Kafka producers.
	p2 := newClient(t, b.Addr(), kgo.RecordRetries(1))
	if err := p2.ProduceSync(testCtx(t, opTimeout), &kgo.Record{Topic: "jobs.dlq", Value: []byte("forged")}).FirstErr(); !errors.Is(err, kerr.PolicyViolation) {
		t.Fatalf("produce into the DLQ: %v, want POLICY_VIOLATION", err)
	}
	// A reserved header fails the record: INVALID_RECORD.
	if err := p2.ProduceSync(testCtx(t, opTimeout), &kgo.Record{Topic: "jobs", Value: []byte("x"),
		Headers: []kgo.RecordHeader{{Key: "x-q-dlq-reason", Value: []byte("forged")}}}).FirstErr(); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("produce with a reserved header: %v, want INVALID_RECORD", err)
	}
	// A transaction cannot include the queue.
	txn := newClient(t, b.Addr(), kgo.TransactionalID("txn-jobs"), kgo.RecordRetries(1))
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txn.ProduceSync(testCtx(t, opTimeout), &kgo.Record{Topic: "jobs", Value: []byte("in-txn")}).FirstErr(); err == nil {
		t.Fatal("a transactional produce into a queue succeeded")
	}
	_ = txn.EndTransaction(testCtx(t, opTimeout), kgo.TryAbort)
	if st := qStats(t, b, "jobs"); st["available"] != float64(0) || st["inflight"] != float64(0) {
		t.Fatalf("refused produces left messages: %v", st)
	}
}
