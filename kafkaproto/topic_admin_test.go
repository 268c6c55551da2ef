package kafkaproto

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

func ptr(s string) *string { return &s }

func describeTopicConfigs(t *testing.T, cl *kgo.Client, topic string, names ...string) map[string]kmsg.DescribeConfigsResponseResourceConfig {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeSynonyms, req.IncludeDocumentation = true, true
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	rr.ConfigNames = names
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("describe %s: %+v", topic, resp.Resources)
	}
	out := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, c := range resp.Resources[0].Configs {
		out[c.Name] = c
	}
	return out
}

func TestAlterAndDescribeConfigs(t *testing.T) {
	s, addr := startTestServer(t)
	ctx := context.Background()
	cl := newClient(t, addr)
	if _, err := s.topics.CreateTopic("cfg", 1, nil, false); err != nil {
		t.Fatal(err)
	}

	incremental := func(validateOnly bool, typ kmsg.ConfigResourceType, name string, configs ...kmsg.IncrementalAlterConfigsRequestResourceConfig) (int16, string) {
		t.Helper()
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		req.ValidateOnly = validateOnly
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName, rr.Configs = typ, name, configs
		req.Resources = append(req.Resources, rr)
		// Straight to node 1: the client would route a broker resource
		// to the broker it names.
		kresp, err := cl.Broker(1).Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		res := kresp.(*kmsg.IncrementalAlterConfigsResponse).Resources[0]
		msg := ""
		if res.ErrorMessage != nil {
			msg = *res.ErrorMessage
		}
		return res.ErrorCode, msg
	}
	op := func(o kmsg.IncrementalAlterConfigOp, name string, value *string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Op, c.Name, c.Value = o, name, value
		return c
	}
	topic := kmsg.ConfigResourceTypeTopic
	if code, msg := incremental(false, topic, "cfg",
		op(kmsg.IncrementalAlterConfigOpSet, "retention.ms", ptr("1000")),
		op(kmsg.IncrementalAlterConfigOpAppend, "cleanup.policy", ptr("compact"))); code != 0 {
		t.Fatalf("alter: %s %s", kerr.ErrorForCode(code), msg)
	}
	got := describeTopicConfigs(t, cl, "cfg", "retention.ms", "cleanup.policy", "segment.ms", "no.such.config")
	if len(got) != 3 {
		t.Fatalf("config_names filter returned %d configs", len(got))
	}
	if c := got["retention.ms"]; *c.Value != "1000" || c.Source != kmsg.ConfigSourceDynamicTopicConfig || c.IsDefault ||
		len(c.ConfigSynonyms) != 1 || c.ConfigSynonyms[0].Source != kmsg.ConfigSourceDynamicTopicConfig || c.ConfigType != kmsg.ConfigTypeLong {
		// No DEFAULT_CONFIG synonym: log.retention.ms has no default of
		// its own in Kafka (it defers to log.retention.hours).
		t.Errorf("retention.ms: %+v", c)
	}
	if c := got["cleanup.policy"]; *c.Value != "delete,compact" || c.ConfigType != kmsg.ConfigTypeList ||
		len(c.ConfigSynonyms) != 2 || c.ConfigSynonyms[1].Name != "log.cleanup.policy" || *c.ConfigSynonyms[1].Value != "delete" ||
		c.ConfigSynonyms[1].Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("cleanup.policy: %+v", c)
	}
	if c := got["segment.ms"]; *c.Value != "604800000" || c.Source != kmsg.ConfigSourceDefaultConfig || c.Documentation == nil || *c.Documentation == "" {
		t.Errorf("segment.ms: %+v", c)
	}

	for _, c := range []struct {
		name    string
		typ     kmsg.ConfigResourceType
		res     string
		configs []kmsg.IncrementalAlterConfigsRequestResourceConfig
		code    int16
		msg     string
	}{
		{"append to a non-list", topic, "cfg", []kmsg.IncrementalAlterConfigsRequestResourceConfig{op(kmsg.IncrementalAlterConfigOpAppend, "retention.ms", ptr("1"))}, kerr.InvalidConfig.Code, "not LIST"},
		{"unknown config", topic, "cfg", []kmsg.IncrementalAlterConfigsRequestResourceConfig{op(kmsg.IncrementalAlterConfigOpSet, "no.such", ptr("1"))}, kerr.InvalidConfig.Code, "unknown topic config name: no.such"},
		{"bad value", topic, "cfg", []kmsg.IncrementalAlterConfigsRequestResourceConfig{op(kmsg.IncrementalAlterConfigOpSet, "min.cleanable.dirty.ratio", ptr("2"))}, kerr.InvalidConfig.Code, "between 0 and 1"},
		{"null set", topic, "cfg", []kmsg.IncrementalAlterConfigsRequestResourceConfig{op(kmsg.IncrementalAlterConfigOpSet, "retention.ms", nil)}, kerr.InvalidRequest.Code, "null value"},
		{"duplicate keys", topic, "cfg", []kmsg.IncrementalAlterConfigsRequestResourceConfig{op(kmsg.IncrementalAlterConfigOpSet, "retention.ms", ptr("1")), op(kmsg.IncrementalAlterConfigOpDelete, "retention.ms", nil)}, kerr.InvalidRequest.Code, "duplicate config keys"},
		{"unknown operation", topic, "cfg", []kmsg.IncrementalAlterConfigsRequestResourceConfig{op(7, "retention.ms", ptr("1"))}, kerr.InvalidRequest.Code, "unknown config operation"},
		{"unknown topic", topic, "nope", nil, kerr.UnknownTopicOrPartition.Code, ""},
		{"empty topic name", topic, "", nil, kerr.InvalidRequest.Code, "default topic"},
		{"broker change", kmsg.ConfigResourceTypeBroker, "1", []kmsg.IncrementalAlterConfigsRequestResourceConfig{op(kmsg.IncrementalAlterConfigOpSet, "log.retention.ms", ptr("1"))}, kerr.InvalidRequest.Code, "cannot be changed at runtime"},
		{"broker no-op", kmsg.ConfigResourceTypeBroker, "", nil, 0, ""},
		{"another broker", kmsg.ConfigResourceTypeBroker, "7", nil, kerr.InvalidRequest.Code, "not this broker"},
		{"unknown resource type", 99, "x", nil, kerr.InvalidRequest.Code, "unsupported"},
	} {
		code, msg := incremental(false, c.typ, c.res, c.configs...)
		if code != c.code || !strings.Contains(msg, c.msg) {
			t.Errorf("%s: %s %q, want %s %q", c.name, kerr.ErrorForCode(code), msg, kerr.ErrorForCode(c.code), c.msg)
		}
	}
	if code, _ := incremental(true, topic, "cfg", op(kmsg.IncrementalAlterConfigOpSet, "retention.ms", ptr("5"))); code != 0 {
		t.Fatalf("validate only: %s", kerr.ErrorForCode(code))
	}
	if v := *describeTopicConfigs(t, cl, "cfg", "retention.ms")["retention.ms"].Value; v != "1000" {
		t.Fatalf("validate-only changed retention.ms to %s", v)
	}

	// Legacy AlterConfigs replaces the whole set.
	legacy := kmsg.NewPtrAlterConfigsRequest()
	rr := kmsg.NewAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = topic, "cfg"
	c := kmsg.NewAlterConfigsRequestResourceConfig()
	c.Name, c.Value = "segment.ms", ptr("100")
	rr.Configs = append(rr.Configs, c)
	legacy.Resources = append(legacy.Resources, rr, rr)
	resp, err := legacy.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Resources) != 2 || resp.Resources[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("duplicate resources: %+v", resp.Resources)
	}
	legacy.Resources = legacy.Resources[:1]
	if resp, err = legacy.RequestWith(ctx, cl); err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("legacy alter: %v %+v", err, resp)
	}
	got = describeTopicConfigs(t, cl, "cfg")
	if *got["segment.ms"].Value != "100" || *got["retention.ms"].Value != "604800000" || *got["cleanup.policy"].Value != "delete" {
		t.Fatalf("after legacy alter: segment.ms %s retention.ms %s cleanup.policy %s", *got["segment.ms"].Value, *got["retention.ms"].Value, *got["cleanup.policy"].Value)
	}

	// Describe errors.
	req := kmsg.NewPtrDescribeConfigsRequest()
	for _, name := range []string{"missing", "bad/name"} {
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName = topic, name
		req.Resources = append(req.Resources, r)
	}
	dresp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if dresp.Resources[0].ErrorCode != kerr.UnknownTopicOrPartition.Code || dresp.Resources[1].ErrorCode != kerr.InvalidTopicException.Code {
		t.Fatalf("describe errors: %d %d", dresp.Resources[0].ErrorCode, dresp.Resources[1].ErrorCode)
	}
}

