package compattests

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The Kafka Streams exactly_once_v2 emulation of CONNECT-STREAMS.md §6.2:
// `in` is re-keyed into a repartition topic, whose records are counted per
// key into a compacted changelog and into `out`. Each instance is a
// kgo.GroupTransactSession; its count store is rebuilt from the changelog
// (read_committed to the high watermark, as StoreChangelogReader does)
// whenever it gains a partition or a transaction of it aborts.

const streamsPartitions = 4

// streamsWordPartition is the partition of a word in the repartition
// topic, the changelog and `out`.
func streamsWordPartition(word string) int32 {
	h := fnv.New32a()
	h.Write([]byte(word))
	return int32(h.Sum32() % streamsPartitions)
}

// streamsBalancer is Streams' "stream" protocol: franz-go's
// cooperative-sticky balancer under another name (the classic protocol).
type streamsBalancer struct{ kgo.GroupBalancer }

func (streamsBalancer) ProtocolName() string { return "stream" }

// streamsTopics names the application's topics.
type streamsTopics struct {
	app, in, out, repartition, changelog string
	changelogID                          [16]byte // Streams fetches by topic ID (Fetch v13+)
}

// producedRecord is where a record an instance produced landed.
type producedRecord struct {
	topic     string
	partition int32
	offset    int64
	pid       int64
	value     string
}

// streamsRestore rebuilds the count store of one changelog partition: end
// offset from ListOffsets LATEST under read_uncommitted (the high
// watermark), Fetch under read_committed from EARLIEST until the position
// reaches it. The position moves past markers and aborted batches, so this
// ends although a changelog written in transactions ends with a marker.
// It returns the latest value per key and every record read.
func streamsRestore(ctx context.Context, cl *kgo.Client, topic string, topicID [16]byte, partition int32) (map[string]string, []*kgo.Record, error) {
	listOffset := func(ts int64) (int64, error) {
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID, req.IsolationLevel = -1, 0
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.Timestamp = partition, -1, ts
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return 0, err
		}
		p := resp.Topics[0].Partitions[0]
		return p.Offset, kerr.ErrorForCode(p.ErrorCode)
	}
	end, err := listOffset(-1)
	if err != nil {
		return nil, nil, fmt.Errorf("restore %s/%d: ListOffsets latest: %w", topic, partition, err)
	}
	pos, err := listOffset(-2)
	if err != nil {
		return nil, nil, fmt.Errorf("restore %s/%d: ListOffsets earliest: %w", topic, partition, err)
	}
	latest := map[string]string{}
	var all []*kgo.Record
	for pos < end {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.IsolationLevel, req.SessionEpoch = -1, 1, -1
		req.MaxBytes, req.MinBytes, req.MaxWaitMillis = 4<<20, 1, 500
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, topicID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = partition, pos, 1<<20, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return nil, nil, fmt.Errorf("restore %s/%d at %d (end %d): %w", topic, partition, pos, end, err)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return nil, nil, fmt.Errorf("restore %s/%d at %d: fetch answer %+v", topic, partition, pos, resp.Topics)
		}
		fp := resp.Topics[0].Partitions[0]
		if fp.ErrorCode != 0 {
			return nil, nil, fmt.Errorf("restore %s/%d at %d: %w", topic, partition, pos, kerr.ErrorForCode(fp.ErrorCode))
		}
		if err := streamsCheckBelowLSO(fp); err != nil {
			return nil, nil, fmt.Errorf("restore %s/%d: %w", topic, partition, err)
		}
		got, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
			Offset: pos, IsolationLevel: kgo.ReadCommitted(), Topic: topic, Partition: partition,
		}, &fp, kgo.DefaultDecompressor(), nil)
		if got.Err != nil {
			return nil, nil, fmt.Errorf("restore %s/%d at %d: %w", topic, partition, pos, got.Err)
		}
		for _, r := range got.Records {
			latest[string(r.Key)] = string(r.Value)
			all = append(all, r)
		}
		pos = next
	}
	return latest, all, nil
}

// streamsCheckBelowLSO is eosCheckBelowLSO for goroutines: it returns the
// violation instead of failing the test.
func streamsCheckBelowLSO(fp kmsg.FetchResponseTopicPartition) error {
	if fp.LastStableOffset > fp.HighWatermark || fp.LastStableOffset < 0 {
		return fmt.Errorf("read_committed fetch: last stable offset %d, high watermark %d", fp.LastStableOffset, fp.HighWatermark)
	}
	raw := fp.RecordBatches
	for len(raw) >= 61 {
		var b kmsg.RecordBatch
		size := 12 + int(int32(binary.BigEndian.Uint32(raw[8:12])))
		if size > len(raw) {
			break
		}
		if err := b.ReadFrom(raw[:size]); err != nil {
			return fmt.Errorf("read_committed fetch: batch does not parse: %v", err)
		}
		if last := b.FirstOffset + int64(b.LastOffsetDelta); last >= fp.LastStableOffset {
			return fmt.Errorf("read_committed fetch returned a batch %d-%d at or past the last stable offset %d", b.FirstOffset, last, fp.LastStableOffset)
		}
		raw = raw[size:]
	}
	return nil
}

