package kafkaproto

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/topics"
)

// BenchmarkProduce sends Produce v9 requests (acks=-1, one batch of 1 KiB
// records per partition, no compression, plain producer) over one loopback
// TCP connection to an in-process server on a real store in a temp dir,
// one request at a time, and reads each response: frame read, decode,
// handler, append, fsync wait (unless nosync), response encode and write.
// The client side is a pre-encoded frame written with one Write and a
// response read into a reused buffer, so its allocations are close to
// none: B/op and allocs/op are the server's. MB/s counts batch bytes.
//
//	go test ./kafkaproto -run '^$' -bench BenchmarkProduce -benchmem -count 3
func BenchmarkProduce(b *testing.B) {
	for _, sync := range []string{"sync", "nosync"} {
		for _, records := range []int{16, 1000} {
			for _, partitions := range []int32{1, 8} {
				size := "16KiB"
				if records >= 1000 {
					size = "1MiB"
				}
				b.Run(fmt.Sprintf("%s/batch=%s/partitions=%d", sync, size, partitions), func(b *testing.B) {
					benchProduce(b, sync == "nosync", records, partitions)
				})
			}
		}
	}
}

// BenchmarkProduceACL is BenchmarkProduce's unsynced 16 KiB case with the
// authorizer on: 300 bindings, the client (User:ANONYMOUS) allowed WRITE on
// the topic, so every partition of every request is checked. Compare with
// BenchmarkProduce/nosync/batch=16KiB for the cost of the checks.
func BenchmarkProduceACL(b *testing.B) {
	for _, partitions := range []int32{1, 8} {
		b.Run(fmt.Sprintf("nosync/batch=16KiB/partitions=%d", partitions), func(b *testing.B) {
			benchProduceAuthz(b, true, 16, partitions, true)
		})
	}
}

func benchProduce(b *testing.B, noSync bool, records int, partitions int32) {
	benchProduceAuthz(b, noSync, records, partitions, false)
}

func benchProduceAuthz(b *testing.B, noSync bool, records int, partitions int32, authz bool) {
	addr := startBenchServer(b, noSync, "bench", partitions, authz)
	frame, batchLen := benchProduceFrame(b, records, partitions)
	c := dialBench(b, addr)
	// The first response is decoded and checked; the others have the same
	// shape (a server answering errors would also show as a jump in MB/s).
	body := c.roundTrip(frame)
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = 9
	if err := resp.ReadFrom(body[5:]); err != nil { // correlation ID, empty tagged fields
		b.Fatal(err)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				b.Fatalf("partition %d: %v", p.Partition, err)
			}
		}
	}
	b.SetBytes(int64(batchLen) * int64(partitions))
	for b.Loop() {
		c.roundTrip(frame)
	}
}

// startBenchServer is startTestServerConfig for benchmarks: broker
// defaults for the store (64 MiB memtables), synced unless noSync, and a
// topic of the given partitions. It returns the Kafka address.
func startBenchServer(tb testing.TB, noSync bool, topic string, partitions int32, authz bool) string {
	tb.Helper()
	store, err := pebblestore.Open(tb.TempDir(), pebblestore.Options{Logger: zerolog.Nop(), NoSync: noSync})
	if err != nil {
		tb.Fatal(err)
	}
	tm, err := topics.Open(store, topics.Config{Logger: zerolog.Nop(), DefaultPartitions: 1})
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := tm.CreateTopic(topic, partitions, nil, false); err != nil {
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	cfg := Config{Logger: zerolog.Nop(), NodeID: 1, AdvertisedAddr: ln.Addr().String()}
	if authz {
		a, err := auth.OpenAuthorizer(store, auth.AuthorizerConfig{})
		if err != nil {
			tb.Fatal(err)
		}
		bs := []auth.Binding{{ResourceType: auth.ResourceTopic, ResourceName: topic, PatternType: auth.PatternLiteral,
			Principal: auth.Anonymous, Host: "*", Operation: auth.OpWrite, Permission: auth.PermissionAllow}}
		for i := range 100 {
			for _, rt := range []auth.ResourceType{auth.ResourceTopic, auth.ResourceGroup} {
				bs = append(bs, auth.Binding{ResourceType: rt, ResourceName: fmt.Sprintf("app-%d", i), PatternType: auth.PatternLiteral,
					Principal: fmt.Sprintf("User:u%d", i), Host: "*", Operation: auth.OpRead, Permission: auth.PermissionAllow})
			}
			bs = append(bs, auth.Binding{ResourceType: auth.ResourceTopic, ResourceName: fmt.Sprintf("b%d-", i), PatternType: auth.PatternPrefixed,
				Principal: "User:*", Host: "*", Operation: auth.OpDescribe, Permission: auth.PermissionAllow})
		}
		if _, err := a.Create(bs); err != nil {
			tb.Fatal(err)
		}
		cfg.Authorizer = a
	}
	s, err := NewServer(cfg, tm)
	if err != nil {
		tb.Fatal(err)
	}
	go func() { _ = s.Serve(ln) }()
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
		_ = store.Close()
	})
	return ln.Addr().String()
}

// benchProduceFrame is the frame of a Produce v9 request (acks=-1) of one
// batch of records 1 KiB records to each of partitions partitions of
// topic "bench", and the batch's length.
func benchProduceFrame(b *testing.B, records int, partitions int32) ([]byte, int) {
	now := time.Now().UnixMilli()
	value := make([]byte, 1024)
	recs := make([]topics.Record, records)
	for i := range recs {
		recs[i] = topics.Record{OffsetDelta: int32(i), Value: value}
	}
	batch, err := topics.EncodeBatch(topics.BatchHeader{BaseTimestamp: now, MaxTimestamp: now, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs)
	if err != nil {
		b.Fatal(err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, -1, 30000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "bench"
	for p := range partitions {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = p, batch
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("bench")).AppendRequest(nil, req, 1), len(batch)
}
