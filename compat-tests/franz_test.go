package compattests

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFranzAdminTopics: kadm CreateTopics with partitions and a config,
// Metadata (topic IDs, partition counts, leader = node 1), DescribeConfigs,
// duplicate create, DeleteTopics.
func TestFranzAdminTopics(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	cl := newClient(t, b.Addr())
	adm := kadm.NewClient(cl)
	ctx := testCtx(t, 2*opTimeout)

	t1, t2 := topicName(t, "a"), topicName(t, "b")
	retention := "86400000"
	resps, err := adm.CreateTopics(ctx, 3, 1, map[string]*string{"retention.ms": &retention}, t1, t2)
	if err != nil {
		t.Fatalf("CreateTopics: %v", err)
	}
	ids := make(map[string]kadm.TopicID)
	for _, name := range []string{t1, t2} {
		r, ok := resps[name]
		if !ok || r.Err != nil {
			t.Fatalf("CreateTopics %s: present=%v err=%v %s", name, ok, r.Err, r.ErrMessage)
		}
		if r.NumPartitions != -1 && r.NumPartitions != 3 {
			t.Errorf("CreateTopics %s: response NumPartitions %d, want 3", name, r.NumPartitions)
		}
		if r.ID == (kadm.TopicID{}) {
			t.Errorf("CreateTopics %s: zero topic ID in response (v7+ must return it)", name)
		}
		ids[name] = r.ID
	}

	// Creating it again is TOPIC_ALREADY_EXISTS.
	again, err := adm.CreateTopics(ctx, 3, 1, nil, t1)
	if err != nil {
		t.Fatalf("CreateTopics again: %v", err)
	}
	if !errors.Is(again[t1].Err, kerr.TopicAlreadyExists) {
		t.Errorf("CreateTopics of an existing topic: err %v, want TOPIC_ALREADY_EXISTS", again[t1].Err)
	}

	// Metadata through kmsg, to see the raw fields.
	mreq := kmsg.NewPtrMetadataRequest()
	mreq.AllowAutoTopicCreation = false
	for _, name := range []string{t1, t2} {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		mreq.Topics = append(mreq.Topics, rt)
	}
	mresp, err := mreq.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("Metadata: %v", err)
	}
	if len(mresp.Brokers) != 1 || mresp.Brokers[0].NodeID != 1 {
		t.Errorf("Metadata brokers %+v; want exactly node 1", mresp.Brokers)
	} else if got := fmt.Sprintf("%s:%d", mresp.Brokers[0].Host, mresp.Brokers[0].Port); got != b.Addr() {
		t.Errorf("Metadata advertises %s; want the listener %s", got, b.Addr())
	}
	if mresp.Version >= 2 && mresp.ControllerID != 1 {
		t.Errorf("Metadata ControllerID %d; want 1", mresp.ControllerID)
	}
	if len(mresp.Topics) != 2 {
		t.Fatalf("Metadata returned %d topics; want 2", len(mresp.Topics))
	}
	for _, mt := range mresp.Topics {
		name := *mt.Topic
		if mt.ErrorCode != 0 {
			t.Errorf("Metadata %s: %s", name, errName(mt.ErrorCode))
			continue
		}
		if mresp.Version >= 10 {
			if mt.TopicID == ([16]byte{}) {
				t.Errorf("Metadata v%d %s: zero topic ID", mresp.Version, name)
			} else if ids[name] != (kadm.TopicID{}) && kadm.TopicID(mt.TopicID) != ids[name] {
				t.Errorf("Metadata %s: topic ID %x differs from CreateTopics' %x", name, mt.TopicID, ids[name])
			}
		}
		if len(mt.Partitions) != 3 {
			t.Errorf("Metadata %s: %d partitions, want 3", name, len(mt.Partitions))
		}
		var seen []int32
		for _, p := range mt.Partitions {
			seen = append(seen, p.Partition)
			if p.ErrorCode != 0 {
				t.Errorf("Metadata %s/%d: %s", name, p.Partition, errName(p.ErrorCode))
			}
			if p.Leader != 1 {
				t.Errorf("Metadata %s/%d: leader %d, want 1", name, p.Partition, p.Leader)
			}
			if !slices.Equal(p.Replicas, []int32{1}) || !slices.Equal(p.ISR, []int32{1}) {
				t.Errorf("Metadata %s/%d: replicas %v isr %v, want [1] [1]", name, p.Partition, p.Replicas, p.ISR)
			}
		}
		slices.Sort(seen)
		if !slices.Equal(seen, []int32{0, 1, 2}) {
			t.Errorf("Metadata %s: partitions %v, want [0 1 2]", name, seen)
		}
	}

	// kadm's view: ListTopics includes both.
	tds, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatalf("ListTopics: %v", err)
	}
	for _, name := range []string{t1, t2} {
		td, ok := tds[name]
		if !ok {
			t.Errorf("ListTopics: %s missing", name)
			continue
		}
		if td.Err != nil || len(td.Partitions) != 3 || td.IsInternal {
			t.Errorf("ListTopics %s: err %v partitions %d internal %v", name, td.Err, len(td.Partitions), td.IsInternal)
		}
	}

	// The config we set is reported, as a dynamic topic config.
	rcs, err := adm.DescribeTopicConfigs(ctx, t1)
	if err != nil {
		t.Fatalf("DescribeTopicConfigs: %v", err)
	}
	rc, err := rcs.On(t1, nil)
	if err != nil {
		t.Fatalf("DescribeTopicConfigs %s: %v", t1, err)
	}
	if rc.Err != nil {
		t.Fatalf("DescribeTopicConfigs %s: %v", t1, rc.Err)
	}
	found := false
	for _, c := range rc.Configs {
		if c.Key == "retention.ms" {
			found = true
			if c.Value == nil || *c.Value != retention {
				t.Errorf("retention.ms = %v, want %s", c.MaybeValue(), retention)
			}
			if c.Source != kmsg.ConfigSourceDynamicTopicConfig {
				t.Errorf("retention.ms source %v, want DYNAMIC_TOPIC_CONFIG", c.Source)
			}
		}
	}
	if !found {
		t.Errorf("DescribeTopicConfigs %s: retention.ms not reported", t1)
	}

	// Delete both; they disappear from metadata.
	dresps, err := adm.DeleteTopics(ctx, t1, t2)
	if err != nil {
		t.Fatalf("DeleteTopics: %v", err)
	}
	for _, name := range []string{t1, t2} {
		if r := dresps[name]; r.Err != nil {
			t.Errorf("DeleteTopics %s: %v", name, r.Err)
		}
	}
	waitTopicGone(t, b.Addr(), t1, t2)
	mresp, err = mreq.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("Metadata after delete: %v", err)
	}
	for _, mt := range mresp.Topics {
		if mt.ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Errorf("Metadata of deleted %s: %s, want UNKNOWN_TOPIC_OR_PARTITION", *mt.Topic, errName(mt.ErrorCode))
		}
	}
	// Deleting again is UNKNOWN_TOPIC_OR_PARTITION.
	dresps, err = adm.DeleteTopics(ctx, t1)
	if err != nil {
		t.Fatalf("DeleteTopics again: %v", err)
	}
	if !errors.Is(dresps[t1].Err, kerr.UnknownTopicOrPartition) {
		t.Errorf("DeleteTopics of a deleted topic: %v, want UNKNOWN_TOPIC_OR_PARTITION", dresps[t1].Err)
	}
}

