package main

// Broker liveness in a cluster (issue 13): KRaft's controller fences a
// broker that misses its heartbeats for broker.session.timeout.ms and
// places no new partitions on it (KIP-631). Here every broker is a voter
// of the metadata group, so the Raft heartbeats are the broker
// heartbeats: the group's leader, which already tracks whether each
// follower answered lately (etcd raft's Progress.RecentActive, kept
// fresh by CheckQuorum), fences a registered broker it has seen inactive
// for brokerSessionTimeout without a break, and unfences it as soon as
// it answers again. Both are records of the metadata log
// (cluster.FenceBrokerRecord), so every broker places partitions alike
// and tells clients alike: Metadata and DescribeCluster leave a fenced
// broker out, and a partition or coordinator it leads has no leader
// (kafkaproto's clusterBrokers and partitionView, as KRaft's brokers).

import (
	"context"
	"time"

	"github.com/rs/zerolog"
	"github.com/vibemq/broker/cluster"
)

// brokerSessionTimeout is how long the leader sees a broker inactive
// before fencing it (Kafka's broker.session.timeout.ms is 9 s; here it
// is shorter, above the metadata group's election timeout of 1 to 2 s,
// during which CheckQuorum's reset may show a live follower inactive
// until its next answer, one 100 ms tick later).
const brokerSessionTimeout = 3 * time.Second

// livenessPoll is how often the leader looks at its view.
const livenessPoll = 250 * time.Millisecond

// fenceChange is a fencing the leader proposes.
type fenceChange struct {
	id     int32
	fenced bool
}

// liveness is the leader's memory of when it first saw each broker
// inactive, for one term of leadership.
type liveness struct {
	term          uint64
	inactiveSince map[int32]time.Time
}

// changes are the fencings to propose given the node's status (the
// leader's view of its members), which brokers are registered and
// fenced, and now. Only a leader proposes; a new term starts the
// inactivity clocks again (a new leader's view starts with every
// follower inactive until it answers).
func (l *liveness) changes(st cluster.Status, registered func(int32) bool, fenced func(int32) bool, now time.Time) []fenceChange {
	if st.State != "StateLeader" || st.Term != l.term {
		l.term, l.inactiveSince = st.Term, map[int32]time.Time{}
		if st.State != "StateLeader" {
			return nil
		}
	}
	var out []fenceChange
	for _, m := range st.Members {
		id := int32(m.ID)
		if m.Learner || !registered(id) {
			continue
		}
		if m.Active {
			delete(l.inactiveSince, id)
			if fenced(id) {
				out = append(out, fenceChange{id, false})
			}
			continue
		}
		since, ok := l.inactiveSince[id]
		if !ok {
			l.inactiveSince[id] = now
			continue
		}
		if now.Sub(since) >= brokerSessionTimeout && !fenced(id) {
			out = append(out, fenceChange{id, true})
		}
	}
	return out
}

// watchLiveness proposes the leader's fencings until ctx ends.
func (c *clusterNode) watchLiveness(ctx context.Context, log zerolog.Logger) {
	defer close(c.livenessDone)
	l := &liveness{}
	t := time.NewTicker(livenessPoll)
	defer t.Stop()
	registered := func(id int32) bool { _, ok := c.metadata.Broker(id); return ok }
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, ch := range l.changes(c.node.Status(), registered, c.metadata.Fenced, time.Now()) {
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := c.node.Propose(pctx, cluster.FenceBrokerRecord(ch.id, ch.fenced))
			cancel()
			if err != nil {
				log.Warn().Err(err).Int32("node_id", ch.id).Bool("fenced", ch.fenced).Msg("proposing a broker's fencing failed; the next look tries again")
				continue
			}
			log.Info().Int32("node_id", ch.id).Bool("fenced", ch.fenced).Msg("broker fencing changed: new partitions are placed on unfenced brokers only")
		}
	}
}
