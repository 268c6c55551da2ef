package kafkaproto

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/groups"
	"github.com/vibemq/broker/txns"
)

// startTxnTestServer is startTestServer with a transaction coordinator
// and topic "fence" (one partition).
func startTxnTestServer(t *testing.T) string {
	t.Helper()
	store, tm := openTestTopics(t, false, "fence")
	coord, err := txns.Open(store, tm, txns.Config{Logger: zerolog.Nop()}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	_, addr := serveTest(t, Config{Txns: coord}, tm, coord.Close, func() { _ = store.Close() })
	return addr
}

// TestWriteTxnMarkersCoordinatorFenced pins the bug where a deposed
// transaction coordinator's late WriteTxnMarkers for transaction N ended
// transaction N+1 of the same producer: a marker whose coordinator epoch
// is lower than that of the producer's last marker on the partition is
// answered TRANSACTION_COORDINATOR_FENCED (52) and changes nothing (LSO,
// the open transaction); one of the same epoch ends it. DescribeProducers
// reports the epoch (what `kafka-transactions abort` sends back).
func TestWriteTxnMarkersCoordinatorFenced(t *testing.T) {
	addr := startTxnTestServer(t)
	ctx := context.Background()
	producer := newClient(t, addr, kgo.TransactionalID("fence-tx"), kgo.DefaultProduceTopic("fence"))
	admin := newClient(t, addr)
	if err := producer.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := producer.ProduceSync(ctx, &kgo.Record{Value: []byte("n")}).FirstErr(); err != nil { // 0
		t.Fatal(err)
	}
	describe := func() kmsg.DescribeProducersResponseTopicPartitionActiveProducer {
		t.Helper()
		req := kmsg.NewPtrDescribeProducersRequest()
		rt := kmsg.NewDescribeProducersRequestTopic()
		rt.Topic, rt.Partitions = "fence", []int32{0}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, admin)
		if err != nil {
			t.Fatal(err)
		}
		if ps := resp.Topics[0].Partitions[0].ActiveProducers; len(ps) == 1 {
			return ps[0]
		}
		t.Fatalf("DescribeProducers: %+v, want one producer", resp.Topics[0].Partitions[0])
		return kmsg.DescribeProducersResponseTopicPartitionActiveProducer{}
	}
	pr := describe()
	writeMarker := func(commit bool, coordinatorEpoch int32) int16 {
		t.Helper()
		req := kmsg.NewPtrWriteTxnMarkersRequest()
		m := kmsg.NewWriteTxnMarkersRequestMarker()
		m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch = pr.ProducerID, int16(pr.ProducerEpoch), commit, coordinatorEpoch
		mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		mt.Topic, mt.Partitions = "fence", []int32{0}
		m.Topics = append(m.Topics, mt)
		req.Markers = append(req.Markers, m)
		resp, err := req.RequestWith(ctx, admin)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Markers[0].Topics[0].Partitions[0].ErrorCode
	}
	lastStable := func() int64 {
		t.Helper()
		req := kmsg.NewPtrListOffsetsRequest()
		req.IsolationLevel = 1 // read_committed: the LSO
		lt := kmsg.NewListOffsetsRequestTopic()
		lt.Topic = "fence"
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Timestamp = -1
		lt.Partitions = append(lt.Partitions, lp)
		req.Topics = append(req.Topics, lt)
		resp, err := req.RequestWith(ctx, admin)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0].Offset
	}

	// The new coordinator (epoch 5) commits N; the producer goes on with
	// N+1 on the partition (its first batch opens it at 2).
	if code := writeMarker(true, 5); code != 0 {
		t.Fatalf("COMMIT of coordinator epoch 5: %v", kerr.ErrorForCode(code))
	}
	if err := producer.ProduceSync(ctx, &kgo.Record{Value: []byte("n+1")}).FirstErr(); err != nil { // 2
		t.Fatal(err)
	}
	if lso := lastStable(); lso != 2 {
		t.Fatalf("LSO %d, want 2 (N+1 open)", lso)
	}
	// The deposed coordinator (epoch 4) is late with its ABORT of N.
	if code := writeMarker(false, 4); code != kerr.TransactionCoordinatorFenced.Code {
		t.Fatalf("ABORT of coordinator epoch 4 after 5: %v, want TRANSACTION_COORDINATOR_FENCED", kerr.ErrorForCode(code))
	}
	if lso, pr := lastStable(), describe(); lso != 2 || pr.CurrentTxnStartOffset != 2 || pr.CoordinatorEpoch != 5 {
		t.Fatalf("after the fenced marker: LSO %d, producer %+v; want LSO 2, N+1 open at 2, coordinator epoch 5", lso, pr)
	}
	if code := writeMarker(false, 5); code != 0 {
		t.Fatalf("ABORT of coordinator epoch 5: %v", kerr.ErrorForCode(code))
	}
	if lso, pr := lastStable(), describe(); lso != 4 || pr.CurrentTxnStartOffset != -1 {
		t.Fatalf("after the ABORT: LSO %d, producer %+v; want LSO 4, nothing open", lso, pr)
	}
}