func TestCreatePartitionsAndDeleteRecords(t *testing.T) {
	s, addr := startTestServer(t)
	ctx := context.Background()
	cl := newClient(t, addr)
	if _, err := s.topics.CreateTopic("grow", 1, nil, false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.topics.CreateTopic("table", 1, map[string]string{"cleanup.policy": "compact"}, false); err != nil {
		t.Fatal(err)
	}
	create := func(validateOnly bool, topics ...kmsg.CreatePartitionsRequestTopic) []kmsg.CreatePartitionsResponseTopic {
		t.Helper()
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.Version = 3
		req.ValidateOnly = validateOnly
		req.Topics = topics
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics
	}
	topicReq := func(name string, count int32, assignment ...[]int32) kmsg.CreatePartitionsRequestTopic {
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = name, count
		for _, a := range assignment {
			ra := kmsg.NewCreatePartitionsRequestTopicAssignment()
			ra.Replicas = a
			rt.Assignment = append(rt.Assignment, ra)
		}
		return rt
	}
	for _, c := range []struct {
		name string
		req  kmsg.CreatePartitionsRequestTopic
		code int16
	}{
		{"decrease", topicReq("grow", 0), kerr.InvalidPartitions.Code},
		{"same", topicReq("grow", 1), kerr.InvalidPartitions.Code},
		{"unknown", topicReq("nope", 3), kerr.UnknownTopicOrPartition.Code},
		{"other node", topicReq("grow", 2, []int32{2}), kerr.InvalidReplicaAssignment.Code},
		{"assignment count", topicReq("grow", 3, []int32{1}), kerr.InvalidReplicaAssignment.Code},
	} {
		if got := create(false, c.req); got[0].ErrorCode != c.code {
			t.Errorf("%s: %s, want %s", c.name, kerr.ErrorForCode(got[0].ErrorCode), kerr.ErrorForCode(c.code))
		}
	}
	if got := create(false, topicReq("grow", 3), topicReq("grow", 4)); got[0].ErrorCode != kerr.InvalidRequest.Code || got[1].ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("duplicate topic: %+v", got)
	}
	if got := create(true, topicReq("grow", 3)); got[0].ErrorCode != 0 {
		t.Fatalf("validate only: %s", kerr.ErrorForCode(got[0].ErrorCode))
	}
	grow, _ := s.topics.Topic("grow")
	if grow.NumPartitions() != 1 {
		t.Fatal("validate-only added partitions")
	}
	if got := create(false, topicReq("grow", 3, []int32{1}, []int32{1})); got[0].ErrorCode != 0 {
		t.Fatalf("create partitions: %s", kerr.ErrorForCode(got[0].ErrorCode))
	}
	meta := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = ptr("grow")
	meta.Topics = append(meta.Topics, mt)
	mresp, err := meta.RequestWith(ctx, cl)
	if err != nil || len(mresp.Topics[0].Partitions) != 3 {
		t.Fatalf("metadata after create partitions: %v %+v", err, mresp)
	}

	// DeleteRecords.
	producer := newClient(t, addr, kgo.DefaultProduceTopic("grow"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := 0; i < 10; i++ {
		if err := producer.ProduceSync(ctx, &kgo.Record{Value: []byte("v"), Partition: 0}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	deleteRecords := func(topic string, partition int32, offset int64) kmsg.DeleteRecordsResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrDeleteRecordsRequest()
		req.Version = 2
		rt := kmsg.NewDeleteRecordsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewDeleteRecordsRequestTopicPartition()
		rp.Partition, rp.Offset = partition, offset
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		kresp, err := cl.Broker(1).Request(ctx, req) // unsharded: unknown partitions too
		if err != nil {
			t.Fatal(err)
		}
		return kresp.(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0]
	}
	if r := deleteRecords("grow", 0, 4); r.ErrorCode != 0 || r.LowWatermark != 4 {
		t.Fatalf("delete before 4: %+v", r)
	}
	lo := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "grow"
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Timestamp = -2
	lt.Partitions = append(lt.Partitions, lp)
	lo.Topics = append(lo.Topics, lt)
	if lresp, err := lo.RequestWith(ctx, cl); err != nil || lresp.Topics[0].Partitions[0].Offset != 4 {
		t.Fatalf("earliest after delete: %v %+v", err, lresp)
	}
	old := newClient(t, addr, kgo.MaxVersions(kversion.V3_0_0())) // Fetch v12: by topic name
	fresp, err := fetchReq(0, -1, "grow", 3, 0).RequestWith(ctx, old)
	if err != nil || fresp.Topics[0].Partitions[0].ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("fetch below the start: %v %+v", err, fresp)
	}
	for _, c := range []struct {
		topic     string
		partition int32
		offset    int64
		code      int16
		low       int64
	}{
		{"grow", 0, 2, 0, 4},
		{"grow", 0, 11, kerr.OffsetOutOfRange.Code, -1},
		{"grow", 0, -3, kerr.OffsetOutOfRange.Code, -1},
		{"grow", 0, -1, 0, 10},
		{"grow", 9, 0, kerr.UnknownTopicOrPartition.Code, -1},
		{"table", 0, 0, kerr.PolicyViolation.Code, -1},
	} {
		if r := deleteRecords(c.topic, c.partition, c.offset); r.ErrorCode != c.code || r.LowWatermark != c.low {
			t.Errorf("delete %s/%d before %d: %s low %d, want %s low %d", c.topic, c.partition, c.offset,
				kerr.ErrorForCode(r.ErrorCode), r.LowWatermark, kerr.ErrorForCode(c.code), c.low)
		}
	}
}

func TestProduceTimestampBounds(t *testing.T) {
	s, addr := startTestServer(t)
	if _, err := s.topics.CreateTopic("clock", 1, map[string]string{"message.timestamp.before.max.ms": "60000"}, false); err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, addr, kgo.DefaultProduceTopic("clock"), kgo.RecordRetries(0))
	ctx := context.Background()
	for _, c := range []struct {
		ts   time.Time
		want error
	}{
		{time.Now(), nil},
		{time.Now().Add(-2 * time.Minute), kerr.InvalidTimestamp},
		{time.Now().Add(2 * time.Hour), kerr.InvalidTimestamp},
	} {
		err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v"), Timestamp: c.ts}).FirstErr()
		if !errors.Is(err, c.want) && !(err == nil && c.want == nil) {
			t.Errorf("timestamp %v: %v, want %v", c.ts, err, c.want)
		}
	}
}
