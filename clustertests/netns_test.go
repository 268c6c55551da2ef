package clustertests

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/vibemq/broker/httpapi"
)

var brokerBin string

func TestMain(m *testing.M) {
	code := func() int {
		dir, err := os.MkdirTemp("", "clustertests-bin")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer func() { _ = os.RemoveAll(dir) }()
		if unavailable() == "" {
			if brokerBin, err = Binary(dir); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
		}
		return m.Run()
	}()
	os.Exit(code)
}

// wait is the bound of one convergence: generous, as the machine is
// shared; the tests assert states, never how fast they came.
const wait = 45 * time.Second

func ids(from, to int) []int {
	var r []int
	for i := from; i <= to; i++ {
		r = append(r, i)
	}
	return r
}

// registered is the member view: node id -> registered Kafka address.
func registered(st httpapi.ClusterStatus) map[int32]string {
	m := map[int32]string{}
	for _, mb := range st.Members {
		m[mb.NodeID] = mb.KafkaAddr
	}
	return m
}

// sameLeader: every node of ids answers in raft mode and names the same
// leader, one of ids, which calls itself leader.
func sameLeader(sts map[int]httpapi.ClusterStatus, ids []int) uint64 {
	var leader uint64
	for _, id := range ids {
		st, ok := sts[id]
		if !ok || st.Raft == nil || st.Raft.Leader == 0 || (leader != 0 && st.Raft.Leader != leader) {
			return 0
		}
		leader = st.Raft.Leader
	}
	if !slices.Contains(ids, int(leader)) || sts[int(leader)].Raft.State != "StateLeader" {
		return 0
	}
	return leader
}

// converged: ids agree on the leader and term, have the same commit and
// applied index (all applied), and hold the same registrations, which
// are the nodes' current Kafka addresses.
func (c *Cluster) converged(sts map[int]httpapi.ClusterStatus, ids []int) bool {
	if sameLeader(sts, ids) == 0 {
		return false
	}
	first := sts[ids[0]].Raft
	for _, id := range ids {
		r := sts[id].Raft
		if r.Term != first.Term || r.Commit != first.Commit || r.Applied != r.Commit {
			return false
		}
		reg := registered(sts[id])
		if len(reg) != len(c.Nodes) {
			return false
		}
		for _, n := range c.Nodes {
			if reg[int32(n.ID)] != n.KafkaAddr() {
				return false
			}
		}
	}
	return true
}

func (c *Cluster) waitConverged(what string, ids []int) map[int]httpapi.ClusterStatus {
	c.t.Helper()
	return c.WaitFor(what, wait, ids, func(sts map[int]httpapi.ClusterStatus) bool { return c.converged(sts, ids) })
}

// TestNetnsThreeNodesKillAndPause: three brokers elect one leader; kill
// -9 of the leader → the two others elect another and still commit (a
// restarted follower's new registration); the old leader restarts on its
// data and catches up; a paused (SIGSTOP) leader is replaced and, once
// continued, follows the new one.
func TestNetnsThreeNodesKillAndPause(t *testing.T) {
	Require(t)
	c := New(t, brokerBin, 3)
	sts := c.waitConverged("3 nodes elect a leader and register", ids(1, 3))
	old := int(sameLeader(sts, ids(1, 3)))
	oldTerm := sts[old].Raft.Term

	c.Kill(old)
	start := time.Now()
	var rest []int
	for _, id := range ids(1, 3) {
		if id != old {
			rest = append(rest, id)
		}
	}
	sts = c.WaitFor("a new leader after kill -9 of the leader", wait, rest, func(sts map[int]httpapi.ClusterStatus) bool {
		l := sameLeader(sts, rest)
		return l != 0 && int(l) != old
	})
	t.Logf("FIGURE failover (3 nodes, kill -9 of the leader → a new leader visible on both others): %v", time.Since(start).Round(10*time.Millisecond))
	if sts[rest[0]].Raft.Term <= oldTerm {
		t.Fatalf("new leader in term %d, the old one's was %d", sts[rest[0]].Raft.Term, oldTerm)
	}
	commit := sts[rest[0]].Raft.Commit
	// The majority commits: a follower restarted with a new Kafka address
	// registers again.
	newLeader := int(sameLeader(sts, rest))
	follower := rest[0]
	if follower == newLeader {
		follower = rest[1]
	}
	c.Restart(follower, true)
	c.WaitFor("the two survivors commit a new registration", wait, rest, func(sts map[int]httpapi.ClusterStatus) bool {
		for _, id := range rest {
			st, ok := sts[id]
			if !ok || st.Raft == nil || st.Raft.Commit <= commit || registered(st)[int32(follower)] != c.Node(follower).KafkaAddr() {
				return false
			}
		}
		return true
	})
	c.Start(old)
	sts = c.waitConverged("the killed leader rejoins on its data", ids(1, 3))

	leader := int(sameLeader(sts, ids(1, 3)))
	term := sts[leader].Raft.Term
	c.Pause(leader)
	others := slices.DeleteFunc(ids(1, 3), func(id int) bool { return id == leader })
	c.WaitFor("a new leader while the leader is paused", wait, others, func(sts map[int]httpapi.ClusterStatus) bool {
		l := sameLeader(sts, others)
		return l != 0 && int(l) != leader && sts[others[0]].Raft.Term > term
	})
	c.Resume(leader)
	c.waitConverged("the paused leader, continued, follows", ids(1, 3))
}

