package cluster

import (
	"testing"
	"time"
)

// TestHostCountersLeaderChangeAndEntries: Host.Counters counts the
// entries (and their bytes) each node made durable, and a leadership
// taken over from another leader once, on the new leader only; the
// first election is not a change.
func TestHostCountersLeaderChangeAndEntries(t *testing.T) {
	c := newHostCluster(t, 3, 1)
	c.waitLeaders()
	first := c.leader(1)
	for _, id := range c.ids {
		if n := c.nodes[id].host.Counters().LeaderChanges; n != 0 {
			t.Fatalf("node %d counted %d leader changes after the first election, want 0", id, n)
		}
	}
	batch := testBatch(3, "counted")
	if _, err := c.propose(1, batch); err != nil {
		t.Fatal(err)
	}
	c.waitFor("every node to save the batch", func() bool {
		for _, id := range c.ids {
			if hc := c.nodes[id].host.Counters(); hc.EntryBytesSaved < uint64(16+len(batch)) || hc.EntriesSaved < 1 || hc.Saves < 1 {
				return false
			}
		}
		return true
	})
	to := c.ids[0]
	if to == first {
		to = c.ids[1]
	}
	c.nodes[first].host.TransferLeader(1, to)
	c.waitFor("the transfer", func() bool { return c.leader(1) == to })
	for _, id := range c.ids {
		want := uint64(0)
		if id == to {
			want = 1
		}
		if n := c.nodes[id].host.Counters().LeaderChanges; n != want {
			t.Errorf("node %d counted %d leader changes after a transfer from %d to %d, want %d", id, n, first, to, want)
		}
	}
}

// TestHostCampaignRightAfterAddGroup: a Campaign that reaches the loop
// before a new group applied its bootstrap configuration (raft refuses
// to campaign then) is not lost: the node campaigns once it is applied
// and is elected without a single tick (no election timeout can fire).
// The preferred replica of a new partition campaigns right after adding
// its group; a lost campaign let another replica win on its timeout and
// the leadership was handed back 2 s later, during the first writes.
func TestHostCampaignRightAfterAddGroup(t *testing.T) {
	c := newHostCluster(t, 3, 0)
	for _, id := range c.ids[1:] {
		hn := c.nodes[id]
		hn.logs[1] = NewPartitionLog(hn.store, 1, nil)
		if err := hn.host.AddGroup(1, c.ids, hn.logs[1]); err != nil {
			t.Fatal(err)
		}
	}
	hn := c.nodes[c.ids[0]]
	hn.logs[1] = NewPartitionLog(hn.store, 1, nil)
	h := hn.host
	added := make(chan error, 1)
	h.report(func() { // on the loop: the group added and the campaign asked in one step, before its first Ready
		err := h.addGroup(&addGroup{group: 1, voters: c.ids, sm: hn.logs[1]})
		if err == nil {
			h.campaign(h.groups[1])
		}
		added <- err
	})
	if err := <-added; err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if s, _ := h.Status(1); s.Leading {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("node 1 did not become the leader without ticks: its campaign was refused and not retried")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := h.Counters().LeaderChanges; n != 0 {
		t.Errorf("a first election counted as %d leader changes", n)
	}
}
