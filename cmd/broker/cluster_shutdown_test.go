package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClusterControlledShutdown: a broker stopped as SIGTERM stops it
// (run's context cancelled) hands its leaderships over before it exits
// (cluster_shutdown.go). Three brokers, an RF 3 topic with one partition
// led by each; the broker that also leads the metadata group is stopped.
// Right when its run returns, with no waiting, no survivor's Raft view
// names it leader of its partition or of the metadata group, and a
// survivor leads its partition (without the hand-over the survivors still
// follow it for an election timeout). An idempotent acks=all producer
// keeps producing to every partition, and every record is read back once,
// in order.
func TestClusterControlledShutdown(t *testing.T) {
	tc := startTestCluster(t)
	ctx := context.Background()
	cl := tc.client(kgo.MetadataMinAge(50e6))
	tc.waitAgreed(ctx, cl, func(*kmsg.MetadataResponse) bool { return true })
	adm := kadm.NewClient(cl)
	if resp, err := adm.CreateTopic(ctx, 3, 3, nil, "rolling"); err != nil || resp.Err != nil {
		t.Fatalf("create RF 3: %v %v", err, resp)
	}
	leaders := tc.waitPreferredLeaders(ctx, cl, "rolling")
	st, ok := clusterStatusOf(t, tc.cfgs[1].HTTPAddr)
	if !ok || st.Raft == nil || st.Raft.Leader == 0 {
		t.Fatalf("no metadata leader: %+v", st.Raft)
	}
	victim := int32(st.Raft.Leader)
	var led int32 = -1
	for p, l := range leaders {
		if l == victim {
			led = p
		}
	}
	t.Logf("leaders %v; stopping broker %d (metadata leader, leads partition %d)", leaders, victim, led)

	pr := tc.client(kgo.DefaultProduceTopic("rolling"), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.MetadataMinAge(50e6))
	want := map[int32][]string{}
	produce := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			r := &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: fmt.Appendf(nil, "v%d", i), Partition: int32(i % 3)}
			if err := pr.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("produce %d: %v", i, err)
			}
			want[r.Partition] = append(want[r.Partition], string(r.Value))
		}
	}
	produce(0, 60)

	tc.stop[victim]()
	var survivors []int32
	for id := int32(1); id <= 3; id++ {
		if id != victim {
			survivors = append(survivors, id)
		}
	}
	leading := false
	for _, id := range survivors {
		st, ok := clusterStatusOf(t, tc.cfgs[id].HTTPAddr)
		if !ok {
			t.Fatalf("cluster status of broker %d", id)
		}
		if st.Raft.Leader == uint64(victim) {
			t.Errorf("broker %d still follows the stopped broker %d in the metadata group", id, victim)
		}
		for _, p := range st.Partitions {
			if p.Topic != "rolling" || p.Partition != led {
				continue
			}
			if p.Leader == uint64(victim) {
				t.Errorf("broker %d still follows the stopped broker %d in partition %d", id, victim, led)
			}
			leading = leading || p.Leader == uint64(id)
		}
	}
	if !leading {
		t.Errorf("no survivor leads partition %d once broker %d stopped", led, victim)
	}

	produce(60, 120)
	co := tc.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"rolling": {0: kgo.NewOffset().At(0), 1: kgo.NewOffset().At(0), 2: kgo.NewOffset().At(0)}}))
	got := consumeAll(ctx, t, co, 120)
	for p := int32(0); p < 3; p++ {
		if !slices.Equal(got[p], want[p]) {
			t.Errorf("partition %d: read %v, want %v", p, head(got[p]), head(want[p]))
		}
	}
}
