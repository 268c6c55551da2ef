package main

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClusterShareGroup: a share group (KIP-932) on a 6-partition topic
// of a three-broker cluster, two partitions led by each broker. Three
// franz-go share consumers, each seeded with every broker, receive every
// record exactly once (membership on the group's coordinator, each
// share-partition's state on its leader). A broker that does not
// coordinate the group answers ShareGroupHeartbeat, ShareGroupDescribe
// and the share offsets APIs NOT_COORDINATOR; ShareFetch of a partition
// another broker leads is NOT_LEADER_OR_FOLLOWER.
func TestClusterShareGroup(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three brokers")
	}
	tc := startTestCluster(t, func(c *Config) { c.GroupShareAutoOffsetReset = "earliest" })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl := tc.client()
	tc.waitAgreed(ctx, cl, func(*kmsg.MetadataResponse) bool { return true })
	const topic, group, records = "jobs", "workers", 300
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 6, -1, nil, topic); err != nil {
		t.Fatal(err)
	}
	m := tc.waitAgreed(ctx, cl, func(m *kmsg.MetadataResponse) bool { _, ok := topicOf(m, topic); return ok })
	jobs, _ := topicOf(m, topic)
	leaderOf := map[int32]int32{}
	for _, p := range jobs.Partitions {
		leaderOf[p.Partition] = p.Leader
	}
	prod := tc.client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var rs []*kgo.Record
	for i := 0; i < records; i++ {
		rs = append(rs, &kgo.Record{Value: []byte(fmt.Sprintf("r-%03d", i)), Partition: int32(i % 6)})
	}
	if err := prod.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	delivered := map[string]int{}
	byMember := map[string]int{}
	pollCtx, stopPolling := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("member-%d", i)
		c := tc.client(kgo.ShareGroup(group), kgo.ConsumeTopics(topic), kgo.ClientID(name), kgo.FetchMaxWait(500*time.Millisecond))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pollCtx.Err() == nil {
				fs := c.PollFetches(pollCtx)
				fs.EachRecord(func(r *kgo.Record) {
					r.Ack(kgo.AckAccept)
					mu.Lock()
					delivered[string(r.Value)]++
					byMember[name]++
					mu.Unlock()
				})
				_ = c.FlushAcks(pollCtx)
			}
		}()
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		mu.Lock()
		n := len(delivered)
		mu.Unlock()
		if n == records {
			break
		}
		if time.Now().After(deadline) {
			stopPolling()
			wg.Wait()
			t.Fatalf("%d of %d records delivered; by member %v", n, records, byMember)
		}
		time.Sleep(50 * time.Millisecond)
	}
	stopPolling()
	wg.Wait()
	for v, n := range delivered {
		if n != 1 {
			t.Errorf("record %s delivered %d times; want once", v, n)
		}
	}
	t.Logf("records by member: %v", byMember)

	// The coordinator answers the group APIs, the others NOT_COORDINATOR.
	coordinator := findGroupCoordinator(ctx, t, cl, group)
	for id := int32(1); id <= 3; id++ {
		want := kerr.NotCoordinator.Code
		if id == coordinator {
			want = 0
		}
		d := kmsg.NewPtrShareGroupDescribeRequest()
		d.GroupIDs = []string{group}
		dr, err := d.RequestWith(ctx, cl.Broker(int(id)))
		if err != nil || dr.Groups[0].ErrorCode != want {
			t.Fatalf("ShareGroupDescribe on broker %d (coordinator %d): %v %+v; want code %d", id, coordinator, err, dr, want)
		}
		o := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
		og := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
		og.GroupID = group
		o.Groups = append(o.Groups, og)
		or, err := o.RequestWith(ctx, cl.Broker(int(id)))
		if err != nil || or.Groups[0].ErrorCode != want {
			t.Fatalf("DescribeShareGroupOffsets on broker %d (coordinator %d): %v %+v; want code %d", id, coordinator, err, or, want)
		}
		lg, err := kmsg.NewPtrListGroupsRequest().RequestWith(ctx, cl.Broker(int(id)))
		if err != nil {
			t.Fatalf("ListGroups on broker %d: %v", id, err)
		}
		listed := false
		for _, g := range lg.Groups {
			listed = listed || g.Group == group
		}
		if listed != (id == coordinator) {
			t.Fatalf("ListGroups on broker %d (coordinator %d) lists %s: %v", id, coordinator, group, listed)
		}
		if id == coordinator {
			continue
		}
		hb := kmsg.NewPtrShareGroupHeartbeatRequest()
		hb.GroupID, hb.MemberID, hb.MemberEpoch, hb.SubscribedTopicNames = group, "raw-member", 0, []string{topic}
		hr, err := hb.RequestWith(ctx, cl.Broker(int(id)))
		if err != nil || hr.ErrorCode != kerr.NotCoordinator.Code {
			t.Fatalf("ShareGroupHeartbeat on broker %d (coordinator %d): %v %+v; want NOT_COORDINATOR", id, coordinator, err, hr)
		}
	}
	// ShareFetch of partition 0 on a broker that does not lead it.
	other := leaderOf[0]%3 + 1
	sf := kmsg.NewPtrShareFetchRequest()
	sf.GroupID, sf.MemberID = kmsg.StringPtr(group), kmsg.StringPtr("raw-member")
	sf.MaxWaitMillis, sf.MaxBytes, sf.MaxRecords = 0, 1<<20, 10
	st := kmsg.NewShareFetchRequestTopic()
	st.TopicID = jobs.TopicID
	sp := kmsg.NewShareFetchRequestTopicPartition()
	sp.Partition = 0
	st.Partitions = append(st.Partitions, sp)
	sf.Topics = append(sf.Topics, st)
	fr, err := sf.RequestWith(ctx, cl.Broker(int(other)))
	if err != nil || fr.ErrorCode != 0 || len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != 1 ||
		fr.Topics[0].Partitions[0].ErrorCode != kerr.NotLeaderForPartition.Code || len(fr.Topics[0].Partitions[0].AcquiredRecords) != 0 {
		t.Fatalf("ShareFetch of partition 0 (leader %d) on broker %d: %v %+v; want NOT_LEADER_OR_FOLLOWER", leaderOf[0], other, err, fr)
	}
}

// findGroupCoordinator asks FindCoordinator (key type group) until the
// coordinator of group is placed.
func findGroupCoordinator(ctx context.Context, t *testing.T, cl *kgo.Client, group string) int32 {
	t.Helper()
	for try := 0; ; try++ {
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.CoordinatorKey = group
		resp, err := fc.RequestWith(ctx, cl)
		if err == nil && resp.ErrorCode == 0 {
			return resp.NodeID
		}
		if try == 100 {
			t.Fatalf("FindCoordinator %s: %v %+v", group, err, resp)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
