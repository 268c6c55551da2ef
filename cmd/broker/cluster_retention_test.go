package main

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// replicaLogStarts are the log start offsets of partition 0 of topic on
// the given brokers' replicas (cluster status), -1 where unknown.
func (tc *testCluster) replicaLogStarts(topic string, ids ...int32) map[int32]int64 {
	out := map[int32]int64{}
	for _, id := range ids {
		out[id] = -1
		st, ok := clusterStatusOf(tc.t, tc.cfgs[id].HTTPAddr)
		if !ok {
			continue
		}
		for _, p := range st.Partitions {
			if p.Topic == topic && p.Partition == 0 {
				out[id] = p.LogStart
			}
		}
	}
	return out
}

// waitLogStart waits until every broker of ids reports log start want for
// partition 0 of topic.
func (tc *testCluster) waitLogStart(topic string, want int64, ids ...int32) {
	tc.t.Helper()
	var got map[int32]int64
	waitFor(tc.t, 30*time.Second, func() bool {
		got = tc.replicaLogStarts(topic, ids...)
		for _, v := range got {
			if v != want {
				return false
			}
		}
		return true
	}, func() string { return fmt.Sprintf("log starts of %s/0 %v, want %d on every one", topic, got, want) })
}

// stopLeader stops the leader of topic's partition 0, as broker 1's
// Metadata names it, and returns it and the other brokers of all.
func (tc *testCluster) stopLeader(ctx context.Context, cl *kgo.Client, topic string, all []int32) (old int32, rest []int32) {
	tc.t.Helper()
	m, err := metadataOf(ctx, cl, 1)
	if err != nil {
		tc.t.Fatal(err)
	}
	mt, _ := topicOf(m, topic)
	old = mt.Partitions[0].Leader
	tc.stop[old]()
	for _, id := range all {
		if id != old {
			rest = append(rest, id)
		}
	}
	return old, rest
}

// firstConsumed is the offset and value of the first record a new
// consumer reading topic from the earliest offset gets.
func firstConsumed(ctx context.Context, t *testing.T, tc *testCluster, topic string) (int64, string) {
	t.Helper()
	cl := tc.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.MetadataMinAge(100*time.Millisecond))
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		fs := cl.PollRecords(ctx, 1)
		if ctx.Err() != nil {
			t.Fatalf("nothing consumed from %s: %v", topic, ctx.Err())
		}
		if rs := fs.Records(); len(rs) > 0 {
			return rs[0].Offset, string(rs[0].Value)
		}
	}
}

