package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/groups"
)

// findCoordinatorAt asks broker id for group's coordinator: its node ID,
// or the error code.
func findCoordinatorAt(ctx context.Context, cl *kgo.Client, id int32, group string) (int32, int16, error) {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey, req.CoordinatorKeys = group, []string{group}
	resp, err := req.RequestWith(ctx, cl.Broker(int(id)))
	if err != nil {
		return -1, 0, err
	}
	if len(resp.Coordinators) == 1 { // v4+
		c := resp.Coordinators[0]
		return c.NodeID, c.ErrorCode, nil
	}
	return resp.NodeID, resp.ErrorCode, nil
}

// offsetFetchAt asks broker id for group's committed offsets of topic:
// the group's error code, and the offsets by partition.
func offsetFetchAt(ctx context.Context, cl *kgo.Client, id int32, group, topic string) (int16, map[int32]int64, error) {
	req := kmsg.NewPtrOffsetFetchRequest()
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = group
	rt := kmsg.NewOffsetFetchRequestGroupTopic()
	rt.Topic, rt.Partitions = topic, []int32{0, 1, 2}
	if ts, err := kadm.NewClient(cl).ListTopics(ctx, topic); err == nil {
		rt.TopicID = ts[topic].ID // v10 names topics by ID
	}
	rg.Topics = append(rg.Topics, rt)
	req.Groups = append(req.Groups, rg) // v8+
	resp, err := req.RequestWith(ctx, cl.Broker(int(id)))
	if err != nil {
		return 0, nil, err
	}
	if len(resp.Groups) != 1 {
		return 0, nil, fmt.Errorf("offset fetch answered %d groups", len(resp.Groups))
	}
	g := resp.Groups[0]
	out := map[int32]int64{}
	for _, t := range g.Topics {
		for _, p := range t.Partitions {
			out[p.Partition] = p.Offset
		}
	}
	return g.ErrorCode, out, nil
}

// waitCoordinator waits until every running broker names the same
// coordinator of group, one that accept takes, and that coordinator
// answers OffsetFetch without error; it returns the coordinator and the
// offsets.
func (tc *testCluster) waitCoordinator(ctx context.Context, cl *kgo.Client, group, topic string, running []int32, accept func(int32) bool) (int32, map[int32]int64) {
	tc.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		ids := map[int32]bool{}
		for _, id := range running {
			c, code, err := findCoordinatorAt(ctx, cl, id, group)
			if err != nil || code != 0 {
				c = -1
			}
			ids[c] = true
		}
		if len(ids) == 1 {
			for c := range ids {
				if c > 0 && accept(c) {
					code, offsets, err := offsetFetchAt(ctx, cl, c, group, topic)
					if err == nil && code == 0 {
						return c, offsets
					}
					last = fmt.Sprintf("coordinator %d answers offset fetch %v %d", c, err, code)
				}
			}
		} else {
			last = fmt.Sprintf("coordinators named %v", ids)
		}
		time.Sleep(50 * time.Millisecond)
	}
	tc.t.Fatalf("no coordinator of %s agreed on by %v: %s", group, running, last)
	return -1, nil
}

