package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/vibemq/broker/pebblestore"
	"go.etcd.io/raft/v3/raftpb"
)

// The tests of this file run real nodes: real Pebble stores in temp
// directories, real TCP on loopback. Ticks are sent by the test (a
// manualTicker per node), only while it waits for a condition; messages
// are lost through the transport's filter, never through timing.

// manualTicker is a Ticker the test drives.
type manualTicker struct{ c chan time.Time }

func (m manualTicker) C() <-chan time.Time { return m.c }
func (m manualTicker) Stop()               {}

// recorder is a state machine that records what it applied, in order.
type recorder struct {
	mu       sync.Mutex
	applied  []string
	restores int
}

func (r *recorder) Apply(e Entry) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.applied = append(r.applied, string(e.Data))
	return nil
}

func (r *recorder) Snapshot() ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return json.Marshal(r.applied)
}

func (r *recorder) Restore(data []byte) error {
	var applied []string
	if err := json.Unmarshal(data, &applied); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.applied = applied
	r.restores++
	return nil
}

func (r *recorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.applied)
}

type testNode struct {
	id     uint64
	dir    string
	store  *pebblestore.Store
	tr     *Transport
	node   *Node
	sm     StateMachine
	ticker manualTicker
}

type testCluster struct {
	t        *testing.T
	ids      []uint64
	addrs    map[uint64]string
	nodes    map[uint64]*testNode // running nodes only
	dirs     map[uint64]string
	cfg      NodeConfig // SnapshotEntries, CompactKeep
	newSM    func() StateMachine
	filterMu sync.Mutex
	filter   Filter
	joining  map[uint64]bool // started with Join (added, not bootstrapped)
}

func newTestCluster(t *testing.T, n int, cfg NodeConfig, newSM func() StateMachine) *testCluster {
	c := &testCluster{t: t, addrs: map[uint64]string{}, nodes: map[uint64]*testNode{}, dirs: map[uint64]string{}, cfg: cfg, newSM: newSM}
	listeners := map[uint64]net.Listener{}
	for i := 1; i <= n; i++ {
		id := uint64(i)
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		c.ids = append(c.ids, id)
		c.addrs[id] = l.Addr().String()
		c.dirs[id] = filepath.Join(t.TempDir(), fmt.Sprint("node", id))
		listeners[id] = l
	}
	for _, id := range c.ids {
		c.start(id, listeners[id])
	}
	t.Cleanup(func() {
		for _, id := range c.ids {
			if c.nodes[id] != nil {
				c.stop(id)
			}
		}
	})
	return c
}

// start starts node id on its data directory (l: its listener, or nil to
// listen on its address again).
func (c *testCluster) start(id uint64, l net.Listener) {
	if err := c.tryStart(id, l); err != nil {
		c.t.Fatal(err)
	}
}

