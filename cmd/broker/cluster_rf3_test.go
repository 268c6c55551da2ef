package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// waitReplicated waits until every broker's Metadata shows topic with
// partitions partitions, each led, with three replicas all in sync, and
// returns the leaders by partition.
func (tc *testCluster) waitReplicated(ctx context.Context, cl *kgo.Client, topic string, partitions int) map[int32]int32 {
	tc.t.Helper()
	m := tc.waitAgreed(ctx, cl, func(m *kmsg.MetadataResponse) bool {
		mt, ok := topicOf(m, topic)
		if !ok || len(mt.Partitions) != partitions {
			return false
		}
		for _, p := range mt.Partitions {
			if p.Leader < 1 || len(p.Replicas) != 3 || len(p.ISR) != 3 || p.ErrorCode != 0 {
				return false
			}
		}
		return true
	})
	mt, _ := topicOf(m, topic)
	leaders := map[int32]int32{}
	for _, p := range mt.Partitions {
		leaders[p.Partition] = p.Leader
	}
	return leaders
}

// consumeAll reads partitions [0, n) of topic from offset 0 until want
// records arrived, and returns each partition's values in offset order.
func consumeAll(ctx context.Context, t *testing.T, cl *kgo.Client, want int) map[int32][]string {
	t.Helper()
	got := map[int32][]string{}
	n := 0
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for n < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records: %v", n, want, ctx.Err())
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			got[r.Partition] = append(got[r.Partition], string(r.Value))
			n++
		})
	}
	return got
}

