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

// failover is one run of the coordinator failover tests: three brokers
// with offsets-topic-replication-factor 3, an RF 3 topic of three
// partitions holding total records, and a consumer group reading it.
type failover struct {
	t       *testing.T
	tc      *testCluster
	cl      *kgo.Client
	ctx     context.Context
	topic   string
	group   string
	total   int
	options []kgo.Opt // of the group's consumers
	seen    map[string]int
	running []int32
}

func startFailover(t *testing.T, options ...kgo.Opt) *failover {
	tc := startTestCluster(t, func(c *Config) {
		c.HTTPAddr = "" // a restart on the same port could find it taken
		c.OffsetsTopicReplicationFactor = 3
		c.GroupInitialRebalanceDelay = 0
	})
	f := &failover{t: t, tc: tc, ctx: context.Background(), topic: "coord-rf3", group: "coord-readers", total: 300,
		options: options, seen: map[string]int{}, running: []int32{1, 2, 3}}
	f.cl = tc.client(kgo.MetadataMinAge(100 * time.Millisecond))
	tc.waitAgreed(f.ctx, f.cl, func(*kmsg.MetadataResponse) bool { return true })
	if resp, err := kadm.NewClient(f.cl).CreateTopic(f.ctx, 3, 3, nil, f.topic); err != nil || resp.Err != nil {
		t.Fatalf("create RF 3: %v %v", err, resp.Err)
	}
	tc.waitReplicated(f.ctx, f.cl, f.topic, 3)
	pr := tc.client(kgo.DefaultProduceTopic(f.topic), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	rs := make([]*kgo.Record, f.total)
	for i := range rs {
		rs[i] = &kgo.Record{Value: []byte(strconv.Itoa(i)), Partition: int32(i % 3)}
	}
	if err := pr.ProduceSync(f.ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	return f
}

func (f *failover) groupClient() *kgo.Client {
	return f.tc.client(append([]kgo.Opt{kgo.ConsumeTopics(f.topic), kgo.ConsumerGroup(f.group), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(), kgo.MetadataMinAge(100 * time.Millisecond), kgo.RetryTimeout(30 * time.Second),
		kgo.FetchMaxWait(500 * time.Millisecond)}, // a fetch in flight when a partition is added waits no longer
		f.options...)...)
}

// consumeHalf reads half of the records with one consumer of the group
// and commits exactly what it read: the committed offsets by partition
// (-1: none) and the number read.
func (f *failover) consumeHalf() (map[int32]int64, int) {
	first := f.groupClient()
	defer first.Close()
	var read []*kgo.Record
	for len(read) < f.total/2 {
		fs := first.PollRecords(f.ctx, f.total/2-len(read))
		if err := fs.Err(); err != nil {
			f.t.Fatalf("first consumer: %v", err)
		}
		read = append(read, fs.Records()...)
	}
	if err := first.CommitRecords(f.ctx, read...); err != nil {
		f.t.Fatalf("commit: %v", err)
	}
	committed := map[int32]int64{0: -1, 1: -1, 2: -1}
	for _, r := range read {
		f.seen[string(r.Value)]++
		committed[r.Partition] = max(committed[r.Partition], r.Offset+1)
	}
	return committed, len(read)
}

// stopCoordinator stops the group's coordinator and waits until the
// survivors agree on another one, which must serve committed; it
// returns the stopped broker.
func (f *failover) stopCoordinator(committed map[int32]int64) int32 {
	coordinator, offsets := f.tc.waitCoordinator(f.ctx, f.cl, f.group, f.topic, f.running, func(int32) bool { return true })
	if !maps.Equal(offsets, committed) {
		f.t.Fatalf("offsets on coordinator %d: %v, want %v", coordinator, offsets, committed)
	}
	stopped := time.Now()
	f.tc.stop[coordinator]()
	f.running = slices.DeleteFunc(f.running, func(id int32) bool { return id == coordinator })
	next, offsets := f.tc.waitCoordinator(f.ctx, f.cl, f.group, f.topic, f.running, func(id int32) bool { return id != coordinator })
	f.t.Logf("coordinator %d stopped; broker %d coordinates the group %v later", coordinator, next, time.Since(stopped))
	if !maps.Equal(offsets, committed) {
		f.t.Fatalf("offsets on the new coordinator %d: %v, want %v", next, offsets, committed)
	}
	return coordinator
}

// consumeRest reads the records after committed with a new consumer of
// the group, checks that every record was read exactly once, and commits.
func (f *failover) consumeRest(committed map[int32]int64, read int) {
	second := f.groupClient()
	defer second.Close()
	for n := 0; n < f.total-read; {
		fs := second.PollFetches(f.ctx)
		if err := fs.Err(); err != nil {
			f.t.Fatalf("second consumer after %d records: %v", n, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < max(committed[r.Partition], 0) {
				f.t.Fatalf("record %s/%d@%d read again (committed %d)", r.Topic, r.Partition, r.Offset, committed[r.Partition])
			}
			f.seen[string(r.Value)]++
			n++
		})
	}
	for i := range f.total {
		if f.seen[strconv.Itoa(i)] != 1 {
			f.t.Fatalf("record %d read %d times", i, f.seen[strconv.Itoa(i)])
		}
	}
	if err := second.CommitUncommittedOffsets(f.ctx); err != nil {
		f.t.Fatal(err)
	}
}

// TestClusterCoordinatorFailover: with offsets-topic-replication-factor
// 3, __consumer_offsets partitions are Raft groups and the group
// coordinator fails over with their leadership (issue 13 part 3). A
// franz-go consumer group (classic protocol) commits what it read of an
// RF 3 topic; the broker coordinating the group is stopped;
// FindCoordinator on the survivors names another broker, which answers
// OffsetFetch with the committed offsets; a new consumer of the group
// reads exactly the rest (nothing twice, nothing skipped). The stopped
// broker, restarted, answers for the group only as the coordinator all
// brokers name (it may lead the partition again: the preferred leader),
// with the offsets the new consumer committed meanwhile.
func TestClusterCoordinatorFailover(t *testing.T) {
	f := startFailover(t)
	committed, read := f.consumeHalf()
	coordinator := f.stopCoordinator(committed)
	f.consumeRest(committed, read)
	all := map[int32]int64{0: 100, 1: 100, 2: 100}
	f.restart(coordinator, all)
}

// TestClusterCoordinatorFailoverKIP848 is TestClusterCoordinatorFailover's
// failover for a group of the consumer protocol (KIP-848: the
// ConsumerGroup* records are loaded by the new coordinator).
func TestClusterCoordinatorFailoverKIP848(t *testing.T) {
	f := startFailover(t, kgo.ServerSideBalancer())
	committed, read := f.consumeHalf()
	before := f.describeConsumerGroup()
	f.stopCoordinator(committed)
	if after := f.describeConsumerGroup(); after.Epoch != before.Epoch || after.AssignmentEpoch != before.AssignmentEpoch {
		t.Fatalf("consumer group on the new coordinator: epochs %d/%d, before %d/%d", after.Epoch, after.AssignmentEpoch, before.Epoch, before.AssignmentEpoch)
	}
	f.consumeRest(committed, read)
}

// describeConsumerGroup is the group as its coordinator describes it
// with ConsumerGroupDescribe: a consumer-protocol group (a classic one
// would be GROUP_ID_NOT_FOUND).
func (f *failover) describeConsumerGroup() kmsg.ConsumerGroupDescribeResponseGroup {
	f.t.Helper()
	coordinator, _ := f.tc.waitCoordinator(f.ctx, f.cl, f.group, f.topic, f.running, func(int32) bool { return true })
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{f.group}
	resp, err := req.RequestWith(f.ctx, f.cl.Broker(int(coordinator)))
	if err != nil || len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 || resp.Groups[0].Epoch < 1 {
		f.t.Fatalf("consumer group describe on coordinator %d: %v %+v", coordinator, err, resp)
	}
	return resp.Groups[0]
}

// restart starts the stopped coordinator again: it answers as
// coordinator only once every broker names it, and then with the latest
// offsets (all). It returns the coordinator once leadership is back
// with the partition's preferred replica.
func (f *failover) restart(coordinator int32, all map[int32]int64) int32 {
	ctx, cl, t := f.ctx, f.cl, f.t
	f.tc.start(coordinator)
	f.running = append(f.running, coordinator)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		code, offsets, err := offsetFetchAt(ctx, cl, coordinator, f.group, f.topic)
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
	preferred := preferredCoordinator(ctx, t, cl, f.group)
	final, offsets := f.tc.waitCoordinator(ctx, cl, f.group, f.topic, f.running, func(id int32) bool { return id == preferred })
	if !maps.Equal(offsets, all) {
		t.Fatalf("offsets on coordinator %d after the restart: %v, want %v", final, offsets, all)
	}
	for _, id := range f.running {
		if id == final {
			continue
		}
		if code, _, err := offsetFetchAt(ctx, cl, id, f.group, f.topic); err != nil || code != kerr.NotCoordinator.Code {
			t.Fatalf("broker %d (coordinator %d) answers offset fetch: %v code %d; want NOT_COORDINATOR", id, final, err, code)
		}
	}
	return final
}

// preferredCoordinator is the preferred replica (the first) of group's
// partition of __consumer_offsets, from Metadata.
func preferredCoordinator(ctx context.Context, t *testing.T, cl *kgo.Client, group string) int32 {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(groups.OffsetsTopic)
	req.Topics = append(req.Topics, rt)
	// A broker just restarted may answer before it replayed the
	// metadata (no leader for the partition yet): ask again.
	var last string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) == 0 {
			last = fmt.Sprintf("%v %+v", err, resp)
			continue
		}
		parts := resp.Topics[0].Partitions
		p := groups.PartitionFor(group, int32(len(parts)))
		for _, mp := range parts {
			if mp.Partition == p && len(mp.Replicas) == 3 {
				return mp.Replicas[0]
			}
			if mp.Partition == p {
				last = fmt.Sprintf("partition %d: %+v", p, mp)
			}
		}
	}
	t.Fatalf("metadata of %s: no partition of %s with three replicas: %s", groups.OffsetsTopic, group, last)
	return -1
}