func (c *testCluster) tryStart(id uint64, l net.Listener) error {
	t := c.t
	if l == nil {
		var err error
		if l, err = net.Listen("tcp", c.addrs[id]); err != nil {
			t.Fatalf("listen again on %s: %v", c.addrs[id], err)
		}
	}
	store, err := pebblestore.Open(c.dirs[id], pebblestore.Options{Logger: zerolog.Nop(), MemTableSize: 4 << 20, CacheSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	inc, err := Incarnation(store, 0)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := NewTransport(TransportConfig{ID: id, Incarnation: inc, Listener: l, Peers: c.addrs, Logger: zerolog.Nop(), BackoffMin: time.Millisecond, BackoffMax: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	tn := &testNode{id: id, dir: c.dirs[id], store: store, tr: tr, sm: c.newSM(), ticker: manualTicker{make(chan time.Time, 4)}}
	cfg := c.cfg
	if cfg.ElectionTicks == 0 {
		// The test ticks every 5 ms of wall time: 30 ticks keep a leader
		// whose goroutine waits for a CPU for 150 ms on a loaded machine
		// (with -race); 10 ticks lost leaders and their proposals.
		cfg.ElectionTicks = 30
	}
	cfg.ID, cfg.Voters, cfg.Store, cfg.StateMachine, cfg.Sender, cfg.Ticker, cfg.Logger = id, c.ids, store, tn.sm, tr, tn.ticker, zerolog.Nop()
	cfg.Peers, cfg.Join = tr, c.joining[id]
	tn.node, err = StartNode(cfg)
	if err != nil {
		_ = tr.Close()
		_ = store.Close()
		return err
	}
	tr.SetFilter(func(m *raftpb.Message) bool {
		c.filterMu.Lock()
		f := c.filter
		c.filterMu.Unlock()
		return f == nil || f(m)
	})
	tr.Start(tn.node)
	c.nodes[id] = tn
	return nil
}

// join starts node id on an empty data directory as a node that waits to
// be added (Join), listening on addr ("" for a new address).
func (c *testCluster) join(id uint64, addr string) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		c.t.Fatal(err)
	}
	c.ids = append(c.ids, id)
	c.addrs[id] = l.Addr().String()
	c.dirs[id] = filepath.Join(c.t.TempDir(), fmt.Sprint("node", id))
	if c.joining == nil {
		c.joining = map[uint64]bool{}
	}
	c.joining[id] = true
	c.start(id, l)
}

// call runs a call of node id's (a proposal, a membership change) while
// ticking every node, and returns its result.
func (c *testCluster) call(what string, f func(ctx context.Context) (uint64, error)) (uint64, error) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type result struct {
		index uint64
		err   error
	}
	done := make(chan result, 1)
	go func() {
		i, err := f(ctx)
		done <- result{i, err}
	}()
	var r result
	c.waitFor(what, func() bool {
		select {
		case r = <-done:
			return true
		default:
			return false
		}
	})
	return r.index, r.err
}

// waitStopped waits until node id's loop has returned, checks it stopped
// because it was removed, and forgets it.
func (c *testCluster) waitStopped(id uint64) {
	c.t.Helper()
	tn := c.nodes[id]
	c.waitFor(fmt.Sprintf("node %d to stop", id), func() bool {
		select {
		case <-tn.node.Done():
			return true
		default:
			return false
		}
	})
	if err := tn.node.Err(); !errors.Is(err, ErrRemoved) {
		c.t.Fatalf("node %d stopped with %v, want ErrRemoved", id, err)
	}
	c.stop(id)
}

// waitVoters waits until every running node applied the configuration
// with exactly these voters and no learner.
func (c *testCluster) waitVoters(voters ...uint64) {
	c.t.Helper()
	slices.Sort(voters)
	c.waitFor(fmt.Sprint("voters ", voters, " everywhere"), func() bool {
		for _, tn := range c.nodes {
			st := tn.node.Status()
			if !slices.Equal(st.Voters, voters) || len(st.Learners) != 0 {
				return false
			}
		}
		return true
	})
}

// stop stops node id as a crash would leave it, minus unsynced data.
func (c *testCluster) stop(id uint64) {
	tn := c.nodes[id]
	tn.node.Stop()
	_ = tn.tr.Close()
	_ = tn.store.Close()
	delete(c.nodes, id)
}

func (c *testCluster) setFilter(f Filter) {
	c.filterMu.Lock()
	defer c.filterMu.Unlock()
	c.filter = f
}

// isolate cuts id off from every other node (both directions).
func (c *testCluster) isolate(id uint64) {
	c.setFilter(func(m *raftpb.Message) bool { return (m.GetFrom() == id) == (m.GetTo() == id) })
}

func (c *testCluster) tick() {
	for _, tn := range c.nodes {
		select {
		case tn.ticker.c <- time.Time{}:
		default:
		}
	}
}

// waitFor ticks every running node until cond holds. The deadline only
// guards against a hang; nothing is asserted about how long it took.
func (c *testCluster) waitFor(what string, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			c.t.Fatalf("gave up waiting for %s; statuses %+v", what, c.statuses())
		}
		c.tick()
		time.Sleep(5 * time.Millisecond)
	}
}

// others are the IDs of c's nodes but id, in c.ids order.
func (c *testCluster) others(id uint64) []uint64 {
	var out []uint64
	for _, o := range c.ids {
		if o != id {
			out = append(out, o)
		}
	}
	return out
}

// waitAnswer waits for the error a proposal's goroutine sends on
// answered, the proposal named what.
func (c *testCluster) waitAnswer(what string, answered <-chan error) error {
	c.t.Helper()
	var err error
	c.waitFor(what+" to be answered", func() bool {
		select {
		case err = <-answered:
			return true
		default:
			return false
		}
	})
	return err
}

