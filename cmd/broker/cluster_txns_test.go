package main

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/topics"
)

// txnProduce sends one transactional batch (one record, value) of producer
// pid at epoch, sequence seq, to partition p of topic on broker id and
// returns its base offset and error code.
func txnProduce(ctx context.Context, t *testing.T, cl *kgo.Client, id int32, topic string, p int32, pid int64, epoch int16, seq int32, value string) (int64, int16) {
	t.Helper()
	now := time.Now().UnixMilli()
	batch, err := topics.EncodeBatch(topics.BatchHeader{Attributes: 0x10, BaseTimestamp: now, MaxTimestamp: now,
		ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq}, []topics.Record{{Value: []byte(value)}})
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis, req.TransactionID = -1, 10000, kmsg.StringPtr("rf3-txn")
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = p, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl.Broker(int(id)))
	if err != nil {
		t.Fatalf("produce to broker %d: %v", id, err)
	}
	sp := resp.Topics[0].Partitions[0]
	return sp.BaseOffset, sp.ErrorCode
}

// writeMarker sends WriteTxnMarkers v1 (one marker, coordinator epoch 0)
// for partitions ps of topic to broker id and returns the error codes by
// partition.
func writeMarker(ctx context.Context, t *testing.T, cl *kgo.Client, id int32, topic string, pid int64, epoch int16, commit bool, ps ...int32) []int16 {
	t.Helper()
	return writeMarkerFrom(ctx, t, cl, id, txnMarker{topic, pid, epoch, commit, 0}, ps...)
}

// txnMarker is one WriteTxnMarkers marker for a topic.
type txnMarker struct {
	topic            string
	pid              int64
	epoch            int16
	commit           bool
	coordinatorEpoch int32
}

// writeMarkerFrom is writeMarker for marker mk (its coordinator epoch).
func writeMarkerFrom(ctx context.Context, t *testing.T, cl *kgo.Client, id int32, mk txnMarker, ps ...int32) []int16 {
	t.Helper()
	topic := mk.topic
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.Version = 1
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch = mk.pid, mk.epoch, mk.commit, mk.coordinatorEpoch
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = topic, ps
	m.Topics = append(m.Topics, mt)
	req.Markers = append(req.Markers, m)
	resp, err := req.RequestWith(ctx, cl.Broker(int(id)))
	if err != nil {
		t.Fatalf("write txn markers to broker %d: %v", id, err)
	}
	var codes []int16
	for _, p := range resp.Markers[0].Topics[0].Partitions {
		codes = append(codes, p.ErrorCode)
	}
	return codes
}

// latestOffset asks broker id for partition p's latest offset, with
// isolation level read_committed (1) or read_uncommitted (0).
func latestOffset(ctx context.Context, t *testing.T, cl *kgo.Client, id int32, topic string, p int32, isolation int8) (int64, int16) {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID, req.IsolationLevel = -1, isolation
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = p, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl.Broker(int(id)))
	if err != nil {
		return -1, kerr.NetworkException.Code
	}
	sp := resp.Topics[0].Partitions[0]
	return sp.Offset, sp.ErrorCode
}