// waitTopicGone polls Metadata (bounded) until every topic is reported
// UNKNOWN_TOPIC_OR_PARTITION. Kafka deletes asynchronously, so a short wait
// is legitimate. It asks over a raw connection because franz-go caches
// metadata answers for MetadataMinAge (5 s).
func waitTopicGone(t testing.TB, addr string, topics ...string) {
	t.Helper()
	vs := apiVersions(t, addr)
	mv := pickVersion(t, vs, kmsg.Metadata, 12, 1)
	c := dialRaw(t, addr)
	defer c.conn.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = mv
		for _, name := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(name)
			req.Topics = append(req.Topics, rt)
		}
		resp := c.roundTrip(req).(*kmsg.MetadataResponse)
		var left []string
		for _, mt := range resp.Topics {
			if mt.ErrorCode != kerr.UnknownTopicOrPartition.Code {
				left = append(left, fmt.Sprintf("%s (%s)", deref(mt.Topic), errName(mt.ErrorCode)))
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("topics %v still exist 20s after DeleteTopics", left)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

var codecs = []struct {
	name  string
	codec kgo.CompressionCodec
	attr  uint8 // batch attribute compression bits
}{
	{"none", kgo.NoCompression(), 0},
	{"gzip", kgo.GzipCompression(), 1},
	{"snappy", kgo.SnappyCompression(), 2},
	{"lz4", kgo.Lz4Compression(), 3},
	{"zstd", kgo.ZstdCompression(), 4},
}

// TestFranzProduceConsumeCodecs: keyed records with headers under every
// codec, read back with direct partition consuming: contents, per-partition
// order, contiguous offsets from 0, headers, timestamps, codec kept as sent.
func TestFranzProduceConsumeCodecs(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	adm := newAdmin(t, b.Addr())
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			topic := topicName(t, "")
			createTopic(t, adm, topic, 3, nil)
			prod := newClient(t, b.Addr(),
				kgo.ProducerBatchCompression(c.codec),
				kgo.DefaultProduceTopic(topic),
				kgo.RequiredAcks(kgo.AllISRAcks()),
			)
			ctx := testCtx(t, opTimeout)

			base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
			const n = 90
			var sent []*kgo.Record
			for i := 0; i < n; i++ {
				r := &kgo.Record{
					Key:       []byte("key-" + strconv.Itoa(i%7)),
					Value:     bytes.Repeat([]byte(fmt.Sprintf("value-%d-%s|", i, c.name)), 1+i%5),
					Timestamp: base.Add(time.Duration(i) * time.Millisecond),
					Headers: []kgo.RecordHeader{
						{Key: "idx", Value: []byte(strconv.Itoa(i))},
						{Key: "codec", Value: []byte(c.name)},
						{Key: "dup", Value: []byte("1")},
						{Key: "dup", Value: []byte("2")},
					},
				}
				switch i {
				case 5:
					r.Key = nil // unkeyed
				case 6:
					r.Value = nil // tombstone
				case 7:
					r.Headers = nil
				}
				sent = append(sent, r)
			}
			// Several ProduceSync calls so every partition gets several batches.
			for lo := 0; lo < n; lo += 30 {
				if err := prod.ProduceSync(ctx, sent[lo:lo+30]...).FirstErr(); err != nil {
					t.Fatalf("produce: %v", err)
				}
			}

			byPart := make(map[int32][]*kgo.Record)
			for _, r := range sent {
				byPart[r.Partition] = append(byPart[r.Partition], r)
			}
			ends := endOffsets(t, adm, topic)
			for p, rs := range byPart {
				slices.SortFunc(rs, func(a, b *kgo.Record) int { return int(a.Offset - b.Offset) })
				if ends[p] != int64(len(rs)) {
					t.Errorf("partition %d: end offset %d, want %d records", p, ends[p], len(rs))
				}
			}
			got := readPartitions(t, b.Addr(), topic, ends)
			codecSeen := c.attr == 0
			for p, want := range byPart {
				rs := got[p]
				checkContiguous(t, topic, p, rs)
				if len(rs) != len(want) {
					t.Fatalf("partition %d: read %d records, produced %d", p, len(rs), len(want))
				}
				lastIdx := -1
				for i, r := range rs {
					w := want[i]
					if r.Offset != w.Offset {
						t.Errorf("p%d #%d: offset %d, producer was acked %d", p, i, r.Offset, w.Offset)
					}
					if !bytes.Equal(r.Key, w.Key) || (r.Key == nil) != (w.Key == nil) {
						t.Errorf("p%d@%d: key %q, want %q", p, r.Offset, r.Key, w.Key)
					}
					if !bytes.Equal(r.Value, w.Value) || (r.Value == nil) != (w.Value == nil) {
						t.Errorf("p%d@%d: value %q (nil=%v), want %q (nil=%v)", p, r.Offset, r.Value, r.Value == nil, w.Value, w.Value == nil)
					}
					if !r.Timestamp.Equal(w.Timestamp) {
						t.Errorf("p%d@%d: timestamp %v, want %v", p, r.Offset, r.Timestamp, w.Timestamp)
					}
					if r.Attrs.TimestampType() != 0 {
						t.Errorf("p%d@%d: timestamp type %d, want 0 (CreateTime)", p, r.Offset, r.Attrs.TimestampType())
					}
					// franz-go sends a batch uncompressed when compressing does
					// not make it smaller (small batches), so a batch is stored
					// either with the codec or without one, never another codec.
					switch ct := r.Attrs.CompressionType(); {
					case ct == c.attr:
						codecSeen = true
					case ct != 0:
						t.Errorf("p%d@%d: batch compression %d, want %d (%s, stored as sent) or 0", p, r.Offset, ct, c.attr, c.name)
					}
					if len(r.Headers) != len(w.Headers) {
						t.Errorf("p%d@%d: %d headers, want %d", p, r.Offset, len(r.Headers), len(w.Headers))
					} else {
						for j := range r.Headers {
							if r.Headers[j].Key != w.Headers[j].Key || !bytes.Equal(r.Headers[j].Value, w.Headers[j].Value) {
								t.Errorf("p%d@%d: header %d = %s=%q, want %s=%q", p, r.Offset, j, r.Headers[j].Key, r.Headers[j].Value, w.Headers[j].Key, w.Headers[j].Value)
							}
						}
					}
					idx := slices.Index(sent, w)
					if idx <= lastIdx {
						t.Errorf("p%d@%d: produce order broken (record #%d after #%d)", p, r.Offset, idx, lastIdx)
					}
					lastIdx = idx
				}
			}
			if !codecSeen {
				t.Errorf("no batch was stored with %s: the broker changed the producer's codec", c.name)
			}
		})
	}
}

