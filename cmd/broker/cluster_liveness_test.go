package main

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/cluster"
	"github.com/vibemq/broker/httpapi"
)

// TestLivenessFencing: the leader fences a registered voter it saw
// inactive for the whole session timeout, not one that answered in
// between nor an unregistered one; it unfences a fenced broker that
// answers; a follower proposes nothing, and a new term starts the clocks
// again.
func TestLivenessFencing(t *testing.T) {
	t0 := time.Unix(1000, 0)
	status := func(state string, term uint64, active map[uint64]bool) cluster.Status {
		st := cluster.Status{State: state, Term: term}
		for id := uint64(1); id <= 4; id++ {
			st.Members = append(st.Members, cluster.Member{ID: id, Active: active[id], Learner: id == 4})
		}
		return st
	}
	fenced := map[int32]bool{}
	isFenced := func(id int32) bool { return fenced[id] }
	registered := func(id int32) bool { return id != 3 }
	l := &liveness{}
	// Broker 2 inactive, 3 inactive but unregistered, 4 a learner.
	down := map[uint64]bool{1: true}
	if got := l.changes(status("StateLeader", 5, down), registered, isFenced, t0); len(got) != 0 {
		t.Fatalf("first look: %v; want nothing (the clock starts)", got)
	}
	if got := l.changes(status("StateLeader", 5, down), registered, isFenced, t0.Add(brokerSessionTimeout-time.Millisecond)); len(got) != 0 {
		t.Fatalf("before the session timeout: %v", got)
	}
	// Broker 2 answered once: its clock starts again.
	l.changes(status("StateLeader", 5, map[uint64]bool{1: true, 2: true}), registered, isFenced, t0.Add(brokerSessionTimeout))
	if got := l.changes(status("StateLeader", 5, down), registered, isFenced, t0.Add(brokerSessionTimeout+time.Second)); len(got) != 0 {
		t.Fatalf("after an answer: %v", got)
	}
	got := l.changes(status("StateLeader", 5, down), registered, isFenced, t0.Add(2*brokerSessionTimeout+time.Second))
	if !slices.Equal(got, []fenceChange{{2, true}}) {
		t.Fatalf("after the session timeout: %v; want broker 2 fenced", got)
	}
	fenced[2] = true
	if got := l.changes(status("StateFollower", 6, down), registered, isFenced, t0.Add(time.Hour)); len(got) != 0 {
		t.Fatalf("a follower proposed %v", got)
	}
	// Leader again in term 7: broker 2 answers, and is unfenced at once.
	if got := l.changes(status("StateLeader", 7, map[uint64]bool{1: true, 2: true}), registered, isFenced, t0.Add(2*time.Hour)); !slices.Equal(got, []fenceChange{{2, false}}) {
		t.Fatalf("broker 2 answering: %v; want it unfenced", got)
	}
}

// TestClusterPlacementSkipsFencedBroker: with one of three brokers
// stopped, the leader fences it after the session timeout and a new
// topic's partitions all land on the two live brokers; restarted, it is
// unfenced and the next topic is spread over all three.
func TestClusterPlacementSkipsFencedBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three brokers")
	}
	tc := startTestCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl := tc.client()
	m := tc.waitAgreed(ctx, cl, func(*kmsg.MetadataResponse) bool { return true })
	down, live := fenceTargets(m)
	tc.stop[down]()
	waitFenced(t, tc.cfgs[live].HTTPAddr, down, true)

	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 6, -1, nil, "while-down"); err != nil {
		t.Fatal(err)
	}
	if leaders := leadersOf(ctx, t, tc, live, "while-down"); leaders[down] != 0 || len(leaders) != 2 {
		t.Fatalf("while broker %d is down, the partitions are led by %v; want the two live brokers only", down, leaders)
	}

	tc.start(down)
	waitFenced(t, tc.cfgs[live].HTTPAddr, down, false)
	if _, err := adm.CreateTopic(ctx, 6, -1, nil, "after-return"); err != nil {
		t.Fatal(err)
	}
	if leaders := leadersOf(ctx, t, tc, live, "after-return"); len(leaders) != 3 {
		t.Fatalf("after broker %d returned, the partitions are led by %v; want all three", down, leaders)
	}
}

// fenceTargets picks, from the agreed Metadata m of a three-broker
// cluster, the broker to stop (down: a follower, so the metadata leader,
// which fences it, keeps its view) and the other follower (live) to ask
// about it.
func fenceTargets(m *kmsg.MetadataResponse) (down, live int32) {
	down = m.ControllerID%3 + 1
	return down, down%3 + 1
}