// TestClusterCoordinatorFailover: with offsets-topic-replication-factor
// 3, __consumer_offsets partitions are Raft groups and the group
// coordinator fails over with their leadership (issue 13 part 3). A
// franz-go consumer group commits what it read of an RF 3 topic; the
// broker coordinating the group is stopped; FindCoordinator on the
// survivors names another broker, which answers OffsetFetch with the
// committed offsets; a new consumer of the group reads exactly the rest
// (nothing twice, nothing skipped). The stopped broker, restarted,
// answers for the group only as the coordinator all brokers name (it may
// lead the partition again: the preferred leader), with the offsets the
// new consumer committed meanwhile. A transactional offset commit is
// refused (INVALID_TXN_STATE).
func TestClusterCoordinatorFailover(t *testing.T) {
	tc := startTestCluster(t, func(c *Config) {
		c.HTTPAddr = "" // a restart on the same port could find it taken
		c.OffsetsTopicReplicationFactor = 3
		c.GroupInitialRebalanceDelay = 0
	})
	ctx := context.Background()
	cl := tc.client(kgo.MetadataMinAge(100 * time.Millisecond))
	tc.waitAgreed(ctx, cl, func(*kmsg.MetadataResponse) bool { return true })
	adm := kadm.NewClient(cl)
	const topic, group, total = "coord-rf3", "coord-readers", 300
	if resp, err := adm.CreateTopic(ctx, 3, 3, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create RF 3: %v %v", err, resp.Err)
	}
	tc.waitReplicated(ctx, cl, topic, 3)
	pr := tc.client(kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	rs := make([]*kgo.Record, total)
	for i := range rs {
		rs[i] = &kgo.Record{Value: []byte(strconv.Itoa(i)), Partition: int32(i % 3)}
	}
	if err := pr.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}

	// The first consumer reads about half and commits exactly what it read.
	groupClient := func() *kgo.Client {
		return tc.client(kgo.ConsumeTopics(topic), kgo.ConsumerGroup(group), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.DisableAutoCommit(), kgo.MetadataMinAge(100*time.Millisecond), kgo.RetryTimeout(30*time.Second),
			kgo.FetchMaxWait(500*time.Millisecond)) // a fetch in flight when a partition is added waits no longer
	}
	seen := map[string]int{}
	first := groupClient()
	var read []*kgo.Record
	for len(read) < total/2 {
		fs := first.PollRecords(ctx, total/2-len(read))
		if err := fs.Err(); err != nil {
			t.Fatalf("first consumer: %v", err)
		}
		read = append(read, fs.Records()...)
	}
	if err := first.CommitRecords(ctx, read...); err != nil {
		t.Fatalf("commit: %v", err)
	}
	committed := map[int32]int64{0: -1, 1: -1, 2: -1} // -1: none committed
	for _, r := range read {
		seen[string(r.Value)]++
		committed[r.Partition] = max(committed[r.Partition], r.Offset+1)
	}
	first.Close()

	running := []int32{1, 2, 3}
	any := func(int32) bool { return true }
	coordinator, offsets := tc.waitCoordinator(ctx, cl, group, topic, running, any)
	if !maps.Equal(offsets, committed) {
		t.Fatalf("offsets on coordinator %d: %v, want %v", coordinator, offsets, committed)
	}

	// The coordinator dies; another broker takes the group over.
	stopped := time.Now()
	tc.stop[coordinator]()
	running = slices.DeleteFunc(running, func(id int32) bool { return id == coordinator })
	next, offsets := tc.waitCoordinator(ctx, cl, group, topic, running, func(id int32) bool { return id != coordinator })
	t.Logf("coordinator %d stopped; broker %d coordinates the group %v later", coordinator, next, time.Since(stopped))
	if !maps.Equal(offsets, committed) {
		t.Fatalf("offsets on the new coordinator %d: %v, want %v", next, offsets, committed)
	}

	// A new consumer resumes exactly after the committed offsets.
	second := groupClient()
	for n := 0; n < total-len(read); {
		fs := second.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("second consumer after %d records: %v", n, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < max(committed[r.Partition], 0) {
				t.Fatalf("record %s/%d@%d read again (committed %d)", r.Topic, r.Partition, r.Offset, committed[r.Partition])
			}
			seen[string(r.Value)]++
			n++
		})
	}
	for i := range total {
		if seen[strconv.Itoa(i)] != 1 {
			t.Fatalf("record %d read %d times", i, seen[strconv.Itoa(i)])
		}
	}
	if err := second.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	second.Close()
	all := map[int32]int64{0: total / 3, 1: total / 3, 2: total / 3}

	// The old coordinator comes back: it answers as coordinator only once
	// every broker names it, and then with the latest offsets.
	tc.start(coordinator)
	running = append(running, coordinator)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		code, offsets, err := offsetFetchAt(ctx, cl, coordinator, group, topic)
		if err != nil {
			continue // not listening yet
		}
		if code == 0 && !maps.Equal(offsets, all) {
			t.Fatalf("the restarted broker %d answers offsets %v, want %v", coordinator, offsets, all)
		}
		if code != 0 && code != kerr.NotCoordinator.Code && code != kerr.CoordinatorLoadInProgress.Code {
			t.Fatalf("the restarted broker %d answers offset fetch with code %d", coordinator, code)
		}
		break
	}
	// Leadership moves back to the partition's preferred replica once it
	// is in sync: wait for it, so that no handover races the checks.
	preferred := preferredCoordinator(ctx, t, cl, group)
	final, offsets := tc.waitCoordinator(ctx, cl, group, topic, running, func(id int32) bool { return id == preferred })
	if !maps.Equal(offsets, all) {
		t.Fatalf("offsets on coordinator %d after the restart: %v, want %v", final, offsets, all)
	}
	for _, id := range running {
		if id == final {
			continue
		}
		if code, _, err := offsetFetchAt(ctx, cl, id, group, topic); err != nil || code != kerr.NotCoordinator.Code {
			t.Fatalf("broker %d (coordinator %d) answers offset fetch: %v code %d; want NOT_COORDINATOR", id, final, err, code)
		}
	}

	// Transactional offset commits are refused on a replicated
	// __consumer_offsets.
	txnID := ""
	for i := 0; txnID == "" && i < 1000; i++ {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType, req.CoordinatorKeys = 1, []string{fmt.Sprint("tx", i)}
		if resp, err := req.RequestWith(ctx, cl.Broker(int(final))); err == nil && resp.Coordinators[0].NodeID == final {
			txnID = fmt.Sprint("tx", i)
		}
	}
	txn := kmsg.NewPtrTxnOffsetCommitRequest()
	txn.TransactionalID, txn.Group, txn.ProducerID, txn.ProducerEpoch = txnID, group, 1, 0
	tt := kmsg.NewTxnOffsetCommitRequestTopic()
	tt.Topic = topic
	tp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	tt.Partitions = append(tt.Partitions, tp)
	txn.Topics = append(txn.Topics, tt)
	tresp, err := txn.RequestWith(ctx, cl.Broker(int(final)))
	if err != nil {
		t.Fatal(err)
	}
	if code := tresp.Topics[0].Partitions[0].ErrorCode; code != kerr.InvalidTxnState.Code {
		t.Fatalf("transactional offset commit of %q: code %d, want INVALID_TXN_STATE", txnID, code)
	}
}

// preferredCoordinator is the preferred replica (the first) of group's
// partition of __consumer_offsets, from Metadata.
func preferredCoordinator(ctx context.Context, t *testing.T, cl *kgo.Client, group string) int32 {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(groups.OffsetsTopic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) == 0 {
		t.Fatalf("metadata of %s: %v %+v", groups.OffsetsTopic, err, resp)
	}
	parts := resp.Topics[0].Partitions
	p := groups.PartitionFor(group, int32(len(parts)))
	for _, mp := range parts {
		if mp.Partition == p && len(mp.Replicas) == 3 {
			return mp.Replicas[0]
		}
	}
	t.Fatalf("metadata of %s: partition %d without three replicas: %+v", groups.OffsetsTopic, p, parts)
	return -1
}
