package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/groups"
	"github.com/vibemq/broker/httpapi"
)

// TestClusterCoordinatorCompaction: the replicated __consumer_offsets is
// compacted (issue 13; it grew without bound before: enforceRetention
// skipped coordinator partitions). Three brokers with
// offsets-topic-replication-factor 3 and a retention check every 100 ms;
// a group commits the same three partitions 150 times (150 batches of
// three offset records). Every replica of the group's offsets partition
// ends with the same high watermark, log start and bytes: the bytes of
// the last two batches only (compaction emptied the others, the log start
// moved past them and the Raft log was trimmed: compacted index above 0). The
// coordinator stopped, the new one loads the compacted log and serves the
// latest offsets.
func TestClusterCoordinatorCompaction(t *testing.T) {
	tc := startTestCluster(t, func(c *Config) {
		c.OffsetsTopicReplicationFactor = 3
		c.LogRetentionCheckInterval = 100 * time.Millisecond
	})
	ctx := context.Background()
	cl := tc.client(kgo.MetadataMinAge(100 * time.Millisecond))
	tc.waitAgreed(ctx, cl, func(*kmsg.MetadataResponse) bool { return true })
	adm := kadm.NewClient(cl)
	const topic, group, commits = "coord-compacted", "busy-group", 150
	if resp, err := adm.CreateTopic(ctx, 3, 3, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	tc.waitReplicated(ctx, cl, topic, 3)
	want := map[int32]int64{}
	for i := range int64(commits) {
		os := kadm.Offsets{}
		for p := range int32(3) {
			want[p] = i*10 + int64(p)
			os.AddOffset(topic, p, want[p], -1)
		}
		resp, err := adm.CommitOffsets(ctx, group, os)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
	}

	all := []int32{1, 2, 3}
	st, _ := clusterStatusOf(t, tc.cfgs[1].HTTPAddr)
	n := int32(0)
	for _, p := range st.Partitions {
		if p.Topic == groups.OffsetsTopic {
			n++
		}
	}
	part := groups.PartitionFor(group, n)
	// Each commit is one batch of at least a 61-byte header: compacted,
	// the partition holds a tenth of that at most (the last two batches:
	// the last one is never compacted, as Kafka's active segment, so the
	// one before keeps the latest records of the clean range).
	uncompacted := int64(commits * 61)
	var last []string
	waitFor(t, 60*time.Second, func() bool {
		last = last[:0]
		for _, id := range all {
			st, _ := clusterStatusOf(t, tc.cfgs[id].HTTPAddr)
			s := "none"
			for _, p := range st.Partitions {
				if p.Topic == groups.OffsetsTopic && p.Partition == part {
					s = replicaState(p, uncompacted)
				}
			}
			last = append(last, s)
		}
		return last[0] != "none" && !slices.ContainsFunc(last, func(s string) bool { return s != last[0] || !strings.HasPrefix(s, "compacted ") })
	}, func() string {
		return fmt.Sprintf("partition %d of %s not compacted alike on every replica: %q", part, groups.OffsetsTopic, last)
	})
	t.Logf("partition %d of %s on every replica: %s", part, groups.OffsetsTopic, last[0])

	coordinator, offsets := tc.waitCoordinator(ctx, cl, group, topic, all, func(int32) bool { return true })
	if !maps.Equal(offsets, want) {
		t.Fatalf("offsets on coordinator %d: %v, want %v", coordinator, offsets, want)
	}
	tc.stop[coordinator]()
	running := slices.DeleteFunc(slices.Clone(all), func(id int32) bool { return id == coordinator })
	next, offsets := tc.waitCoordinator(ctx, cl, group, topic, running, func(id int32) bool { return id != coordinator })
	if !maps.Equal(offsets, want) {
		t.Fatalf("offsets on the new coordinator %d, loaded from the compacted log: %v, want %v", next, offsets, want)
	}
}

// replicaState describes replica p of a coordinator partition as
// "compacted ..." once its log start is above 0, its Raft log was
// trimmed and its bytes are under a tenth of uncompacted, else as
// "not compacted ...".
func replicaState(p httpapi.ClusterPartition, uncompacted int64) string {
	s := fmt.Sprintf("hw %d log start %d bytes %d", p.HighWatermark, p.LogStart, p.Bytes)
	if p.LogStart > 0 && p.CompactedIndex > 0 && p.Bytes*10 < uncompacted {
		return "compacted " + s
	}
	return fmt.Sprintf("not compacted %s compacted index %d", s, p.CompactedIndex)
}
