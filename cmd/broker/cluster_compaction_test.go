package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// consumeKeyed reads topic's partition 0 from the earliest offset to the
// high watermark hw with a new consumer: "offset:key=value" per record
// (value "nil" for a tombstone).
func consumeKeyed(ctx context.Context, t *testing.T, tc *testCluster, topic string, hw int64) []string {
	t.Helper()
	cl := tc.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.MetadataMinAge(100*time.Millisecond))
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var out []string
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%s: read %v, not up to %d: %v", topic, out, hw, ctx.Err())
		}
		done := false
		fs.EachRecord(func(r *kgo.Record) {
			v := string(r.Value)
			if r.Value == nil {
				v = "nil"
			}
			out = append(out, fmt.Sprintf("%d:%s=%s", r.Offset, r.Key, v))
			done = done || r.Offset == hw-1
		})
		if done {
			return out
		}
	}
}

// TestClusterReplicatedCompaction: cleanup.policy=compact on a topic with
// replication factor 3 (issue 13 part 2), created through franz-go's
// admin client. Five keys written four times, one deleted (a tombstone,
// delete.retention.ms 1), and one last record: the leader's check (every
// 100 ms) proposes compaction commands until every replica serves the
// same bytes (cluster status), the same clean range end, and a consumer
// reads only the latest value of each live key and the last record; the
// tombstone went after its horizon. The leader stopped, the new leader
// serves the same records; the old one restarted replays to the same
// bytes. Altering an RF 3 topic to compact,delete is accepted.
func TestClusterReplicatedCompaction(t *testing.T) {
	tc := startTestCluster(t, func(c *Config) { c.LogRetentionCheckInterval = 100 * time.Millisecond })
	ctx := context.Background()
	cl := tc.client(kgo.MetadataMinAge(100 * time.Millisecond))
	tc.waitAgreed(ctx, cl, func(*kmsg.MetadataResponse) bool { return true })
	adm := kadm.NewClient(cl)
	const topic = "rf3-compacted"
	// A check may run between two writes: any dirty batch makes the
	// partition cleanable again (min.cleanable.dirty.ratio 0.01).
	configs := map[string]*string{"cleanup.policy": kmsg.StringPtr("compact"), "delete.retention.ms": kmsg.StringPtr("1"),
		"min.cleanable.dirty.ratio": kmsg.StringPtr("0.01")}
	if resp, err := adm.CreateTopic(ctx, 1, 3, configs, topic); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	tc.waitReplicated(ctx, cl, topic, 1)
	produce := func(key string, value []byte) {
		t.Helper()
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(key), Value: value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 4 {
		for k := range 5 {
			produce(fmt.Sprintf("k%d", k), fmt.Appendf(nil, "r%d", round))
		}
	}
	produce("k0", nil) // 20
	produce("z", []byte("last"))
	const hw = 22
	want := fmt.Sprint([]string{"16:k1=r3", "17:k2=r3", "18:k3=r3", "19:k4=r3", "21:z=last"})
	all := []int32{1, 2, 3}
	tc.waitCompacted(ctx, topic, hw, want, all)

	// The leader stops: the new one serves the same records.
	old, rest := tc.stopLeader(ctx, cl, topic, all)
	tc.waitCompacted(ctx, topic, hw, want, rest)
	tc.start(old)
	tc.waitCompacted(ctx, topic, hw, want, all)

	resp, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "cleanup.policy", Value: kmsg.StringPtr("compact,delete")}}, topic)
	if err == nil {
		err = resp[0].Err
	}
	if err != nil {
		t.Fatalf("alter cleanup.policy=compact,delete on RF 3: %v", err)
	}
}

// waitCompacted waits until the replicas of topic's partition 0 on ids
// report the same bytes, the high watermark hw and the clean range end
// hw-1 (the last batch is never compacted), and a consumer reads want.
func (tc *testCluster) waitCompacted(ctx context.Context, topic string, hw int64, want string, ids []int32) {
	t := tc.t
	t.Helper()
	var got string
	var states []string
	waitFor(t, 30*time.Second, func() bool {
		if got = fmt.Sprint(consumeKeyed(ctx, t, tc, topic, hw)); got != want {
			return false
		}
		states = states[:0]
		same := true
		for _, id := range ids {
			st, _ := clusterStatusOf(t, tc.cfgs[id].HTTPAddr)
			s := "none"
			for _, p := range st.Partitions {
				if p.Topic == topic && p.Partition == 0 {
					s = fmt.Sprintf("bytes %d clean end %d hw %d", p.Bytes, p.CleanEnd, p.HighWatermark)
				}
			}
			same = same && (len(states) == 0 || states[0] == s)
			states = append(states, s)
		}
		return same && states[0] != "none" && strings.HasSuffix(states[0], fmt.Sprintf("clean end %d hw %d", hw-1, hw))
	}, func() string {
		return fmt.Sprintf("%s on %v: consumed %s, want %s; replicas %v", topic, ids, got, want, states)
	})
}
