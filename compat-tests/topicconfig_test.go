package compattests

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestListOffsetsWithinBatch: ListOffsets by timestamp and by max
// timestamp look inside batches, compressed or not, whose records carry
// out-of-order timestamps; consuming from a timestamp starts there.
func TestListOffsetsWithinBatch(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	adm := newAdmin(t, b.Addr())
	topic := topicName(t, "")
	createTopic(t, adm, topic, 1, nil)
	vs := apiVersions(t, b.Addr())
	pv := pickVersion(t, vs, kmsg.Produce, 11, 3)
	lv := pickVersion(t, vs, kmsg.ListOffsets, 10, 7)
	c := dialRaw(t, b.Addr())

	t0 := time.Now().Add(-time.Hour).UnixMilli()
	batch := func(first int, deltas []int64, gz bool) []byte {
		var recs []rawRecord
		for i, d := range deltas {
			recs = append(recs, rawRecord{value: []byte(fmt.Sprintf("v%d", first+i)), tsDelta: d})
		}
		return rawBatchGzip(-1, -1, -1, t0+deltas[0], recs, gz)
	}
	// offsets 0-4: t0+0 +100 +50 +200 +150 (uncompressed)
	// offsets 5-9: t0+300 +500 +400 +700 +600 (gzip); deltas are relative to FirstTimestamp
	if p := c.produceRaw(pv, topic, 0, batch(0, []int64{0, 100, 50, 200, 150}, false)); p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("batch 1: %s at %d", errName(p.ErrorCode), p.BaseOffset)
	}
	b2 := func() []byte {
		var recs []rawRecord
		for i, ts := range []int64{300, 500, 400, 700, 600} {
			recs = append(recs, rawRecord{value: []byte(fmt.Sprintf("v%d", 5+i)), tsDelta: ts - 300})
		}
		return rawBatchGzip(-1, -1, -1, t0+300, recs, true)
	}()
	if p := c.produceRaw(pv, topic, 0, b2); p.ErrorCode != 0 || p.BaseOffset != 5 {
		t.Fatalf("batch 2: %s at %d", errName(p.ErrorCode), p.BaseOffset)
	}

	list := func(ts int64) kmsg.ListOffsetsResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version = lv
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = ts
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return c.roundTrip(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	}
	for _, cse := range []struct{ target, offset, ts int64 }{
		{0, 0, 0},
		{60, 1, 100},
		{101, 3, 200},
		{201, 5, 300},
		{450, 6, 500},
		{501, 8, 700},
		{650, 8, 700},
	} {
		p := list(t0 + cse.target)
		if p.ErrorCode != 0 || p.Offset != cse.offset || p.Timestamp != t0+cse.ts {
			t.Errorf("ListOffsets v%d at t0+%d: %s offset %d ts t0%+d; want offset %d ts t0+%d (first record at or after, inside the batch)",
				lv, cse.target, errName(p.ErrorCode), p.Offset, p.Timestamp-t0, cse.offset, cse.ts)
		}
	}
	if p := list(-3); p.ErrorCode != 0 || p.Offset != 8 || p.Timestamp != t0+700 {
		t.Errorf("ListOffsets v%d max timestamp: %s offset %d ts t0%+d; want offset 8 (the record, not its batch) ts t0+700", lv, errName(p.ErrorCode), p.Offset, p.Timestamp-t0)
	}

	cons := newClient(t, b.Addr(), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AfterMilli(t0+450)), kgo.FetchMaxWait(500*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	var got []*kgo.Record
	for len(got) < 4 && ctx.Err() == nil {
		fs := cons.PollFetches(ctx)
		got = append(got, fs.Records()...)
	}
	if values(got) != `6:"v6" 7:"v7" 8:"v8" 9:"v9"` {
		t.Errorf("consume from t0+450: %s; want offsets 6-9", values(got))
	}
}

