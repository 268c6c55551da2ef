package compattests

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Topics owned by the native queue and the event store: Kafka clients may
// read them, but every change a Kafka client could make to them is refused
// (it would break the queue's or the store's state).

// ownedTopics creates a queue "orders" (with its automatic DLQ
// "orders.dlq") holding three messages and an event store "ledger" holding
// one event, and returns each topic with the owner phrase and the command
// its refusal messages must name.
func ownedTopics(t *testing.T, b *brokerProc) map[string][2]string {
	t.Helper()
	qMust(t, b, "PUT", "/v1/queues/orders", map[string]any{}, 201)
	qSend(t, b, "orders", "m1", "m2", "m3")
	esMust(t, b, "POST", "/v1/stores/ledger/streams/acct-1/events",
		esAppendBody("no_stream", map[string]any{"type": "Opened", "data": map[string]any{"owner": "ann"}}), 201)
	return map[string][2]string{
		"orders":     {`the native queue "orders"`, "broker queue delete orders"},
		"orders.dlq": {`the native queue "orders.dlq"`, "broker queue delete orders.dlq"},
		"ledger":     {`the event store "ledger"`, "DELETE /v1/stores/ledger"},
	}
}

// topicState is what a refused change must leave alone: partitions, end
// offsets, start offsets and explicit configs of each topic.
func topicState(t *testing.T, adm *kadm.Client, names ...string) string {
	t.Helper()
	ctx := testCtx(t, opTimeout)
	details, err := adm.ListTopics(ctx, names...)
	if err != nil {
		t.Fatal(err)
	}
	starts, err := adm.ListStartOffsets(ctx, names...)
	if err != nil {
		t.Fatal(err)
	}
	ends, err := adm.ListEndOffsets(ctx, names...)
	if err != nil {
		t.Fatal(err)
	}
	configs, err := adm.DescribeTopicConfigs(ctx, names...)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	for _, d := range details.Sorted() {
		if d.Err != nil {
			t.Fatalf("topic %s: %v", d.Topic, d.Err)
		}
		fmt.Fprintf(&sb, "%s id=%s partitions=%d", d.Topic, d.ID, len(d.Partitions))
		for _, p := range d.Partitions.Numbers() {
			s, _ := starts.Lookup(d.Topic, p)
			e, _ := ends.Lookup(d.Topic, p)
			fmt.Fprintf(&sb, " %d:[%d,%d)", p, s.Offset, e.Offset)
		}
		rc, err := configs.On(d.Topic, nil)
		if err != nil {
			t.Fatalf("configs of %s: %v", d.Topic, err)
		}
		for _, c := range rc.Configs {
			if c.Source == kmsg.ConfigSourceDynamicTopicConfig && c.Value != nil {
				fmt.Fprintf(&sb, " %s=%s", c.Key, *c.Value)
			}
		}
		sb.WriteString("\n")
	}
	return sb.String()
}

