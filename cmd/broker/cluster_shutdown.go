package main

// Controlled shutdown (issue 13, rolling restarts; KIP-631's controlled
// shutdown for KRaft, KIP-143 before it): a clustered broker asked to stop
// first moves the leadership of every replicated partition it leads to an
// in-sync follower, waits (bounded) until the metadata names the new
// leaders, hands over the metadata group if it leads it, and only then
// stops serving. A client sees NOT_LEADER_OR_FOLLOWER once and re-routes,
// instead of a partition without a leader for an election timeout.

import (
	"os"
	"time"

	"github.com/rs/zerolog"
)

// handOffTimeout bounds the whole hand-over: past it the broker stops
// anyway, and the groups not moved elect after an election timeout.
const handOffTimeout = 5 * time.Second

// skipHandOffEnv, set to 1, skips the hand-over: a broker stops as it did
// before controlled shutdown existed. For measurements only (TESTING.md,
// the rolling restart); not a configuration key.
const skipHandOffEnv = "VMQ_SKIP_CONTROLLED_SHUTDOWN"

// handOffPoll is how often the hand-over looks at the new leaders.
const handOffPoll = 20 * time.Millisecond

// handOff moves this broker's leaderships away before it stops (DESIGN.md
// "Cluster", controlled shutdown). After it the broker takes no
// leadership: its replica manager campaigns no more and its host ignores
// the hand-overs of other leaders. It does nothing on a single node.
func (c *clusterNode) handOff(log zerolog.Logger) {
	if c == nil {
		return
	}
	if os.Getenv(skipHandOffEnv) == "1" {
		log.Warn().Str("env", skipHandOffEnv).Msg("controlled shutdown skipped: the partitions led here wait for an election timeout")
		return
	}
	start := time.Now()
	deadline := start.Add(handOffTimeout)
	self := uint64(c.replicas.self)
	c.replicas.stopping.Store(true)
	moved := c.host.HandOff()
	left := len(moved)
	for left > 0 && time.Now().Before(deadline) {
		time.Sleep(handOffPoll)
		left = 0
		for g := range moved {
			if !c.movedAway(g, self) {
				left++
			}
		}
	}
	partitions := time.Since(start)
	metadataTo := uint64(0)
	if c.node.Status().State == "StateLeader" {
		if metadataTo = c.node.HandOff(); metadataTo != 0 {
			for time.Now().Before(deadline) {
				if st := c.node.Status(); st.Leader != self && st.Leader != 0 {
					break
				}
				time.Sleep(handOffPoll)
			}
		}
	}
	ev := log.Info()
	if left > 0 || (metadataTo != 0 && c.node.Status().Leader == self) {
		ev = log.Warn()
	}
	ev.Int("partitions_moved", len(moved)-left).Int("partitions_not_moved", left).Dur("partitions_took", partitions).
		Uint64("metadata_leader_to", metadataTo).Dur("took", time.Since(start)).
		Msg("controlled shutdown: leaderships handed over (those not moved are elected elsewhere after an election timeout)")
}

// movedAway reports whether group g, which this broker led, has another
// leader both in its Raft view and in the applied metadata (record 8, which
// the new leader proposes), so that clients refreshing their metadata are
// sent to it.
func (c *clusterNode) movedAway(g, self uint64) bool {
	st, ok := c.host.Status(g)
	if !ok {
		return true // removed meanwhile
	}
	if st.Leader == self || st.Leader == 0 {
		return false
	}
	pl, ok := c.metadata.Leader(g)
	return ok && pl.Leader != int32(self) && pl.Leader >= 0
}