// TestTopicConfigsApplied: topic configs that change what is stored:
// message.timestamp.type=LogAppendTime, compression.type (recompression),
// message.timestamp.after/before.max.ms, cleanup.policy=compact (keys
// required).
func TestTopicConfigsApplied(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	adm := newAdmin(t, b.Addr())
	vs := apiVersions(t, b.Addr())
	pv := pickVersion(t, vs, kmsg.Produce, 11, 3)
	c := dialRaw(t, b.Addr())
	ctx := testCtx(t, 2*opTimeout)
	s := func(v string) *string { return &v }

	t.Run("LogAppendTime", func(t *testing.T) {
		topic := topicName(t, "")
		createTopic(t, adm, topic, 1, map[string]*string{"message.timestamp.type": s("LogAppendTime")})
		old := time.Now().Add(-30 * time.Minute).UnixMilli()
		before := time.Now().UnixMilli()
		p := c.produceRaw(pv, topic, 0, rawBatch(-1, -1, -1, old, valueRecords("a", "b")))
		after := time.Now().UnixMilli()
		if p.ErrorCode != 0 {
			t.Fatalf("produce: %s", errName(p.ErrorCode))
		}
		if p.LogAppendTime == -1 || p.LogAppendTime < before-60_000 || p.LogAppendTime > after+60_000 {
			t.Errorf("Produce response LogAppendTime %d; want the broker's clock (about %d)", p.LogAppendTime, before)
		}
		rs := readPartitions(t, b.Addr(), topic, map[int32]int64{0: 2})[0]
		for _, r := range rs {
			if r.Attrs.TimestampType() != 1 {
				t.Errorf("offset %d: timestamp type %d, want 1 (LogAppendTime)", r.Offset, r.Attrs.TimestampType())
			}
			if r.Timestamp.UnixMilli() != p.LogAppendTime {
				t.Errorf("offset %d: timestamp %d, want the append time %d (not the producer's %d)", r.Offset, r.Timestamp.UnixMilli(), p.LogAppendTime, old)
			}
		}
	})

	for _, cse := range []struct {
		config string
		send   kgo.CompressionCodec
		want   uint8
	}{
		{"gzip", kgo.SnappyCompression(), 1},
		{"uncompressed", kgo.Lz4Compression(), 0},
		{"zstd", kgo.NoCompression(), 4},
	} {
		t.Run("compression.type="+cse.config, func(t *testing.T) {
			topic := topicName(t, "")
			createTopic(t, adm, topic, 1, map[string]*string{"compression.type": s(cse.config)})
			prod := newClient(t, b.Addr(), kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(cse.send))
			var rs []*kgo.Record
			for i := 0; i < 20; i++ {
				rs = append(rs, &kgo.Record{Key: []byte(fmt.Sprint(i % 3)), Value: []byte(fmt.Sprintf("value-%d-%s", i, "xxxxxxxxxxxxxxxxxxxxxxxx"))})
			}
			if err := prod.ProduceSync(ctx, rs...).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
			got := readPartitions(t, b.Addr(), topic, map[int32]int64{0: 20})[0]
			checkContiguous(t, topic, 0, got)
			for i, r := range got {
				if string(r.Value) != string(rs[i].Value) || string(r.Key) != string(rs[i].Key) {
					t.Errorf("offset %d: %q=%q, want %q=%q", r.Offset, r.Key, r.Value, rs[i].Key, rs[i].Value)
				}
				if r.Attrs.CompressionType() != cse.want {
					t.Errorf("offset %d: stored with codec %d, want %d (compression.type=%s)", r.Offset, r.Attrs.CompressionType(), cse.want, cse.config)
					break
				}
			}
		})
	}

	t.Run("timestamp-bounds", func(t *testing.T) {
		topic := topicName(t, "")
		createTopic(t, adm, topic, 1, map[string]*string{
			"message.timestamp.before.max.ms": s("3600000"),
			"message.timestamp.after.max.ms":  s("3600000"),
		})
		now := time.Now()
		if p := c.produceRaw(pv, topic, 0, rawBatch(-1, -1, -1, now.Add(2*time.Hour).UnixMilli(), valueRecords("future"))); p.ErrorCode != kerr.InvalidTimestamp.Code {
			t.Errorf("timestamp 2 h ahead with after.max.ms=1h: %s, want INVALID_TIMESTAMP", errName(p.ErrorCode))
		}
		if p := c.produceRaw(pv, topic, 0, rawBatch(-1, -1, -1, now.Add(-2*time.Hour).UnixMilli(), valueRecords("past"))); p.ErrorCode != kerr.InvalidTimestamp.Code {
			t.Errorf("timestamp 2 h old with before.max.ms=1h: %s, want INVALID_TIMESTAMP", errName(p.ErrorCode))
		}
		if p := c.produceRaw(pv, topic, 0, rawBatch(-1, -1, -1, now.UnixMilli(), valueRecords("now"))); p.ErrorCode != 0 {
			t.Errorf("timestamp now: %s, want NONE", errName(p.ErrorCode))
		}
		if e := endOffsets(t, adm, topic); e[0] != 1 {
			t.Errorf("end offset %d, want 1: only the in-bounds record may be appended", e[0])
		}
	})

	t.Run("compact-needs-keys", func(t *testing.T) {
		topic := topicName(t, "")
		createTopic(t, adm, topic, 1, map[string]*string{"cleanup.policy": s("compact")})
		keyless := rawBatch(-1, -1, -1, time.Now().UnixMilli(), []rawRecord{{value: []byte("no-key")}})
		if p := c.produceRaw(pv, topic, 0, keyless); p.ErrorCode != kerr.InvalidRecord.Code && p.ErrorCode != kerr.CorruptMessage.Code {
			t.Errorf("keyless record on a compacted topic: %s, want INVALID_RECORD", errName(p.ErrorCode))
		}
		if p := c.produceRaw(pv, topic, 0, rawBatch(-1, -1, -1, time.Now().UnixMilli(), valueRecords("keyed"))); p.ErrorCode != 0 || p.BaseOffset != 0 {
			t.Errorf("keyed record on a compacted topic: %s at %d, want NONE at 0", errName(p.ErrorCode), p.BaseOffset)
		}
	})
}