// produceTimestamps writes one batch per timestamp to topic partition 0 with
// values "v<i>" and returns nothing; offsets are 0..len(tss)-1.
func produceTimestamps(t testing.TB, cl *kgo.Client, topic string, tss []int64) {
	t.Helper()
	ctx := testCtx(t, opTimeout)
	for i, ts := range tss {
		r := &kgo.Record{Topic: topic, Partition: 0, Value: []byte(fmt.Sprintf("v%d", i)), Timestamp: time.UnixMilli(ts)}
		res := cl.ProduceSync(ctx, r)
		if err := res.FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
		if r.Offset != int64(i) {
			t.Fatalf("record %d acked at offset %d", i, r.Offset)
		}
	}
}

// TestFranzListOffsets: earliest, latest, by timestamp (kadm) and max
// timestamp (ListOffsets v7+, timestamp -3) on a partition whose timestamps
// are not monotonic.
func TestFranzListOffsets(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	cl := newClient(t, b.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	topic := topicName(t, "")
	empty := topicName(t, "empty")
	createTopic(t, adm, topic, 1, nil)
	createTopic(t, adm, empty, 1, nil)
	ctx := testCtx(t, 2*opTimeout)

	t0 := time.Now().Add(-time.Hour).UnixMilli()
	// offset:    0   1       2      3       4       5
	tss := []int64{t0, t0 + 100, t0 + 50, t0 + 200, t0 + 150, t0 + 150}
	produceTimestamps(t, cl, topic, tss)

	check := func(what string, l kadm.ListedOffsets, err error, wantOffset, wantTS int64, checkTS bool) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		o, ok := l.Lookup(topic, 0)
		if !ok {
			t.Fatalf("%s: partition 0 missing", what)
		}
		if o.Err != nil {
			t.Fatalf("%s: %v", what, o.Err)
		}
		if o.Offset != wantOffset {
			t.Errorf("%s: offset %d, want %d", what, o.Offset, wantOffset)
		}
		if checkTS && o.Timestamp != wantTS {
			t.Errorf("%s: timestamp %d (t0%+d), want t0%+d", what, o.Timestamp, o.Timestamp-t0, wantTS-t0)
		}
	}
	l, err := adm.ListStartOffsets(ctx, topic)
	check("ListStartOffsets", l, err, 0, 0, false)
	l, err = adm.ListEndOffsets(ctx, topic)
	check("ListEndOffsets", l, err, 6, 0, false)
	// First offset whose timestamp is >= the target.
	for _, c := range []struct {
		target, offset, ts int64
	}{
		{t0 - 1000, 0, t0},
		{t0, 0, t0},
		{t0 + 1, 1, t0 + 100},
		{t0 + 50, 1, t0 + 100},
		{t0 + 100, 1, t0 + 100},
		{t0 + 101, 3, t0 + 200},
		{t0 + 150, 3, t0 + 200},
		{t0 + 200, 3, t0 + 200},
	} {
		l, err = adm.ListOffsetsAfterMilli(ctx, c.target, topic)
		check(fmt.Sprintf("ListOffsetsAfterMilli(t0%+d)", c.target-t0), l, err, c.offset, c.ts, true)
	}

	// Past every timestamp the broker answers offset -1 (kadm would then
	// substitute the end offset), so ask with kmsg to see the raw answer.
	vs := apiVersions(t, b.Addr())
	lv := pickVersion(t, vs, kmsg.ListOffsets, 10, 7)
	raw := dialRaw(t, b.Addr())
	listRaw := func(topic string, ts int64) kmsg.ListOffsetsResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version = lv
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = 0
		rp.Timestamp = ts
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := raw.roundTrip(req).(*kmsg.ListOffsetsResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("ListOffsets v%d: malformed response %+v", lv, resp.Topics)
		}
		return resp.Topics[0].Partitions[0]
	}
	if p := listRaw(topic, t0+201); p.ErrorCode != 0 || p.Offset != -1 || p.Timestamp != -1 {
		t.Errorf("ListOffsets v%d after every timestamp: err %s offset %d ts %d; want NONE, -1, -1", lv, errName(p.ErrorCode), p.Offset, p.Timestamp)
	}
	// Max timestamp: offset 3 holds t0+200.
	if p := listRaw(topic, -3); p.ErrorCode != 0 || p.Offset != 3 || p.Timestamp != t0+200 {
		t.Errorf("ListOffsets v%d max timestamp (-3): err %s offset %d ts t0%+d; want NONE, offset 3, t0+200", lv, errName(p.ErrorCode), p.Offset, p.Timestamp-t0)
	}
	if p := listRaw(topic, -2); p.ErrorCode != 0 || p.Offset != 0 {
		t.Errorf("ListOffsets v%d earliest (-2): err %s offset %d; want NONE, 0", lv, errName(p.ErrorCode), p.Offset)
	}
	if p := listRaw(topic, -1); p.ErrorCode != 0 || p.Offset != 6 {
		t.Errorf("ListOffsets v%d latest (-1): err %s offset %d; want NONE, 6", lv, errName(p.ErrorCode), p.Offset)
	}
	// An empty partition: earliest = latest = 0, no max-timestamp record.
	if p := listRaw(empty, -2); p.ErrorCode != 0 || p.Offset != 0 {
		t.Errorf("empty partition earliest: err %s offset %d; want NONE, 0", errName(p.ErrorCode), p.Offset)
	}
	if p := listRaw(empty, -1); p.ErrorCode != 0 || p.Offset != 0 {
		t.Errorf("empty partition latest: err %s offset %d; want NONE, 0", errName(p.ErrorCode), p.Offset)
	}
	if p := listRaw(empty, -3); p.ErrorCode != 0 || p.Offset != -1 || p.Timestamp != -1 {
		t.Errorf("empty partition max timestamp: err %s offset %d ts %d; want NONE, -1, -1", errName(p.ErrorCode), p.Offset, p.Timestamp)
	}
	if p := listRaw(empty, t0); p.ErrorCode != 0 || p.Offset != -1 {
		t.Errorf("empty partition by timestamp: err %s offset %d; want NONE, -1", errName(p.ErrorCode), p.Offset)
	}
	if p := listRaw(topicName(t, "missing"), -1); p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("ListOffsets of a missing topic: %s, want UNKNOWN_TOPIC_OR_PARTITION", errName(p.ErrorCode))
	}
}

