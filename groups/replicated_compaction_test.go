package groups

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vibemq/broker/internal/testtools/coordlog"
	"github.com/vibemq/broker/topics"
)

// compact compacts l as a replicated partition's compaction command does
// (coordlog.Compact) and returns the log's bytes after.
func (l *memOffsetsLog) compact(t *testing.T, now time.Time, deleteRetention time.Duration) int {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	kept, err := coordlog.Compact(l.batches, now, deleteRetention)
	if err != nil {
		t.Fatal(err)
	}
	l.batches = kept
	return coordlog.Size(kept)
}

// startAtFirstBatch moves l's log start to its first batch, as the leader
// of a coordinator partition does once compaction emptied the batches
// before it.
func (l *memOffsetsLog) startAtFirstBatch() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.batches) > 0 {
		h, _ := topics.ParseBatchHeader(l.batches[0])
		l.logStart = max(l.logStart, h.BaseOffset)
	}
}

// tombstones counts the tombstones of l.
func (l *memOffsetsLog) tombstones(t *testing.T) int {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	n, err := coordlog.Tombstones(l.batches)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// loadedState is everything c rebuilt from its logs, deterministically
// printed (groups by name, maps sorted), except the groups' store IDs
// (rows are not written on a replicated partition).
func loadedState(c *Coordinator) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	str := func(s *string) string {
		if s == nil {
			return "<nil>"
		}
		return *s
	}
	for _, name := range slices.Sorted(maps.Keys(c.mu.groups)) {
		g := c.mu.groups[name]
		fmt.Fprintf(&b, "group %s partition %d state %v/%v at %v generation %d type %s protocol %s leader %q members %v static %v protocols %v metadata %x\n",
			name, g.partition, g.state, g.previousState, g.stateTimestamp, g.generation, str(g.protocolType), str(g.protocolName), g.leader,
			g.memberOrder, g.staticMembers, g.supportedProtocols, g.lastMetadata)
		for _, id := range slices.Sorted(maps.Keys(g.members)) {
			m := g.members[id]
			fmt.Fprintf(&b, "  member %s instance %s client %s %s type %s protocols %v session %v rebalance %v assignment %q deadline %v new %v\n",
				id, str(m.instanceID), m.clientID, m.clientHost, m.protocolType, m.protocols, m.sessionTimeout, m.rebalanceTimeout, m.assignment, m.heartbeatDeadline, m.isNew)
		}
		for _, tp := range slices.SortedFunc(maps.Keys(g.offsets), compareTP) {
			e := g.offsets[tp]
			fmt.Fprintf(&b, "  offset %v = %d epoch %d metadata %q committed %v expires %v topic %x\n", tp, e.offset, e.leaderEpoch, e.metadata, e.commitTime, e.expireTime, e.topicID)
		}
		for _, pid := range slices.Sorted(maps.Keys(g.txnOffsets)) {
			p := g.txnOffsets[pid]
			fmt.Fprintf(&b, "  pending producer %d epoch %d superseded %v\n", pid, p.epoch, p.superseded)
			for _, tp := range slices.SortedFunc(maps.Keys(p.offsets), compareTP) {
				e := p.offsets[tp]
				fmt.Fprintf(&b, "    %v = %d epoch %d metadata %q committed %v topic %x\n", tp, e.offset, e.leaderEpoch, e.metadata, e.commitTime, e.topicID)
			}
		}
		if cg := g.cg; cg != nil {
			fmt.Fprintf(&b, "  consumer group epoch %d assignment epoch %d static %v target %v owners %v\n", cg.groupEpoch, cg.assignmentEpoch, cg.staticMembers, cg.target, cg.owners)
			for _, id := range slices.Sorted(maps.Keys(cg.members)) {
				m := cg.members[id]
				fmt.Fprintf(&b, "  consumer member %s instance %s rack %s client %s %s topics %v regex %s assignor %s rebalance %v epoch %d/%d state %v assigned %v pending %v session %v revoke %v classic %+v\n",
					id, str(m.instanceID), str(m.rackID), m.clientID, m.clientHost, m.topicNames, str(m.regex), str(m.serverAssignor), m.rebalanceTimeout,
					m.epoch, m.previousEpoch, m.state, m.assigned, m.pending, m.sessionDeadline, m.revokeDeadline, m.classic)
			}
		}
	}
	fmt.Fprintf(&b, "producers %v\n", c.mu.txnProducers)
	return b.String()
}

func compareTP(a, b topicPartition) int {
	if c := strings.Compare(a.topic, b.topic); c != 0 {
		return c
	}
	return int(a.partition - b.partition)
}

