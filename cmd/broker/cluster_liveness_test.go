package main

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/cluster"
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
	down := m.ControllerID%3 + 1 // a follower: the leader keeps its view
	live := down%3 + 1
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

// waitFenced waits until broker id's fencing, as the cluster status of the
// broker at httpAddr shows it, is want.
func waitFenced(t *testing.T, httpAddr string, id int32, want bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if st, ok := clusterStatusOf(t, httpAddr); ok {
			for _, m := range st.Members {
				if m.NodeID == id && m.Fenced == want {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker %d fenced never became %v", id, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// leadersOf counts the partitions of topic each broker leads, as broker
// id's Metadata says once it has the topic.
func leadersOf(ctx context.Context, t *testing.T, tc *testCluster, id int32, topic string) map[int32]int {
	t.Helper()
	cl := tc.client()
	deadline := time.Now().Add(30 * time.Second)
	for {
		m, err := metadataOf(ctx, cl, id)
		if err == nil {
			if tp, ok := topicOf(m, topic); ok && len(tp.Partitions) > 0 {
				out := map[int32]int{}
				for _, p := range tp.Partitions {
					out[p.Leader]++
				}
				return out
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker %d's metadata lacks %s: %v", id, topic, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
