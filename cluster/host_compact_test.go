package cluster

import (
	"fmt"
	"testing"
)

// TestHostLogStartOnEveryReplica: log-start commands proposed on the
// leader move the log start of every replica alike; once a later command
// finds every voter past the first one, every replica drops its log up to
// it; all three nodes restarted recover the same log start, high
// watermark and records from their compacted logs, and offsets go on.
func TestHostLogStartOnEveryReplica(t *testing.T) {
	c := newHostCluster(t, 3, 1)
	c.waitLeaders()
	const g = 1
	var bases []int64
	for i := range 10 {
		off, err := c.propose(g, testBatch(3, fmt.Sprint("a", i)))
		if err != nil {
			t.Fatal(err)
		}
		bases = append(bases, off)
	}
	c.waitSameLogs(map[uint64]int64{g: 30})
	logStart := func(want int64) {
		t.Helper()
		c.waitFor(fmt.Sprint("log start ", want, " on every replica"), func() bool {
			for _, hn := range c.nodes {
				if hn.logs[g].LogStart() != want {
					return false
				}
			}
			return true
		})
	}
	command := func(offset int64) int64 {
		t.Helper()
		lead := c.leader(g)
		matched := c.nodes[lead].host.Matched(g)
		got, err := c.propose(g, LogStartCommand(offset, matched))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := command(bases[4] + 1); got != bases[4]+1 { // inside the fifth batch
		t.Fatalf("log start %d, want %d", got, bases[4]+1)
	}
	logStart(bases[4] + 1)
	first := map[uint64]uint64{}
	c.waitFor("the command's index", func() bool {
		for id, hn := range c.nodes {
			s, _ := hn.host.Status(g)
			first[id] = s.Applied // the command's index or later
			if s.Applied < s.Last {
				return false
			}
		}
		return true
	})
	for i := range 5 {
		if _, err := c.propose(g, testBatch(2, fmt.Sprint("b", i))); err != nil {
			t.Fatal(err)
		}
	}
	c.waitSameLogs(map[uint64]int64{g: 40})
	// Past every batch proposed before the first command: every replica
	// may drop its log up to that command (or a later one, when a retry
	// below finds the second one matched too).
	command(40)
	logStart(40)
	c.waitFor("every replica's log compacted", func() bool {
		// A follower's acknowledgement may not have reached the leader
		// when it proposed: again with its newer view, as the retention
		// loop does while CompactionPending.
		if lead := c.leader(g); lead != 0 && c.nodes[lead].logs[g].CompactionPending(c.nodes[lead].host.Matched(g)) {
			command(40)
		}
		for id, hn := range c.nodes {
			st, err := OpenStorage(hn.store, g)

			if err != nil {
				t.Fatal(err)
			}
			if st.truncatedIndex == 0 || st.truncatedIndex != hn.logs[g].CompactTo() || st.truncatedIndex < first[id] {
				return false
			}
		}
		return true
	})
	for _, id := range c.ids {
		c.stop(id)
	}
	for _, id := range c.ids {
		if err := c.start(id, nil); err != nil {
			t.Fatal(err)
		}
	}
	c.waitLeaders()
	c.waitSameLogs(map[uint64]int64{g: 40})
	logStart(40)
	off, err := c.propose(g, testBatch(1, "c"))
	if err != nil || off != 40 {
		t.Fatalf("after the restart: offset %d %v, want 40", off, err)
	}
	c.waitSameLogs(map[uint64]int64{g: 41})
	for id := range c.nodes {
		if got := c.read(id, g); len(got) != 1 || got[40] != "c" {
			t.Fatalf("node %d reads %v, want only c at 40", id, got)
		}
	}
}
