package compattests

// The topic side of a Kafka Connect distributed worker pair, on the wire
// (shared/design/CONNECT-STREAMS.md §6.1: steps 1-5, 8, 9, 13 and 17; the
// group-protocol steps belong to the consumer-group tests). Each emulated
// Java client announces itself as apache-kafka-java and is limited to the
// versions of a Kafka 3.9 client, then of a 4.0 client with the 4.0 floors.

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// connectFloors40 are the lowest versions a Kafka 4.0 client sends of the
// requests used here (franz-go kversion b40, KIP-896).
func connectFloors40() *kversion.Versions {
	vs := &kversion.Versions{}
	for k, v := range map[kmsg.Key]int16{
		kmsg.Produce: 3, kmsg.Fetch: 4, kmsg.ListOffsets: 1, kmsg.CreateTopics: 2,
		kmsg.DeleteTopics: 1, kmsg.DescribeConfigs: 1, kmsg.Metadata: 0,
	} {
		vs.SetMaxKeyVersion(int16(k), v)
	}
	return vs
}

// TestConnectWorkerPair: what two Connect workers do with their internal
// topics on startup and while running: create the three compacted topics
// (RF -1; RF 3 refused on one node) and verify cleanup.policy=compact via
// DescribeConfigs, find empty logs, read every partition to the end with
// assign + seekToBeginning, write configs, statuses and offsets with a
// non-idempotent acks=all producer and see each write at once, have the
// second worker re-read the same state and receive new configs by long
// poll; then write keyed updates and tombstones with fast compaction
// configured and re-read exactly the latest state: offsets unchanged,
// EARLIEST still 0, LATEST unchanged, tombstones visible for
// delete.retention.ms, a fetch at a removed offset answered with the next
// batch, read-to-end finishing. Keyless records get INVALID_RECORD and
// DeleteRecords on a compacted topic POLICY_VIOLATION.
func TestConnectWorkerPair(t *testing.T) {
	t.Parallel()
	b := startBroker(t, fastCleanupArgs)
	for _, profile := range []struct {
		name string
		opts []kgo.Opt
	}{
		{"kafka-3.9", []kgo.Opt{kgo.MaxVersions(kversion.V3_9_0())}},
		{"kafka-4.0", []kgo.Opt{kgo.MaxVersions(kversion.V4_0_0()), kgo.MinVersions(connectFloors40())}},
	} {
		t.Run(profile.name, func(t *testing.T) { connectWorkerPair(t, b, profile.opts) })
	}
}

// connectTopic is one of a Connect cluster's internal topics.
type connectTopic struct {
	name       string
	partitions int32
}

