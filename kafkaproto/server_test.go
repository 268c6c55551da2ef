package kafkaproto

import (
	"context"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/topics"
)

// startTestServer serves the Kafka protocol on a loopback port over a real
// store in a temp dir.
func startTestServer(t *testing.T) (*Server, string) {
	t.Helper()
	return startTestServerConfig(t, Config{})
}

// startTestServerConfig is startTestServer with cfg (Logger, NodeID and
// AdvertisedAddr are filled in).
func startTestServerConfig(t *testing.T, cfg Config) (*Server, string) {
	t.Helper()
	store, tm := openTestTopics(t, true)
	return serveTest(t, cfg, tm, func() { _ = store.Close() })
}

// openTestTopics opens a small store in a temp dir and its topics
// (auto-creation as autoCreate says, one partition by default) with the
// named one-partition topics created.
func openTestTopics(t *testing.T, autoCreate bool, names ...string) (*pebblestore.Store, *topics.Manager) {
	t.Helper()
	store, err := pebblestore.Open(t.TempDir(), pebblestore.Options{Logger: zerolog.Nop(), MemTableSize: 4 << 20, CacheSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	tm, err := topics.Open(store, topics.Config{Logger: zerolog.Nop(), AutoCreate: autoCreate, DefaultPartitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if _, err := tm.CreateTopic(name, 1, nil, false); err != nil {
			t.Fatal(err)
		}
	}
	return store, tm
}

// serveTest serves the Kafka protocol for tm on a loopback port with cfg
// (Logger, NodeID and AdvertisedAddr are filled in) until the test ends:
// then it shuts the server down and calls closers in order (the
// coordinators, the store).
func serveTest(t *testing.T, cfg Config, tm *topics.Manager, closers ...func()) (*Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger, cfg.NodeID, cfg.AdvertisedAddr = zerolog.Nop(), 1, ln.Addr().String()
	s, err := NewServer(cfg, tm)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
		for _, c := range closers {
			c()
		}
	})
	return s, ln.Addr().String()
}

func newClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func TestProduceConsumeRoundTrip(t *testing.T) {
	_, addr := startTestServer(t)
	ctx := context.Background()
	cl := newClient(t, addr, kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("rt"))
	for i := 0; i < 50; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte{byte(i)}, Value: []byte{byte(i), 1}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	consumer := newClient(t, addr, kgo.ConsumeTopics("rt"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got int
	for got < 50 {
		fs := consumer.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != int64(got) || r.Value[0] != byte(got) {
				t.Fatalf("record %d: offset %d value %v", got, r.Offset, r.Value)
			}
			got++
		})
	}
}

// fetchReq builds a v12 fetch (named topics, sessions) of topic/partition 0.
func fetchReq(sessionID, epoch int32, topic string, offset int64, maxWait int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = 12
	req.SessionID, req.SessionEpoch = sessionID, epoch
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = maxWait, 1, 1<<20
	if topic != "" {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = offset, 1<<20, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	}
	return req
}

func TestFetchSessions(t *testing.T) {
	_, addr := startTestServer(t)
	ctx := context.Background()
	// Kafka 3.0's versions: Fetch v12, which names topics (v13 uses IDs).
	cl := newClient(t, addr, kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("fs"), kgo.MaxVersions(kversion.V3_0_0()))
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("one")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	send := func(req *kmsg.FetchRequest) *kmsg.FetchResponse {
		t.Helper()
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	// Epoch 0 creates a session and returns everything.
	full := send(fetchReq(0, 0, "fs", 0, 0))
	if full.ErrorCode != 0 || full.SessionID == 0 || len(full.Topics) != 1 || len(full.Topics[0].Partitions[0].RecordBatches) == 0 {
		t.Fatalf("initial session fetch: err %d session %d topics %d", full.ErrorCode, full.SessionID, len(full.Topics))
	}
	id := full.SessionID
	// Epoch 1 moves the offset to the end: the partition changed position,
	// but nothing new arrived and its offsets are unchanged, so it is omitted.
	inc := send(fetchReq(id, 1, "fs", 1, 0))
	if inc.ErrorCode != 0 || len(inc.Topics) != 0 {
		t.Fatalf("incremental fetch with no news: err %d, %d topics", inc.ErrorCode, len(inc.Topics))
	}
	// New data shows up for the partition the session remembers.
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("two")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	inc = send(fetchReq(id, 2, "", 0, 0))
	if inc.ErrorCode != 0 || len(inc.Topics) != 1 || inc.Topics[0].Partitions[0].HighWatermark != 2 {
		t.Fatalf("incremental fetch after produce: err %d topics %+v", inc.ErrorCode, inc.Topics)
	}
	if bad := send(fetchReq(id, 7, "", 0, 0)); bad.ErrorCode != kerr.InvalidFetchSessionEpoch.Code {
		t.Fatalf("wrong epoch: %d", bad.ErrorCode)
	}
	if bad := send(fetchReq(id+1, 1, "", 0, 0)); bad.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("unknown session: %d", bad.ErrorCode)
	}
	// Epoch -1 closes the session; the next incremental use fails.
	send(fetchReq(id, -1, "fs", 0, 0))
	if bad := send(fetchReq(id, 3, "", 0, 0)); bad.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("closed session: %d", bad.ErrorCode)
	}
}

