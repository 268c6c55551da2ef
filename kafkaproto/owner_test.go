package kafkaproto

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/vibemq/broker/topics"
)

// TestOwnedTopicReadOnlyOverKafka pins the bug where a Kafka client could
// delete a queue's or event store's topic, add partitions, change its
// configs, delete its records or produce into it, silently breaking the
// state kept beside the log. Each API now answers its refusal code (and
// message where the version has one) and changes nothing; reads still
// work.
func TestOwnedTopicReadOnlyOverKafka(t *testing.T) {
	s, addr := startTestServer(t)
	ctx := context.Background()
	topic, err := s.topics.CreateOwnedTopic("orders", 1, map[string]string{"retention.ms": "60000"}, topics.OwnerQueue)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := topic.Partition(0)
	batch, err := topics.EncodeBatch(topics.BatchHeader{BaseTimestamp: 1, MaxTimestamp: 1, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
		[]topics.Record{{Value: []byte("owned")}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.topics.Append([]*topics.Append{{Partition: p, Batch: batch}}, time.UnixMilli(1)).Wait(); err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, addr)
	policy := func(what string, code int16, msg *string, hint string) {
		t.Helper()
		if code != kerr.PolicyViolation.Code {
			t.Fatalf("%s: error %v, want POLICY_VIOLATION", what, kerr.ErrorForCode(code))
		}
		if hint == "" {
			return
		}
		if msg == nil || !strings.Contains(*msg, `the native queue "orders"`) || !strings.Contains(*msg, hint) {
			t.Fatalf("%s: message %v, want the owner and %q", what, msg, hint)
		}
	}

	// DeleteTopics by name (v4 has no message, v5+ has one) and by ID (v6).
	old := newClient(t, addr, kgo.MaxVersions(kversion.V2_3_0())) // DeleteTopics v3, Produce v7
	dreq := kmsg.NewPtrDeleteTopicsRequest()
	dreq.TopicNames = []string{"orders"}
	dresp, err := dreq.RequestWith(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	policy("DeleteTopics v3", dresp.Topics[0].ErrorCode, nil, "")
	dreq = kmsg.NewPtrDeleteTopicsRequest()
	byName := kmsg.NewDeleteTopicsRequestTopic()
	byName.Topic = kmsg.StringPtr("orders")
	byID := kmsg.NewDeleteTopicsRequestTopic()
	byID.TopicID = topic.ID
	dreq.Topics = []kmsg.DeleteTopicsRequestTopic{byName, byID}
	dreq.TopicNames = []string{"orders"}
	dresp, err = dreq.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for i, st := range dresp.Topics {
		policy("DeleteTopics", st.ErrorCode, st.ErrorMessage, "broker queue delete orders")
		if st.TopicID != topic.ID {
			t.Fatalf("DeleteTopics answer %d: topic ID %x", i, st.TopicID)
		}
	}

	// CreatePartitions, with a valid and with a bad assignment: the owner
	// comes first.
	for _, assign := range [][]int32{nil, {7}} {
		creq := kmsg.NewPtrCreatePartitionsRequest()
		ct := kmsg.NewCreatePartitionsRequestTopic()
		ct.Topic, ct.Count = "orders", 2
		if assign != nil {
			a := kmsg.NewCreatePartitionsRequestTopicAssignment()
			a.Replicas = assign
			ct.Assignment = append(ct.Assignment, a)
		}
		creq.Topics = append(creq.Topics, ct)
		cresp, err := creq.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		policy("CreatePartitions", cresp.Topics[0].ErrorCode, cresp.Topics[0].ErrorMessage, "partition count is fixed")
	}

	// AlterConfigs and IncrementalAlterConfigs, validate-only too.
	for _, validateOnly := range []bool{false, true} {
		areq := kmsg.NewPtrAlterConfigsRequest()
		areq.ValidateOnly = validateOnly
		ar := kmsg.NewAlterConfigsRequestResource()
		ar.ResourceType, ar.ResourceName = kmsg.ConfigResourceTypeTopic, "orders"
		ac := kmsg.NewAlterConfigsRequestResourceConfig()
		ac.Name, ac.Value = "retention.ms", kmsg.StringPtr("1")
		ar.Configs = append(ar.Configs, ac)
		areq.Resources = append(areq.Resources, ar)
		aresp, err := areq.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		policy("AlterConfigs", aresp.Resources[0].ErrorCode, aresp.Resources[0].ErrorMessage, "PATCH /v1/queues/orders")

		ireq := kmsg.NewPtrIncrementalAlterConfigsRequest()
		ireq.ValidateOnly = validateOnly
		ir := kmsg.NewIncrementalAlterConfigsRequestResource()
		ir.ResourceType, ir.ResourceName = kmsg.ConfigResourceTypeTopic, "orders"
		ic := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		ic.Op, ic.Name = kmsg.IncrementalAlterConfigOpDelete, "retention.ms"
		ir.Configs = append(ir.Configs, ic)
		ireq.Resources = append(ireq.Resources, ir)
		iresp, err := ireq.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		policy("IncrementalAlterConfigs", iresp.Resources[0].ErrorCode, iresp.Resources[0].ErrorMessage, "PATCH /v1/queues/orders")
	}

	// DeleteRecords: no message field.
	rreq := kmsg.NewPtrDeleteRecordsRequest()
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = "orders"
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition, rp.Offset = 0, -1
	rt.Partitions = append(rt.Partitions, rp)
	rreq.Topics = append(rreq.Topics, rt)
	rresp, err := rreq.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if sp := rresp.Topics[0].Partitions[0]; sp.ErrorCode != kerr.PolicyViolation.Code || sp.LowWatermark != -1 {
		t.Fatalf("DeleteRecords: %v low watermark %d", kerr.ErrorForCode(sp.ErrorCode), sp.LowWatermark)
	}

	// Produce: v8+ POLICY_VIOLATION with the message, v7 INVALID_TOPIC_EXCEPTION.
	produce := func(c *kgo.Client) kmsg.ProduceResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = -1, 1000
		pt := kmsg.NewProduceRequestTopic()
		pt.Topic = "orders"
		pp := kmsg.NewProduceRequestTopicPartition()
		pp.Records = batch
		pt.Partitions = append(pt.Partitions, pp)
		req.Topics = append(req.Topics, pt)
		resp, err := req.RequestWith(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0]
	}
	sp := produce(cl)
	policy("Produce", sp.ErrorCode, sp.ErrorMessage, "broker queue send orders")
	if sp = produce(old); sp.ErrorCode != kerr.InvalidTopicException.Code {
		t.Fatalf("Produce v7: %v, want INVALID_TOPIC_EXCEPTION", kerr.ErrorForCode(sp.ErrorCode))
	}

	// Nothing changed, and reads work.
	if _, ok := s.topics.Topic("orders"); !ok || topic.NumPartitions() != 1 || topic.Config("retention.ms") != "60000" ||
		p.LogStartOffset() != 0 || p.HighWatermark() != 1 {
		t.Fatalf("a refused request changed the topic: partitions %d, retention.ms %s, start %d, hwm %d",
			topic.NumPartitions(), topic.Config("retention.ms"), p.LogStartOffset(), p.HighWatermark())
	}
	if got := describeTopicConfigs(t, cl, "orders", "retention.ms"); got["retention.ms"].Value == nil || *got["retention.ms"].Value != "60000" {
		t.Fatalf("DescribeConfigs: %+v", got)
	}
	consumer := newClient(t, addr, kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fs := consumer.PollFetches(ctx)
	if err := fs.Err(); err != nil {
		t.Fatal(err)
	}
	if recs := fs.Records(); len(recs) != 1 || string(recs[0].Value) != "owned" {
		t.Fatalf("fetch of the owned topic: %v", recs)
	}
}