// startOffsetsTxnServer is a server with a group coordinator (one
// partition of __consumer_offsets) and topic "t" (one partition).
func startOffsetsTxnServer(t *testing.T) (string, *groups.Coordinator) {
	t.Helper()
	store, tm := openTestTopics(t, false, "t")
	gc, err := groups.Open(store, tm, groups.Config{Logger: zerolog.Nop(), OffsetsTopicPartitions: 1}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	_, addr := serveTest(t, Config{Groups: gc}, tm, func() { _ = store.Close() })
	return addr, gc
}

// TestWriteTxnMarkersOffsetsCoordinatorFenced pins the bug where a
// deposed transaction coordinator's late COMMIT on a partition of
// __consumer_offsets committed the pending transactional offsets of the
// producer's next transaction (same producer epoch): it is answered
// TRANSACTION_COORDINATOR_FENCED (52) and the offsets stay pending; the
// new coordinator's marker commits them. The offsets are staged through
// the group coordinator (on a single node TxnOffsetCommit stages them in
// the transaction coordinator instead, which ends them without markers).
func TestWriteTxnMarkersOffsetsCoordinatorFenced(t *testing.T) {
	addr, gc := startOffsetsTxnServer(t)
	ctx := context.Background()
	admin := newClient(t, addr)
	stage := func(offset int64) {
		t.Helper()
		err := gc.StageTxnOffsets(groups.TxnOffsetsRequest{ProducerID: 7, ProducerEpoch: 0, Commit: groups.CommitRequest{Group: "g", Generation: -1,
			Topics: []groups.CommitTopic{{Topic: "t", Partitions: []groups.CommitPartition{{Offset: offset, LeaderEpoch: -1}}}}}}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
	}
	writeMarker := func(coordinatorEpoch int32) int16 {
		t.Helper()
		req := kmsg.NewPtrWriteTxnMarkersRequest()
		m := kmsg.NewWriteTxnMarkersRequestMarker()
		m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch = 7, 0, true, coordinatorEpoch
		mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		mt.Topic, mt.Partitions = groups.OffsetsTopic, []int32{0}
		m.Topics = append(m.Topics, mt)
		req.Markers = append(req.Markers, m)
		resp, err := req.RequestWith(ctx, admin)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Markers[0].Topics[0].Partitions[0].ErrorCode
	}
	// fetch is t/0 of group g read with require_stable (KIP-447): the
	// offset and the partition's error code.
	fetch := func() (int64, int16) {
		t.Helper()
		req := kmsg.NewPtrOffsetFetchRequest()
		req.RequireStable = true
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = "g"
		rt := kmsg.NewOffsetFetchRequestGroupTopic()
		rt.Topic, rt.Partitions = "t", []int32{0}
		rg.Topics = append(rg.Topics, rt)
		req.Groups = append(req.Groups, rg)
		resp, err := req.RequestWith(ctx, admin)
		if err != nil {
			t.Fatal(err)
		}
		p := resp.Groups[0].Topics[0].Partitions[0]
		return p.Offset, p.ErrorCode
	}

	stage(10)
	if code := writeMarker(5); code != 0 {
		t.Fatalf("COMMIT of coordinator epoch 5: %v", kerr.ErrorForCode(code))
	}
	if off, code := fetch(); off != 10 || code != 0 {
		t.Fatalf("after the COMMIT: offset %d (%v), want 10", off, kerr.ErrorForCode(code))
	}
	stage(20) // the next transaction, same producer epoch
	if code := writeMarker(4); code != kerr.TransactionCoordinatorFenced.Code {
		t.Fatalf("COMMIT of coordinator epoch 4 after 5: %v, want TRANSACTION_COORDINATOR_FENCED", kerr.ErrorForCode(code))
	}
	if _, code := fetch(); code != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("after the fenced marker: %v, want UNSTABLE_OFFSET_COMMIT (the offsets still pending)", kerr.ErrorForCode(code))
	}
	if code := writeMarker(5); code != 0 {
		t.Fatalf("COMMIT of coordinator epoch 5: %v", kerr.ErrorForCode(code))
	}
	if off, code := fetch(); off != 20 || code != 0 {
		t.Fatalf("after the second COMMIT: offset %d (%v), want 20", off, kerr.ErrorForCode(code))
	}
}