// waitApplied waits until the recorder of every node of ids applied
// exactly want.
func (c *testCluster) waitApplied(what string, ids []uint64, want []string) {
	c.t.Helper()
	c.waitFor(what, func() bool {
		for _, id := range ids {
			if !slices.Equal(c.recorder(id).list(), want) {
				return false
			}
		}
		return true
	})
}

func (c *testCluster) statuses() map[uint64]Status {
	out := map[uint64]Status{}
	for id, tn := range c.nodes {
		out[id] = tn.node.Status()
	}
	return out
}

// leader is the leader every running node agrees on, or 0.
func (c *testCluster) leader() uint64 {
	var lead uint64
	for _, tn := range c.nodes {
		s := tn.node.Status()
		if s.Leader == 0 || (lead != 0 && s.Leader != lead) {
			return 0
		}
		lead = s.Leader
	}
	if c.nodes[lead] == nil || c.nodes[lead].node.Status().State != "StateLeader" {
		return 0
	}
	return lead
}

func (c *testCluster) waitLeader() uint64 {
	c.t.Helper()
	c.waitFor("a leader", func() bool { return c.leader() != 0 })
	return c.leader()
}

// propose proposes data on node id, ticking while it waits, retrying while
// there is no leader.
func (c *testCluster) propose(id uint64, data []byte) (uint64, error) {
	c.t.Helper()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		type result struct {
			index uint64
			err   error
		}
		done := make(chan result, 1)
		go func() {
			i, err := c.nodes[id].node.Propose(ctx, data)
			done <- result{i, err}
		}()
		var r result
		c.waitFor(fmt.Sprintf("proposal %q on node %d", data, id), func() bool {
			select {
			case r = <-done:
				return true
			default:
				return false
			}
		})
		cancel()
		if r.err != ErrNoLeader && r.err != ErrProposalLost {
			return r.index, r.err
		}
	}
}

func (c *testCluster) recorder(id uint64) *recorder { return c.nodes[id].sm.(*recorder) }

// waitSame waits until every running node applied exactly want.
func (c *testCluster) waitSame(want []string) {
	c.t.Helper()
	c.waitFor(fmt.Sprintf("every node to apply %d entries", len(want)), func() bool {
		for _, tn := range c.nodes {
			if !slices.Equal(tn.sm.(*recorder).list(), want) {
				return false
			}
		}
		return true
	})
}

func newRecorder() StateMachine { return &recorder{} }

func TestThreeNodesElectAndApplyInOrder(t *testing.T) {
	c := newTestCluster(t, 3, NodeConfig{}, newRecorder)
	c.nodes[1].node.Campaign()
	lead := c.waitLeader()
	// Proposals on every node (followers forward to the leader), several
	// at once: every node applies the same entries in the same order.
	var wg sync.WaitGroup
	var mu sync.Mutex
	acked := map[string]bool{}
	for _, id := range c.ids {
		wg.Add(1)
		go func(id uint64) {
			defer wg.Done()
			for i := range 10 {
				data := fmt.Sprintf("n%d-%d", id, i)
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				_, err := c.nodes[id].node.Propose(ctx, []byte(data))
				cancel()
				if err == nil {
					mu.Lock()
					acked[data] = true
					mu.Unlock()
				}
			}
		}(id)
	}
	proposing := make(chan struct{})
	go func() { wg.Wait(); close(proposing) }()
	c.waitFor("the proposers", func() bool {
		select {
		case <-proposing:
			return true
		default:
			return false
		}
	})
	want := c.recorder(lead).list()
	c.waitSame(want)
	for data := range acked {
		if !slices.Contains(want, data) {
			t.Fatalf("acknowledged proposal %q is not applied; applied %v", data, want)
		}
	}
	if len(acked) == 0 {
		t.Fatal("no proposal was acknowledged")
	}
	st := c.nodes[lead].node.Status()
	if fmt.Sprint(st.Voters) != "[1 2 3]" || st.Applied < uint64(len(want)) {
		t.Fatalf("leader status %+v", st)
	}
}

