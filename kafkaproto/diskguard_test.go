package kafkaproto

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/vibemq/broker/groups"
	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/topics"
)

// fakeDisk is an injected free-space probe.
type fakeDisk struct{ free atomic.Int64 }

func (d *fakeDisk) probe(string) (pebblestore.SpaceReading, error) {
	return pebblestore.SpaceReading{Free: d.free.Load(), Total: 100 << 30}, nil
}

// startGuardedServer is startTestServer with a consumer-group coordinator
// and a store whose free space is disk's, limit 64 MiB.
func startGuardedServer(t *testing.T, disk *fakeDisk) (*Server, string, *pebblestore.Store) {
	t.Helper()
	store, err := pebblestore.Open(t.TempDir(), pebblestore.Options{Logger: zerolog.Nop(), MemTableSize: 4 << 20, CacheSize: 8 << 20,
		FreeSpaceMin: 64 << 20, FreeSpaceProbe: disk.probe})
	if err != nil {
		t.Fatal(err)
	}
	tm, err := topics.Open(store, topics.Config{Logger: zerolog.Nop(), DefaultPartitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	gc, err := groups.Open(store, tm, groups.Config{Logger: zerolog.Nop(), OffsetsTopicPartitions: 1}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	s, addr := serveTest(t, Config{Groups: gc}, tm, func() { _ = store.Close() })
	return s, addr, store
}

// TestProduceRefusedWhileDiskLow pins the fix for a broker that crashed
// when its disk filled up (Pebble panics on a failed WAL write): while the
// free space is below disk-free-min, Produce answers KAFKA_STORAGE_ERROR
// for every partition (with a message from v8) and stores nothing; reads,
// offset commits, DeleteRecords and DeleteTopics go on; a franz-go
// producer retries and its records land once space returns.
func TestProduceRefusedWhileDiskLow(t *testing.T) {
	disk := &fakeDisk{}
	disk.free.Store(10 << 30)
	s, addr, store := startGuardedServer(t, disk)
	ctx := context.Background()
	if _, err := s.topics.CreateTopic("t", 2, nil, false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.topics.CreateTopic("scratch", 1, nil, false); err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, addr)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("before")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	setFree := func(n int64) {
		disk.free.Store(n)
		if err := store.Space().Probe(); err != nil {
			t.Fatal(err)
		}
	}
	setFree(10 << 20)

	produce := func(cl *kgo.Client) *kmsg.ProduceResponse {
		t.Helper()
		req := kmsg.NewPtrProduceRequest()
		req.Acks = -1
		req.TimeoutMillis = 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "t"
		for part := int32(0); part < 2; part++ {
			batch, err := topics.EncodeBatch(topics.BatchHeader{BaseTimestamp: time.Now().UnixMilli(), MaxTimestamp: time.Now().UnixMilli(),
				ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, []topics.Record{{Value: []byte("refused")}})
			if err != nil {
				t.Fatal(err)
			}
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition = part
			rp.Records = batch
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	ends := func() map[int32]int64 {
		out := map[int32]int64{}
		tp, _ := s.topics.Topic("t")
		for _, p := range tp.Partitions() {
			out[p.Index] = p.HighWatermark()
		}
		return out
	}
	before := ends()

	resp := produce(cl) // Produce v11
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != kerr.KafkaStorageError.Code || p.BaseOffset != -1 {
			t.Fatalf("partition %d: error %v base %d, want KAFKA_STORAGE_ERROR", p.Partition, kerr.ErrorForCode(p.ErrorCode), p.BaseOffset)
		}
		if p.ErrorMessage == nil || !strings.Contains(*p.ErrorMessage, "10.0 MiB free") || !strings.Contains(*p.ErrorMessage, "disk-free-min) is 64.0 MiB") {
			t.Fatalf("partition %d: message %v, want the free space and the limit", p.Partition, p.ErrorMessage)
		}
	}
	old := newClient(t, addr, kgo.MaxVersions(kversion.V2_3_0())) // Produce v7: no message field
	resp = produce(old)
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != kerr.KafkaStorageError.Code || p.ErrorMessage != nil {
			t.Fatalf("v7 partition %d: error %v message %v", p.Partition, kerr.ErrorForCode(p.ErrorCode), p.ErrorMessage)
		}
	}
	// Produce v3 predates KAFKA_STORAGE_ERROR (v4, KIP-112): Kafka answers
	// NOT_LEADER_OR_FOLLOWER, which such clients retry after a metadata
	// refresh, where they might fail an unknown code for good.
	v3 := newClient(t, addr, kgo.MaxVersions(kversion.V0_11_0()))
	resp = produce(v3)
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != kerr.NotLeaderForPartition.Code {
			t.Fatalf("v3 partition %d: error %v, want NOT_LEADER_OR_FOLLOWER", p.Partition, kerr.ErrorForCode(p.ErrorCode))
		}
	}
	if after := ends(); after[0] != before[0] || after[1] != before[1] {
		t.Fatalf("refused produces moved the log ends: %v -> %v", before, after)
	}

	// Reads work.
	consumer := newClient(t, addr, kgo.ConsumeTopics("t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	fetches := consumer.PollRecords(fctx, 10)
	cancel()
	if recs := fetches.Records(); len(recs) != 1 || string(recs[0].Value) != "before" {
		t.Fatalf("fetch while low: %v %v", recs, fetches.Errors())
	}
	// Offset commits (generation -1: an admin commit to an empty group) work.
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Group = "g"
	oc.Generation = -1
	oct := kmsg.NewOffsetCommitRequestTopic()
	tp, _ := s.topics.Topic("t")
	oct.Topic, oct.TopicID = "t", tp.ID // v10 names topics by ID
	ocp := kmsg.NewOffsetCommitRequestTopicPartition()
	ocp.Partition = 0
	ocp.Offset = 1
	oct.Partitions = append(oct.Partitions, ocp)
	oc.Topics = append(oc.Topics, oct)
	ocResp, err := oc.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if code := ocResp.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("offset commit while low: %v", kerr.ErrorForCode(code))
	}
	// DeleteRecords and DeleteTopics work.
	dr := kmsg.NewPtrDeleteRecordsRequest()
	drt := kmsg.NewDeleteRecordsRequestTopic()
	drt.Topic = "t"
	for part := int32(0); part < 2; part++ {
		drp := kmsg.NewDeleteRecordsRequestTopicPartition()
		drp.Partition = part
		drp.Offset = -1 // the high watermark
		drt.Partitions = append(drt.Partitions, drp)
	}
	dr.Topics = append(dr.Topics, drt)
	drResp, err := dr.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range drResp.Topics[0].Partitions {
		if p.ErrorCode != 0 || p.LowWatermark != before[p.Partition] {
			t.Fatalf("DeleteRecords while low, partition %d: %v low %d", p.Partition, kerr.ErrorForCode(p.ErrorCode), p.LowWatermark)
		}
	}
	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.TopicNames = []string{"scratch"}
	dtt := kmsg.NewDeleteTopicsRequestTopic()
	dtt.Topic = kmsg.StringPtr("scratch")
	dt.Topics = append(dt.Topics, dtt)
	dtResp, err := dt.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if code := dtResp.Topics[0].ErrorCode; code != 0 {
		t.Fatalf("DeleteTopics while low: %v", kerr.ErrorForCode(code))
	}

	// A franz-go producer retries KAFKA_STORAGE_ERROR; its record lands
	// once space is back.
	done := make(chan error, 1)
	go func() {
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		done <- cl.ProduceSync(pctx, &kgo.Record{Topic: "t", Value: []byte("after")}).FirstErr()
	}()
	select {
	case err := <-done:
		t.Fatalf("produce finished while the disk is low: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	setFree(10 << 30)
	if err := <-done; err != nil {
		t.Fatalf("produce after space returned: %v", err)
	}
	after := ends()
	if after[0]+after[1] != before[0]+before[1]+1 {
		t.Fatalf("log ends %v -> %v, want one record more", before, after)
	}
}