// waitFenced waits until broker id's fencing, as the cluster status of the
// broker at httpAddr shows it, is want.
func waitFenced(t *testing.T, httpAddr string, id int32, want bool) {
	t.Helper()
	waitClusterStatus(t, httpAddr, fmt.Sprintf("broker %d fenced %v", id, want), func(st httpapi.ClusterStatus) bool {
		return slices.ContainsFunc(st.Members, func(m httpapi.ClusterMember) bool { return m.NodeID == id && m.Fenced == want })
	})
}

// leadersOf counts the partitions of topic each broker leads, as broker
// id's Metadata says once it has the topic.
func leadersOf(ctx context.Context, t *testing.T, tc *testCluster, id int32, topic string) map[int32]int {
	t.Helper()
	cl := tc.client()
	var out map[int32]int
	var err error
	waitFor(t, 30*time.Second, func() bool {
		var m *kmsg.MetadataResponse
		if m, err = metadataOf(ctx, cl, id); err != nil {
			return false
		}
		tp, ok := topicOf(m, topic)
		if !ok || len(tp.Partitions) == 0 {
			return false
		}
		out = map[int32]int{}
		for _, p := range tp.Partitions {
			out[p.Leader]++
		}
		return true
	}, func() string { return fmt.Sprintf("broker %d's metadata lacks %s: %v", id, topic, err) })
	return out
}

// TestClusterMetadataLeavesOutFencedBroker: once the leader fenced a
// stopped broker, Metadata and DescribeCluster leave it out, as KRaft's
// brokers do (KafkaApis lists getAliveBrokerNodes); DescribeCluster v2
// with IncludeFencedBrokers lists it with IsFenced (KIP-1073); the RF 1
// partition it led has leader -1 (LEADER_NOT_AVAILABLE in Metadata) and
// the broker as offline replica, in DescribeTopicPartitions too; a group
// it coordinates gets COORDINATOR_NOT_AVAILABLE from FindCoordinator.
// Restarted and unfenced, it is listed and leads again. Pins what
// TestNetnsTxnCoordinatorKill found: Metadata kept listing a fenced
// broker, so a franz-go transactional producer kept dialing its dead
// coordinator (it drops a coordinator only once Metadata drops its
// broker) until the broker came back.
func TestClusterMetadataLeavesOutFencedBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three brokers")
	}
	tc := startTestCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl := tc.client()
	m := tc.waitAgreed(ctx, cl, func(*kmsg.MetadataResponse) bool { return true })
	down, live := fenceTargets(m)
	const topic = "fenced-rf1"
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 3, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	m = tc.waitAgreed(ctx, cl, func(m *kmsg.MetadataResponse) bool { tp, ok := topicOf(m, topic); return ok && len(tp.Partitions) == 3 })
	tp, _ := topicOf(m, topic)
	p := slices.IndexFunc(tp.Partitions, func(p kmsg.MetadataResponseTopicPartition) bool { return p.Leader == down })
	if p < 0 {
		t.Fatalf("no partition of %s is led by broker %d: %s", topic, down, clusterSummary(m))
	}
	fv := fencedView{ctx: ctx, t: t, cl: cl, at: live, id: down, topic: topic, partition: tp.Partitions[p].Partition}
	fv.group = fv.groupCoordinatedBy()
	fv.check(false)

	tc.stop[down]()
	waitFenced(t, tc.cfgs[live].HTTPAddr, down, true)
	fv.check(true)

	tc.start(down)
	waitFenced(t, tc.cfgs[live].HTTPAddr, down, false)
	fv.check(false)
}

// fencedView checks what broker at tells clients about broker id, the
// only replica of partition of topic and coordinator of group.
type fencedView struct {
	ctx       context.Context
	t         *testing.T
	cl        *kgo.Client
	at, id    int32
	topic     string
	partition int32
	group     string
}

// groupCoordinatedBy is a group whose coordinator is broker id.
func (v fencedView) groupCoordinatedBy() string {
	v.t.Helper()
	for i := range 200 {
		g := fmt.Sprintf("fenced-group-%d", i)
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			node, code, err := findCoordinatorAt(v.ctx, v.cl, v.at, g)
			if err == nil && code == 0 {
				if node == v.id {
					return g
				}
				break
			}
			if time.Now().After(deadline) {
				v.t.Fatalf("FindCoordinator %s: %v, code %d", g, err, code)
			}
		}
	}
	v.t.Fatalf("no group of 200 is coordinated by broker %d", v.id)
	return ""
}