// TestClusterReplicatedRetention: DeleteRecords and retention.bytes on a
// topic with replication factor 3 (issue 13 part 2). DeleteRecords through
// franz-go's admin client answers the new low watermark and every
// replica's log start follows; a consumer from the earliest offset starts
// there, ListOffsets earliest answers it; a lower offset changes nothing,
// one above the high watermark is OFFSET_OUT_OF_RANGE. retention.bytes
// set small drops the old batches on every replica (the leader's check,
// every 100 ms here). The leader stopped, the new leader reports the same
// log start and serves from it; the old leader restarted recovers it.
// retention.ms 1 then empties the log on every replica.
func TestClusterReplicatedRetention(t *testing.T) {
	tc := startTestCluster(t, func(c *Config) { c.LogRetentionCheckInterval = 100 * time.Millisecond })
	ctx := context.Background()
	cl := tc.client(kgo.MetadataMinAge(100 * time.Millisecond))
	tc.waitAgreed(ctx, cl, func(*kmsg.MetadataResponse) bool { return true })
	adm := kadm.NewClient(cl)
	const topic = "rf3-retention"
	if resp, err := adm.CreateTopic(ctx, 1, 3, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	tc.waitReplicated(ctx, cl, topic, 1)
	for i := range 30 { // one batch each
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "v%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	all := []int32{1, 2, 3}

	dr, err := adm.DeleteRecords(ctx, kadm.Offsets{topic: {0: {At: 10}}})
	if r := dr[topic][0]; err != nil || r.Err != nil || r.LowWatermark != 10 {
		t.Fatalf("DeleteRecords 10: %v %+v, want low watermark 10", err, r)
	}
	tc.waitLogStart(topic, 10, all...)
	if off, v := firstConsumed(ctx, t, tc, topic); off != 10 || v != "v10" {
		t.Fatalf("consumed %s at %d first, want v10 at 10", v, off)
	}
	if lo, err := adm.ListStartOffsets(ctx, topic); err != nil || lo[topic][0].Offset != 10 {
		t.Fatalf("ListOffsets earliest: %v %+v, want 10", err, lo[topic][0])
	}
	dr, err = adm.DeleteRecords(ctx, kadm.Offsets{topic: {0: {At: 5}}})
	if r := dr[topic][0]; err != nil || r.Err != nil || r.LowWatermark != 10 {
		t.Fatalf("DeleteRecords 5 below the log start: %v %+v, want low watermark 10", err, r)
	}
	dr, err = adm.DeleteRecords(ctx, kadm.Offsets{topic: {0: {At: 31}}})
	if r := dr[topic][0]; err != nil || !errors.Is(r.Err, kerr.OffsetOutOfRange) {
		t.Fatalf("DeleteRecords 31 above the high watermark: %v %+v, want OFFSET_OUT_OF_RANGE", err, r)
	}

	// retention.bytes 1: every batch but the last one goes.
	alter := func(op kadm.IncrementalOp, value *string) {
		t.Helper()
		resp, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: op, Name: "retention.bytes", Value: value}}, topic)
		if err == nil {
			err = resp[0].Err
		}
		if err != nil {
			t.Fatalf("alter retention.bytes: %v", err)
		}
	}
	alter(kadm.SetConfig, kmsg.StringPtr("1"))
	tc.waitLogStart(topic, 29, all...)
	alter(kadm.DeleteConfig, nil)

	// The leader stops: the new one serves from the same log start.
	old, rest := tc.stopLeader(ctx, cl, topic, all)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v30")}).FirstErr(); err != nil {
		t.Fatalf("produce after the leader stopped: %v", err)
	}
	var lo kadm.ListedOffsets
	waitFor(t, 30*time.Second, func() bool {
		lo, err = adm.ListStartOffsets(ctx, topic)
		if err != nil || lo[topic][0].Err != nil {
			return false
		}
		if got := lo[topic][0].Offset; got != 29 {
			t.Fatalf("the new leader's earliest offset %d, want 29", got)
		}
		return true
	}, func() string { return fmt.Sprintf("no earliest offset from a new leader: %v %+v", err, lo) })
	tc.waitLogStart(topic, 29, rest...)
	if off, v := firstConsumed(ctx, t, tc, topic); off != 29 || v != "v29" {
		t.Fatalf("consumed %s at %d first from the new leader, want v29 at 29", v, off)
	}
	tc.start(old)
	tc.waitLogStart(topic, 29, all...)

	// retention.ms 1: every batch is older, the log empties at 31 on
	// every replica, the restarted one included.
	// The restarted broker may take the request before it has heard from
	// the metadata leader (NOT_CONTROLLER, retriable; kadm does not retry
	// it): ask again until it is taken.
	var resp kadm.AlterConfigsResponses
	waitFor(t, 30*time.Second, func() bool {
		resp, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: kmsg.StringPtr("1")}}, topic)
		if err == nil && resp[0].Err == nil {
			return true
		}
		if err == nil && !errors.Is(resp[0].Err, kerr.NotController) {
			t.Fatalf("alter retention.ms: %v %v", err, resp)
		}
		return false
	}, func() string { return fmt.Sprintf("alter retention.ms: %v %v", err, resp) })
	tc.waitLogStart(topic, 31, all...)
}
