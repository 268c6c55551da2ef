package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/httpapi"
)

// waitReplicas waits until each broker of ids reports its replica of
// every one of the partitions of topic, each accepted by ok, and returns
// them by broker and partition.
func (tc *testCluster) waitReplicas(what, topic string, partitions int, ids []int32, ok func(id int32, p httpapi.ClusterPartition) bool) map[int32]map[int32]httpapi.ClusterPartition {
	tc.t.Helper()
	var last map[int32]map[int32]httpapi.ClusterPartition
	waitFor(tc.t, 30*time.Second, func() bool {
		last = map[int32]map[int32]httpapi.ClusterPartition{}
		done := true
		for _, id := range ids {
			last[id] = map[int32]httpapi.ClusterPartition{}
			st, _ := clusterStatusOf(tc.t, tc.cfgs[id].HTTPAddr)
			for _, p := range st.Partitions {
				if p.Topic == topic && ok(id, p) {
					last[id][p.Partition] = p
				}
			}
			done = done && len(last[id]) == partitions
		}
		return done
	}, func() string { return fmt.Sprintf("gave up waiting for %s; replicas accepted: %+v", what, last) })
	return last
}

// TestClusterWipedReplicaCatchesUp: a broker whose data directory is
// wiped and which is started again with the same node ID catches up on
// replicated partitions whose logs were compacted (issue 13: snapshots
// for lagging replicas). Three partitions of replication factor 3, one
// led by each broker; DeleteRecords of everything lets every replica
// compact its log; more records and a second DeleteRecords follow. One
// broker stopped, wiped, more records written meanwhile, started again:
// its replicas get the state row the logs were compacted to as a
// snapshot and the entries after it; every partition's ISR has it again,
// its log start and high watermark are the others', and once it leads its
// preferred partition again it serves the same records.
func TestClusterWipedReplicaCatchesUp(t *testing.T) {
	tc := startTestCluster(t, func(c *Config) { c.LogRetentionCheckInterval = 100 * time.Millisecond })
	ctx := context.Background()
	cl := tc.client(kgo.MetadataMinAge(100*time.Millisecond), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	tc.waitAgreed(ctx, cl, func(*kmsg.MetadataResponse) bool { return true })
	adm := kadm.NewClient(cl)
	const topic = "rf3-wiped"
	if resp, err := adm.CreateTopic(ctx, 3, 3, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	leaders := tc.waitPreferredLeaders(ctx, cl, topic)
	all := []int32{1, 2, 3}
	produce := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			for p := range int32(3) {
				if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "p%d-v%d", p, i)}).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	deleteRecords := func(at int64) {
		t.Helper()
		dr, err := adm.DeleteRecords(ctx, kadm.Offsets{topic: {0: {At: at}, 1: {At: at}, 2: {At: at}}})
		if err == nil {
			err = dr.Error()
		}
		if err != nil {
			t.Fatalf("DeleteRecords %d: %v", at, err)
		}
	}
	produce(0, 10)
	deleteRecords(10) // every batch: the logs may be compacted
	compacted := tc.waitReplicas("every replica's log compacted", topic, 3, all, func(_ int32, p httpapi.ClusterPartition) bool {
		return p.LogStart == 10 && p.CompactedIndex > 0
	})
	produce(10, 20)
	deleteRecords(15)

	wiped := leaders[0]
	tc.stop[wiped]()
	if err := os.RemoveAll(tc.cfgs[wiped].DataDir); err != nil {
		t.Fatal(err)
	}
	produce(20, 25)
	tc.start(wiped)
	tc.waitReplicas("the wiped replica caught up", topic, 3, all, func(id int32, p httpapi.ClusterPartition) bool {
		return p.LogStart == 15 && p.HighWatermark == 25 && (id != wiped || p.CompactedIndex >= compacted[id][p.Partition].CompactedIndex)
	})
	tc.waitReplicated(ctx, cl, topic, 3) // every ISR has the three replicas
	if got := tc.waitPreferredLeaders(ctx, cl, topic); got[0] != wiped {
		t.Fatalf("partition 0 led by %d, want its preferred replica %d", got[0], wiped)
	}
	tc.waitReplicas("every leader's ISR whole", topic, 3, all, func(_ int32, p httpapi.ClusterPartition) bool {
		return p.Leader == 0 || p.ISR == nil || len(p.ISR) == 3
	})

	// Partition 0's leader is the wiped broker: what it serves.
	if lo, err := adm.ListStartOffsets(ctx, topic); err != nil || lo[topic][0].Offset != 15 {
		t.Fatalf("ListOffsets earliest from the wiped leader: %v %+v, want 15", err, lo[topic][0])
	}
	if hi, err := adm.ListEndOffsets(ctx, topic); err != nil || hi[topic][0].Offset != 25 {
		t.Fatalf("ListOffsets latest from the wiped leader: %v %+v, want 25", err, hi[topic][0])
	}
	co := tc.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	var got, want []string
	for i := 15; i < 25; i++ {
		want = append(want, fmt.Sprintf("p0-v%d", i))
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for len(got) < len(want) {
		fs := co.PollFetches(cctx)
		if cctx.Err() != nil {
			t.Fatalf("consumed %v from the wiped leader, want %v: %v", got, want, cctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if !slices.Equal(got, want) {
		t.Fatalf("consumed %v from the wiped leader, want %v", got, want)
	}
}