// TestFranzConsumeFromTimestamp: kgo.ConsumeResetOffset(AfterMilli(ts))
// starts exactly at the first record whose timestamp is >= ts.
func TestFranzConsumeFromTimestamp(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	cl := newClient(t, b.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	topic := topicName(t, "")
	createTopic(t, adm, topic, 1, nil)

	t0 := time.Now().Add(-time.Hour).UnixMilli()
	var tss []int64
	for i := 0; i < 20; i++ {
		tss = append(tss, t0+int64(i)*10)
	}
	produceTimestamps(t, cl, topic, tss)

	for _, c := range []struct {
		target int64
		first  int
	}{
		{t0 + 55, 6},   // between records
		{t0 + 120, 12}, // exactly on a record
		{t0 - 5, 0},    // before everything
	} {
		cons := newClient(t, b.Addr(),
			kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AfterMilli(c.target)),
			kgo.FetchMaxWait(500*time.Millisecond),
		)
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		var got []*kgo.Record
		for len(got) < len(tss)-c.first && ctx.Err() == nil {
			fs := cons.PollFetches(ctx)
			for _, fe := range fs.Errors() {
				if ctx.Err() == nil {
					t.Fatalf("consume from t0%+d: %v", c.target-t0, fe.Err)
				}
			}
			got = append(got, fs.Records()...)
		}
		cancel()
		cons.Close()
		if len(got) != len(tss)-c.first {
			t.Fatalf("consume from t0%+d: got %d records (%s), want %d", c.target-t0, len(got), values(got), len(tss)-c.first)
		}
		for i, r := range got {
			wantOff := int64(c.first + i)
			if r.Offset != wantOff || string(r.Value) != fmt.Sprintf("v%d", wantOff) || r.Timestamp.UnixMilli() != tss[wantOff] {
				t.Errorf("consume from t0%+d: record #%d offset %d value %q ts t0%+d; want offset %d", c.target-t0, i, r.Offset, r.Value, r.Timestamp.UnixMilli()-t0, wantOff)
			}
		}
	}
}

