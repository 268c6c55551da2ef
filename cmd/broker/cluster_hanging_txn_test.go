package main

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClusterAbortHangingTransaction: `kafka-transactions abort` (KIP-664)
// on an RF 3 partition. A franz-go transactional producer commits one
// transaction, then leaves the next one open (a long transaction
// timeout): the partition's LSO stays at its first offset. kadm
// DescribeProducers, answered by the partition's leader from the Raft
// group's state machine, shows the producer with the open transaction's
// start offset and the coordinator epoch of its last marker (before the
// fix it showed no producer: the leader's empty local partition); a
// follower answers NOT_LEADER_OR_FOLLOWER. The WriteTxnMarkers ABORT that
// Kafka's AbortTransaction admin sends (the producer ID, epoch and
// coordinator epoch DescribeProducers gave, to the partition's leader)
// ends it: the LSO moves past the marker, DescribeProducers shows no open
// transaction, and a read_committed consumer reads on past it.
func TestClusterAbortHangingTransaction(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three brokers")
	}
	tc := startTestCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl := tc.client()
	tc.waitAgreed(ctx, cl, func(*kmsg.MetadataResponse) bool { return true })
	const topic = "rf3-hanging"
	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = topic, 3, 3
	create.Topics, create.TimeoutMillis = append(create.Topics, ct), 10000
	if resp, err := create.RequestWith(ctx, cl); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create: %v %+v", err, resp)
	}
	leader := tc.waitPreferredLeaders(ctx, cl, topic)[0] // settled: no handoff to come

	// Everything on partition 0.
	prod := tc.client(kgo.TransactionalID("hanging"), kgo.DefaultProduceTopic(topic), kgo.TransactionTimeout(10*time.Minute),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for _, v := range []string{"committed", "hanging"} {
		if err := prod.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
		if v == "committed" {
			if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
				t.Fatal(err)
			}
		}
	}
	// committed at 0, its COMMIT at 1, hanging at 2 (left open).
	pid, epoch, err := prod.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitLSO(ctx, t, cl, leader, topic, 2)

	adm := kadm.NewClient(cl)
	described := describeProducer(ctx, t, adm, topic, pid)
	if described.CurrentTxnStartOffset != 2 || described.ProducerEpoch != epoch || described.CoordinatorEpoch < 0 ||
		described.LastSequence != 1 || described.LastTimestamp <= 0 || described.Leader != leader {
		t.Fatalf("described producer %+v, want producer %d epoch %d, transaction open at 2, a coordinator epoch (its COMMIT's), last sequence 1, a timestamp, leader %d",
			described, pid, epoch, leader)
	}
	req := kmsg.NewPtrDescribeProducersRequest()
	rt := kmsg.NewDescribeProducersRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{0}
	req.Topics = append(req.Topics, rt)
	if resp, err := req.RequestWith(ctx, cl.Broker(int(leader%3+1))); err != nil || resp.Topics[0].Partitions[0].ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("DescribeProducers to a follower: %v %+v, want NOT_LEADER_OR_FOLLOWER", err, resp)
	}

	// Kafka's AbortTransactionHandler: one marker, transactionResult
	// false, coordinator epoch as DescribeProducers gave it (-1: 0).
	abort := txnMarker{topic, pid, described.ProducerEpoch, false, max(described.CoordinatorEpoch, 0)}
	if codes := writeMarkerFrom(ctx, t, cl, leader, abort, 0); codes[0] != 0 {
		t.Fatalf("abort the hanging transaction: code %d (%v)", codes[0], kerr.ErrorForCode(codes[0]))
	}
	waitLSO(ctx, t, cl, leader, topic, 4) // its ABORT at 3
	if d := describeProducer(ctx, t, adm, topic, pid); d.CurrentTxnStartOffset != -1 {
		t.Fatalf("described producer after the abort %+v, want no open transaction", d)
	}
	plain := tc.client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := plain.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	co := tc.client(kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(0)}}))
	if got := consumeAll(ctx, t, co, 2); !slices.Equal(got[0], []string{"committed", "after"}) {
		t.Fatalf("read_committed: %v, want [committed after]", got[0])
	}
}

// waitLSO waits until broker id answers want as partition 0's
// read_committed latest offset.
func waitLSO(ctx context.Context, t *testing.T, cl *kgo.Client, id int32, topic string, want int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		lso, code := latestOffset(ctx, t, cl, id, topic, 0, 1)
		if code == 0 && lso == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("read_committed latest offset %d (code %d), want %d", lso, code, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// describeProducer is kadm's DescribeProducers answer for producer pid on
// partition 0 of topic.
func describeProducer(ctx context.Context, t *testing.T, adm *kadm.Client, topic string, pid int64) kadm.DescribedProducer {
	t.Helper()
	ds, err := adm.DescribeProducers(ctx, kadm.TopicsSet{topic: {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	var all []kadm.DescribedProducer
	ds.EachPartition(func(p kadm.DescribedProducersPartition) {
		if p.Err != nil {
			t.Fatalf("DescribeProducers %s/%d: %v", p.Topic, p.Partition, p.Err)
		}
	})
	ds.EachProducer(func(d kadm.DescribedProducer) {
		all = append(all, d)
	})
	for _, d := range all {
		if d.ProducerID == pid {
			return d
		}
	}
	t.Fatalf("DescribeProducers of %s/0: %+v, no producer %d", topic, all, pid)
	return kadm.DescribedProducer{}
}