// TestClusterReplicatedTransactions: transactions on RF 3 partitions
// (issue 13, C2 and C3), driven with raw requests as the transaction
// coordinator would: a producer ID from InitProducerID; transactional
// batches produced to each partition's leader (one partition led by each
// broker) open the transaction there without asking a coordinator;
// WriteTxnMarkers to a follower answers NOT_LEADER_OR_FOLLOWER, to the
// leader NONE (again NONE: it ends nothing); a newer epoch's marker fences
// the older one (INVALID_PRODUCER_EPOCH); a marker of an older
// coordinator epoch than the partition's last one is
// TRANSACTION_COORDINATOR_FENCED and leaves the producer's next
// transaction open (a deposed coordinator's late marker). One transaction committed,
// one aborted, one committed: a franz-go read_committed consumer reads
// exactly the committed records of every partition. ListOffsets latest
// with read_committed answers the LSO (the open transaction's first
// offset). The leader stopped while a transaction is open: the new leader
// holds the LSO there, and the marker sent to it ends the transaction.
func TestClusterReplicatedTransactions(t *testing.T) {
	tc := startTestCluster(t)
	ctx := context.Background()
	cl := tc.client()
	tc.waitAgreed(ctx, cl, func(*kmsg.MetadataResponse) bool { return true })
	const topic = "rf3-txn"
	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = topic, 3, 3
	create.Topics, create.TimeoutMillis = append(create.Topics, ct), 10000
	if resp, err := create.RequestWith(ctx, cl); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create: %v %+v", err, resp)
	}
	leaders := tc.waitPreferredLeaders(ctx, cl, topic)
	ipid := kmsg.NewPtrInitProducerIDRequest()
	ipid.TransactionTimeoutMillis = 60000
	iresp, err := ipid.RequestWith(ctx, cl)
	if err != nil || iresp.ErrorCode != 0 {
		t.Fatalf("InitProducerID: %v %+v", err, iresp)
	}
	pid, epoch := iresp.ProducerID, iresp.ProducerEpoch
	parts := []int32{0, 1, 2}
	want := map[int32][]string{}
	seq := int32(0)
	for i, commit := range []bool{true, false, true} {
		for _, p := range parts {
			v := []string{"c1", "a2", "c3"}[i] + "-" + string(rune('0'+p))
			if _, code := txnProduce(ctx, t, cl, leaders[p], topic, p, pid, epoch, seq, v); code != 0 {
				t.Fatalf("transaction %d: produce to partition %d: code %d", i, p, code)
			}
			if commit {
				want[p] = append(want[p], v)
			}
		}
		seq++
		if i == 0 {
			// Open on every partition: the LSO is its first offset (0).
			if lso, code := latestOffset(ctx, t, cl, leaders[1], topic, 1, 1); code != 0 || lso != 0 {
				t.Fatalf("read_committed latest offset with a transaction open at 0: %d (code %d), want 0", lso, code)
			}
			follower := leaders[0]%3 + 1
			if codes := writeMarker(ctx, t, cl, follower, topic, pid, epoch, commit, 0); codes[0] != kerr.NotLeaderForPartition.Code {
				t.Fatalf("marker to a follower: code %d, want NOT_LEADER_OR_FOLLOWER", codes[0])
			}
		}
		for _, p := range parts {
			for range 2 { // the second ends nothing: NONE, no offset
				if codes := writeMarker(ctx, t, cl, leaders[p], topic, pid, epoch, commit, p); codes[0] != 0 {
					t.Fatalf("transaction %d: marker to the leader of %d: code %d", i, p, codes[0])
				}
			}
		}
	}
	for _, p := range parts {
		// Three records and three markers: the LSO is the high watermark.
		if lso, code := latestOffset(ctx, t, cl, leaders[p], topic, p, 1); code != 0 || lso != 6 {
			t.Fatalf("partition %d: read_committed latest offset %d (code %d), want 6", p, lso, code)
		}
	}
	co := tc.client(kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(0), 1: kgo.NewOffset().At(0), 2: kgo.NewOffset().At(0)}}))
	got := consumeAll(ctx, t, co, 6)
	for _, p := range parts {
		if !slices.Equal(got[p], want[p]) {
			t.Fatalf("read_committed partition %d (led by %d): %v, want %v", p, leaders[p], got[p], want[p])
		}
	}
	co.Close()

	// A fencing marker of a newer epoch (ending nothing) on partition 1:
	// the old epoch's batches and markers are refused there.
	if codes := writeMarker(ctx, t, cl, leaders[1], topic, pid, epoch+1, false, 1); codes[0] != 0 {
		t.Fatalf("fencing marker: code %d", codes[0])
	}
	if _, code := txnProduce(ctx, t, cl, leaders[1], topic, 1, pid, epoch, seq, "zombie"); code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("produce of the fenced epoch: code %d, want INVALID_PRODUCER_EPOCH", code)
	}
	if codes := writeMarker(ctx, t, cl, leaders[1], topic, pid, epoch, true, 1); codes[0] != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("marker of the fenced epoch: code %d, want INVALID_PRODUCER_EPOCH", codes[0])
	}

	// A stale coordinator's late marker on partition 2: the coordinator
	// of epoch 3 commits, the producer opens its next transaction, the
	// ABORT of coordinator epoch 2 is TRANSACTION_COORDINATOR_FENCED and
	// changes nothing (decided at apply on every replica).
	for i, step := range []struct {
		commit           bool
		coordinatorEpoch int32
		code             int16
		lso              int64
	}{
		{true, 3, 0, 8},
		{false, 2, kerr.TransactionCoordinatorFenced.Code, 8},
		{true, 3, 0, 10},
	} {
		if i < 2 { // transaction N at 6, N+1 at 8
			if at, code := txnProduce(ctx, t, cl, leaders[2], topic, 2, pid, epoch, seq+int32(i), "c5-2"); code != 0 || at != 6+2*int64(i) {
				t.Fatalf("step %d: produce to partition 2: offset %d code %d, want %d", i, at, code, 6+2*i)
			}
		}
		if codes := writeMarkerFrom(ctx, t, cl, leaders[2], txnMarker{topic, pid, epoch, step.commit, step.coordinatorEpoch}, 2); codes[0] != step.code {
			t.Fatalf("step %d: marker of coordinator epoch %d: code %d, want %d", i, step.coordinatorEpoch, codes[0], step.code)
		}
		if lso, code := latestOffset(ctx, t, cl, leaders[2], topic, 2, 1); code != 0 || lso != step.lso {
			t.Fatalf("step %d: read_committed latest offset %d (code %d), want %d", i, lso, code, step.lso)
		}
	}

	// A transaction open on partition 0 when its leader stops.
	first, code := txnProduce(ctx, t, cl, leaders[0], topic, 0, pid, epoch, seq, "c4-0")
	if code != 0 || first != 6 {
		t.Fatalf("produce the open transaction: offset %d code %d, want 6", first, code)
	}
	if lso, _ := latestOffset(ctx, t, cl, leaders[0], topic, 0, 1); lso != first {
		t.Fatalf("read_committed latest offset %d, want %d (the open transaction)", lso, first)
	}
	if hw, _ := latestOffset(ctx, t, cl, leaders[0], topic, 0, 0); hw != first+1 {
		t.Fatalf("read_uncommitted latest offset %d, want %d", hw, first+1)
	}
	old := leaders[0]
	tc.stop[old]()
	var leader int32
	waitFor(t, 30*time.Second, func() bool {
		for id := int32(1); id <= 3; id++ {
			if id == old {
				continue
			}
			if lso, code := latestOffset(ctx, t, cl, id, topic, 0, 1); code == 0 {
				if lso != first {
					t.Fatalf("the new leader %d: read_committed latest offset %d, want %d (the open transaction)", id, lso, first)
				}
				leader = id
			}
		}
		return leader != 0
	}, func() string { return "no new leader of partition 0 answered ListOffsets" })
	if codes := writeMarker(ctx, t, cl, leader, topic, pid, epoch, true, 0); codes[0] != 0 {
		t.Fatalf("marker to the new leader %d: code %d", leader, codes[0])
	}
	if lso, code := latestOffset(ctx, t, cl, leader, topic, 0, 1); code != 0 || lso != first+2 {
		t.Fatalf("read_committed latest offset after the marker: %d (code %d), want %d", lso, code, first+2)
	}
	co = tc.client(kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(first)}}))
	if got := consumeAll(ctx, t, co, 1); !slices.Equal(got[0], []string{"c4-0"}) {
		t.Fatalf("read_committed from %d on the new leader: %v, want [c4-0]", first, got[0])
	}
}