func TestLeaderStopsNewLeaderOldOneCatchesUp(t *testing.T) {
	c := newTestCluster(t, 3, NodeConfig{SnapshotEntries: 8, CompactKeep: 2}, newRecorder)
	c.nodes[1].node.Campaign()
	first := c.waitLeader()
	var want []string
	for i := range 5 {
		data := fmt.Sprint("before-", i)
		if _, err := c.propose(first, []byte(data)); err != nil {
			t.Fatal(err)
		}
		want = append(want, data)
	}
	c.waitSame(want)
	oldTerm := c.nodes[first].node.Status().Term

	c.stop(first)
	second := c.waitLeader()
	if second == first || c.nodes[second].node.Status().Term <= oldTerm {
		t.Fatalf("leader %d after stopping %d", second, first)
	}
	for i := range 20 { // past two snapshots: the old leader may need one
		data := fmt.Sprint("after-", i)
		if _, err := c.propose(second, []byte(data)); err != nil {
			t.Fatal(err)
		}
		want = append(want, data)
	}
	c.waitSame(want)

	c.start(first, nil)
	c.waitSame(want)
	if _, err := c.propose(first, []byte("from-the-old-leader")); err != nil {
		t.Fatal(err)
	}
	c.waitSame(append(want, "from-the-old-leader"))
}

func TestWipedNodeCatchesUpFromSnapshot(t *testing.T) {
	c := newTestCluster(t, 3, NodeConfig{SnapshotEntries: 8, CompactKeep: 2}, newRecorder)
	c.nodes[1].node.Campaign()
	lead := c.waitLeader()
	var want []string
	for i := range 30 {
		data := fmt.Sprint("e", i)
		if _, err := c.propose(lead, []byte(data)); err != nil {
			t.Fatal(err)
		}
		want = append(want, data)
	}
	c.waitSame(want)
	if st := c.nodes[lead].node.Status(); st.FirstIndex < 10 {
		t.Fatalf("the leader's log was not compacted: %+v", st)
	}
	victim := uint64(3)
	if victim == lead {
		victim = 2
	}
	c.stop(victim)
	if err := os.RemoveAll(c.dirs[victim]); err != nil {
		t.Fatal(err)
	}
	c.start(victim, nil)
	c.waitSame(want)
	if r := c.recorder(victim); r.restores == 0 {
		t.Fatal("the wiped node caught up without a snapshot, but the leader's log no longer starts at 1")
	}
}

func TestMinorityCannotCommit(t *testing.T) {
	c := newTestCluster(t, 3, NodeConfig{}, newRecorder)
	c.nodes[1].node.Campaign()
	old := c.waitLeader()
	if _, err := c.propose(old, []byte("a")); err != nil {
		t.Fatal(err)
	}
	c.waitSame([]string{"a"})

	c.isolate(old)
	commitBefore := c.nodes[old].node.Status().Commit
	ctx, cancel := context.WithCancel(context.Background())
	lost := make(chan error, 1)
	go func() {
		_, err := c.nodes[old].node.Propose(ctx, []byte("lost"))
		lost <- err
	}()
	majority := c.others(old)
	var lead uint64
	c.waitFor("a leader in the majority", func() bool {
		a, b := c.nodes[majority[0]].node.Status(), c.nodes[majority[1]].node.Status()
		lead = a.Leader
		return lead != old && lead != 0 && a.Leader == b.Leader && c.nodes[lead].node.Status().State == "StateLeader"
	})
	if _, err := c.propose(lead, []byte("b")); err != nil {
		t.Fatal(err)
	}
	c.waitApplied("the majority to apply b", majority, []string{"a", "b"})
	// The isolated node committed nothing while cut off.
	if st := c.nodes[old].node.Status(); st.Commit != commitBefore {
		t.Fatalf("the isolated node's commit moved from %d to %d", commitBefore, st.Commit)
	}
	if got := c.recorder(old).list(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("the isolated node applied %v", got)
	}

	c.setFilter(nil)
	c.waitSame([]string{"a", "b"})
	// Healed, the old leader's entry is overwritten by the new leader's
	// log: its proposal is answered at once, not left to its context.
	err := c.waitAnswer("the isolated leader's proposal", lost)
	cancel()
	if !errors.Is(err, ErrProposalLost) && !errors.Is(err, ErrNoLeader) {
		t.Fatalf("the proposal of the isolated leader: %v, want ErrProposalLost (or ErrNoLeader had it stepped down before appending it)", err)
	}
}

