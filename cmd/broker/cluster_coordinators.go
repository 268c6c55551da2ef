package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/vibemq/broker/cluster"
	"github.com/vibemq/broker/groups"
)

// The group coordinator on a replicated __consumer_offsets
// (offsets-topic-replication-factor above 1; DESIGN.md "Cluster",
// Coordinators): each partition is a Raft group run by the replica
// manager like a replicated topic's, and this broker coordinates the
// partition's groups while it leads the group. The replica manager's
// loop (every leadersEvery) follows leadership:
//
//   - leading in a new term: groups.StartLoad (requests answer
//     COORDINATOR_LOAD_IN_PROGRESS), then, once every entry of the
//     earlier terms is applied here (the applied index reached the
//     leader's first entry of its term, so the log is the committed
//     one), groups.Load reads the partition's log on its own goroutine
//     (a load that fails is tried again after loadRetry);
//   - not leading any more (or a new term): groups.UnloadPartition.
//
// The coordinator's appends go through offsetsLog: Host.Enqueue, in the
// order the coordinator makes them, answered once committed and applied.

// coordinatorLoad is this broker's leadership of a replicated
// __consumer_offsets partition: the Raft term, the log index the applied
// index must reach before loading, and whether the load started.
type coordinatorLoad struct {
	term, readyAt uint64
	started       bool
	// failed is set by a load that failed (a read or decode error); it
	// is tried again from retryAt.
	failed  atomic.Bool
	retryAt time.Time
}

// loadRetry is how long a failed load waits before it is tried again.
const loadRetry = 5 * time.Second

// offsetsAppendTimeout bounds an offsets partition's proposal: a request
// whose proposal does not commit in that time answers NOT_COORDINATOR.
const offsetsAppendTimeout = 30 * time.Second

// useReplicatedOffsets switches the group coordinator to replicated
// offsets partitions once the metadata places __consumer_offsets with
// replicas (before this broker proposes any leader record for them).
func (m *replicaManager) useReplicatedOffsets() {
	if m.groups == nil || m.offsetsReplicated {
		return
	}
	if _, ok := m.md.CoordinatorGroup(groups.OffsetsTopic, 0); ok {
		m.groups.UseReplicatedOffsets()
		m.offsetsReplicated = true
	}
}

// followCoordinator loads or unloads the groups of partition r of a
// replicated __consumer_offsets as this broker's leadership of its Raft
// group g changes. REQUIRES: called from run.
func (m *replicaManager) followCoordinator(g uint64, r *replica, st cluster.GroupStatus, ok bool) {
	if m.groups == nil || !r.rp.Coordinator || r.rp.Topic != groups.OffsetsTopic {
		return
	}
	p := r.rp.Partition
	m.followCoordinatorLoad(g, st, ok, coordinatorSteps{
		unload: func() { m.groups.UnloadPartition(p) },
		startLoad: func(term uint64) {
			m.groups.StartLoad(p, term, coordinatorLog{host: m.host, group: g, log: r.log, notCoordinator: groups.ErrNotCoordinator, what: "offsets"})
		},
		load: func(term uint64) error {
			start := time.Now()
			res, err := m.groups.Load(p, term, start)
			switch {
			case err != nil:
				m.log.Error().Err(err).Int32("partition", p).Dur("retry_in", loadRetry).Msg("cannot load the groups of the offsets partition; they are not served meanwhile")
			case res.Loaded:
				m.log.Info().Int32("partition", p).Uint64("epoch", term).Int("records", res.Records).Int("groups", res.Groups).
					Dur("took", time.Since(start)).Msg("offsets partition loaded; coordinating its groups")
			}
			return err
		},
	})
}

// coordinatorSteps is what followCoordinatorLoad does to one coordinator
// (groups or txns) for one replicated coordinator partition.
type coordinatorSteps struct {
	// unload stops serving the partition (this broker no longer leads it).
	unload func()
	// startLoad marks the partition gained in Raft term term: its
	// requests answer COORDINATOR_LOAD_IN_PROGRESS until a load of term
	// completes; it unloads an earlier term's state first.
	startLoad func(term uint64)
	// load reads the partition's log and serves it, on its own
	// goroutine, and logs the outcome; an error makes the load be tried
	// again after loadRetry.
	load func(term uint64) error
}

// followCoordinatorLoad is the load/unload bookkeeping of replicated
// coordinator partition g (m.coordinators[g]) for one leadership status
// st of its Raft group (ok false: the group is not run here).
// Invariants: m.coordinators[g] is set exactly while this broker leads g,
// for the term it leads in; startLoad runs once per term gained, before
// any load of that term; at most one load of a term runs at a time, it
// starts only once the applied index reached the leader's first entry
// of its term (every earlier term's entry is applied) and not before
// retryAt; a failed load is retried after loadRetry; unload runs once
// when leadership is lost. REQUIRES: called from run.
func (m *replicaManager) followCoordinatorLoad(g uint64, st cluster.GroupStatus, ok bool, steps coordinatorSteps) {
	cur := m.coordinators[g]
	if !ok || !st.Leading {
		if cur != nil {
			delete(m.coordinators, g)
			steps.unload()
		}
		return
	}
	if cur == nil || cur.term != st.Term {
		cur = &coordinatorLoad{term: st.Term, readyAt: st.Last}
		m.coordinators[g] = cur
		steps.startLoad(st.Term)
	}
	if cur.started && cur.failed.Load() {
		cur.started = false
		cur.failed.Store(false)
		cur.retryAt = time.Now().Add(loadRetry)
	}
	if cur.started || st.Applied < cur.readyAt || time.Now().Before(cur.retryAt) {
		return
	}
	cur.started = true
	term := cur.term
	go func() {
		if err := steps.load(term); err != nil {
			cur.failed.Store(true)
		}
	}()
}

// coordinatorLog is a replicated coordinator partition's log
// (__consumer_offsets or __transaction_state) as its coordinator appends
// to and loads it: groups.OffsetsLog and txns.StateLog, which have the
// same methods.
type coordinatorLog struct {
	host  *cluster.Host
	group uint64
	log   *cluster.PartitionLog
	// notCoordinator wraps an append not known committed (the
	// coordinator's ErrNotCoordinator); what names the partition's topic
	// in its message.
	notCoordinator error
	what           string
}

var _ groups.OffsetsLog = coordinatorLog{}

// Append starts replicating batch; the wait returns its base offset
// once committed on a majority, else notCoordinator.
func (l coordinatorLog) Append(batch []byte) func() (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), offsetsAppendTimeout)
	wait := l.host.Enqueue(ctx, l.group, batch)
	return func() (int64, error) {
		defer cancel()
		_, base, err := wait()
		if err != nil {
			return -1, fmt.Errorf("%w: the %s partition's proposal is not known committed: %v", l.notCoordinator, l.what, err)
		}
		return int64(base), nil
	}
}

// ReadRange appends the batches from the one holding offset on.
func (l coordinatorLog) ReadRange(offset int64, maxBytes int, dst []byte) ([]byte, error) {
	return l.log.ReadRange(offset, maxBytes, true, dst)
}

// HighWatermark is the next offset.
func (l coordinatorLog) HighWatermark() int64 { return l.log.HighWatermark() }

// LogStart is the partition's log start.
func (l coordinatorLog) LogStart() int64 { return l.log.LogStart() }
