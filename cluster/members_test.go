package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"sync"
	"testing"
	"time"
)

func (c *testCluster) proposeN(lead uint64, prefix string, n int) []string {
	c.t.Helper()
	var out []string
	for i := range n {
		data := fmt.Sprint(prefix, i)
		if _, err := c.propose(lead, []byte(data)); err != nil {
			c.t.Fatal(err)
		}
		out = append(out, data)
	}
	return out
}

func otherThan(ids []uint64, not ...uint64) uint64 {
	for _, id := range ids {
		if !slices.Contains(not, id) {
			return id
		}
	}
	return 0
}

// TestAddNodeLearnerCatchesUpIsPromoted: 3 -> 4 nodes. A node started
// with Join on an empty data directory bootstraps nothing; added as a
// learner on the leader, it catches up (from a snapshot: the leader's log
// is compacted), is promoted to a voter by the leader, and with one of the
// first three stopped, proposals commit only because it votes (3 of 4).
func TestAddNodeLearnerCatchesUpIsPromoted(t *testing.T) {
	c := newTestCluster(t, 3, NodeConfig{SnapshotEntries: 8, CompactKeep: 2}, newRecorder)
	c.nodes[1].node.Campaign()
	lead := c.waitLeader()
	want := c.proposeN(lead, "e", 20)
	c.waitSame(want)

	c.join(4, "")
	if st := c.nodes[4].node.Status(); len(st.Voters) != 0 || st.Applied != 0 {
		t.Fatalf("a joining node bootstrapped: %+v", st)
	}
	if _, err := c.call("add-node 4", func(ctx context.Context) (uint64, error) {
		return c.nodes[lead].node.AddLearner(ctx, 4, c.addrs[4])
	}); err != nil {
		t.Fatal(err)
	}
	c.waitVoters(1, 2, 3, 4)
	c.waitSame(want)
	if c.recorder(4).restores == 0 {
		t.Fatal("node 4 caught up without the leader's snapshot, but the log was compacted")
	}
	if m := c.nodes[c.waitLeader()].node.Status().Members; len(m) != 4 || m[3].ID != 4 || m[3].Addr != c.addrs[4] || m[3].Learner {
		t.Fatalf("members on the leader: %+v", m)
	}

	// Two of four stopped would stop commits; one stopped: the three left
	// (node 4 among them) are the quorum.
	stopped := otherThan([]uint64{1, 2, 3}, c.leader())
	c.stop(stopped)
	lead = c.waitLeader()
	want = append(want, c.proposeN(lead, "after", 3)...)
	c.waitSame(want)

	// Started again, the stopped node knows node 4's address from its
	// snapshot (taken after the changes, which are not replayed).
	c.start(stopped, nil)
	if m := c.nodes[stopped].node.Status().Members; len(m) != 4 || m[3].Addr != c.addrs[4] {
		t.Fatalf("members after a restart: %+v", m)
	}
	c.waitSame(want)
}

// TestRemoveFollower: 3 -> 2 nodes. The removed follower stops its loop
// (ErrRemoved), the two left commit alone, and the removed node started
// again on its data stops again instead of campaigning.
func TestRemoveFollower(t *testing.T) {
	c := newTestCluster(t, 3, NodeConfig{}, newRecorder)
	c.nodes[1].node.Campaign()
	lead := c.waitLeader()
	want := c.proposeN(lead, "e", 3)
	victim := otherThan(c.ids, lead)
	if _, err := c.call("remove-node", func(ctx context.Context) (uint64, error) {
		return c.nodes[lead].node.RemoveMember(ctx, victim)
	}); err != nil {
		t.Fatal(err)
	}
	c.waitStopped(victim)
	left := slices.DeleteFunc(slices.Clone(c.ids), func(id uint64) bool { return id == victim })
	c.waitVoters(left...)
	want = append(want, c.proposeN(otherThan(left, lead), "after", 3)...)
	c.waitSame(want)

	// Started again on its data, it applies its removal again and stops.
	if err := c.tryStart(victim, nil); err != nil {
		if !errors.Is(err, ErrRemoved) {
			t.Fatal(err)
		}
	} else {
		c.waitStopped(victim)
	}
}