// TestLongPollWakesOnProduce pins that a waiting fetch is answered with the
// new records as soon as they are durable, not at the end of max wait.
func TestLongPollWakesOnProduce(t *testing.T) {
	_, addr := startTestServer(t)
	ctx := context.Background()
	cl := newClient(t, addr, kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("lp"), kgo.MaxVersions(kversion.V3_0_0()))
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("first")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	done := make(chan *kmsg.FetchResponse, 1)
	go func() {
		resp, err := fetchReq(0, -1, "lp", 1, 60_000).RequestWith(ctx, cl)
		if err != nil {
			t.Error(err)
		}
		done <- resp
	}()
	// The fetch is parked: nothing can wake it but a produce.
	select {
	case <-done:
		t.Fatal("fetch at the end of the log returned before any produce")
	case <-time.After(200 * time.Millisecond):
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("second")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	resp := <-done
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || len(p.RecordBatches) == 0 || p.HighWatermark != 2 {
		t.Fatalf("woken fetch: err %d, %d bytes, hwm %d", p.ErrorCode, len(p.RecordBatches), p.HighWatermark)
	}
}

// FuzzDecodeRequest feeds arbitrary frames to the decoder and the handlers:
// nothing may panic, whatever the bytes.
func FuzzDecodeRequest(f *testing.F) {
	for _, req := range []kmsg.Request{
		kmsg.NewPtrApiVersionsRequest(), kmsg.NewPtrMetadataRequest(), fetchReq(0, 0, "t", 0, 0),
		kmsg.NewPtrProduceRequest(), kmsg.NewPtrListOffsetsRequest(), kmsg.NewPtrCreateTopicsRequest(),
	} {
		req.SetVersion(req.MaxVersion())
		if reg := registry[req.Key()]; reg != nil && req.GetVersion() > reg.maxVersion {
			req.SetVersion(reg.maxVersion)
		}
		body := binary.BigEndian.AppendUint16(nil, uint16(req.Key()))
		body = binary.BigEndian.AppendUint16(body, uint16(req.GetVersion()))
		body = binary.BigEndian.AppendUint32(body, 7)
		body = append(body, 0xff, 0xff) // null client id
		if req.IsFlexible() {
			body = append(body, 0)
		}
		f.Add(req.AppendTo(body))
	}
	store, err := pebblestore.Open(f.TempDir(), pebblestore.Options{Logger: zerolog.Nop(), MemTableSize: 4 << 20, CacheSize: 8 << 20})
	if err != nil {
		f.Fatal(err)
	}
	defer store.Close()
	tm, err := topics.Open(store, topics.Config{Logger: zerolog.Nop(), AutoCreate: true, DefaultPartitions: 1})
	if err != nil {
		f.Fatal(err)
	}
	s, err := NewServer(Config{Logger: zerolog.Nop(), NodeID: 1, AdvertisedAddr: "127.0.0.1:9092"}, tm)
	if err != nil {
		f.Fatal(err)
	}
	close(s.closing) // long polls return at once
	f.Fuzz(func(t *testing.T, body []byte) {
		c := &conn{s: s, listener: s.plaintext, log: zerolog.Nop(), replies: make(chan queued, 4), readDone: make(chan struct{})}
		r, err := c.decode(body)
		if err != nil || r == nil {
			return
		}
		rep, err := registry[r.key].handle(s, r)
		if err != nil {
			return
		}
		if rep.finish != nil {
			rep.finish()
		}
		if !rep.none {
			rep.resp.SetVersion(r.version)
			_ = rep.resp.AppendTo(nil)
		}
	})
}

// TestProduceToInternalTopicRefused pins that clients cannot write
// __consumer_offsets: forged commits would be visible to tools reading it.
func TestProduceToInternalTopicRefused(t *testing.T) {
	_, addr := startTestServer(t)
	cl := newClient(t, addr)
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 1000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "__consumer_offsets"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = []byte{0}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.InvalidTopicException.Code {
		t.Fatalf("produce to __consumer_offsets: error %d, want INVALID_TOPIC_EXCEPTION", code)
	}
}

// TestFetchSessionBounded pins a review finding of issue 17: incremental
// fetches added partitions (of any name) to their session without bound,
// up to max-partitions-per-request more per request, forever. A request
// that would grow a session past max-partitions-per-request evicts it and
// is answered FETCH_SESSION_ID_NOT_FOUND.
func TestFetchSessionBounded(t *testing.T) {
	_, addr := startTestServerConfig(t, Config{MaxPartitionsPerRequest: 3})
	ctx := context.Background()
	cl := newClient(t, addr, kgo.MaxVersions(kversion.V3_0_0()))
	send := func(req *kmsg.FetchRequest) *kmsg.FetchResponse {
		t.Helper()
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	full := send(fetchReq(0, 0, "bounded-a", 0, 0))
	if full.ErrorCode != 0 || full.SessionID == 0 {
		t.Fatalf("initial session fetch: err %d session %d", full.ErrorCode, full.SessionID)
	}
	id := full.SessionID
	for i, topic := range []string{"bounded-b", "bounded-c"} {
		if r := send(fetchReq(id, int32(i+1), topic, 0, 0)); r.ErrorCode != 0 {
			t.Fatalf("incremental fetch adding %s: %d", topic, r.ErrorCode)
		}
	}
	if r := send(fetchReq(id, 3, "bounded-d", 0, 0)); r.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("fourth partition in a session of at most 3: err %d, want FETCH_SESSION_ID_NOT_FOUND", r.ErrorCode)
	}
	if r := send(fetchReq(id, 4, "", 0, 0)); r.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("evicted session still answers: err %d", r.ErrorCode)
	}
}