// TestForwardedProposalAnsweredWhenLeaderChanges: a follower's proposal
// is forwarded to the leader; with the leader cut off the message is
// lost, and once the follower knows another leader (or none) the proposal
// is answered ErrLeaderChanged at once, not left to its context (a Kafka
// request's 30 s). It was not applied, and the majority goes on.
func TestForwardedProposalAnsweredWhenLeaderChanges(t *testing.T) {
	c := newTestCluster(t, 3, NodeConfig{}, newRecorder)
	c.nodes[1].node.Campaign()
	old := c.waitLeader()
	if _, err := c.propose(old, []byte("a")); err != nil {
		t.Fatal(err)
	}
	c.waitSame([]string{"a"})
	majority := c.others(old)
	c.isolate(old)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	answered := make(chan error, 1)
	go func() {
		_, err := c.nodes[majority[0]].node.Propose(ctx, []byte("forwarded"))
		answered <- err
	}()
	err := c.waitAnswer("the forwarded proposal", answered)
	if !errors.Is(err, ErrLeaderChanged) && !errors.Is(err, ErrNoLeader) {
		t.Fatalf("the forwarded proposal: %v, want ErrLeaderChanged (or ErrNoLeader, had the follower lost the leader before)", err)
	}
	var lead uint64
	c.waitFor("a leader in the majority", func() bool {
		lead = c.nodes[majority[0]].node.Status().Leader
		return lead != old && lead != 0 && c.nodes[lead].node.Status().State == "StateLeader"
	})
	if _, err := c.propose(lead, []byte("b")); err != nil {
		t.Fatal(err)
	}
	c.waitApplied("the majority to apply b", majority, []string{"a", "b"})
}

func TestMetadataReplicated(t *testing.T) {
	c := newTestCluster(t, 3, NodeConfig{}, func() StateMachine { return NewMetadata() })
	c.nodes[1].node.Campaign()
	c.waitLeader()
	for _, id := range c.ids {
		if _, err := c.propose(id, RegisterBrokerRecord(Broker{NodeID: int32(id), KafkaAddr: fmt.Sprintf("127.0.0.1:%d", 9091+id)})); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.propose(2, CreateTopicRecord(Topic{Name: "orders", ID: [16]byte{1}, Partitions: 3, ReplicationFactor: 3})); err != nil {
		t.Fatal(err)
	}
	if _, err := c.propose(3, CreateTopicRecord(Topic{Name: "orders", ID: [16]byte{2}, Partitions: 1, ReplicationFactor: 1})); !errorsIs(err, ErrTopicExists) {
		t.Fatalf("second create: %v, want ErrTopicExists", err)
	}
	if _, err := c.propose(1, DeleteTopicRecord("missing")); !errorsIs(err, ErrTopicNotFound) {
		t.Fatalf("delete of a missing topic: %v", err)
	}
	if _, err := c.propose(1, CreateTopicRecord(Topic{Name: "tmp", Partitions: 1, ReplicationFactor: 1})); err != nil {
		t.Fatal(err)
	}
	last, err := c.propose(1, DeleteTopicRecord("tmp"))
	if err != nil {
		t.Fatal(err)
	}
	c.waitFor("every node to apply the deletion", func() bool {
		for _, tn := range c.nodes {
			if tn.sm.(*Metadata).View().Applied < last {
				return false
			}
		}
		return true
	})
	want := fmt.Sprintf("%+v", c.nodes[1].sm.(*Metadata).View())
	for id, tn := range c.nodes {
		if got := fmt.Sprintf("%+v", tn.sm.(*Metadata).View()); got != want {
			t.Fatalf("node %d: %s, node 1: %s", id, got, want)
		}
	}
	v := c.nodes[3].sm.(*Metadata).View()
	if len(v.Brokers) != 3 || v.Brokers[2].KafkaAddr != "127.0.0.1:9094" || len(v.Topics) != 1 || v.Topics[0].Name != "orders" || v.Topics[0].Partitions != 3 {
		t.Fatalf("view %+v", v)
	}
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }
