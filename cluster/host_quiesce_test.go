package cluster

import (
	"fmt"
	"testing"
	"time"
)

// waitQuiesced waits until every running node has every group quiesced.
func (c *hostCluster) waitQuiesced() {
	c.t.Helper()
	c.waitFor("every group quiesced on every node", func() bool {
		for _, hn := range c.nodes {
			if hn.host.Quiesced() != len(c.groups) {
				return false
			}
		}
		return true
	})
}

// tickN gives every running node n ticks, one round at a time: the next
// round only once every node received a frame from every other since the
// last (each tick sends a node heartbeat), so that no live node looks
// silent however slowly the loopback delivers (liveness counts ticks).
func (c *hostCluster) tickN(n int) {
	c.t.Helper()
	heard := func() map[[2]uint64]uint64 {
		m := map[[2]uint64]uint64{}
		for id, hn := range c.nodes {
			for peer := range c.nodes {
				if peer != id {
					m[[2]uint64{id, peer}] = hn.tr.Heard(peer)
				}
			}
		}
		return m
	}
	for range n {
		before := heard()
		for _, hn := range c.nodes {
			select {
			case hn.ticker.c <- time.Time{}:
			case <-time.After(30 * time.Second):
				c.t.Fatalf("node %d's loop took no tick for 30 s", hn.id)
			}
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			after, all := heard(), true
			for k, v := range before {
				all = all && after[k] > v
			}
			if all {
				break
			}
			if time.Now().After(deadline) {
				c.t.Fatal("the nodes' node heartbeats did not arrive in 30 s")
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// TestHostQuiescesIdleGroups: once every group committed its proposals,
// every replica of every group quiesces and takes no tick at all through
// more than two election timeouts (no group campaigns, no leader
// changes); a proposal to a quiesced group wakes it and commits, and the
// group quiesces again.
func TestHostQuiescesIdleGroups(t *testing.T) {
	c := newHostCluster(t, 3, 20)
	for _, g := range c.groups {
		c.nodes[1+g%3].host.Campaign(g)
	}
	c.waitLeaders()
	for _, g := range c.groups {
		if _, err := c.propose(g, testBatch(1, fmt.Sprint("g", g))); err != nil {
			t.Fatal(err)
		}
	}
	c.waitQuiesced()
	leaders := map[uint64]uint64{}
	for _, g := range c.groups {
		leaders[g] = c.leader(g)
	}
	ticks := map[uint64]uint64{}
	for id, hn := range c.nodes {
		ticks[id] = hn.host.GroupTicks()
	}
	c.tickN(70) // more than two election timeouts (30 ticks)
	for id, hn := range c.nodes {
		if got := hn.host.GroupTicks(); got != ticks[id] {
			t.Fatalf("node %d: %d group ticks while every group was quiesced, want none", id, got-ticks[id])
		}
		if q := hn.host.Quiesced(); q != len(c.groups) {
			t.Fatalf("node %d: %d groups quiesced after 70 ticks, want %d", id, q, len(c.groups))
		}
	}
	for _, g := range c.groups {
		if l := c.leader(g); l != leaders[g] {
			t.Fatalf("group %d: leader %d after the quiet ticks, was %d", g, l, leaders[g])
		}
		if off, err := c.proposeOnce(g, testBatch(1, fmt.Sprint("again", g))); err != nil || off != 1 {
			t.Fatalf("group %d: a proposal to the quiesced group: offset %d, %v; want 1", g, off, err)
		}
	}
	c.waitSameLogs(map[uint64]int64{})
	c.waitQuiesced()
}

// TestHostQuiescedLeaderNodeDies: the node leading every group, all of
// them quiesced, stops; the followers find its node silent, wake, and
// elect new leaders for every group, which accept proposals; the node
// restarted catches up and every group quiesces again.
func TestHostQuiescedLeaderNodeDies(t *testing.T) {
	c := newHostCluster(t, 3, 30)
	for _, g := range c.groups {
		c.nodes[1].host.Campaign(g)
	}
	c.waitFor("node 1 leading every group", func() bool {
		for _, g := range c.groups {
			if c.leader(g) != 1 {
				return false
			}
		}
		return true
	})
	for _, g := range c.groups {
		if _, err := c.propose(g, testBatch(1, fmt.Sprint("g", g))); err != nil {
			t.Fatal(err)
		}
	}
	c.waitQuiesced()
	c.stop(1)
	c.waitLeaders()
	want := map[uint64]int64{}
	for _, g := range c.groups {
		if l := c.leader(g); l == 1 {
			t.Fatalf("group %d: still led by the stopped node", g)
		}
		off, err := c.propose(g, testBatch(1, fmt.Sprint("after", g)))
		if err != nil || off != 1 {
			t.Fatalf("group %d: a proposal after its leader's node died: offset %d, %v; want 1", g, off, err)
		}
		want[g] = 2
	}
	if err := c.start(1, nil); err != nil {
		t.Fatal(err)
	}
	c.waitSameLogs(want)
	c.waitQuiesced()
}

// TestHostLeaderLease: a leader holds its lease while the nodes of a
// majority of its group are live; cut off (both other nodes stopped), its
// quiesced groups still say Leading (nothing ticks them), but the lease
// is gone once the peers' nodes were silent for an election timeout, so
// the broker stops serving them as leader.
func TestHostLeaderLease(t *testing.T) {
	c := newHostCluster(t, 3, 4)
	c.waitLeaders()
	for _, g := range c.groups {
		if _, err := c.propose(g, testBatch(1, "x")); err != nil {
			t.Fatal(err)
		}
	}
	c.waitQuiesced()
	lead := c.leader(c.groups[0])
	h := c.nodes[lead].host
	for _, g := range c.groups {
		if s, _ := h.Status(g); s.Leading != h.LeaderLease(g) {
			t.Fatalf("group %d: leading %v, lease %v, want equal with every node live", g, s.Leading, h.LeaderLease(g))
		}
	}
	if !h.LeaderLease(c.groups[0]) {
		t.Fatal("the leader of group 1 has no lease with every node live")
	}
	for id := range c.nodes {
		if id != lead {
			c.stop(id)
		}
	}
	// Ticks are taken asynchronously (a buffered channel): give up to
	// three election timeouts' worth, one at a time.
	for i := 0; h.LeaderLease(c.groups[0]); i++ {
		if i > 3*h.cfg.ElectionTicks {
			t.Fatal("the cut-off leader still holds its lease after its peers were silent for three election timeouts")
		}
		c.tickN(1)
		time.Sleep(10 * time.Millisecond)
	}
	if s, _ := h.Status(c.groups[0]); !s.Leading {
		t.Fatal("the cut-off quiesced leader stepped down by itself; the test needs it to still believe it leads")
	}
}