// streamsLSOWatch fetches every partition of topics under read_committed
// from offset 0 until ctx ends and reports the first answer that returns a
// batch at or past the last stable offset. It counts the answers given
// while a transaction was open (LSO < HWM).
func streamsLSOWatch(ctx context.Context, cl *kgo.Client, topics map[string][16]byte, openSeen *atomic.Int64) error {
	for ctx.Err() == nil {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.IsolationLevel, req.SessionEpoch = -1, 1, -1
		req.MaxBytes, req.MinBytes, req.MaxWaitMillis = 16<<20, 0, 0
		for name, id := range topics {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = name, id
			for p := range int32(streamsPartitions) {
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.Partition, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = p, 4<<20, -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
		}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		for _, rt := range resp.Topics {
			for _, fp := range rt.Partitions {
				if fp.ErrorCode != 0 {
					return fmt.Errorf("read_committed fetch %s/%d: %s", rt.Topic, fp.Partition, errName(fp.ErrorCode))
				}
				if err := streamsCheckBelowLSO(fp); err != nil {
					return fmt.Errorf("%s/%d: %w", rt.Topic, fp.Partition, err)
				}
				if fp.LastStableOffset < fp.HighWatermark {
					openSeen.Add(1)
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// streamsInstance is one application instance (one stream thread).
type streamsInstance struct {
	t          *testing.T
	name       string
	addr       string
	topics     streamsTopics
	txnID      string
	abortEvery int // abort every n-th transaction; 0 never
	probes     int // transactions to probe between TxnOffsetCommit and EndTxn
	probeCl    *kgo.Client
	done       chan struct{}

	// Loop-owned.
	txns    int
	current []producedRecord // records of the transaction being ended

	mu      sync.Mutex
	state   map[int32]map[string]int64 // count stores, by loaded partition
	aborted []producedRecord           // records of transactions aborted on purpose
	commits int

	// Shared with the hook (a client goroutine).
	lastReq    atomic.Pointer[kmsg.TxnOffsetCommitRequest]
	probeThis  atomic.Bool
	probeErr   atomic.Pointer[string] // what the probe of this transaction found wrong
	probesOK   atomic.Int32
	freezeArm  atomic.Bool
	frozeThis  atomic.Bool
	frozen     chan struct{}
	release    chan struct{}
	frozenEnd  chan error // the frozen transaction's End: nil if it committed
	restores   atomic.Int32
	lsoBelowOK atomic.Int32 // probes that saw LSO <= a record of the open transaction < HWM
}

func newStreamsInstance(t *testing.T, name, addr string, topics streamsTopics) *streamsInstance {
	return &streamsInstance{
		t: t, name: name, addr: addr, topics: topics,
		txnID:     fmt.Sprintf("%s-%s-1", topics.app, topicName(t, name)), // <application.id>-<processId>-<thread>
		probeCl:   newClient(t, addr),
		done:      make(chan struct{}),
		state:     map[int32]map[string]int64{},
		frozen:    make(chan struct{}),
		release:   make(chan struct{}),
		frozenEnd: make(chan error, 1),
	}
}

// OnBrokerRead runs after a response is read, before the client sees it.
// After a TxnOffsetCommit, the transaction has its records and its staged
// offsets and no EndTxn has been sent: the moment to freeze or probe.
func (in *streamsInstance) OnBrokerRead(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key != int16(kmsg.TxnOffsetCommit) || err != nil {
		return
	}
	if in.freezeArm.CompareAndSwap(true, false) {
		in.frozeThis.Store(true)
		close(in.frozen)
		<-in.release
		return
	}
	if in.probeThis.Load() {
		in.probe()
	}
}

// probe checks, between TxnOffsetCommit and EndTxn, that OffsetFetch with
// require_stable answers UNSTABLE_OFFSET_COMMIT for every staged partition
// and that, on every partition the transaction wrote to, the last stable
// offset is at or before its records and the high watermark past them.
func (in *streamsInstance) probe() {
	fail := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		in.probeErr.Store(&msg)
	}
	req := in.lastReq.Load()
	if req == nil {
		fail("no TxnOffsetCommit was captured")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	codes, _, err := streamsOffsetFetch(ctx, in.probeCl, in.topics.app, req)
	if err != nil {
		fail("OffsetFetch: %v", err)
		return
	}
	for tp, code := range codes {
		if code != kerr.UnstableOffsetCommit.Code {
			fail("OffsetFetch require_stable %s between TxnOffsetCommit and EndTxn: %s, want UNSTABLE_OFFSET_COMMIT", tp, errName(code))
			return
		}
	}
	adm := kadm.NewClient(in.probeCl)
	var topics []string
	for _, r := range in.current {
		if !slices.Contains(topics, r.topic) {
			topics = append(topics, r.topic)
		}
	}
	hwms, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		fail("ListEndOffsets: %v", err)
		return
	}
	lsos, err := adm.ListCommittedOffsets(ctx, topics...)
	if err != nil {
		fail("ListCommittedOffsets: %v", err)
		return
	}
	for _, r := range in.current {
		h, _ := hwms.Lookup(r.topic, r.partition)
		l, _ := lsos.Lookup(r.topic, r.partition)
		if l.Offset > r.offset || h.Offset <= r.offset {
			fail("%s/%d with this transaction's record at %d open: last stable offset %d, high watermark %d", r.topic, r.partition, r.offset, l.Offset, h.Offset)
			return
		}
		in.lsoBelowOK.Add(1)
	}
}

// streamsOffsetFetch fetches the group's committed offsets of the
// partitions in req with require_stable (OffsetFetch v8).
func streamsOffsetFetch(ctx context.Context, cl *kgo.Client, group string, req *kmsg.TxnOffsetCommitRequest) (map[string]int16, map[string]int64, error) {
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Version, of.RequireStable = 8, true
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = group
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetFetchRequestGroupTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, p.Partition)
		}
		g.Topics = append(g.Topics, rt)
	}
	of.Groups = append(of.Groups, g)
	resp, err := of.RequestWith(ctx, cl)
	if err != nil {
		return nil, nil, err
	}
	if len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 {
		return nil, nil, fmt.Errorf("OffsetFetch answer %+v", resp.Groups)
	}
	codes, offsets := map[string]int16{}, map[string]int64{}
	for _, t := range resp.Groups[0].Topics {
		for _, p := range t.Partitions {
			tp := fmt.Sprintf("%s/%d", t.Topic, p.Partition)
			codes[tp], offsets[tp] = p.ErrorCode, p.Offset
		}
	}
	return codes, offsets, nil
}

// dropState forgets the count stores of partitions (all when nil).
func (in *streamsInstance) dropState(partitions []int32) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if partitions == nil {
		in.state = map[int32]map[string]int64{}
		return
	}
	for _, p := range partitions {
		delete(in.state, p)
	}
}

// store returns the count store of a repartition partition, restoring it
// from the changelog if it is not loaded.
func (in *streamsInstance) store(ctx context.Context, p int32) (map[string]int64, error) {
	in.mu.Lock()
	st, ok := in.state[p]
	in.mu.Unlock()
	if ok {
		return st, nil
	}
	latest, _, err := streamsRestore(ctx, in.probeCl, in.topics.changelog, in.topics.changelogID, p)
	if err != nil {
		return nil, err
	}
	in.restores.Add(1)
	st = map[string]int64{}
	for k, v := range latest {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("changelog %d: %s=%q", p, k, v)
		}
		st[k] = n
	}
	in.mu.Lock()
	in.state[p] = st
	in.mu.Unlock()
	return st, nil
}