// check asserts broker at's Metadata, DescribeCluster (without and with
// IncludeFencedBrokers), DescribeTopicPartitions and FindCoordinator
// given broker id's fencing.
func (v fencedView) check(fenced bool) {
	t, b := v.t, v.cl.Broker(int(v.at))
	t.Helper()
	want, wantAll := []int32{1, 2, 3}, []int32{1, 2, 3}
	wantLeader, wantCode, wantOffline := v.id, int16(0), []int32{}
	if fenced {
		want = slices.DeleteFunc(slices.Clone(want), func(id int32) bool { return id == v.id })
		wantAll[v.id-1] = -v.id
		wantLeader, wantCode, wantOffline = -1, kerr.LeaderNotAvailable.Code, []int32{v.id}
	}
	m, err := kmsg.NewPtrMetadataRequest().RequestWith(v.ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int32
	for _, br := range m.Brokers {
		ids = append(ids, br.NodeID)
	}
	slices.Sort(ids)
	tp, _ := topicOf(m, v.topic)
	if !slices.Equal(ids, want) || len(tp.Partitions) != 3 {
		t.Fatalf("broker %d fenced %v: Metadata lists brokers %v and %d partitions, want %v and 3", v.id, fenced, ids, len(tp.Partitions), want)
	}
	if mp := tp.Partitions[v.partition]; mp.Leader != wantLeader || mp.ErrorCode != wantCode || !slices.Equal(mp.Replicas, []int32{v.id}) || !slices.Equal(mp.OfflineReplicas, wantOffline) {
		t.Fatalf("broker %d fenced %v: Metadata partition %d: leader %d code %d replicas %v offline %v; want leader %d code %d offline %v", v.id, fenced, v.partition, mp.Leader, mp.ErrorCode, mp.Replicas, mp.OfflineReplicas, wantLeader, wantCode, wantOffline)
	}
	if got := v.describeCluster(false); !slices.Equal(got, want) {
		t.Fatalf("broker %d fenced %v: DescribeCluster lists %v, want %v", v.id, fenced, got, want)
	}
	if got := v.describeCluster(true); !slices.Equal(got, wantAll) {
		t.Fatalf("broker %d fenced %v: DescribeCluster with fenced brokers lists %v (negative: IsFenced), want %v", v.id, fenced, got, wantAll)
	}
	dreq := kmsg.NewPtrDescribeTopicPartitionsRequest()
	dreq.Topics = []kmsg.DescribeTopicPartitionsRequestTopic{{Topic: v.topic}}
	dresp, err := dreq.RequestWith(v.ctx, b)
	if err != nil || len(dresp.Topics) != 1 || len(dresp.Topics[0].Partitions) != 3 {
		t.Fatalf("DescribeTopicPartitions: %v %+v", err, dresp)
	}
	if dp := dresp.Topics[0].Partitions[v.partition]; dp.LeaderID != wantLeader || !slices.Equal(dp.OfflineReplicas, wantOffline) {
		t.Fatalf("broker %d fenced %v: DescribeTopicPartitions partition %d: leader %d offline %v; want %d %v", v.id, fenced, v.partition, dp.LeaderID, dp.OfflineReplicas, wantLeader, wantOffline)
	}
	node, code, err := findCoordinatorAt(v.ctx, v.cl, v.at, v.group)
	if fenced && (err != nil || code != kerr.CoordinatorNotAvailable.Code) || !fenced && (err != nil || code != 0 || node != v.id) {
		t.Fatalf("broker %d fenced %v: FindCoordinator %s: node %d code %d %v", v.id, fenced, v.group, node, code, err)
	}
}

// describeCluster is broker at's DescribeCluster brokers, sorted; with
// fenced, IncludeFencedBrokers is set and a broker answered IsFenced is
// negated.
func (v fencedView) describeCluster(fenced bool) []int32 {
	req := kmsg.NewPtrDescribeClusterRequest()
	req.IncludeFencedBrokers = fenced
	resp, err := req.RequestWith(v.ctx, v.cl.Broker(int(v.at)))
	if err != nil || resp.ErrorCode != 0 {
		v.t.Fatalf("DescribeCluster: %v %+v", err, resp)
	}
	var ids []int32
	for _, b := range resp.Brokers {
		id := b.NodeID
		if b.IsFenced {
			id = -id
		}
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b int32) int { return int(abs32(a) - abs32(b)) })
	return ids
}

func abs32(x int32) int32 {
	if x < 0 {
		return -x
	}
	return x
}