func connectWorkerPair(t *testing.T, b *brokerProc, versions []kgo.Opt) {
	prefix := topicName(t, "")
	configs := connectTopic{prefix + "-configs", 1}
	offsets := connectTopic{prefix + "-offsets", 25}
	status := connectTopic{prefix + "-status", 5}
	internal := []connectTopic{configs, offsets, status}
	javaClient := func(id string, opts ...kgo.Opt) *kgo.Client {
		base := append([]kgo.Opt{kgo.ClientID(id), kgo.SoftwareNameAndVersion("apache-kafka-java", "3.9.0")}, versions...)
		return newClient(t, b.Addr(), append(base, opts...)...)
	}
	ctx := testCtx(t, 2*opTimeout)

	// 1. Metadata with no topics, DescribeCluster with broker endpoints.
	admin := javaClient("connect-cluster-shared-admin")
	meta := kmsg.NewPtrMetadataRequest()
	meta.Topics = []kmsg.MetadataRequestTopic{}
	mresp, err := meta.RequestWith(ctx, admin)
	if err != nil || mresp.ClusterID == nil || *mresp.ClusterID == "" || len(mresp.Brokers) < 1 {
		t.Fatalf("Metadata []: %v %+v", err, mresp)
	}
	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.EndpointType = 1
	dresp, err := dc.RequestWith(ctx, admin)
	if err != nil || dresp.ErrorCode != 0 || dresp.ClusterID != *mresp.ClusterID || len(dresp.Brokers) < 1 {
		t.Fatalf("DescribeCluster: %v %+v", err, dresp)
	}

	// 2. CreateTopics, then again: TOPIC_ALREADY_EXISTS. RF 3 cannot be
	// placed on one broker.
	createInternal := func(rf int16) map[string]int16 {
		t.Helper()
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 30000
		for _, ct := range internal {
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = ct.name, ct.partitions, rf
			c := kmsg.NewCreateTopicsRequestTopicConfig()
			c.Name, c.Value = "cleanup.policy", strp("compact")
			rt.Configs = append(rt.Configs, c)
			req.Topics = append(req.Topics, rt)
		}
		resp, err := req.RequestWith(ctx, admin)
		if err != nil {
			t.Fatalf("CreateTopics: %v", err)
		}
		out := map[string]int16{}
		for _, rt := range resp.Topics {
			out[rt.Topic] = rt.ErrorCode
		}
		return out
	}
	for name, code := range createInternal(3) {
		if code != kerr.InvalidReplicationFactor.Code {
			t.Fatalf("CreateTopics %s with RF 3: %s, want INVALID_REPLICATION_FACTOR", name, errName(code))
		}
	}
	for name, code := range createInternal(-1) {
		if code != 0 {
			t.Fatalf("CreateTopics %s: %s", name, errName(code))
		}
	}
	for name, code := range createInternal(-1) {
		if code != kerr.TopicAlreadyExists.Code {
			t.Fatalf("CreateTopics %s again: %s, want TOPIC_ALREADY_EXISTS", name, errName(code))
		}
	}

	// 3. DescribeConfigs (all configs, no synonyms): cleanup.policy split on
	// commas, trimmed, lower-cased must be exactly {compact}
	// (TopicAdmin.verifyTopicCleanupPolicyOnlyCompact). Controls.
	adm := kadm.NewClient(admin)
	deleteTopic, bothTopic := prefix+"-delete", prefix+"-both"
	createTopic(t, adm, deleteTopic, 1, map[string]*string{"cleanup.policy": strp("delete")})
	createTopic(t, adm, bothTopic, 1, map[string]*string{"cleanup.policy": strp("compact,delete")})
	policy := func(topic string) (string, int16) {
		t.Helper()
		req := kmsg.NewPtrDescribeConfigsRequest()
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, topic
		req.Resources = append(req.Resources, rr)
		resp, err := req.RequestWith(ctx, admin)
		if err != nil {
			t.Fatalf("DescribeConfigs %s: %v", topic, err)
		}
		r := resp.Resources[0]
		for _, c := range r.Configs {
			if c.Name == "cleanup.policy" && c.Value != nil {
				return *c.Value, r.ErrorCode
			}
		}
		return "", r.ErrorCode
	}
	for _, ct := range internal {
		v, code := policy(ct.name)
		var parts []string
		for _, p := range strings.Split(v, ",") {
			parts = append(parts, strings.ToLower(strings.TrimSpace(p)))
		}
		if code != 0 || len(parts) != 1 || parts[0] != "compact" {
			t.Fatalf("%s: cleanup.policy %q (%s); Connect requires exactly compact", ct.name, v, errName(code))
		}
	}
	for topic, want := range map[string]string{deleteTopic: "delete", bothTopic: "compact,delete"} {
		if v, _ := policy(topic); v != want {
			t.Errorf("%s: cleanup.policy %q, want %q", topic, v, want)
		}
	}
	if _, code := policy(prefix + "-missing"); code != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("DescribeConfigs of a missing topic: %s, want UNKNOWN_TOPIC_OR_PARTITION", errName(code))
	}

	// 4. Metadata per topic: partition counts, live leaders, topic IDs.
	details, err := adm.ListTopics(ctx, configs.name, offsets.name, status.name)
	if err != nil {
		t.Fatal(err)
	}
	for _, ct := range internal {
		d := details[ct.name]
		if d.Err != nil || int32(len(d.Partitions)) != ct.partitions || d.ID == (kadm.TopicID{}) {
			t.Fatalf("%s: %v, %d partitions, id %v", ct.name, d.Err, len(d.Partitions), d.ID)
		}
		for _, p := range d.Partitions {
			if p.Leader != 1 || p.Err != nil {
				t.Fatalf("%s/%d: leader %d, %v", ct.name, p.Partition, p.Leader, p.Err)
			}
		}
	}

	// 5. Empty logs: LATEST (read_uncommitted) and EARLIEST are 0; a fetch
	// long-polls for max wait and returns nothing with HWM 0.
	for _, ct := range internal {
		for p, end := range endOffsets(t, adm, ct.name) {
			if end != 0 {
				t.Fatalf("%s/%d: end offset %d, want 0", ct.name, p, end)
			}
		}
	}
	fetch := kmsg.NewPtrFetchRequest()
	fetch.ReplicaID, fetch.MaxWaitMillis, fetch.MinBytes, fetch.MaxBytes, fetch.SessionEpoch = -1, 500, 1, 52428800, -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = configs.name, details[configs.name].ID
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.FetchOffset, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch, fp.LogStartOffset = 0, 1048576, -1, -1
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	began := time.Now()
	fresp, err := fetch.RequestWith(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	if fp := fresp.Topics[0].Partitions[0]; fp.ErrorCode != 0 || fp.HighWatermark != 0 || len(fp.RecordBatches) != 0 || time.Since(began) < 400*time.Millisecond {
		t.Fatalf("fetch of an empty log: %s hwm %d %d bytes after %v", errName(fp.ErrorCode), fp.HighWatermark, len(fp.RecordBatches), time.Since(began))
	}

	// 8. Worker 1 writes the session key and a connector's configs, then
	// statuses and offsets; after each write its readToEnd sees exactly it.
	producer := javaClient("connect-cluster-configs",
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DisableIdempotentWrite(),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.MaxProduceRequestsInflightPerBroker(1),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	worker1 := newConnectLog(t, javaClient("connect-cluster-configs-consumer-w1", kgo.FetchMaxWait(500*time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{configs.name: {0: kgo.NewOffset().AtStart()}})), adm, configs)
	write := func(topic string, partition int32, key, value string, ts time.Time) int64 {
		t.Helper()
		r := &kgo.Record{Topic: topic, Partition: partition, Key: []byte(key), Value: []byte(value), Timestamp: ts}
		if value == "~" {
			r.Value = nil
		}
		res := producer.ProduceSync(ctx, r)
		if err := res.FirstErr(); err != nil {
			t.Fatalf("produce %s to %s/%d: %v", key, topic, partition, err)
		}
		return res[0].Record.Offset
	}
	type kv struct{ key, value string }
	configRecords := []kv{
		{"session-key", `{"key":"c2VjcmV0","algorithm":"HmacSHA256","creation-timestamp":1}`},
		{"connector-c1", `{"properties":{"connector.class":"FileStreamSource","tasks.max":"2"}}`},
		{"target-state-c1", `{"state":"STARTED"}`},
		{"task-c1-0", `{"properties":{"task.class":"FileStreamSourceTask"}}`},
		{"task-c1-1", `{"properties":{"task.class":"FileStreamSourceTask"}}`},
		{"commit-c1", `{"tasks":2}`},
	}
	for i, r := range configRecords {
		if off := write(configs.name, 0, r.key, r.value, time.Now()); off != int64(i) {
			t.Fatalf("%s written at %d, want %d", r.key, off, i)
		}
		got := worker1.readToEnd()
		if len(got) != 1 || string(got[0].Key) != r.key || string(got[0].Value) != r.value || got[0].Offset != int64(i) {
			t.Fatalf("worker 1 read %s after writing %s", values(got), r.key)
		}
	}
	for i := 0; i < 20; i++ {
		key := fmt.Sprintf("status-task-c1-%d", i%2)
		write(status.name, int32(i%2), key, fmt.Sprintf(`{"state":"RUNNING","worker_id":"w1","generation":%d}`, i), time.Now())
	}
	for i := 0; i < 10; i++ {
		write(offsets.name, 0, `["c1",{"file":"in.txt"}]`, fmt.Sprintf(`{"position":%d}`, i*100), time.Now())
	}
	if ends := endOffsets(t, adm, status.name); ends[0] != 10 || ends[1] != 10 {
		t.Fatalf("status end offsets %v", ends)
	}

	// 9. Worker 2 starts: the topics exist, are compacted, and it reads the
	// same configs at the same offsets; the config offset is 6.
	for name, code := range createInternal(-1) {
		if code != kerr.TopicAlreadyExists.Code {
			t.Fatalf("worker 2 CreateTopics %s: %s", name, errName(code))
		}
	}
	if v, _ := policy(configs.name); v != "compact" {
		t.Fatalf("worker 2 sees cleanup.policy %q", v)
	}
	worker2 := newConnectLog(t, javaClient("connect-cluster-configs-consumer-w2", kgo.FetchMaxWait(500*time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{configs.name: {0: kgo.NewOffset().AtStart()}})), adm, configs)
	got := worker2.readToEnd()
	if len(got) != len(configRecords) {
		t.Fatalf("worker 2 read %d config records, want %d: %s", len(got), len(configRecords), values(got))
	}
	for i, r := range got {
		if r.Offset != int64(i) || string(r.Key) != configRecords[i].key || string(r.Value) != configRecords[i].value {
			t.Fatalf("worker 2 record %d: %d %s=%s", i, r.Offset, r.Key, r.Value)
		}
	}
	if end := endOffsets(t, adm, configs.name)[0]; end != 6 {
		t.Fatalf("config offset %d, want 6", end)
	}

	// 13. New configs from worker 1 reach worker 2 by long poll.
	write(configs.name, 0, "connector-c2", `{"properties":{}}`, time.Now())
	write(configs.name, 0, "target-state-c2", `{"state":"STARTED"}`, time.Now())
	if got := worker2.poll(2, 5*time.Second); len(got) != 2 || got[0].Offset != 6 || got[1].Offset != 7 {
		t.Fatalf("worker 2 long poll: %s", values(got))
	}

	// 17. Compaction of the status and offsets topics with fast settings.
	// Updates carry timestamps 150 ms apart (segment.ms=100), so each closes
	// the previous segment without waiting.
	for _, topic := range []string{status.name, offsets.name} {
		resps, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
			{Op: kadm.SetConfig, Name: "segment.ms", Value: strp("100")},
			{Op: kadm.SetConfig, Name: "min.cleanable.dirty.ratio", Value: strp("0.01")},
			{Op: kadm.SetConfig, Name: "delete.retention.ms", Value: strp("1000")},
		}, topic)
		if err != nil {
			t.Fatal(err)
		}
		if r, _ := resps.On(topic, nil); r.Err != nil {
			t.Fatalf("alter %s: %v %s", topic, r.Err, r.ErrMessage)
		}
	}
	// connect-offsets partition 3: many updates to three keys, a tombstone
	// for one, then one more write that closes the last segment.
	type written struct {
		offset int64
		value  string
	}
	latest := map[string]written{}
	base := time.Now().Add(-time.Minute)
	step := 0
	next := func() time.Time { step++; return base.Add(time.Duration(step) * 150 * time.Millisecond) }
	for i := 0; i < 30; i++ {
		key := fmt.Sprintf(`["c1",{"file":"f%d"}]`, i%3)
		value := fmt.Sprintf(`{"position":%d}`, i)
		off := write(offsets.name, 3, key, value, next())
		latest[key] = written{off, value}
	}
	tombKey := `["c1",{"file":"f1"}]`
	off := write(offsets.name, 3, tombKey, "~", next())
	latest[tombKey] = written{off, "~"}
	last := write(offsets.name, 3, `["c2",{"file":"g"}]`, `{"position":1}`, next())
	latest[`["c2",{"file":"g"}]`] = written{last, `{"position":1}`}
	end := last + 1

	readPartition := func() []*kgo.Record {
		recs := readPartitions(t, b.Addr(), offsets.name, map[int32]int64{3: end}, versions...)[3]
		return recs
	}
	// check reports whether recs hold only latest values, every live key,
	// and whether the tombstone is still there.
	check := func(recs []*kgo.Record) (valid, tombstone bool, desc string) {
		var sb strings.Builder
		seen := map[string]bool{}
		valid = true
		for _, r := range recs {
			v := string(r.Value)
			if r.Value == nil {
				v = "~"
			}
			fmt.Fprintf(&sb, "%d:%s=%s ", r.Offset, r.Key, v)
			if w, ok := latest[string(r.Key)]; !ok || w.offset != r.Offset || w.value != v {
				valid = false
			}
			seen[string(r.Key)] = true
		}
		for k, w := range latest {
			if !seen[k] && w.value != "~" {
				valid = false
			}
		}
		return valid, seen[tombKey], sb.String()
	}
	sawTombstone := false
	retWaitFor(t, 30*time.Second, "compaction to keep the latest value per key", func() (bool, string) {
		valid, tombstone, desc := check(readPartition())
		sawTombstone = valid && tombstone
		return valid, desc
	})
	retWaitFor(t, 30*time.Second, "the tombstone to go after delete.retention.ms", func() (bool, string) {
		valid, tombstone, desc := check(readPartition())
		return valid && !tombstone, desc
	})
	if !sawTombstone {
		t.Log("note: the tombstone was gone before the first read after compaction")
	}
	if s, e := retOffsetsPartition(t, adm, offsets.name, 3); s != 0 || e != end {
		t.Fatalf("after compaction: earliest %d latest %d, want 0 and %d", s, e, end)
	}
	// A fetch at a removed offset gets the next batch.
	if first, _ := retFirstBatch(t, retRawFetchPartition(t, b.Addr(), offsets.name, 3, 0)); first <= 0 || first > latest[`["c1",{"file":"f0"}]`].offset {
		t.Fatalf("fetch at the removed offset 0 returned a batch at %d", first)
	}

	// connect-status: the latest status of each task survives.
	// Two more writes, a second apart (segment.ms=100): the first closes
	// the segment of the ten old updates, the second closes its own.
	newest := write(status.name, 0, "status-task-c1-0", `{"state":"RUNNING","generation":99}`, time.Now().Add(time.Second))
	write(status.name, 0, "status-connector-c1", `{"state":"RUNNING"}`, time.Now().Add(2*time.Second))
	retWaitFor(t, 30*time.Second, "connect-status compaction", func() (bool, string) {
		recs := readPartitions(t, b.Addr(), status.name, map[int32]int64{0: newest + 2}, versions...)[0]
		return len(recs) == 2 && recs[0].Offset == newest && strings.Contains(string(recs[0].Value), `"generation":99`), values(recs)
	})

	// Keyless records and DeleteRecords are refused on compacted topics.
	c := dialRaw(t, b.Addr())
	if p := c.produceRaw(9, offsets.name, 0, rawBatch(-1, -1, -1, time.Now().UnixMilli(), []rawRecord{{value: []byte("x")}})); p.ErrorCode != kerr.InvalidRecord.Code {
		t.Fatalf("keyless record: %s, want INVALID_RECORD", errName(p.ErrorCode))
	}
	dr, err := adm.DeleteRecords(ctx, kadm.Offsets{offsets.name: {0: {Topic: offsets.name, Partition: 0, At: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := dr.Lookup(offsets.name, 0); r.Err != kerr.PolicyViolation {
		t.Fatalf("DeleteRecords on %s: %v, want POLICY_VIOLATION", offsets.name, r.Err)
	}
}

// connectLog is a worker's KafkaBasedLog over one single-partition topic:
// assign + seekToBeginning, readToEnd against LATEST from the admin.
type connectLog struct {
	t     *testing.T
	cl    *kgo.Client
	adm   *kadm.Client
	topic connectTopic
	pos   int64 // next offset to read
}

func newConnectLog(t *testing.T, cl *kgo.Client, adm *kadm.Client, topic connectTopic) *connectLog {
	return &connectLog{t: t, cl: cl, adm: adm, topic: topic}
}

// readToEnd polls until the position reaches the end offset listed now and
// returns the records read.
func (l *connectLog) readToEnd() []*kgo.Record {
	l.t.Helper()
	end := endOffsets(l.t, l.adm, l.topic.name)[0]
	var out []*kgo.Record
	deadline := time.Now().Add(opTimeout)
	for l.pos < end {
		if time.Now().After(deadline) {
			l.t.Fatalf("readToEnd of %s: position %d, end %d", l.topic.name, l.pos, end)
		}
		out = append(out, l.poll(0, time.Second)...)
	}
	return out
}

// poll polls for up to wait (or until it has n records) and returns them.
func (l *connectLog) poll(n int, wait time.Duration) []*kgo.Record {
	l.t.Helper()
	ctx := testCtx(l.t, wait)
	var out []*kgo.Record
	for ctx.Err() == nil && (n == 0 || len(out) < n) {
		fs := l.cl.PollFetches(ctx)
		for _, fe := range fs.Errors() {
			if ctx.Err() == nil {
				l.t.Fatalf("poll %s: %v", l.topic.name, fe.Err)
			}
		}
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, r)
			l.pos = r.Offset + 1
		})
		if n == 0 && len(out) > 0 {
			break
		}
	}
	return out
}

// retOffsetsPartition returns the earliest and latest offsets of one partition.
func retOffsetsPartition(t testing.TB, adm *kadm.Client, topic string, partition int32) (int64, int64) {
	t.Helper()
	ctx := testCtx(t, opTimeout)
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := starts.Lookup(topic, partition)
	e, _ := ends.Lookup(topic, partition)
	return s.Offset, e.Offset
}

// retRawFetchPartition is retRawFetch for any partition.
func retRawFetchPartition(t testing.TB, addr, topic string, partition int32, offset int64) kmsg.FetchResponseTopicPartition {
	t.Helper()
	c := dialRaw(t, addr)
	defer c.conn.Close()
	req := kmsg.NewPtrFetchRequest()
	req.Version = 12
	req.ReplicaID, req.MaxBytes, req.SessionEpoch = -1, 1<<20, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = partition, offset, 1<<20, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := c.roundTrip(req).(*kmsg.FetchResponse)
	return resp.Topics[0].Partitions[0]
}