func (in *streamsInstance) run(ctx context.Context) {
	defer close(in.done)
	tp := in.topics
	onChange := func(_ context.Context, _ *kgo.Client, parts map[string][]int32) {
		if ps, ok := parts[tp.repartition]; ok {
			in.dropState(ps)
		}
	}
	sess, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(in.addr),
		kgo.ClientID(in.txnID+"-StreamThread-1-consumer"),
		kgo.SoftwareNameAndVersion("apache-kafka-java", "3.9.0"),
		kgo.TransactionalID(in.txnID),
		kgo.TransactionTimeout(10*time.Second),
		kgo.ConsumerGroup(tp.app),
		kgo.ConsumeTopics(tp.in, tp.repartition),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), // franz-go always sends OffsetFetch with require_stable
		kgo.Balancers(streamsBalancer{kgo.CooperativeStickyBalancer()}),
		kgo.SessionTimeout(6*time.Second),
		kgo.RebalanceTimeout(20*time.Second),
		kgo.HeartbeatInterval(500*time.Millisecond),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.Lz4Compression()),
		kgo.RetryTimeout(30*time.Second),
		kgo.OnPartitionsAssigned(onChange),
		kgo.OnPartitionsRevoked(onChange),
		kgo.OnPartitionsLost(onChange),
		kgo.WithHooks(in),
	)
	if err != nil {
		in.t.Errorf("%s: %v", in.name, err)
		return
	}
	defer sess.Close()
	for ctx.Err() == nil {
		pollCtx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := sess.PollRecords(pollCtx, 40)
		cancel()
		if fs.Empty() {
			continue
		}
		if err := sess.Begin(); err != nil {
			in.t.Errorf("%s: begin: %v", in.name, err)
			return
		}
		var out []*kgo.Record
		pending := map[int32]map[string]int64{}
		var failed error
		fs.EachRecord(func(r *kgo.Record) {
			if failed != nil {
				return
			}
			if r.Topic == tp.in {
				word := string(r.Value)
				out = append(out, &kgo.Record{Topic: tp.repartition, Partition: streamsWordPartition(word), Key: r.Value, Value: r.Key})
				return
			}
			st, err := in.store(ctx, r.Partition)
			if err != nil {
				failed = err
				return
			}
			if pending[r.Partition] == nil {
				pending[r.Partition] = maps.Clone(st)
			}
			word := string(r.Key)
			pending[r.Partition][word]++
			count := []byte(strconv.FormatInt(pending[r.Partition][word], 10))
			out = append(out,
				&kgo.Record{Topic: tp.changelog, Partition: r.Partition, Key: r.Key, Value: count},
				&kgo.Record{Topic: tp.out, Partition: r.Partition, Key: r.Key, Value: count})
		})
		if failed != nil {
			if ctx.Err() == nil {
				in.t.Errorf("%s: %v", in.name, failed)
			}
			return
		}
		seq := in.txns + 1
		abort := in.abortEvery > 0 && seq%in.abortEvery == 0
		results := sess.ProduceSync(ctx, out...)
		produceErr := results.FirstErr()
		in.current = in.current[:0]
		for _, res := range results {
			if res.Err == nil {
				r := res.Record
				in.current = append(in.current, producedRecord{r.Topic, r.Partition, r.Offset, r.ProducerID, string(r.Value)})
			}
		}
		in.probeThis.Store(in.probes > 0 && !abort && produceErr == nil)
		in.probeErr.Store(nil)
		in.lastReq.Store(nil)
		endCtx := kgo.PreTxnCommitFnContext(ctx, func(req *kmsg.TxnOffsetCommitRequest) error {
			in.lastReq.Store(req)
			return nil
		})
		committed, endErr := sess.End(endCtx, kgo.TransactionEndTry(!abort && produceErr == nil))
		in.txns = seq
		if in.frozeThis.Load() {
			switch {
			case committed:
				in.frozenEnd <- nil
			case endErr != nil:
				in.frozenEnd <- endErr
			default:
				in.frozenEnd <- errors.New("aborted")
			}
			return // fenced: this instance is a zombie now
		}
		if endErr != nil && ctx.Err() == nil {
			in.t.Logf("%s: End: %v", in.name, endErr)
		}
		if !committed {
			in.dropState(nil) // the stores hold uncommitted counts: restore them
			if abort && produceErr == nil && endErr == nil {
				in.mu.Lock()
				in.aborted = append(in.aborted, in.current...)
				in.mu.Unlock()
			}
			continue
		}
		in.mu.Lock()
		for p, st := range pending {
			if _, ok := in.state[p]; ok { // still owned and loaded
				in.state[p] = st
			}
		}
		in.commits++
		in.mu.Unlock()
		if in.probeThis.Load() {
			in.probes--
			if msg := in.probeErr.Load(); msg != nil {
				in.t.Errorf("%s: %s", in.name, *msg)
				continue
			}
			req := in.lastReq.Load()
			codes, offsets, err := streamsOffsetFetch(ctx, in.probeCl, tp.app, req)
			if err != nil {
				in.t.Errorf("%s: OffsetFetch after the commit: %v", in.name, err)
				continue
			}
			for _, t := range req.Topics {
				for _, p := range t.Partitions {
					key := fmt.Sprintf("%s/%d", t.Topic, p.Partition)
					if codes[key] != 0 || offsets[key] != p.Offset {
						in.t.Errorf("%s: OffsetFetch require_stable %s after the commit: %d %s, want the committed %d", in.name, key, offsets[key], errName(codes[key]), p.Offset)
					}
				}
			}
			in.probesOK.Add(1)
		}
	}
}

