package compattests

// Retention, compaction, DeleteRecords and topic configs, observed through
// real clients. Time is never waited for: records carry explicit (old)
// timestamps, segments close by those timestamps (segment.ms), and the
// broker's loops run every few tens of milliseconds
// (--log-retention-check-interval, --log-cleaner-backoff). Only the
// tombstone horizon (delete.retention.ms=500) takes wall time.

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fastCleanupArgs make the broker check retention and compaction often.
var fastCleanupArgs = withArgs("--log-retention-check-interval", "50ms", "--log-cleaner-backoff", "50ms")

func strp(s string) *string { return &s }

// retProduce sends records (key=value pairs; value "~" is a tombstone) as
// one batch to partition 0 with timestamp ts and returns the first offset.
func retProduce(t testing.TB, cl *kgo.Client, topic string, ts time.Time, kv ...string) int64 {
	t.Helper()
	var rs []*kgo.Record
	for i := 0; i+1 < len(kv); i += 2 {
		r := &kgo.Record{Topic: topic, Partition: 0, Key: []byte(kv[i]), Value: []byte(kv[i+1]), Timestamp: ts}
		if kv[i+1] == "~" {
			r.Value = nil
		}
		rs = append(rs, r)
	}
	res := cl.ProduceSync(testCtx(t, opTimeout), rs...)
	if err := res.FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
	return res[0].Record.Offset
}

// retProducer sends every ProduceSync call as one batch to the record's
// partition, as a Connect worker's producer does.
func retProducer(t testing.TB, addr string, opts ...kgo.Opt) *kgo.Client {
	return newClient(t, addr, append([]kgo.Opt{
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.DisableIdempotentWrite(),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.MaxProduceRequestsInflightPerBroker(1),
		kgo.ProducerBatchCompression(kgo.NoCompression()), // Connect's default
	}, opts...)...)
}

// retOffsets returns the earliest and latest offsets of partition 0.
func retOffsets(t testing.TB, adm *kadm.Client, topic string) (int64, int64) {
	t.Helper()
	ctx := testCtx(t, opTimeout)
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("ListStartOffsets %s: %v", topic, err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("ListEndOffsets %s: %v", topic, err)
	}
	s, _ := starts.Lookup(topic, 0)
	e, _ := ends.Lookup(topic, 0)
	if s.Err != nil || e.Err != nil {
		t.Fatalf("list offsets %s: %v %v", topic, s.Err, e.Err)
	}
	return s.Offset, e.Offset
}

// retWaitFor polls cond until it holds or timeout passes.
func retWaitFor(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s; last state: %s", timeout, what, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// retRawFetch fetches partition 0 of topic at offset (Fetch v12, by name)
// and returns the partition response.
func retRawFetch(t testing.TB, addr, topic string, offset int64) kmsg.FetchResponseTopicPartition {
	t.Helper()
	c := dialRaw(t, addr)
	defer c.conn.Close()
	req := kmsg.NewPtrFetchRequest()
	req.Version = 12
	req.ReplicaID = -1
	req.MaxBytes, req.MinBytes, req.MaxWaitMillis = 1<<20, 0, 0
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = offset, 1<<20, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := c.roundTrip(req).(*kmsg.FetchResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch %s@%d: unexpected response shape %+v", topic, offset, resp)
	}
	return resp.Topics[0].Partitions[0]
}

// retFirstBatch returns the first and last offset of the first batch in a
// fetch response, or (-1, -1) when it holds none.
func retFirstBatch(t testing.TB, p kmsg.FetchResponseTopicPartition) (int64, int64) {
	t.Helper()
	if len(p.RecordBatches) == 0 {
		return -1, -1
	}
	var b kmsg.RecordBatch
	if err := b.ReadFrom(p.RecordBatches); err != nil {
		t.Fatalf("decode fetched batch: %v", err)
	}
	return b.FirstOffset, b.FirstOffset + int64(b.LastOffsetDelta)
}

// retConsumeFrom consumes partition 0 from offset with the reset policy
// "earliest" (as Connect and Streams) until it has seen the record before
// end, and returns the records.
func retConsumeFrom(t testing.TB, addr, topic string, offset, end int64) []*kgo.Record {
	t.Helper()
	cl := newClient(t, addr,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(offset)}}),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond))
	defer cl.Close()
	ctx := testCtx(t, opTimeout)
	var out []*kgo.Record
	for len(out) == 0 || out[len(out)-1].Offset < end-1 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consuming %s from %d: timed out with %d records", topic, offset, len(out))
		}
		for _, fe := range fs.Errors() {
			t.Fatalf("consuming %s: %v", topic, fe.Err)
		}
		fs.EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	return out
}