// TestFranzTailAndLargeRecords: a consumer parked at the end of a partition
// receives records produced after it started; records of ~600 KB travel
// whole even with a 64 KB per-partition fetch limit (KIP-74).
func TestFranzTailAndLargeRecords(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	adm := newAdmin(t, b.Addr())
	topic := topicName(t, "")
	createTopic(t, adm, topic, 1, nil)
	cons := newClient(t, b.Addr(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtEnd()}}),
		kgo.FetchMaxPartitionBytes(64<<10),
		kgo.FetchMaxBytes(64<<10),
	)
	ctx := testCtx(t, 2*opTimeout)
	// Let the consumer resolve the end offset and park a fetch there; an
	// early poll returning nothing is expected.
	fctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	cons.PollFetches(fctx)
	cancel()

	prod := newClient(t, b.Addr(), kgo.DefaultProduceTopic(topic), kgo.ProducerBatchMaxBytes(2<<20), kgo.MaxBufferedBytes(16<<20))
	var sent []*kgo.Record
	for i := 0; i < 6; i++ {
		v := bytes.Repeat([]byte{byte('a' + i)}, 600<<10)
		if i%2 == 1 {
			v = []byte(fmt.Sprintf("small-%d", i))
		}
		r := &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: v}
		if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %d (%d bytes): %v", i, len(v), err)
		}
		sent = append(sent, r)
	}
	var got []*kgo.Record
	for len(got) < len(sent) {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("tail consumer got %d of %d records", len(got), len(sent))
		}
		for _, fe := range fs.Errors() {
			t.Fatalf("fetch: %v", fe.Err)
		}
		got = append(got, fs.Records()...)
	}
	for i, r := range got {
		if r.Offset != int64(i) || !bytes.Equal(r.Value, sent[i].Value) {
			t.Errorf("record %d: offset %d, %d bytes; want offset %d, %d bytes", i, r.Offset, len(r.Value), i, len(sent[i].Value))
		}
	}
}