// TestNetnsLeaderPartition: the leader cut off from the majority; the
// majority elects a leader in a higher term and commits, the old leader
// commits nothing (its commit index and registrations stay), and after
// healing all three agree on term, commit, applied and registrations.
func TestNetnsLeaderPartition(t *testing.T) {
	Require(t)
	c := New(t, brokerBin, 3)
	sts := c.waitConverged("3 nodes elect a leader and register", ids(1, 3))
	old := int(sameLeader(sts, ids(1, 3)))
	before := sts[old].Raft
	majority := slices.DeleteFunc(ids(1, 3), func(id int) bool { return id == old })

	c.Partition(old)
	start := time.Now()
	sts = c.WaitFor("the majority elects a new leader", wait, majority, func(sts map[int]httpapi.ClusterStatus) bool {
		l := sameLeader(sts, majority)
		return l != 0 && int(l) != old && sts[majority[0]].Raft.Term > before.Term
	})
	t.Logf("FIGURE failover (3 nodes, leader partitioned → a new leader in the majority): %v", time.Since(start).Round(10*time.Millisecond))
	follower := majority[0]
	if follower == int(sameLeader(sts, majority)) {
		follower = majority[1]
	}
	c.Restart(follower, true)
	sts = c.WaitFor("the majority commits a new registration", wait, majority, func(sts map[int]httpapi.ClusterStatus) bool {
		for _, id := range majority {
			st, ok := sts[id]
			if !ok || st.Raft == nil || st.Raft.Commit <= before.Commit || registered(st)[int32(follower)] != c.Node(follower).KafkaAddr() {
				return false
			}
		}
		return true
	})
	majorityCommit := sts[majority[0]].Raft.Commit
	// The isolated old leader: nothing new is committed or applied there.
	// CheckQuorum makes it step down (no leader known) in an election
	// timeout.
	iso := c.WaitFor("the isolated old leader steps down", wait, []int{old}, func(sts map[int]httpapi.ClusterStatus) bool {
		st, ok := sts[old]
		return ok && st.Raft != nil && st.Raft.State != "StateLeader"
	})[old]
	if iso.Raft.Commit >= majorityCommit || iso.Raft.Commit != before.Commit || registered(iso)[int32(follower)] == c.Node(follower).KafkaAddr() {
		t.Fatalf("the isolated old leader committed: before %+v, now %+v, majority commit %d", before, iso.Raft, majorityCommit)
	}
	c.Heal()
	sts = c.waitConverged("all three converge after healing", ids(1, 3))
	if sts[old].Raft.Commit < majorityCommit {
		t.Fatalf("converged below the majority's commit %d: %+v", majorityCommit, sts[old].Raft)
	}
}

// TestNetnsFiveNodesTwoPartitioned: five brokers, the leader and one
// follower cut off; the three others elect a leader and commit; after
// healing all five converge.
func TestNetnsFiveNodesTwoPartitioned(t *testing.T) {
	Require(t)
	c := New(t, brokerBin, 5)
	sts := c.waitConverged("5 nodes elect a leader and register", ids(1, 5))
	old := int(sameLeader(sts, ids(1, 5)))
	commit := sts[old].Raft.Commit
	cut := []int{old, old%5 + 1}
	majority := slices.DeleteFunc(ids(1, 5), func(id int) bool { return slices.Contains(cut, id) })
	c.Partition(cut...)
	sts = c.WaitFor("the three elect a leader", wait, majority, func(sts map[int]httpapi.ClusterStatus) bool {
		l := sameLeader(sts, majority)
		return l != 0 && !slices.Contains(cut, int(l))
	})
	follower := majority[0]
	if follower == int(sameLeader(sts, majority)) {
		follower = majority[1]
	}
	c.Restart(follower, true)
	c.WaitFor("the three commit a new registration", wait, majority, func(sts map[int]httpapi.ClusterStatus) bool {
		for _, id := range majority {
			st, ok := sts[id]
			if !ok || st.Raft == nil || st.Raft.Commit <= commit || registered(st)[int32(follower)] != c.Node(follower).KafkaAddr() {
				return false
			}
		}
		return true
	})
	for _, id := range cut {
		st, err := c.Status(id)
		if err != nil {
			t.Fatal(err)
		}
		if registered(st)[int32(follower)] == c.Node(follower).KafkaAddr() {
			t.Fatalf("partitioned node %d applied the majority's new registration", id)
		}
	}
	c.Heal()
	c.waitConverged("all five converge after healing", ids(1, 5))
}