func (in *streamsInstance) committedCount() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.commits
}

// TestStreamsExactlyOnce emulates a Kafka Streams application under
// exactly_once_v2 (CONNECT-STREAMS.md §6.2 steps 1-12):
// internal topics created with Streams' CreateTopics (RF -1, its configs;
// again -> TOPIC_ALREADY_EXISTS); keyed input re-keyed through a
// repartition topic and counted into a compacted changelog (fast cleaning,
// so compaction runs under open transactions) and `out`, LZ4 batches. Two
// GroupTransactSession instances (read_committed, require_stable, a
// cooperative "stream" balancer); A aborts every 5th transaction; B joins
// later (cooperative rebalance). Between TxnOffsetCommit and EndTxn,
// OffsetFetch require_stable answers UNSTABLE_OFFSET_COMMIT and the LSO of
// every partition the transaction wrote stays at or below its records;
// after the commit the new offsets are returned. A is frozen after a TxnOffsetCommit: after its
// session timeout B owns every partition, the broker aborts A's transaction
// after its 10 s timeout, A's TxnOffsetCommit with its old generation gets
// ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID, its EndTxn PRODUCER_FENCED or
// INVALID_PRODUCER_EPOCH, and A never commits. At the end: read_committed
// `out` holds for every key exactly the counts 1..n in order; A's aborted
// records are in the log (read_uncommitted), listed in AbortedTransactions
// and never returned under read_committed; no read_committed fetch (a
// watch over `out` and the repartition topic every 100 ms, the restores,
// the final reads) ever returned a batch at or past the LSO; restoring the changelog (LATEST
// under read_uncommitted, read_committed fetches until the position
// reaches it) ends although every partition ends with a marker, before and
// after compaction, with the expected count per key; committed offsets on
// `in` are its high watermarks; DeleteRecords on the repartition topic at
// the committed offsets moves the log start there (fetch below ->
// OFFSET_OUT_OF_RANGE); a purge to the high watermark past the first
// record of a transaction still open keeps the LSO at the new log start
// (regression: it stayed at the deleted record, below the log start); on
// the changelog DeleteRecords is POLICY_VIOLATION. A compact,delete
// window changelog written in transactions loses its old segments to
// retention (EARLIEST at a batch boundary, fetch below out of range), an
// open transaction's first record with them: the LSO stays at the log
// start, and a restore ends once the transaction is aborted.
func TestStreamsExactlyOnce(t *testing.T) {
	t.Parallel()
	b := startBroker(t, fastCleanupArgs, withArgs("--group-initial-rebalance-delay", "0s"))
	adm := newAdmin(t, b.Addr())
	app := topicName(t, "app")
	tp := streamsTopics{app: app, in: app + "-in", out: app + "-out", repartition: app + "-rekey-repartition", changelog: app + "-counts-changelog"}
	ctx := testCtx(t, 3*opTimeout)
	c := dialRaw(t, b.Addr())

	// 1. Topics: `in` and `out` by the user; the internal topics by the
	// Streams leader (InternalTopicManager.makeReady).
	createTopic(t, adm, tp.in, streamsPartitions, nil)
	createTopic(t, adm, tp.out, streamsPartitions, nil)
	meta := kmsg.NewPtrMetadataRequest()
	meta.Version, meta.AllowAutoTopicCreation = 12, false
	for _, name := range []string{tp.in, tp.out} {
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(name)
		meta.Topics = append(meta.Topics, mt)
	}
	if resp := c.roundTrip(meta).(*kmsg.MetadataResponse); len(resp.Topics) != 2 ||
		len(resp.Topics[0].Partitions) != streamsPartitions || len(resp.Topics[1].Partitions) != streamsPartitions {
		t.Fatalf("Metadata of in and out: %+v", resp.Topics)
	}
	createInternal := func() map[string]int16 {
		t.Helper()
		req := kmsg.NewPtrCreateTopicsRequest()
		req.Version, req.TimeoutMillis = 7, 30000
		for name, configs := range map[string][][2]string{
			tp.repartition: {{"cleanup.policy", "delete"}, {"segment.bytes", "52428800"}, {"retention.ms", "-1"}, {"message.timestamp.type", "CreateTime"}},
			tp.changelog:   {{"cleanup.policy", "compact"}, {"message.timestamp.type", "CreateTime"}},
		} {
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, streamsPartitions, -1
			for _, kv := range configs {
				cfg := kmsg.NewCreateTopicsRequestTopicConfig()
				cfg.Name, cfg.Value = kv[0], kmsg.StringPtr(kv[1])
				rt.Configs = append(rt.Configs, cfg)
			}
			req.Topics = append(req.Topics, rt)
		}
		out := map[string]int16{}
		for _, rt := range c.roundTrip(req).(*kmsg.CreateTopicsResponse).Topics {
			out[rt.Topic] = rt.ErrorCode
			if rt.ErrorCode == 0 && (rt.NumPartitions != streamsPartitions || rt.ReplicationFactor != 1) {
				t.Fatalf("CreateTopics %s: %d partitions, RF %d", rt.Topic, rt.NumPartitions, rt.ReplicationFactor)
			}
		}
		return out
	}
	for name, code := range createInternal() {
		if code != 0 {
			t.Fatalf("CreateTopics %s: %s", name, errName(code))
		}
	}
	for name, code := range createInternal() {
		if code != kerr.TopicAlreadyExists.Code {
			t.Fatalf("CreateTopics %s again: %s, want TOPIC_ALREADY_EXISTS", name, errName(code))
		}
	}
	details, err := adm.ListTopics(ctx, tp.repartition, tp.changelog, tp.out)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{tp.repartition, tp.changelog} {
		d := details[name]
		if d.Err != nil || len(d.Partitions) != streamsPartitions {
			t.Fatalf("%s: %v, %d partitions", name, d.Err, len(d.Partitions))
		}
		for _, p := range d.Partitions {
			if p.Leader != 1 {
				t.Fatalf("%s/%d: leader %d", name, p.Partition, p.Leader)
			}
		}
	}
	tp.changelogID = details[tp.changelog].ID
	// 11. Fast cleaning of the changelog, so compaction runs while
	// transactions are open.
	alter, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "segment.ms", Value: strp("100")},
		{Op: kadm.SetConfig, Name: "min.cleanable.dirty.ratio", Value: strp("0.01")},
		{Op: kadm.SetConfig, Name: "delete.retention.ms", Value: strp("1000")},
	}, tp.changelog)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := alter.On(tp.changelog, nil); r.Err != nil {
		t.Fatalf("alter %s: %v %s", tp.changelog, r.Err, r.ErrMessage)
	}

	// 5. Read_committed fetches of `out` and the repartition topic, all run
	// long, never return a batch at or past the LSO.
	var openSeen atomic.Int64
	watchCtx, stopWatch := context.WithCancel(context.Background())
	watched := make(chan error, 1)
	go func() {
		watched <- streamsLSOWatch(watchCtx, newClient(t, b.Addr()), map[string][16]byte{
			tp.out: details[tp.out].ID, tp.repartition: details[tp.repartition].ID,
		}, &openSeen)
	}()
	var stopWatchOnce sync.Once
	stopWatching := func() {
		stopWatchOnce.Do(func() {
			stopWatch()
			if err := <-watched; err != nil {
				t.Errorf("LSO watch: %v", err)
			}
		})
	}
	t.Cleanup(stopWatching)

	// 2. Keyed input; the feeder goes on in the background later.
	var produced atomic.Int64
	expected := map[string]int64{}
	var expectedMu sync.Mutex
	feeder := newClient(t, b.Addr(), kgo.DefaultProduceTopic(tp.in), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	feed := func(n int) error {
		rs := make([]*kgo.Record, n)
		expectedMu.Lock()
		for i := range rs {
			k := produced.Add(1) - 1
			word := fmt.Sprintf("w%02d", (k*7+k/13)%29)
			expected[word]++
			rs[i] = &kgo.Record{Key: fmt.Appendf(nil, "k%06d", k), Value: []byte(word)}
		}
		expectedMu.Unlock()
		return feeder.ProduceSync(ctx, rs...).FirstErr()
	}
	if err := feed(800); err != nil {
		t.Fatal(err)
	}

	// Instances.
	type running struct {
		inst *streamsInstance
		stop context.CancelFunc
	}
	var instances []running
	start := func(inst *streamsInstance) {
		ictx, cancel := context.WithCancel(context.Background())
		instances = append(instances, running{inst, cancel})
		go inst.run(ictx)
	}
	stopInstance := func(inst *streamsInstance) {
		for _, r := range instances {
			if r.inst == inst {
				r.stop()
				select {
				case <-inst.release:
				default:
					close(inst.release)
				}
				<-inst.done
			}
		}
	}
	t.Cleanup(func() {
		for _, r := range instances {
			stopInstance(r.inst)
		}
	})
	a := newStreamsInstance(t, "a", b.Addr(), tp)
	a.abortEvery, a.probes = 5, 3
	start(a)
	retWaitFor(t, 30*time.Second, "instance A to commit transactions", func() (bool, string) {
		return a.committedCount() >= 6 && a.probesOK.Load() >= 3, fmt.Sprintf("%d commits, %d probes", a.committedCount(), a.probesOK.Load())
	})

	stopFeed, fed := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(fed)
		tick := time.NewTicker(25 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopFeed:
				return
			case <-tick.C:
				if err := feed(6); err != nil {
					t.Errorf("feed: %v", err)
					return
				}
			}
		}
	}()
	var stopFeedOnce sync.Once
	stopFeeding := func() { stopFeedOnce.Do(func() { close(stopFeed); <-fed }) }
	t.Cleanup(stopFeeding)

	// 7. B joins: a cooperative rebalance moves partitions to it.
	bInst := newStreamsInstance(t, "b", b.Addr(), tp)
	start(bInst)
	waitGroup := func(members int, what string) {
		t.Helper()
		retWaitFor(t, 40*time.Second, what, func() (bool, string) {
			d, err := adm.DescribeGroups(ctx, tp.app)
			if err != nil {
				return false, err.Error()
			}
			g := d[tp.app]
			assigned := g.AssignedPartitions()
			return g.State == "Stable" && len(g.Members) == members && g.Protocol == "stream" &&
					len(assigned[tp.in]) == streamsPartitions && len(assigned[tp.repartition]) == streamsPartitions,
				fmt.Sprintf("%s, protocol %s, %d members, assigned %v", g.State, g.Protocol, len(g.Members), assigned)
		})
	}
	waitGroup(2, "A and B sharing every partition")
	retWaitFor(t, 30*time.Second, "both instances to commit", func() (bool, string) {
		return bInst.committedCount() >= 3, fmt.Sprintf("B: %d commits", bInst.committedCount())
	})

	// Freeze A after a TxnOffsetCommit, its transaction open.
	a.freezeArm.Store(true)
	select {
	case <-a.frozen:
	case <-time.After(30 * time.Second):
		t.Fatal("instance A did not reach a TxnOffsetCommit within 30s")
	}
	frozenReq := a.lastReq.Load()
	if frozenReq == nil || frozenReq.MemberID == "" || frozenReq.Generation < 1 {
		t.Fatalf("A's TxnOffsetCommit: %+v; want its member ID and generation (v3+)", frozenReq)
	}
	waitGroup(1, "B to own every partition after A's session timeout")
	retWaitFor(t, 30*time.Second, "the broker to abort A's transaction", func() (bool, string) {
		d, err := adm.DescribeTransactions(ctx, a.txnID)
		if err != nil {
			return false, err.Error()
		}
		s := d[a.txnID]
		return s.State == "CompleteAbort" && s.ProducerEpoch > frozenReq.ProducerEpoch, fmt.Sprintf("%s epoch %d", s.State, s.ProducerEpoch)
	})
	zombie := *frozenReq
	zombie.Version = 3
	for _, rt := range c.roundTrip(&zombie).(*kmsg.TxnOffsetCommitResponse).Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != kerr.IllegalGeneration.Code && rp.ErrorCode != kerr.UnknownMemberID.Code {
				t.Fatalf("A's TxnOffsetCommit with generation %d after B took over: %s/%d %s, want ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID",
					zombie.Generation, rt.Topic, rp.Partition, errName(rp.ErrorCode))
			}
		}
	}
	if code := eosEndTxn(t, c, a.txnID, frozenReq.ProducerID, frozenReq.ProducerEpoch, true); !eosFenced(code) {
		t.Fatalf("A's EndTxn after the broker aborted its transaction: %s, want PRODUCER_FENCED or INVALID_PRODUCER_EPOCH", errName(code))
	}
	close(a.release)
	select {
	case err := <-a.frozenEnd:
		if err == nil {
			t.Fatal("A committed its frozen transaction after B took over")
		}
		t.Logf("A's frozen transaction ended: %v", err)
	case <-time.After(opTimeout):
		t.Fatal("A's End did not return after it was released")
	}
	stopInstance(a)

	// B alone finishes the input.
	stopFeeding()
	if err := feed(150); err != nil {
		t.Fatal(err)
	}
	n := produced.Load()
	outReaders := make([]*eosReader, streamsPartitions)
	for p := range outReaders {
		outReaders[p] = newEOSReader(t, b.Addr(), tp.out, int32(p), 0)
	}
	retWaitFor(t, 60*time.Second, "every input record counted in out", func() (bool, string) {
		total := 0
		for _, r := range outReaders {
			for r.fetch(0) {
			}
			total += len(r.records)
		}
		return int64(total) >= n, fmt.Sprintf("%d of %d", total, n)
	})
	stopInstance(bInst)
	stopWatching()
	if openSeen.Load() == 0 {
		t.Fatal("the LSO watch never saw an open transaction")
	}

	// 8. Exactly once: per key the counts 1..n in order in `out`.
	aborted := a.aborted
	abortedAt := map[producedRecord]bool{}
	for _, r := range aborted {
		abortedAt[producedRecord{topic: r.topic, partition: r.partition, offset: r.offset}] = true
	}
	if len(aborted) == 0 {
		t.Fatal("instance A aborted no transaction with records")
	}
	seen := map[string]int64{}
	for p, r := range outReaders {
		r.toEnd(eosListOffset(t, c, tp.out, int32(p), -1, 0), 20*time.Second)
		for _, rec := range r.records {
			word := string(rec.Key)
			if streamsWordPartition(word) != int32(p) {
				t.Fatalf("out/%d holds key %s of partition %d", p, word, streamsWordPartition(word))
			}
			seen[word]++
			if got := string(rec.Value); got != strconv.FormatInt(seen[word], 10) {
				t.Fatalf("out/%d offset %d: %s=%s, want count %d (each count once, in order)", p, rec.Offset, word, got, seen[word])
			}
			if abortedAt[producedRecord{topic: tp.out, partition: int32(p), offset: rec.Offset}] {
				t.Fatalf("out/%d offset %d: a record of A's aborted transaction under read_committed", p, rec.Offset)
			}
		}
	}
	expectedMu.Lock()
	want := maps.Clone(expected)
	expectedMu.Unlock()
	if !maps.Equal(seen, want) {
		t.Fatalf("counts in out: %v\nwant %v", seen, want)
	}

	// 11. The instances' batches are LZ4 (and come back so).
	lz4 := false
	for _, bt := range parseBatches(t, eosFetch(t, c, tp.out, 0, 0, 0, 0).RecordBatches) {
		lz4 = lz4 || bt.Attributes&0x07 == 3
	}
	if !lz4 {
		t.Fatal("no LZ4 batch at the start of out/0")
	}

	// 6. A's aborted records: in the log, listed as aborted, never read.
	for _, topic := range []string{tp.out, tp.repartition} {
		for p := range int32(streamsPartitions) {
			end := eosListOffset(t, c, topic, p, -1, 0)
			raw := newEOSUncommittedReader(t, b.Addr(), topic, p, 0)
			raw.toEnd(end, 20*time.Second)
			at := map[int64]string{}
			for _, rec := range raw.records {
				at[rec.Offset] = string(rec.Value)
			}
			committed := newEOSReader(t, b.Addr(), topic, p, 0)
			committed.toEnd(end, 20*time.Second)
			read := map[int64]bool{}
			for _, rec := range committed.records {
				read[rec.Offset] = true
			}
			for _, r := range aborted {
				if r.topic != topic || r.partition != p {
					continue
				}
				if v, ok := at[r.offset]; !ok || v != r.value {
					t.Fatalf("%s/%d offset %d: read_uncommitted has %q, want A's aborted %q", topic, p, r.offset, v, r.value)
				}
				if read[r.offset] {
					t.Fatalf("%s/%d offset %d: A's aborted record returned under read_committed", topic, p, r.offset)
				}
				listed := false
				for _, at := range committed.aborted {
					listed = listed || (at.ProducerID == r.pid && at.FirstOffset <= r.offset)
				}
				if !listed {
					t.Fatalf("%s/%d offset %d: no AbortedTransactions entry of producer %d covers A's aborted record", topic, p, r.offset, r.pid)
				}
			}
		}
	}

	// Committed offsets on `in` are its high watermarks.
	inEnds := endOffsets(t, adm, tp.in)
	offs, err := adm.FetchOffsets(ctx, tp.app)
	if err != nil {
		t.Fatal(err)
	}
	for p, end := range inEnds {
		if o, _ := offs.Lookup(tp.in, p); o.At != end {
			t.Fatalf("committed offset of in/%d: %d, want the high watermark %d", p, o.At, end)
		}
	}

	// 9. Restore with a fresh client: ends at the high watermark though the
	// changelog ends with markers; the latest count per key is the expected
	// count. 11. Again after compaction.
	restoreCl := newClient(t, b.Addr())
	restore := func() (map[string]int64, int) {
		t.Helper()
		counts, records := map[string]int64{}, 0
		for p := range int32(streamsPartitions) {
			latest, all, err := streamsRestore(ctx, restoreCl, tp.changelog, tp.changelogID, p)
			if err != nil {
				t.Fatal(err)
			}
			records += len(all)
			for _, r := range all {
				if abortedAt[producedRecord{topic: tp.changelog, partition: p, offset: r.Offset}] {
					t.Fatalf("changelog/%d offset %d: A's aborted record restored", p, r.Offset)
				}
			}
			for k, v := range latest {
				counts[k], _ = strconv.ParseInt(v, 10, 64)
			}
		}
		return counts, records
	}
	for p := range int32(streamsPartitions) {
		hwm := eosListOffset(t, c, tp.changelog, p, -1, 0)
		batches := parseBatches(t, eosFetch(t, c, tp.changelog, p, hwm-1, 0, 0).RecordBatches)
		if len(batches) == 0 {
			t.Fatalf("changelog/%d: nothing at %d", p, hwm-1)
		}
		if control, _ := eosMarker(t, batches[len(batches)-1]); !control {
			t.Fatalf("changelog/%d: the last offset %d is not a marker", p, hwm-1)
		}
	}
	counts, records := restore()
	if !maps.Equal(counts, want) {
		t.Fatalf("restored counts: %v\nwant %v", counts, want)
	}
	// Every counted record wrote one changelog update: once compaction has
	// run, fewer are left. A record a second newer closes each partition's
	// last segment (segment.ms=100) so that it can be cleaned too.
	roll := newClient(t, b.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range int32(streamsPartitions) {
		r := &kgo.Record{Topic: tp.changelog, Partition: p, Key: []byte("roll"), Value: []byte("0"), Timestamp: time.Now().Add(time.Second)}
		if err := roll.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	compacted := 0
	retWaitFor(t, 30*time.Second, "compaction of the changelog", func() (bool, string) {
		counts, after := restore()
		compacted = after
		delete(counts, "roll")
		if !maps.Equal(counts, want) {
			t.Fatalf("restored counts after compaction: %v\nwant %v", counts, want)
		}
		return int64(after) < n, fmt.Sprintf("%d records restored (%d before the roll), %d counted", after, records, n)
	})

	// 10. DeleteRecords on the repartition topic at the committed offsets;
	// refused on the compacted changelog.
	toDelete := kadm.Offsets{}
	for p := range int32(streamsPartitions) {
		o, ok := offs.Lookup(tp.repartition, p)
		if !ok || o.At <= 0 {
			t.Fatalf("no committed offset on repartition/%d: %+v", p, o)
		}
		toDelete.Add(kadm.Offset{Topic: tp.repartition, Partition: p, At: o.At})
	}
	dr, err := adm.DeleteRecords(ctx, toDelete)
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(streamsPartitions) {
		x, _ := toDelete.Lookup(tp.repartition, p)
		r, _ := dr.Lookup(tp.repartition, p)
		if r.Err != nil || r.LowWatermark != x.At {
			t.Fatalf("DeleteRecords repartition/%d at %d: %v, low watermark %d", p, x.At, r.Err, r.LowWatermark)
		}
		if start := eosListOffset(t, c, tp.repartition, p, -2, 0); start != x.At {
			t.Fatalf("repartition/%d: EARLIEST %d after DeleteRecords at %d", p, start, x.At)
		}
		if fp := eosFetch(t, c, tp.repartition, p, x.At-1, 1, 0); fp.ErrorCode != kerr.OffsetOutOfRange.Code {
			t.Fatalf("fetch repartition/%d below the log start: %s, want OFFSET_OUT_OF_RANGE", p, errName(fp.ErrorCode))
		}
		hwm := eosListOffset(t, c, tp.repartition, p, -1, 0)
		if x.At < hwm {
			fp := eosFetch(t, c, tp.repartition, p, x.At, 0, 0)
			if bs := parseBatches(t, fp.RecordBatches); fp.ErrorCode != 0 || len(bs) == 0 || bs[0].FirstOffset > x.At || bs[0].FirstOffset+int64(bs[0].LastOffsetDelta) < x.At {
				t.Fatalf("fetch repartition/%d at the log start %d: %s, %d batches; want the batch holding it", p, x.At, errName(fp.ErrorCode), len(bs))
			}
		}
		if fp := eosFetch(t, c, tp.repartition, p, hwm+1, 1, 0); fp.ErrorCode != kerr.OffsetOutOfRange.Code {
			t.Fatalf("fetch repartition/%d past the high watermark: %s, want OFFSET_OUT_OF_RANGE", p, errName(fp.ErrorCode))
		}
	}
	// A purge at -1 (the high watermark) past the first record of a
	// transaction still open: the LSO stays at the log start, not at the
	// deleted record, and read_committed fetches there are answered.
	straggler := app + "-straggler"
	spid, sepoch := eosInitOK(t, c, straggler, 60000, -1, -1)
	if code := eosAddPartitions(t, c, straggler, spid, sepoch, tp.repartition, 0); code != 0 {
		t.Fatalf("straggler AddPartitionsToTxn: %s", errName(code))
	}
	if p := eosProduce(t, c, tp.repartition, 0, spid, sepoch, 0, "w00", "k-straggler"); p.ErrorCode != 0 {
		t.Fatalf("straggler produce: %s", errName(p.ErrorCode))
	}
	all, err := adm.DeleteRecords(ctx, kadm.Offsets{tp.repartition: {0: {Topic: tp.repartition, Partition: 0, At: -1}}})
	if err != nil {
		t.Fatal(err)
	}
	hwm0 := eosListOffset(t, c, tp.repartition, 0, -1, 0)
	if r, _ := all.Lookup(tp.repartition, 0); r.Err != nil || r.LowWatermark != hwm0 {
		t.Fatalf("DeleteRecords repartition/0 at -1: %v, low watermark %d; want the high watermark %d", r.Err, r.LowWatermark, hwm0)
	}
	if lso := eosListOffset(t, c, tp.repartition, 0, -1, 1); lso != hwm0 {
		t.Fatalf("repartition/0 after a purge past an open transaction: last stable offset %d, log start %d", lso, hwm0)
	}
	if fp := eosFetch(t, c, tp.repartition, 0, hwm0, 1, 0); fp.ErrorCode != 0 || fp.LastStableOffset != hwm0 || len(fp.RecordBatches) != 0 {
		t.Fatalf("read_committed fetch at the log start %d with a transaction open: %s, last stable offset %d, %d bytes", hwm0, errName(fp.ErrorCode), fp.LastStableOffset, len(fp.RecordBatches))
	}
	if code := eosEndTxn(t, c, straggler, spid, sepoch, false); code != 0 {
		t.Fatalf("straggler abort: %s", errName(code))
	}
	if lso := eosListOffset(t, c, tp.repartition, 0, -1, 1); lso != hwm0+1 {
		t.Fatalf("repartition/0 after the abort: last stable offset %d, want %d (past the marker)", lso, hwm0+1)
	}
	cl, err := adm.DeleteRecords(ctx, kadm.Offsets{tp.changelog: {0: {Topic: tp.changelog, Partition: 0, At: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := cl.Lookup(tp.changelog, 0); !errors.Is(r.Err, kerr.PolicyViolation) {
		t.Fatalf("DeleteRecords on the changelog: %v, want POLICY_VIOLATION", r.Err)
	}
	// 12. A windowed store's changelog (compact,delete, retention.ms=2000)
	// written in transactions: a committed one, an aborted one and one
	// left open, all with old timestamps, then a fresh record. Retention
	// deletes the old segments, the open transaction's first record with
	// them: EARLIEST moves to a batch boundary, fetches below are out of
	// range, the LSO stays at the log start while the transaction is open,
	// and a restore ends once it is aborted.
	window := app + "-window-changelog"
	wreq := kmsg.NewPtrCreateTopicsRequest()
	wreq.Version, wreq.TimeoutMillis = 7, 30000
	wt := kmsg.NewCreateTopicsRequestTopic()
	wt.Topic, wt.NumPartitions, wt.ReplicationFactor = window, 1, -1
	for _, kv := range [][2]string{{"cleanup.policy", "compact,delete"}, {"retention.ms", "2000"}, {"segment.ms", "100"}, {"message.timestamp.type", "CreateTime"}} {
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = kv[0], kmsg.StringPtr(kv[1])
		wt.Configs = append(wt.Configs, cfg)
	}
	wreq.Topics = append(wreq.Topics, wt)
	if code := c.roundTrip(wreq).(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode; code != 0 {
		t.Fatalf("CreateTopics %s: %s", window, errName(code))
	}
	old := time.Now().Add(-time.Minute)
	wid, oid := app+"-window-1", app+"-window-2"
	wpid, wepoch := eosInitOK(t, c, wid, 60000, -1, -1)
	opid, oepoch := eosInitOK(t, c, oid, 60000, -1, -1)
	for i, commit := range []bool{true, false} {
		if code := eosAddPartitions(t, c, wid, wpid, wepoch, window, 0); code != 0 {
			t.Fatalf("window AddPartitionsToTxn: %s", errName(code))
		}
		if p := eosProduceAt(t, c, window, 0, wpid, wepoch, int32(2*i), old, "w00@0", "1", "w01@0", "1"); p.ErrorCode != 0 {
			t.Fatalf("window produce: %s", errName(p.ErrorCode))
		}
		if code := eosEndTxn(t, c, wid, wpid, wepoch, commit); code != 0 {
			t.Fatalf("window EndTxn: %s", errName(code))
		}
	}
	if code := eosAddPartitions(t, c, oid, opid, oepoch, window, 0); code != 0 {
		t.Fatalf("window AddPartitionsToTxn: %s", errName(code))
	}
	openAt := eosProduceAt(t, c, window, 0, opid, oepoch, 0, old, "w02@0", "1").BaseOffset // 6
	fresh := eosProduceAt(t, c, window, 0, -1, -1, -1, time.Now().Add(30*time.Second), "w03@0", "1").BaseOffset
	if openAt != 6 || fresh != 7 {
		t.Fatalf("window changelog: open transaction at %d, fresh record at %d; want 6 and 7", openAt, fresh)
	}
	retWaitFor(t, 20*time.Second, "retention of the window changelog's old segments", func() (bool, string) {
		start := eosListOffset(t, c, window, 0, -2, 0)
		return start > openAt, fmt.Sprintf("log start %d", start)
	})
	wstart := eosListOffset(t, c, window, 0, -2, 0)
	if bs := parseBatches(t, eosFetch(t, c, window, 0, wstart, 0, 0).RecordBatches); len(bs) == 0 || bs[0].FirstOffset != wstart {
		t.Fatalf("window changelog: log start %d is not the first offset of a batch (%d batches)", wstart, len(bs))
	}
	if fp := eosFetch(t, c, window, 0, wstart-1, 1, 0); fp.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("window changelog fetch below the log start %d: %s, want OFFSET_OUT_OF_RANGE", wstart, errName(fp.ErrorCode))
	}
	if lso := eosListOffset(t, c, window, 0, -1, 1); lso != wstart {
		t.Fatalf("window changelog with a transaction open whose records retention deleted: last stable offset %d, log start %d", lso, wstart)
	}
	if code := eosEndTxn(t, c, oid, opid, oepoch, false); code != 0 {
		t.Fatalf("window abort: %s", errName(code))
	}
	wend := eosListOffset(t, c, window, 0, -1, 0)
	wr := newEOSReader(t, b.Addr(), window, 0, wstart)
	wr.toEnd(wend, 10*time.Second)
	if got := eosKeyValues(wr.records); !slices.Equal(got, []string{"w03@0=1"}) {
		t.Fatalf("window changelog restore from %d to %d: %v, want the fresh record only", wstart, wend, got)
	}

	t.Logf("A: %d transactions (%d aborted records), B: %d commits; %d restores by A, %d by B; %d open-transaction LSO probes; %d watched answers with a transaction open; changelog restores %d records of %d updates after compaction",
		a.txns, len(aborted), bInst.committedCount(), a.restores.Load(), bInst.restores.Load(), a.lsoBelowOK.Load(), openSeen.Load(), compacted, n)
	if a.lsoBelowOK.Load() == 0 {
		t.Fatal("no probe saw an open transaction's records: the LSO check did not run")
	}
}