// TestClusterReplicatedTopic: a topic with replication factor 3 on three
// brokers (issue 13 step 3). Created with franz-go's admin client, every
// broker's Metadata shows each partition with three replicas, all in
// sync, a leader with the leader epoch, leaders spread over the brokers
// (each preferred replica campaigns). An idempotent acks=all producer
// writes every partition; a consumer reads every record back once, in
// order; ListOffsets and OffsetForLeaderEpoch answer from the Raft log; a
// follower answers NOT_LEADER_OR_FOLLOWER; a fetch with an older leader
// epoch FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH;
// an added partition is replicated; a topic deleted and created again
// starts a new log (transactions: TestClusterReplicatedTransactions;
// compaction: TestClusterReplicatedCompaction); with a follower
// stopped the ISR shrinks and min.insync.replicas 3 refuses acks=all
// (NOT_ENOUGH_REPLICAS), not acks=1.
func TestClusterReplicatedTopic(t *testing.T) {
	tc := startTestCluster(t)
	ctx := context.Background()
	cl := tc.client()
	tc.waitAgreed(ctx, cl, func(*kmsg.MetadataResponse) bool { return true })
	adm := kadm.NewClient(cl)
	resp, err := adm.CreateTopic(ctx, 3, 3, nil, "rf3")
	if err != nil || resp.Err != nil {
		t.Fatalf("create RF 3: %v %v %s", err, resp.Err, resp.ErrMessage)
	}
	// Each partition ends up led by its preferred replica (it campaigns,
	// or the leadership is handed back to it): one per broker.
	leaders := tc.waitPreferredLeaders(ctx, cl, "rf3")
	t.Logf("leaders %v", leaders)
	for id := int32(1); id <= 3; id++ {
		m := scrape(t, tc.cfgs[id].HTTPAddr)
		if !strings.Contains(m, "broker_replicated_partitions 3\n") || !strings.Contains(m, "broker_replicated_partitions_under_replicated 0\n") {
			t.Errorf("broker %d /metrics: want 3 replicated partitions, none under-replicated", id)
		}
	}
	// cluster status lists the broker's replicas; the one it leads with
	// the ISR.
	if st, ok := clusterStatusOf(t, tc.cfgs[leaders[1]].HTTPAddr); !ok || len(st.Partitions) != 3 ||
		st.Partitions[1].Leader != uint64(leaders[1]) || len(st.Partitions[1].ISR) != 3 || st.Partitions[1].Topic != "rf3" {
		t.Errorf("cluster status of broker %d: %+v", leaders[1], st.Partitions)
	}

	pr := tc.client(kgo.DefaultProduceTopic("rf3"), kgo.RequiredAcks(kgo.AllISRAcks()))
	const total = 300
	want := map[int32][]string{}
	for i := range total {
		r := &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: []byte(fmt.Sprintf("v%d", i)), Partition: int32(i % 3)}
		res := pr.ProduceSync(ctx, r)
		if err := res.FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
		want[r.Partition] = append(want[r.Partition], string(r.Value))
	}

	co := tc.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"rf3": {0: kgo.NewOffset().At(0), 1: kgo.NewOffset().At(0), 2: kgo.NewOffset().At(0)}}))
	got := consumeAll(ctx, t, co, total)
	for p := int32(0); p < 3; p++ {
		if !slices.Equal(got[p], want[p]) {
			t.Fatalf("partition %d: read %d records %v, want %v", p, len(got[p]), head(got[p]), head(want[p]))
		}
	}

	ends, err := adm.ListEndOffsets(ctx, "rf3")
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil || o.Offset != int64(len(want[o.Partition])) {
			t.Errorf("end offset of partition %d: %d %v, want %d", o.Partition, o.Offset, o.Err, len(want[o.Partition]))
		}
	})

	// The leader's epoch, then the errors of followers and stale epochs.
	m, err := metadataOf(ctx, cl, leaders[0])
	if err != nil {
		t.Fatal(err)
	}
	mt, _ := topicOf(m, "rf3")
	epoch := mt.Partitions[0].LeaderEpoch
	if epoch < 1 {
		t.Fatalf("leader epoch %d, want the raft term (>= 1)", epoch)
	}
	oe := kmsg.NewPtrOffsetForLeaderEpochRequest()
	oe.ReplicaID = -1
	ot := kmsg.NewOffsetForLeaderEpochRequestTopic()
	ot.Topic = "rf3"
	op := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	op.Partition, op.CurrentLeaderEpoch, op.LeaderEpoch = 0, epoch, epoch
	ot.Partitions = append(ot.Partitions, op)
	oe.Topics = append(oe.Topics, ot)
	oresp, err := oe.RequestWith(ctx, cl.Broker(int(leaders[0])))
	if err != nil {
		t.Fatal(err)
	}
	if p := oresp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.LeaderEpoch != epoch || p.EndOffset != int64(len(want[0])) {
		t.Fatalf("OffsetForLeaderEpoch: code %d epoch %d end %d, want epoch %d end %d", p.ErrorCode, p.LeaderEpoch, p.EndOffset, epoch, len(want[0]))
	}
	follower := leaders[0]%3 + 1
	for _, c := range []struct {
		broker, epoch int32
		code          int16
	}{
		{follower, epoch, kerr.NotLeaderForPartition.Code},
		{leaders[0], epoch - 1, kerr.FencedLeaderEpoch.Code},
		{leaders[0], epoch + 1, kerr.UnknownLeaderEpoch.Code},
	} {
		f := kmsg.NewPtrFetchRequest()
		f.Version, f.ReplicaID, f.MaxBytes, f.MaxWaitMillis = 12, -1, 1<<20, 0
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic, ft.TopicID = "rf3", mt.TopicID
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.CurrentLeaderEpoch, fp.PartitionMaxBytes = 0, c.epoch, 1<<20
		ft.Partitions = append(ft.Partitions, fp)
		f.Topics = append(f.Topics, ft)
		fresp, err := f.RequestWith(ctx, cl.Broker(int(c.broker)))
		if err != nil {
			t.Fatal(err)
		}
		if got := fresp.Topics[0].Partitions[0].ErrorCode; got != c.code {
			t.Errorf("fetch from %d with epoch %d: code %d, want %d", c.broker, c.epoch, got, c.code)
		}
	}
	// Partitions added to a replicated topic are replicated too; a topic
	// deleted and created again under its name gets new groups.
	if _, err := adm.CreatePartitions(ctx, 1, "rf3"); err != nil {
		t.Fatal(err)
	}
	tc.waitReplicated(ctx, cl, "rf3", 4)
	if res := pr.ProduceSync(ctx, &kgo.Record{Value: []byte("p3"), Partition: 3}); res.FirstErr() != nil {
		t.Fatalf("produce to the added partition: %v", res.FirstErr())
	}
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, "again"); err != nil {
		t.Fatal(err)
	}
	tc.waitReplicated(ctx, cl, "again", 1)
	if res := pr.ProduceSync(ctx, &kgo.Record{Topic: "again", Value: []byte("first")}); res.FirstErr() != nil {
		t.Fatal(res.FirstErr())
	}
	if _, err := adm.DeleteTopics(ctx, "again"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, func() bool {
		_, err = adm.CreateTopic(ctx, 1, 3, nil, "again")
		return err == nil
	}, func() string { return fmt.Sprintf("create again: %v", err) })
	tc.waitReplicated(ctx, cl, "again", 1)
	// A new client: pr keeps the deleted topic's ID (UNKNOWN_TOPIC_ID).
	pr2 := tc.client()
	if res := pr2.ProduceSync(ctx, &kgo.Record{Topic: "again", Value: []byte("second")}); res.FirstErr() != nil || res[0].Record.Offset != 0 {
		t.Fatalf("produce to the topic created again: %v, offset %d (want 0: a new log)", res.FirstErr(), res[0].Record.Offset)
	}

	// The topic's settings apply as on a local partition: the leader
	// checks the batch (max.message.bytes) and stamps LogAppendTime
	// before it proposes, so every replica stores the same bytes.
	if _, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{
		"message.timestamp.type": kmsg.StringPtr("LogAppendTime"), "max.message.bytes": kmsg.StringPtr("2000")}, "lat"); err != nil {
		t.Fatal(err)
	}
	tc.waitReplicated(ctx, cl, "lat", 1)
	before := time.Now().Add(-time.Second)
	big := make([]byte, 5000) // random: compressed, it is still above 2000
	_, _ = rand.Read(big)
	if res := pr2.ProduceSync(ctx, &kgo.Record{Topic: "lat", Value: big}); !errors.Is(res.FirstErr(), kerr.MessageTooLarge) {
		t.Fatalf("a 5000-byte record to max.message.bytes 2000: %v, want MESSAGE_TOO_LARGE", res.FirstErr())
	}
	if res := pr2.ProduceSync(ctx, &kgo.Record{Topic: "lat", Value: []byte("stamped"), Timestamp: time.Unix(1, 0)}); res.FirstErr() != nil {
		t.Fatal(res.FirstErr())
	}
	lat := tc.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"lat": {0: kgo.NewOffset().At(0)}}))
	for got := false; !got; {
		fs := lat.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			got = true
			if r.Attrs.TimestampType() != 1 || r.Timestamp.Before(before) {
				t.Errorf("record on a LogAppendTime topic: timestamp %v type %d, want the append time (type 1)", r.Timestamp, r.Attrs.TimestampType())
			}
		})
	}
	lat.Close()

	// min.insync.replicas 3 with one follower of partition 0 down: its
	// leader's ISR shrinks to two and acks=all is NOT_ENOUGH_REPLICAS.
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "min.insync.replicas", Value: kmsg.StringPtr("3")}}, "rf3"); err != nil {
		t.Fatal(err)
	}
	down := follower // every broker is a replica of partition 0
	tc.stop[down]()
	waitFor(t, 20*time.Second, func() bool {
		m, err := metadataOf(ctx, cl, leaders[0])
		if err != nil {
			return false
		}
		mt, ok := topicOf(m, "rf3")
		return ok && len(mt.Partitions[0].ISR) == 2 && !slices.Contains(mt.Partitions[0].ISR, down)
	}, func() string { return fmt.Sprintf("the ISR of partition 0 did not shrink without broker %d", down) })
	if m := scrape(t, tc.cfgs[leaders[0]].HTTPAddr); !strings.Contains(m, "broker_replicated_partitions_under_replicated ") || strings.Contains(m, "broker_replicated_partitions_under_replicated 0\n") {
		t.Errorf("broker %d /metrics: want partition 0 (at least) under-replicated", leaders[0])
	}
	prq := kmsg.NewPtrProduceRequest()
	prq.Acks, prq.TimeoutMillis = -1, 5000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "rf3"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Partition, pp.Records = 0, oneRecordBatch(t)
	pt.Partitions = append(pt.Partitions, pp)
	prq.Topics = append(prq.Topics, pt)
	presp, err := prq.RequestWith(ctx, cl.Broker(int(leaders[0])))
	if err != nil {
		t.Fatal(err)
	}
	if got := presp.Topics[0].Partitions[0].ErrorCode; got != kerr.NotEnoughReplicas.Code {
		t.Fatalf("acks=all with 2 in sync and min.insync.replicas 3: code %d, want NOT_ENOUGH_REPLICAS", got)
	}
	// min.insync.replicas binds acks=all only (Kafka). franz-go sends a
	// Produce request with its client's acks.
	one := tc.client(kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	prq.Acks = 1
	if presp, err = prq.RequestWith(ctx, one.Broker(int(leaders[0]))); err != nil || presp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("acks=1 with 2 in sync: %v %+v %s", err, presp, *presp.Topics[0].Partitions[0].ErrorMessage)
	}
}

func head(s []string) []string { return s[:min(len(s), 5)] }

// waitPreferredLeaders waits until the three partitions of topic are each
// led by a different broker (their preferred replicas) and returns them.
func (tc *testCluster) waitPreferredLeaders(ctx context.Context, cl *kgo.Client, topic string) map[int32]int32 {
	tc.t.Helper()
	var leaders map[int32]int32
	waitFor(tc.t, 20*time.Second, func() bool {
		leaders = tc.waitReplicated(ctx, cl, topic, 3)
		return leaders[0] != leaders[1] && leaders[1] != leaders[2] && leaders[0] != leaders[2]
	}, func() string {
		return fmt.Sprintf("leaders %v: want one partition led by each broker (the preferred replicas)", leaders)
	})
	return leaders
}