// TestOwnedTopicsRefuseKafkaChanges: kadm DeleteTopics, UpdatePartitions
// (CreatePartitions), AlterTopicConfigs (IncrementalAlterConfigs),
// AlterTopicConfigsState (AlterConfigs) and DeleteRecords, and `broker
// topics delete` on the topics of a queue, its DLQ and an event store; a
// raw Produce at v9 and v7 and a kgo producer on the DLQ's and the event
// store's (a queue's own topic takes Kafka producers' records as messages
// since issue 10 part 3: queue_produce_test.go): each refused with
// POLICY_VIOLATION (or INVALID_TOPIC_EXCEPTION for Produce v7) and a
// message naming the owner and the command to use; nothing changes, the
// refusal survives a restart, the queue still works and the owners' own
// deletes remove the topics.
func TestOwnedTopicsRefuseKafkaChanges(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	owned := ownedTopics(t, b)
	names := []string{"ledger", "orders", "orders.dlq"}
	adm := newAdmin(t, b.Addr())
	before := topicState(t, adm, names...)

	refused := func(what, topic string, err error, message string) {
		t.Helper()
		if !errors.Is(err, kerr.PolicyViolation) {
			t.Fatalf("%s %s: %v (%s), want POLICY_VIOLATION", what, topic, err, message)
		}
		if message == "" {
			return
		}
		if !strings.Contains(message, owned[topic][0]) || !strings.Contains(message, "read-only to Kafka clients") {
			t.Fatalf("%s %s: message %q does not name %s", what, topic, message, owned[topic][0])
		}
	}
	deleteAll := func() {
		t.Helper()
		resps, err := adm.DeleteTopics(testCtx(t, opTimeout), names...)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range names {
			r := resps[name]
			refused("DeleteTopics", name, r.Err, r.ErrMessage)
			if !strings.Contains(r.ErrMessage, owned[name][1]) {
				t.Fatalf("DeleteTopics %s: message %q lacks %q", name, r.ErrMessage, owned[name][1])
			}
		}
	}
	deleteAll()

	parts, err := adm.UpdatePartitions(testCtx(t, opTimeout), 4, names...)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		refused("UpdatePartitions", name, parts[name].Err, parts[name].ErrMessage)
	}
	set := []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: kmsg.StringPtr("1000")}}
	for api, alter := range map[string]func() (kadm.AlterConfigsResponses, error){
		"IncrementalAlterConfigs": func() (kadm.AlterConfigsResponses, error) {
			return adm.AlterTopicConfigs(testCtx(t, opTimeout), set, names...)
		},
		"AlterConfigs": func() (kadm.AlterConfigsResponses, error) {
			return adm.AlterTopicConfigsState(testCtx(t, opTimeout), set, names...)
		},
		"IncrementalAlterConfigs validate-only": func() (kadm.AlterConfigsResponses, error) {
			return adm.ValidateAlterTopicConfigs(testCtx(t, opTimeout), set, names...)
		},
	} {
		resps, err := alter()
		if err != nil {
			t.Fatal(err)
		}
		if len(resps) != len(names) {
			t.Fatalf("%s: %d answers for %d topics", api, len(resps), len(names))
		}
		for _, r := range resps {
			refused(api, r.Name, r.Err, r.ErrMessage)
		}
	}
	offsets := kadm.Offsets{}
	for _, name := range names {
		offsets.Add(kadm.Offset{Topic: name, Partition: 0, At: -1})
	}
	dels, err := adm.DeleteRecords(testCtx(t, opTimeout), offsets)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		r, ok := dels.Lookup(name, 0)
		if !ok {
			t.Fatalf("DeleteRecords: no answer for %s", name)
		}
		refused("DeleteRecords", name, r.Err, "")
	}

	// Produce: raw at v9 (message) and v7 (no message field), then kgo;
	// not on the queue's own topic, which takes produced records.
	vs := apiVersions(t, b.Addr())
	c := dialRaw(t, b.Addr())
	defer c.conn.Close()
	batch := rawBatch(-1, -1, -1, 1_700_000_000_000, valueRecords("forged"))
	for _, name := range []string{"ledger", "orders.dlq"} {
		sp := c.produceRaw(pickVersion(t, vs, kmsg.Produce, 9, 9), name, 0, batch)
		msg := ""
		if sp.ErrorMessage != nil {
			msg = *sp.ErrorMessage
		}
		refused("Produce v9", name, kerr.ErrorForCode(sp.ErrorCode), msg)
		if msg == "" || sp.BaseOffset != -1 {
			t.Fatalf("Produce v9 %s: message %q, base offset %d", name, msg, sp.BaseOffset)
		}
		if sp = c.produceRaw(7, name, 0, batch); sp.ErrorCode != kerr.InvalidTopicException.Code {
			t.Fatalf("Produce v7 %s: %s, want INVALID_TOPIC_EXCEPTION", name, errName(sp.ErrorCode))
		}
	}
	producer := newClient(t, b.Addr(), kgo.RecordRetries(1))
	if err := producer.ProduceSync(testCtx(t, opTimeout), &kgo.Record{Topic: "orders.dlq", Value: []byte("forged")}).FirstErr(); !errors.Is(err, kerr.PolicyViolation) {
		t.Fatalf("kgo produce into a DLQ topic: %v, want POLICY_VIOLATION", err)
	}

	code, stdout, stderr := brokerCLI(t, "topics", "delete", "--bootstrap-server", b.Addr(), "orders")
	if code == 0 || !strings.Contains(stderr, "POLICY_VIOLATION") || !strings.Contains(stderr, "broker queue delete orders") {
		t.Fatalf("broker topics delete orders: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}

	if after := topicState(t, adm, names...); after != before {
		t.Fatalf("refused changes changed the topics:\nbefore:\n%safter:\n%s", before, after)
	}

	// The marks are stored: still refused after a restart.
	b.Restart()
	adm = newAdmin(t, b.Addr())
	deleteAll()
	if after := topicState(t, adm, names...); after != before {
		t.Fatalf("topics changed across the restart:\nbefore:\n%safter:\n%s", before, after)
	}

	// The queue works: the three messages, nothing forged.
	msgs := qReceive(t, b, "orders", 10, 30000, 0)
	var got []string
	var receipts []string
	for _, m := range msgs {
		got = append(got, m.Body)
		receipts = append(receipts, m.Receipt)
	}
	if strings.Join(got, ",") != "m1,m2,m3" {
		t.Fatalf("queue after the refused changes: %v", got)
	}
	if st := qItemStatuses(qMust(t, b, "POST", "/v1/queues/orders/ack", map[string]any{"receipts": receipts}, 200)); strings.Join(st, ",") != "acked,acked,acked" {
		t.Fatalf("ack: %v", st)
	}
	esMust(t, b, "POST", "/v1/stores/ledger/streams/acct-1/events",
		esAppendBody(0, map[string]any{"type": "Deposited", "data": map[string]any{"amount": 5}}), 201)

	// The owners' deletes remove their topics.
	qMust(t, b, "DELETE", "/v1/queues/orders", nil, 204)
	esMust(t, b, "DELETE", "/v1/stores/ledger", nil, 204)
	details, err := adm.ListTopics(testCtx(t, opTimeout))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if details.Has(name) {
			t.Fatalf("topic %s left after its owner deleted it", name)
		}
	}
}