// TestRemoveLeader: the leader removes itself; it stops, the two left
// elect a leader among themselves and commit.
func TestRemoveLeader(t *testing.T) {
	c := newTestCluster(t, 3, NodeConfig{}, newRecorder)
	c.nodes[1].node.Campaign()
	old := c.waitLeader()
	want := c.proposeN(old, "e", 3)
	if _, err := c.call("remove the leader", func(ctx context.Context) (uint64, error) {
		return c.nodes[old].node.RemoveMember(ctx, old)
	}); err != nil {
		t.Fatal(err)
	}
	c.waitStopped(old)
	lead := c.waitLeader()
	if lead == old {
		t.Fatal("the removed leader still leads")
	}
	left := slices.DeleteFunc(slices.Clone(c.ids), func(id uint64) bool { return id == old })
	c.waitVoters(left...)
	want = append(want, c.proposeN(lead, "after", 3)...)
	c.waitSame(want)
}

// TestMembershipChangeRefusals: a change asked of a follower names the
// leader; unknown and existing IDs are refused; with one follower
// stopped, removing the other live one would leave one live voter of two
// and is refused, while removing the stopped one is accepted.
func TestMembershipChangeRefusals(t *testing.T) {
	c := newTestCluster(t, 3, NodeConfig{}, newRecorder)
	c.nodes[1].node.Campaign()
	lead := c.waitLeader()
	follower := otherThan(c.ids, lead)
	ln := c.nodes[lead].node
	_, err := c.call("remove on a follower", func(ctx context.Context) (uint64, error) {
		return c.nodes[follower].node.RemoveMember(ctx, lead)
	})
	var nl *NotLeaderError
	if !errors.As(err, &nl) || nl.Leader != lead {
		t.Fatalf("remove-node on a follower: %v, want NotLeaderError naming %d", err, lead)
	}
	if _, err := c.call("remove 9", func(ctx context.Context) (uint64, error) { return ln.RemoveMember(ctx, 9) }); !errors.Is(err, ErrUnknownMember) {
		t.Fatalf("remove-node 9: %v", err)
	}
	if _, err := c.call("add 2", func(ctx context.Context) (uint64, error) { return ln.AddLearner(ctx, follower, "127.0.0.1:1") }); !errors.Is(err, ErrMemberExists) {
		t.Fatalf("add-node of a member: %v", err)
	}

	stopped := follower
	live := otherThan(c.ids, lead, stopped)
	c.stop(stopped)
	c.waitFor("the leader to see the stopped node inactive", func() bool {
		for _, m := range ln.Status().Members {
			if m.ID == stopped {
				return !m.Active
			}
		}
		return false
	})
	if _, err := c.call("remove the live follower", func(ctx context.Context) (uint64, error) { return ln.RemoveMember(ctx, live) }); !errors.Is(err, ErrWouldLoseQuorum) {
		t.Fatalf("removing the live follower: %v, want ErrWouldLoseQuorum", err)
	}
	if _, err := c.call("remove the stopped follower", func(ctx context.Context) (uint64, error) { return ln.RemoveMember(ctx, stopped) }); err != nil {
		t.Fatal(err)
	}
	c.waitVoters(lead, live)
	want := c.proposeN(lead, "e", 2)
	c.waitSame(want)
}