// TestReplicatedOffsetsCompactedLoad: a coordinator loading a compacted
// replicated __consumer_offsets rebuilds exactly what a load of the log
// before compaction rebuilt (issue 13: these logs are compacted as Kafka
// compacts the offsets topic). The logs hold a classic group committing
// the same partitions again and again, a simple group with an offset
// deleted, a deleted simple group, a KIP-848 group whose second member
// left, a deleted KIP-848 group, and pending transactional offsets
// (committed, aborted, superseded by a plain commit, still pending).
// Loads compared: before compaction, after a compaction that keeps the
// tombstones (within delete.retention.ms), after one past their horizon
// (no tombstone left), and from a log start moved to the first batch
// left. The pending offset still pending after all that commits on the
// last coordinator. PartitionLoaded, which gates the leader's compaction,
// is true only once loaded, in the epoch of the load.
func TestReplicatedOffsetsCompactedLoad(t *testing.T) {
	logs := map[int32]*memOffsetsLog{}
	h := replicatedHarness(t, logs)
	if h.c.PartitionLoaded(0, 1) {
		t.Fatal("a partition being loaded reported loaded: the leader would compact it under the load")
	}
	h.loadAll()
	if !h.c.PartitionLoaded(0, 1) || h.c.PartitionLoaded(0, 2) {
		t.Fatal("PartitionLoaded: want loaded at epoch 1 only")
	}
	commit := func(group string, gen int32, member string, p int32, offset int64) {
		t.Helper()
		req := CommitRequest{Group: group, Generation: gen, MemberID: member,
			Topics: []CommitTopic{{Topic: "t", Partitions: []CommitPartition{{Partition: p, Offset: offset, LeaderEpoch: -1, Metadata: kmsgStr(fmt.Sprint("m", offset))}}}}}
		wantErr(t, "commit", result(t, h.c.Commit(req, h.now)).Topics[0][0], nil)
	}
	ids, gen := h.stableGroup("g", 2)
	for round := range int64(5) {
		for p := range int32(4) {
			commit("g", gen, ids[0], p, round*10+int64(p))
		}
	}
	commit("simple", -1, "", 1, 4)
	commit("simple", -1, "", 2, 5)
	if del := result(t, h.c.DeleteOffsets("simple", []OffsetDeleteTopic{{Topic: "t", Partitions: []int32{1}}}, h.now)); del.Err != nil {
		t.Fatalf("offset delete: %+v", del)
	}
	commit("gone", -1, "", 0, 9)
	wantErr(t, "delete group", result(t, h.c.DeleteGroups([]string{"gone"}, h.now))[0], nil)

	h.join("cg", "m1", "t")
	h.join("cg", "m2", "t")
	if r := h.hb(ConsumerHeartbeatRequest{Group: "cg", MemberID: "m2", MemberEpoch: -1}); r.Err != nil {
		t.Fatalf("m2 leaving: %v", r.Err)
	}
	h.hb(ConsumerHeartbeatRequest{Group: "cg", MemberID: "m1", MemberEpoch: h.consumerGroup("cg").members["m1"].epoch})
	h.join("cgone", "x", "t")
	if r := h.hb(ConsumerHeartbeatRequest{Group: "cgone", MemberID: "x", MemberEpoch: -1}); r.Err != nil {
		t.Fatalf("x leaving: %v", r.Err)
	}
	wantErr(t, "delete consumer group", result(t, h.c.DeleteGroups([]string{"cgone"}, h.now))[0], nil)

	h.mustStage("c", 7, 0, 0, 10) // committed
	h.mustStage("c", 7, 0, 0, 11)
	wantErr(t, "commit c", h.marker("c", 7, 0, true), nil)
	h.mustStage("a", 8, 0, 0, 30) // aborted
	wantErr(t, "abort a", h.marker("a", 8, 0, false), nil)
	h.mustStage("s", 12, 0, 0, 50) // superseded by a plain commit
	commit("s", -1, "", 0, 60)
	wantErr(t, "commit s", h.marker("s", 12, 0, true), nil)
	h.mustStage("p", 9, 2, 0, 40) // still pending
	h.mustStage("p", 9, 2, 3, 41)

	load := func(what string) (*harness, string) {
		t.Helper()
		hl := replicatedHarness(t, logs)
		hl.loadAll()
		return hl, loadedState(hl.c)
	}
	_, before := load("before compaction")
	for _, name := range []string{"g", "simple", "cg", "c", "s", "p"} {
		if !strings.Contains(before, "group "+name+" ") {
			t.Fatalf("group %s not loaded before compaction:\n%s", name, before)
		}
	}
	bytes := func() (int, int) {
		n, tomb := 0, 0
		for _, l := range logs {
			for _, b := range l.batches {
				n += len(b)
			}
			tomb += l.tombstones(t)
		}
		return n, tomb
	}
	total, tomb := bytes()
	if tomb == 0 {
		t.Fatal("the logs hold no tombstone: the test tests nothing")
	}

	for _, step := range []struct {
		what        string
		now         time.Time
		moveStart   bool
		noTombstone bool
	}{
		{what: "compacted, tombstones kept", now: h.now},
		{what: "compacted past the tombstones' horizon", now: h.now.Add(25 * time.Hour), noTombstone: true},
		{what: "loaded from the first batch left", now: h.now.Add(50 * time.Hour), moveStart: true, noTombstone: true},
	} {
		for _, l := range logs {
			l.compact(t, step.now, 24*time.Hour)
			if step.moveStart {
				l.startAtFirstBatch()
			}
		}
		after, tombAfter := bytes()
		if after >= total {
			t.Fatalf("%s: %d bytes, %d before: nothing compacted", step.what, after, total)
		}
		if step.noTombstone && tombAfter > 0 {
			// Only a last batch, never compacted, may keep one.
			for p, l := range logs {
				if len(l.batches) > 0 && l.tombstones(t) > 0 {
					last := &memOffsetsLog{batches: l.batches[len(l.batches)-1:]}
					if l.tombstones(t) != last.tombstones(t) {
						t.Fatalf("%s: partition %d kept tombstones past their horizon", step.what, p)
					}
				}
			}
		}
		t.Logf("%s: %d bytes (%d before compaction), %d tombstones (%d)", step.what, after, total, tombAfter, tomb)
		hl, got := load(step.what)
		if got != before {
			t.Fatalf("%s: the load differs from the load before compaction:\n%s\nwant:\n%s", step.what, got, before)
		}
		if step.moveStart {
			hl.wantTxn("pending after compaction", "p", 3, -1, true)
			wantErr(t, "commit p after compaction", hl.marker("p", 9, 2, true), nil)
			hl.wantTxn("committed after compaction", "p", 3, 41, false)
		}
	}
}

func kmsgStr(s string) *string { return &s }