// TestRetentionByTime: segments whose newest timestamp is older than
// retention.ms are deleted, oldest first, the active one too once it is all
// expired; ListOffsets EARLIEST follows; a fetch below it gets
// OFFSET_OUT_OF_RANGE and a consumer with auto.offset.reset=earliest
// resumes at the new start; the partition metrics report the start.
func TestRetentionByTime(t *testing.T) {
	t.Parallel()
	b := startBroker(t, fastCleanupArgs)
	adm := newAdmin(t, b.Addr())
	topic := topicName(t, "")
	createTopic(t, adm, topic, 1, map[string]*string{"retention.ms": strp("600000"), "segment.ms": strp("1000")})
	cl := retProducer(t, b.Addr())
	now := time.Now()
	for i := 0; i < 3; i++ { // three old segments, offsets 0-5
		retProduce(t, cl, topic, now.Add(-time.Hour+time.Duration(i)*2*time.Second), "k", fmt.Sprint("old", i), "k2", "x")
	}
	for i := 0; i < 2; i++ { // two recent ones, offsets 6-7
		retProduce(t, cl, topic, now.Add(-10*time.Second+time.Duration(i)*2*time.Second), "k", fmt.Sprint("new", i))
	}
	retWaitFor(t, 30*time.Second, "retention to delete the old segments", func() (bool, string) {
		s, e := retOffsets(t, adm, topic)
		return s == 6 && e == 8, fmt.Sprintf("earliest %d latest %d", s, e)
	})
	if p := retRawFetch(t, b.Addr(), topic, 5); p.ErrorCode != kerr.OffsetOutOfRange.Code || p.LogStartOffset != -1 && p.LogStartOffset != 6 {
		t.Fatalf("fetch below the start: %s (log start %d), want OFFSET_OUT_OF_RANGE", errName(p.ErrorCode), p.LogStartOffset)
	}
	if p := retRawFetch(t, b.Addr(), topic, 6); p.ErrorCode != 0 || p.LogStartOffset != 6 || p.HighWatermark != 8 {
		t.Fatalf("fetch at the start: %s log start %d hwm %d", errName(p.ErrorCode), p.LogStartOffset, p.HighWatermark)
	}
	rs := retConsumeFrom(t, b.Addr(), topic, 0, 8)
	if rs[0].Offset != 6 || string(rs[0].Value) != "new0" || len(rs) != 2 {
		t.Fatalf("consumer reset from 0: %s", values(rs))
	}

	resp, err := http.Get("http://" + b.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := fmt.Sprintf(`broker_partition_log_start_offset{partition="0",topic=%q} 6`, topic)
	// The counter exists at 0 from the start: the deleted segment's bytes
	// must have been added.
	reclaimed := regexp.MustCompile(`(?m)^broker_log_reclaimed_bytes_total\{reason="retention"\} ([0-9.e+]+)$`).FindStringSubmatch(string(body))
	if !strings.Contains(string(body), want) || reclaimed == nil || reclaimed[1] == "0" {
		t.Errorf("/metrics lacks %s or reclaimed bytes by retention (%v)", want, reclaimed)
	}

	// A partition whose records all expired empties at its end offset; the
	// next record continues there.
	all := topicName(t, "all")
	createTopic(t, adm, all, 1, map[string]*string{"retention.ms": strp("60000")})
	retProduce(t, cl, all, now.Add(-time.Hour), "a", "1", "b", "2", "c", "3")
	retWaitFor(t, 30*time.Second, "the expired active segment to go", func() (bool, string) {
		s, e := retOffsets(t, adm, all)
		return s == 3 && e == 3, fmt.Sprintf("earliest %d latest %d", s, e)
	})
	if off := retProduce(t, cl, all, now, "d", "4"); off != 3 {
		t.Fatalf("append after the log emptied landed at %d, want 3", off)
	}
	b.Restart()
	if s, e := retOffsets(t, newAdmin(t, b.Addr()), all); s != 3 || e != 4 {
		t.Fatalf("after restart: earliest %d latest %d, want 3 and 4", s, e)
	}
}

// TestRetentionBySize: the oldest segments go while the rest still holds
// retention.bytes; the consumer resets to the new start.
func TestRetentionBySize(t *testing.T) {
	t.Parallel()
	b := startBroker(t, fastCleanupArgs)
	adm := newAdmin(t, b.Addr())
	topic := topicName(t, "")
	// Six one-record batches of about 1075 bytes, one segment each: keeping
	// at least 2500 bytes keeps the newest three.
	createTopic(t, adm, topic, 1, map[string]*string{"retention.bytes": strp("2500"), "segment.ms": strp("1000")})
	cl := retProducer(t, b.Addr())
	start := time.Now().Add(-time.Minute)
	for i := 0; i < 6; i++ {
		retProduce(t, cl, topic, start.Add(time.Duration(i)*2*time.Second), fmt.Sprint("k", i), strings.Repeat(fmt.Sprint(i), 1000))
	}
	retWaitFor(t, 30*time.Second, "size retention", func() (bool, string) {
		s, e := retOffsets(t, adm, topic)
		return s == 3 && e == 6, fmt.Sprintf("earliest %d latest %d", s, e)
	})
	rs := retConsumeFrom(t, b.Addr(), topic, 1, 6)
	if len(rs) != 3 || rs[0].Offset != 3 {
		t.Fatalf("consumer reset from 1: offsets %s", values(rs))
	}
}

// TestCompactDelete: under cleanup.policy=compact,delete retention deletes
// the expired segments (the start moves to a segment boundary) while
// compaction keeps the latest value of every key in the rest without
// renumbering offsets; a tombstone stays readable until delete.retention.ms
// after the pass that first kept it; a fetch inside a removed range gets
// the next batch; keyless records are refused.
func TestCompactDelete(t *testing.T) {
	t.Parallel()
	b := startBroker(t, fastCleanupArgs)
	adm := newAdmin(t, b.Addr())
	topic := topicName(t, "")
	createTopic(t, adm, topic, 1, map[string]*string{
		"cleanup.policy": strp("compact,delete"), "retention.ms": strp("600000"), "segment.ms": strp("1000"),
		"min.cleanable.dirty.ratio": strp("0.01"), "delete.retention.ms": strp("500"),
	})
	cl := retProducer(t, b.Addr())
	now := time.Now()
	retProduce(t, cl, topic, now.Add(-time.Hour), "k1", "old1", "k2", "old2") // 0-1: expires
	base := now.Add(-time.Minute)
	for i, kv := range [][2]string{{"k1", "v1"}, {"k2", "v2"}, {"k1", "v3"}, {"k3", "v4"}, {"k2", "~"}, {"k1", "v5"}, {"k4", "v6"}} {
		retProduce(t, cl, topic, base.Add(time.Duration(i)*2*time.Second), kv[0], kv[1]) // offsets 2-8, 8 in the active segment
	}
	type rec struct {
		key   string
		value string
	}
	read := func() map[int64]rec {
		s, e := retOffsets(t, adm, topic)
		out := map[int64]rec{}
		for _, r := range retConsumeFrom(t, b.Addr(), topic, s, e) {
			v := string(r.Value)
			if r.Value == nil {
				v = "~"
			}
			out[r.Offset] = rec{string(r.Key), v}
		}
		return out
	}
	describe := func(m map[int64]rec) string {
		var offs []int64
		for o := range m {
			offs = append(offs, o)
		}
		sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
		var sb strings.Builder
		for _, o := range offs {
			fmt.Fprintf(&sb, "%d:%s=%s ", o, m[o].key, m[o].value)
		}
		return sb.String()
	}
	cleaned := map[int64]rec{5: {"k3", "v4"}, 6: {"k2", "~"}, 7: {"k1", "v5"}, 8: {"k4", "v6"}}
	final := map[int64]rec{5: {"k3", "v4"}, 7: {"k1", "v5"}, 8: {"k4", "v6"}}
	sawTombstone := false
	retWaitFor(t, 30*time.Second, "retention and compaction", func() (bool, string) {
		got := describe(read())
		if got == describe(cleaned) {
			sawTombstone = true
		}
		return got == describe(final), got
	})
	if !sawTombstone {
		t.Log("note: the tombstone was removed before this test read it (delete.retention.ms=500)")
	}
	if s, e := retOffsets(t, adm, topic); s != 2 || e != 9 {
		t.Fatalf("earliest %d latest %d, want 2 (retention's segment boundary; compaction does not move it) and 9", s, e)
	}
	if first, last := retFirstBatch(t, retRawFetch(t, b.Addr(), topic, 3)); first != 5 || last != 5 {
		t.Fatalf("fetch at a removed offset returned batch %d-%d, want the next batch 5-5", first, last)
	}
	c := dialRaw(t, b.Addr())
	if p := c.produceRaw(9, topic, 0, rawBatch(-1, -1, -1, time.Now().UnixMilli(), []rawRecord{{value: []byte("no key")}})); p.ErrorCode != kerr.InvalidRecord.Code {
		t.Fatalf("keyless record on a compacted topic: %s, want INVALID_RECORD", errName(p.ErrorCode))
	}
}

// TestDeleteRecordsEdgeCases: DeleteRecords moves the log start (inside a
// batch too), -1 means the high watermark, beyond it or another negative
// offset is OFFSET_OUT_OF_RANGE, a lower offset changes nothing, compacted
// topics get POLICY_VIOLATION, unknown partitions
// UNKNOWN_TOPIC_OR_PARTITION, and the start survives a restart.
func TestDeleteRecordsEdgeCases(t *testing.T) {
	t.Parallel()
	b := startBroker(t, fastCleanupArgs)
	adm := newAdmin(t, b.Addr())
	topic := topicName(t, "")
	table := topicName(t, "table")
	createTopic(t, adm, topic, 1, nil)
	createTopic(t, adm, table, 1, map[string]*string{"cleanup.policy": strp("compact")})
	cl := retProducer(t, b.Addr())
	for i := 0; i < 3; i++ {
		retProduce(t, cl, topic, time.Now(), "a", "1", "b", "2", "c", "3") // batches 0-2, 3-5, 6-8
	}
	retProduce(t, cl, table, time.Now(), "a", "1")

	c := dialRaw(t, b.Addr())
	del := func(topic string, partition int32, offset int64) kmsg.DeleteRecordsResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrDeleteRecordsRequest()
		req.Version = 2
		req.TimeoutMillis = 30000
		rt := kmsg.NewDeleteRecordsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewDeleteRecordsRequestTopicPartition()
		rp.Partition, rp.Offset = partition, offset
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return c.roundTrip(req).(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0]
	}
	if r := del(topic, 0, 4); r.ErrorCode != 0 || r.LowWatermark != 4 {
		t.Fatalf("delete before 4: %s low %d", errName(r.ErrorCode), r.LowWatermark)
	}
	if s, _ := retOffsets(t, adm, topic); s != 4 {
		t.Fatalf("earliest %d after delete before 4", s)
	}
	if p := retRawFetch(t, b.Addr(), topic, 3); p.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("fetch at 3: %s, want OFFSET_OUT_OF_RANGE", errName(p.ErrorCode))
	}
	if first, last := retFirstBatch(t, retRawFetch(t, b.Addr(), topic, 4)); first != 3 || last != 5 {
		t.Fatalf("fetch at 4 returned batch %d-%d, want the batch 3-5 that holds it", first, last)
	}
	if rs := retConsumeFrom(t, b.Addr(), topic, 4, 9); rs[0].Offset != 4 || len(rs) != 5 {
		t.Fatalf("consume from 4: %s", values(rs))
	}
	for _, cs := range []struct {
		name      string
		topic     string
		partition int32
		offset    int64
		code      int16
		low       int64
	}{
		{"below the start", topic, 0, 2, 0, 4},
		{"beyond the high watermark", topic, 0, 10, kerr.OffsetOutOfRange.Code, -1},
		{"negative", topic, 0, -2, kerr.OffsetOutOfRange.Code, -1},
		{"unknown partition", topic, 3, 0, kerr.UnknownTopicOrPartition.Code, -1},
		{"compacted topic", table, 0, 1, kerr.PolicyViolation.Code, -1},
		{"high watermark", topic, 0, -1, 0, 9},
	} {
		if r := del(cs.topic, cs.partition, cs.offset); r.ErrorCode != cs.code || r.LowWatermark != cs.low {
			t.Errorf("%s: %s low %d, want %s low %d", cs.name, errName(r.ErrorCode), r.LowWatermark, errName(cs.code), cs.low)
		}
	}
	if s, e := retOffsets(t, adm, topic); s != 9 || e != 9 {
		t.Fatalf("after delete to the high watermark: earliest %d latest %d", s, e)
	}
	if p := retRawFetch(t, b.Addr(), topic, 9); p.ErrorCode != 0 || len(p.RecordBatches) != 0 {
		t.Fatalf("fetch at the end: %s with %d bytes", errName(p.ErrorCode), len(p.RecordBatches))
	}
	// kadm's DeleteRecords, and the start after a restart.
	b.Restart()
	adm = newAdmin(t, b.Addr())
	if s, e := retOffsets(t, adm, topic); s != 9 || e != 9 {
		t.Fatalf("after restart: earliest %d latest %d", s, e)
	}
	cl = retProducer(t, b.Addr())
	if off := retProduce(t, cl, topic, time.Now(), "d", "4", "e", "5"); off != 9 {
		t.Fatalf("append after restart at %d, want 9", off)
	}
	resps, err := adm.DeleteRecords(testCtx(t, opTimeout), kadm.Offsets{topic: {0: {Topic: topic, Partition: 0, At: 10}}})
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := resps.Lookup(topic, 0); r.Err != nil || r.LowWatermark != 10 {
		t.Fatalf("kadm DeleteRecords: %v low %d", r.Err, r.LowWatermark)
	}
}