// TestOwnedTopicsReadableOverKafka: Kafka clients still read owned topics:
// Metadata, DescribeConfigs, ListOffsets, a consumer group on the DLQ topic
// (reading a dead-lettered message with its dead-letter headers and
// committing its offset), a plain consumer of the event store's topic; the
// DLQ keeps its message for native readers and the queue keeps working.
func TestOwnedTopicsReadableOverKafka(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	qMust(t, b, "PUT", "/v1/queues/jobs", map[string]any{}, 201)
	qSend(t, b, "jobs", "bad", "good")
	first := qReceive(t, b, "jobs", 1, 30000, 0)
	if len(first) != 1 || first[0].Body != "bad" {
		t.Fatalf("receive: %+v", first)
	}
	if st := qItemStatuses(qMust(t, b, "POST", "/v1/queues/jobs/nack", map[string]any{"receipts": []string{first[0].Receipt}, "dead_letter": true, "reason": "bad schema"}, 200)); len(st) != 1 || st[0] != "dead_lettered" {
		t.Fatalf("reject: %v", st)
	}
	esMust(t, b, "POST", "/v1/stores/audit/streams/user-7/events",
		esAppendBody("no_stream", map[string]any{"type": "LoggedIn", "data": map[string]any{"ip": "10.0.0.1"}}), 201)

	adm := newAdmin(t, b.Addr())
	ctx := testCtx(t, opTimeout)
	details, err := adm.ListTopics(ctx, "jobs", "jobs.dlq", "audit")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"jobs", "jobs.dlq", "audit"} {
		if d := details[name]; d.Err != nil || len(d.Partitions) != 1 {
			t.Fatalf("Metadata %s: %v %d partitions", name, d.Err, len(d.Partitions))
		}
	}
	configs, err := adm.DescribeTopicConfigs(ctx, "jobs", "jobs.dlq", "audit")
	if err != nil {
		t.Fatal(err)
	}
	for _, rc := range configs {
		if rc.Err != nil || len(rc.Configs) == 0 {
			t.Fatalf("DescribeConfigs %s: %v", rc.Name, rc.Err)
		}
	}
	if ends := endOffsets(t, adm, "jobs.dlq"); ends[0] != 1 {
		t.Fatalf("DLQ end offset %d, want 1", ends[0])
	}

	group := newClient(t, b.Addr(), kgo.ConsumerGroup("dlq-readers"), kgo.ConsumeTopics("jobs.dlq"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	var dead *kgo.Record
	for dead == nil {
		fs := group.PollFetches(testCtx(t, opTimeout))
		if err := fs.Err0(); err != nil {
			t.Fatalf("poll the DLQ topic: %v", err)
		}
		if recs := fs.Records(); len(recs) > 0 {
			dead = recs[0]
		}
	}
	reason := ""
	for _, h := range dead.Headers {
		if h.Key == "x-q-dlq-reason" {
			reason = string(h.Value)
		}
	}
	if string(dead.Value) != "bad" || reason != "rejected" {
		t.Fatalf("DLQ record: value %q, reason %q", dead.Value, reason)
	}
	if err := group.CommitUncommittedOffsets(testCtx(t, opTimeout)); err != nil {
		t.Fatalf("commit on the DLQ topic: %v", err)
	}
	committed, err := adm.FetchOffsets(testCtx(t, opTimeout), "dlq-readers")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := committed.Lookup("jobs.dlq", 0); !ok || o.At != 1 {
		t.Fatalf("committed DLQ offset %+v (found %v), want 1", o, ok)
	}

	recs := readPartitions(t, b.Addr(), "audit", map[int32]int64{0: 1})[0]
	if len(recs) != 1 || string(recs[0].Key) != "user-7" {
		t.Fatalf("event store topic read: %s", values(recs))
	}

	// Reading changed nothing for native readers.
	dlq := qMust(t, b, "GET", "/v1/queues/jobs/dlq", nil, 200)
	if ms, _ := dlq.Body["messages"].([]any); len(ms) != 1 {
		t.Fatalf("DLQ after the Kafka read: %s", dlq.Raw)
	}
	if rest := qReceive(t, b, "jobs", 10, 30000, 0); len(rest) != 1 || rest[0].Body != "good" {
		t.Fatalf("queue after the Kafka reads: %+v", rest)
	}
}