// TestNetnsLossAndDelay: 20% packet loss and 50 ms delay each way on
// every link; three brokers still elect, register (commit), and fail over.
func TestNetnsLossAndDelay(t *testing.T) {
	Require(t)
	if !NetemAvailable() {
		t.Skip("this kernel has no netem qdisc (tc qdisc ... netem: unknown qdisc kind); the loss/delay test needs sch_netem")
	}
	c := New(t, brokerBin, 3)
	c.Netem("loss", "20%", "delay", "50ms")
	sts := c.waitConverged("3 nodes elect and register under loss and delay", ids(1, 3))
	old := int(sameLeader(sts, ids(1, 3)))
	commit := sts[old].Raft.Commit
	c.Kill(old)
	start := time.Now()
	rest := slices.DeleteFunc(ids(1, 3), func(id int) bool { return id == old })
	c.WaitFor("a new leader under loss and delay", wait, rest, func(sts map[int]httpapi.ClusterStatus) bool {
		l := sameLeader(sts, rest)
		return l != 0 && int(l) != old
	})
	t.Logf("FIGURE failover under 20%% loss + 50 ms delay (3 nodes, kill -9 of the leader): %v", time.Since(start).Round(10*time.Millisecond))
	c.Start(old)
	sts = c.waitConverged("the killed leader rejoins under loss and delay", ids(1, 3))
	if sts[old].Raft.Commit <= commit {
		t.Fatalf("no new entry committed after the failover: commit %d, before %d", sts[old].Raft.Commit, commit)
	}
}

// TestNetnsSoak (CLUSTER_NETNS_SOAK=<rounds>, skipped otherwise): five
// brokers, each round one fault on the leader (kill -9 and restart on the
// same data, pause, or partition; round-robin), then recovery; every
// round must end with all five converged. Prints the failover times'
// median and range.
func TestNetnsSoak(t *testing.T) {
	rounds, _ := strconv.Atoi(os.Getenv("CLUSTER_NETNS_SOAK"))
	if rounds <= 0 {
		t.Skip("set CLUSTER_NETNS_SOAK=<rounds> to run the fault soak")
	}
	Require(t)
	c := New(t, brokerBin, 5)
	all := ids(1, 5)
	sts := c.waitConverged("5 nodes elect a leader and register", all)
	var failovers []time.Duration
	for round := 0; round < rounds; round++ {
		old := int(sameLeader(sts, all))
		rest := slices.DeleteFunc(ids(1, 5), func(id int) bool { return id == old })
		fault := []string{"kill", "pause", "partition"}[round%3]
		switch fault {
		case "kill":
			c.Kill(old)
		case "pause":
			c.Pause(old)
		case "partition":
			c.Partition(old)
		}
		start := time.Now()
		c.WaitFor(fmt.Sprintf("round %d (%s): a new leader", round, fault), wait, rest, func(sts map[int]httpapi.ClusterStatus) bool {
			l := sameLeader(sts, rest)
			return l != 0 && int(l) != old
		})
		failovers = append(failovers, time.Since(start))
		switch fault {
		case "kill":
			c.Restart(old, round%2 == 0)
		case "pause":
			c.Resume(old)
		case "partition":
			c.Heal()
		}
		sts = c.waitConverged(fmt.Sprintf("round %d (%s): all converge", round, fault), all)
	}
	slices.Sort(failovers)
	t.Logf("FIGURE soak failover over %d rounds (5 nodes): median %v, min %v, max %v", rounds,
		failovers[len(failovers)/2].Round(10*time.Millisecond), failovers[0].Round(10*time.Millisecond), failovers[len(failovers)-1].Round(10*time.Millisecond))
}