// TestTopicConfigRoundTrip: configs set through kadm (CreateTopics,
// IncrementalAlterConfigs SET/DELETE/APPEND, legacy AlterConfigs) and
// sarama's ClusterAdmin (AlterConfig, IncrementalAlterConfig,
// CreatePartitions, DeleteRecords) read back through both clients'
// DescribeConfigs, with their sources (and synonyms and documentation), and survive a restart; bad values
// and unknown names get INVALID_CONFIG with a message.
func TestTopicConfigRoundTrip(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	adm := newAdmin(t, b.Addr())
	ctx := testCtx(t, opTimeout)
	topic := topicName(t, "")
	createTopic(t, adm, topic, 1, map[string]*string{"cleanup.policy": strp("compact"), "min.compaction.lag.ms": strp("1000")})

	configs := func(adm *kadm.Client) map[string]kadm.Config {
		t.Helper()
		rcs, err := adm.DescribeTopicConfigs(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		rc, err := rcs.On(topic, nil)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]kadm.Config{}
		for _, c := range rc.Configs {
			out[c.Key] = c
		}
		return out
	}
	expect := func(got map[string]kadm.Config, key, value string, source kmsg.ConfigSource) {
		t.Helper()
		if c, ok := got[key]; !ok || c.MaybeValue() != value || c.Source != source {
			t.Errorf("%s = %q (%v), want %q (%v)", key, c.MaybeValue(), c.Source, value, source)
		}
	}
	alter := func(ops ...kadm.AlterConfig) error {
		t.Helper()
		resps, err := adm.AlterTopicConfigs(ctx, ops, topic)
		if err != nil {
			t.Fatal(err)
		}
		r, _ := resps.On(topic, nil)
		if r.Err != nil {
			return fmt.Errorf("%w: %s", r.Err, r.ErrMessage)
		}
		return nil
	}
	if err := alter(kadm.AlterConfig{Op: kadm.SetConfig, Name: "retention.ms", Value: strp("1234")},
		kadm.AlterConfig{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: strp("delete")},
		kadm.AlterConfig{Op: kadm.DeleteConfig, Name: "min.compaction.lag.ms"}); err != nil {
		t.Fatalf("incremental alter: %v", err)
	}
	got := configs(adm)
	expect(got, "retention.ms", "1234", kmsg.ConfigSourceDynamicTopicConfig)
	expect(got, "cleanup.policy", "compact,delete", kmsg.ConfigSourceDynamicTopicConfig)
	expect(got, "min.compaction.lag.ms", "0", kmsg.ConfigSourceDefaultConfig)
	expect(got, "segment.ms", "604800000", kmsg.ConfigSourceDefaultConfig)
	for _, bad := range []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "segment.bytes", Value: strp("5")},
		{Op: kadm.SetConfig, Name: "min.cleanable.dirty.ratio", Value: strp("1.5")},
		{Op: kadm.SetConfig, Name: "cleanup.policy", Value: strp("forever")},
		{Op: kadm.SetConfig, Name: "no.such.config", Value: strp("1")},
		{Op: kadm.AppendConfig, Name: "retention.ms", Value: strp("1")},
	} {
		if err := alter(bad); !errors.Is(err, kerr.InvalidConfig) || !strings.Contains(err.Error(), bad.Name) {
			t.Errorf("%v %s=%s: %v, want INVALID_CONFIG naming the config", bad.Op, bad.Name, *bad.Value, err)
		}
	}
	// Legacy AlterConfigs replaces the whole set.
	resps, err := adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "max.message.bytes", Value: strp("2048")}}, topic)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := resps.On(topic, nil); r.Err != nil {
		t.Fatalf("legacy alter: %v %s", r.Err, r.ErrMessage)
	}
	got = configs(adm)
	expect(got, "max.message.bytes", "2048", kmsg.ConfigSourceDynamicTopicConfig)
	expect(got, "cleanup.policy", "delete", kmsg.ConfigSourceDefaultConfig)
	expect(got, "retention.ms", "604800000", kmsg.ConfigSourceDefaultConfig)

	// sarama's ClusterAdmin.
	ca, err := sarama.NewClusterAdmin([]string{b.Addr()}, saramaConfig(sarama.V3_6_0_0))
	if err != nil {
		t.Fatalf("NewClusterAdmin: %v", err)
	}
	defer ca.Close()
	if err := ca.IncrementalAlterConfig(sarama.TopicResource, topic, map[string]sarama.IncrementalAlterConfigsEntry{
		"segment.ms":     {Operation: sarama.IncrementalAlterConfigsOperationSet, Value: strp("100")},
		"cleanup.policy": {Operation: sarama.IncrementalAlterConfigsOperationAppend, Value: strp("compact")},
	}, false); err != nil {
		t.Fatalf("sarama IncrementalAlterConfig: %v", err)
	}
	results, err := ca.DescribeConfigs([]*sarama.ConfigResource{{Type: sarama.TopicResource, Name: topic}},
		sarama.DescribeConfigsOptions{IncludeSynonyms: true, IncludeDocumentation: true})
	if err != nil || len(results) != 1 || results[0].ErrorCode != 0 {
		t.Fatalf("sarama DescribeConfigs: %v %+v", err, results)
	}
	seen := map[string]sarama.ConfigEntry{}
	for _, e := range results[0].Configs {
		seen[e.Name] = e
	}
	// One synonym, the topic's own: log.roll.ms has no default of its own
	// in Kafka (it defers to log.roll.hours), so no DEFAULT_CONFIG synonym.
	if e := seen["segment.ms"]; e.Value != "100" || len(e.Synonyms) != 1 || e.Documentation == nil || *e.Documentation == "" {
		t.Errorf("sarama sees segment.ms %q with %d synonyms, documentation %v", e.Value, len(e.Synonyms), e.Documentation)
	}
	if e := seen["cleanup.policy"]; e.Value != "delete,compact" || e.Source != sarama.SourceTopic {
		t.Errorf("sarama sees cleanup.policy %q source %v", e.Value, e.Source)
	}
	if e := seen["max.message.bytes"]; e.Value != "2048" {
		t.Errorf("sarama sees max.message.bytes %q", e.Value)
	}
	if err := ca.AlterConfig(sarama.TopicResource, topic, map[string]*string{"cleanup.policy": strp("compact"), "retention.ms": strp("5000")}, false); err != nil {
		t.Fatalf("sarama AlterConfig: %v", err)
	}
	if err := ca.AlterConfig(sarama.TopicResource, topic, map[string]*string{"retention.ms": strp("-5")}, false); err == nil || !strings.Contains(err.Error(), "retention.ms") {
		t.Errorf("sarama AlterConfig retention.ms=-5: %v, want an invalid config error", err)
	}
	if err := ca.CreatePartitions(topic, 3, nil, false); err != nil {
		t.Fatalf("sarama CreatePartitions: %v", err)
	}
	if err := ca.CreatePartitions(topic, 2, nil, false); err == nil {
		t.Error("sarama CreatePartitions to fewer partitions succeeded")
	}
	logs := topicName(t, "logs")
	createTopic(t, adm, logs, 1, nil)
	retProduce(t, retProducer(t, b.Addr()), logs, time.Now(), "a", "1", "b", "2", "c", "3")
	if err := ca.DeleteRecords(logs, map[int32]int64{0: 2}); err != nil {
		t.Fatalf("sarama DeleteRecords: %v", err)
	}
	if err := ca.DeleteRecords(topic, map[int32]int64{0: 0}); err == nil {
		t.Error("sarama DeleteRecords on a compacted topic succeeded")
	}

	b.Restart()
	adm2 := newAdmin(t, b.Addr())
	got = configs(adm2)
	expect(got, "cleanup.policy", "compact", kmsg.ConfigSourceDynamicTopicConfig)
	expect(got, "retention.ms", "5000", kmsg.ConfigSourceDynamicTopicConfig)
	expect(got, "max.message.bytes", "1048588", kmsg.ConfigSourceDefaultConfig)
	details, err := adm2.ListTopics(ctx, topic)
	if err != nil || len(details[topic].Partitions) != 3 {
		t.Fatalf("after restart: %v, %d partitions, want 3", err, len(details[topic].Partitions))
	}
	if s, _ := retOffsets(t, adm2, logs); s != 2 {
		t.Fatalf("after restart the log start of %s is %d, want 2", logs, s)
	}
}