// TestWipedNodeRejoinsUnderNewID: the procedure for a node whose disk was
// lost, which also forgot its votes: remove its old ID, start it on the
// empty directory and the same address under a new ID with Join, add it.
// It catches up from a snapshot and votes; the old ID is gone everywhere.
func TestWipedNodeRejoinsUnderNewID(t *testing.T) {
	c := newTestCluster(t, 3, NodeConfig{SnapshotEntries: 8, CompactKeep: 2}, newRecorder)
	c.nodes[1].node.Campaign()
	lead := c.waitLeader()
	want := c.proposeN(lead, "e", 20)
	c.waitSame(want)
	victim := otherThan(c.ids, lead)
	addr := c.addrs[victim]
	// The removal needs a live majority of the voters left in the
	// leader's view: the other follower must have answered the new
	// leader (a leader's view starts with every follower inactive).
	other := otherThan(c.ids, lead, victim)
	c.waitFor("the leader to see the other follower active", func() bool {
		for _, m := range c.nodes[lead].node.Status().Members {
			if m.ID == other {
				return m.Active
			}
		}
		return false
	})
	c.stop(victim)
	if err := os.RemoveAll(c.dirs[victim]); err != nil {
		t.Fatal(err)
	}
	if _, err := c.call("remove the wiped node", func(ctx context.Context) (uint64, error) {
		return c.nodes[lead].node.RemoveMember(ctx, victim)
	}); err != nil {
		t.Fatal(err)
	}
	// Its old ID is never used again.
	if _, err := c.call("add-node of the old id", func(ctx context.Context) (uint64, error) {
		return c.nodes[lead].node.AddLearner(ctx, victim, addr)
	}); !errors.Is(err, ErrIDRemoved) {
		t.Fatalf("add-node of a removed id: %v, want ErrIDRemoved", err)
	}
	c.ids = slices.DeleteFunc(c.ids, func(id uint64) bool { return id == victim })
	delete(c.addrs, victim)
	c.join(4, addr)
	if _, err := c.call("add-node 4", func(ctx context.Context) (uint64, error) {
		return c.nodes[lead].node.AddLearner(ctx, 4, addr)
	}); err != nil {
		t.Fatal(err)
	}
	c.waitVoters(slices.Clone(c.ids)...)
	c.waitSame(want)
	lead = c.waitLeader()
	want = append(want, c.proposeN(4, "after", 3)...)
	c.waitSame(want)
}

// TestTransportFollowsMembership: the addresses come from the log. Once
// a learner is added, every node's transport dials it at the address of
// the change (here a listener of the test's, which reads their hellos);
// once it is removed, a node closes a connection that claims to be it.
func TestTransportFollowsMembership(t *testing.T) {
	c := newTestCluster(t, 3, NodeConfig{}, newRecorder)
	c.nodes[1].node.Campaign()
	lead := c.waitLeader()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var mu sync.Mutex
	dialed := map[uint64]bool{}
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				var h [helloSize]byte
				if _, err := io.ReadFull(conn, h[:]); err == nil && binary.BigEndian.Uint64(h[16:]) == 9 {
					mu.Lock()
					dialed[binary.BigEndian.Uint64(h[8:])] = true
					mu.Unlock()
				}
				_, _ = io.Copy(io.Discard, conn)
			}()
		}
	}()
	if _, err := c.call("add-node 9", func(ctx context.Context) (uint64, error) {
		return c.nodes[lead].node.AddLearner(ctx, 9, l.Addr().String())
	}); err != nil {
		t.Fatal(err)
	}
	c.waitFor("every node to dial the new learner", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return dialed[1] && dialed[2] && dialed[3]
	})
	if st := c.nodes[lead].node.Status(); !slices.Equal(st.Learners, []uint64{9}) {
		t.Fatalf("a learner that never answered was promoted: %+v", st)
	}

	if _, err := c.call("remove-node 9", func(ctx context.Context) (uint64, error) {
		return c.nodes[lead].node.RemoveMember(ctx, 9)
	}); err != nil {
		t.Fatal(err)
	}
	follower := otherThan(c.ids, lead)
	c.waitFor("the follower to apply the removal", func() bool { return len(c.nodes[follower].node.Status().Learners) == 0 })
	conn, err := net.Dial("tcp", c.addrs[follower])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write(hello(9, follower, 0)); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("a removed peer's connection was not closed: %v", err)
	}
}
