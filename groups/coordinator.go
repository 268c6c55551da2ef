// Package groups is the consumer-group coordinator: Kafka's classic group
// protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup with the states
// Empty, PreparingRebalance, CompletingRebalance, Stable and Dead, static
// membership, the initial rebalance delay), committed offsets, and their
// storage as records of the internal compacted topic __consumer_offsets in
// Kafka's own format, with a Pebble index that restart reads (store.go).
//
// The package knows no Kafka request or response: kafkaproto translates
// them to the plain types of api.go. Member metadata and assignments pass
// through byte for byte whatever the protocol type ("consumer", "connect",
// others). The semantics follow Apache Kafka's GroupMetadataManager,
// OffsetMetadataManager and ClassicGroup; where franz-go's kfake differs,
// Kafka wins.
//
// # Time
//
// Every method takes now. Timers (session timeouts, pending members, the
// join phase's rebalance timeout and initial delay, the sync phase's
// deadline, offset retention) are deadlines that Tick fires; retention/
// calls Tick on a short interval. Late by at most one interval.
//
// # State ownership and lock order
//
// One mutex, Coordinator.mu, guards every group, member and committed
// offset; methods with a Locked suffix require it. JoinGroup and SyncGroup
// requests that must wait for a rebalance get a Future whose channel a
// later call (another request, or Tick) fills while holding mu; the caller
// waits on it without the lock, on its own goroutine (kafkaproto's
// connection writer).
//
// Lock order: Coordinator.mu, then topics' locks (Manager.Append takes
// Partition.mu; Append.Extra runs under it and takes no lock). Appends are
// applied under mu but never synced under it: the fsync wait
// (persist.wait) runs after mu is released, and its completion callback
// takes mu itself.
//
// # Durability
//
// A response goes out only after the records its call appended are
// durable. Committed offsets become visible to OffsetFetch only once
// durable; membership changes are visible at once (they are in-memory
// state that Kafka too persists only as snapshots).
package groups

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/topics"
)

// OffsetsTopic is the name of Kafka's internal topic of committed offsets
// and group metadata.
const OffsetsTopic = "__consumer_offsets"

// Coordinator is the group coordinator of the broker.
type Coordinator struct {
	cfg          Config
	log          zerolog.Logger
	store        *pebblestore.Store
	tm           *topics.Manager
	offsetsTopic *topics.Topic
	// numPartitions is the partition count of __consumer_offsets.
	numPartitions int32
	metrics       *metrics
	// share holds the share groups (KIP-932, share.go), under their own
	// mutex, never taken together with mu.
	share shareState

	mu struct {
		sync.Mutex
		groups      map[string]*group
		nextGroupID uint64
		// nextRetentionCheck is when Tick next removes expired offsets.
		nextRetentionCheck time.Time
		// strayRows are index rows found at recovery that belong to no
		// group or to a topic replaced since; the next sweep deletes them.
		strayRows [][]byte
		// replicated holds the partitions of a replicated
		// __consumer_offsets led here (replicated.go); nil on a single
		// node and with RF 1, where every partition is local.
		replicated map[int32]*offsetsPartition
		// logSeq orders the offset commits appended to replicated
		// partitions (their base offsets are known only once committed).
		logSeq int64
		// txnProducers maps a producer ID to the groups holding its
		// pending transactional offsets (txn_offsets.go), so a marker
		// finds them.
		txnProducers map[int64]map[string]bool
		// txnCoordEpochs maps a partition of __consumer_offsets and a
		// producer ID to the coordinator epoch of the producer's last
		// marker there (absent: -1; txn_offsets_fence.go).
		txnCoordEpochs map[int32]map[int64]int32
	}
}

// Open starts the coordinator: it creates __consumer_offsets if missing
// (compacted, cfg.OffsetsTopicPartitions partitions) and rebuilds every
// group's offsets and last stored metadata from the index. Members of
// restored groups expire one session timeout after now unless they
// heartbeat.
func Open(store *pebblestore.Store, tm *topics.Manager, cfg Config, now time.Time) (*Coordinator, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Coordinator{cfg: cfg, store: store, tm: tm, log: cfg.Logger.With().Str("component", "groups").Logger()}
	c.mu.groups = map[string]*group{}
	c.mu.nextGroupID = 1
	c.mu.txnProducers = map[int64]map[string]bool{}

	t, ok := tm.Topic(OffsetsTopic)
	if !ok {
		var err error
		t, err = tm.CreateTopic(OffsetsTopic, cfg.OffsetsTopicPartitions, map[string]string{"cleanup.policy": "compact"}, false)
		if errors.Is(err, topics.ErrTopicExists) {
			t, ok = tm.Topic(OffsetsTopic)
			if !ok {
				return nil, fmt.Errorf("groups: %s vanished while being created", OffsetsTopic)
			}
		} else if err != nil {
			return nil, fmt.Errorf("groups: creating %s: %w", OffsetsTopic, err)
		}
	} else if t.Config("cleanup.policy") != "compact" {
		c.log.Warn().Str("topic", OffsetsTopic).Str("cleanup.policy", t.Config("cleanup.policy")).
			Msg("the offsets topic is not compacted; its records will not be cleaned by key")
	}
	c.offsetsTopic = t
	c.numPartitions = t.NumPartitions()
	if c.numPartitions < 1 {
		return nil, fmt.Errorf("groups: %s has no partitions", OffsetsTopic)
	}
	c.metrics = newMetrics(c, cfg.Registerer)

	if err := c.recoverShare(); err != nil {
		return nil, fmt.Errorf("groups: recovering share groups: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.recoverLocked(now); err != nil {
		return nil, fmt.Errorf("groups: recovering consumer groups: %w", err)
	}
	return c, nil
}

// PartitionFor is the partition of __consumer_offsets that holds group.
func (c *Coordinator) PartitionFor(group string) int32 { return PartitionFor(group, c.numPartitions) }

// newGroupLocked creates an Empty group. REQUIRES: c.mu held; no group of
// that name.
func (c *Coordinator) newGroupLocked(name string) *group {
	g := newGroup(name, c.mu.nextGroupID, c.PartitionFor(name))
	c.mu.nextGroupID++
	c.mu.groups[name] = g
	return g
}

// dropIfUnusedLocked forgets a group created by a request that failed, so
// that bad requests leave no trace. REQUIRES: c.mu held.
func (c *Coordinator) dropIfUnusedLocked(g *group) {
	if g.is(StateEmpty) && len(g.members) == 0 && len(g.pending) == 0 && len(g.offsets) == 0 &&
		len(g.txnOffsets) == 0 && g.pendingCommits == 0 && !g.rowWritten && c.mu.groups[g.name] == g {
		delete(c.mu.groups, g.name)
	}
}

// Future is the result of a call that may wait for a rebalance to
// complete and for its writes to become durable.
type Future[T any] struct {
	ch       chan T
	persists []*persist
	// failed builds the result when a write failed or the wait was
	// cancelled, from the result received (zero if none) and the error.
	failed func(res T, err error) T
	// mapErr turns a failed write into the error the result carries.
	mapErr func(error) error
	// dependsOn returns a write, made by another call, that the result
	// must not overtake (the group metadata a SyncGroup result carries).
	dependsOn func(res T) *persist
}

func newFuture[T any](failed func(T, error) T) *Future[T] {
	return &Future[T]{ch: make(chan T, 1), failed: failed, mapErr: metadataAppendError}
}

// Wait returns the result, blocking until the group's rebalance gives it
// or cancel is closed (the result is then COORDINATOR_NOT_AVAILABLE), and
// until the writes it depends on are durable. Call it once, without
// holding any lock of this package.
func (f *Future[T]) Wait(cancel <-chan struct{}) T {
	var res T
	cancelled := false
	select {
	case res = <-f.ch:
	case <-cancel:
		select {
		case res = <-f.ch:
		default:
			cancelled = true
		}
	}
	var werr error
	for _, p := range f.persists {
		if err := p.wait(); err != nil && werr == nil {
			werr = err
		}
	}
	if cancelled {
		return f.failed(res, ErrCoordinatorNotAvailable)
	}
	if f.dependsOn != nil {
		if err := f.dependsOn(res).wait(); err != nil && werr == nil {
			werr = err
		}
	}
	if werr != nil {
		return f.failed(res, f.mapErr(werr))
	}
	return res
}

// resolved returns a Future already holding res.
func resolved[T any](res T, failed func(T, error) T) *Future[T] {
	f := newFuture(failed)
	f.ch <- res
	return f
}

// Tick fires every timer due at now: member session timeouts, expiry of
// member IDs handed out with MEMBER_ID_REQUIRED, the join phase's
// rebalance timeout and initial delay, the sync phase's deadline; and, every
// OffsetsRetentionCheckInterval, the removal of expired offsets and of
// offsets of deleted topics. It returns once its writes are durable.
func (c *Coordinator) Tick(now time.Time) {
	o := &op{now: now}
	c.mu.Lock()
	for _, g := range c.mu.groups {
		switch {
		case g.cg != nil && g.hasTimers():
			c.runConsumerTimersLocked(o, g)
		case g.hasTimers():
			c.runTimersLocked(o, g)
		}
	}
	if !now.Before(c.mu.nextRetentionCheck) {
		c.mu.nextRetentionCheck = now.Add(c.cfg.OffsetsRetentionCheckInterval)
		c.expireOffsetsLocked(o)
	}
	c.mu.Unlock()
	if err := o.waitAll(); err != nil {
		c.log.Warn().Err(err).Msg("a group change made by a timer was not stored")
	}
	c.tickShare(now)
}

type timerKind int8

const (
	timerNone timerKind = iota
	timerPending
	timerHeartbeat
	timerJoin
	timerSync
)

// nextDue returns the earliest timer of g due at now.
func (g *group) nextDue(now time.Time) (timerKind, string) {
	kind, id := timerNone, ""
	var best time.Time
	consider := func(k timerKind, mid string, d time.Time) {
		if d.After(now) {
			return
		}
		if kind == timerNone || d.Before(best) {
			kind, id, best = k, mid, d
		}
	}
	for mid, d := range g.pending {
		consider(timerPending, mid, d)
	}
	for _, m := range g.members {
		if !m.heartbeatDeadline.IsZero() {
			consider(timerHeartbeat, m.id, m.heartbeatDeadline)
		}
	}
	if g.joinTimer.active {
		consider(timerJoin, "", g.joinTimer.deadline)
	}
	if g.syncTimer.active {
		consider(timerSync, "", g.syncTimer.deadline)
	}
	return kind, id
}

// runTimersLocked fires g's due timers in deadline order. A timer that
// reschedules itself at now (a zero rebalance timeout) fires again on the
// next Tick, not in a loop. REQUIRES: c.mu held.
func (c *Coordinator) runTimersLocked(o *op, g *group) {
	limit := 2*(len(g.members)+len(g.pending)) + 4
	for i := 0; i < limit; i++ {
		kind, id := g.nextDue(o.now)
		switch kind {
		case timerNone:
			return
		case timerPending:
			delete(g.pending, id)
			c.log.Debug().Str("group", g.name).Str("member", id).Msg("pending member expired")
			if g.is(StatePreparingRebalance) && g.hasAllMembersJoined() {
				c.completeJoinLocked(o, g)
			}
		case timerHeartbeat:
			m := g.members[id]
			m.heartbeatDeadline = time.Time{}
			if !m.hasSatisfiedHeartbeat() {
				c.log.Info().Str("group", g.name).Str("member", id).Dur("session_timeout", m.sessionTimeout).Msg("member session expired; removing it")
				c.metrics.expiredMembers.Inc()
				c.removeMemberAndUpdateLocked(o, g, m)
			}
		case timerJoin:
			t := g.joinTimer
			g.joinTimer.active = false
			if t.initial {
				c.tryCompleteInitialRebalanceLocked(o, g, t.delay, t.remaining)
			} else {
				c.completeJoinLocked(o, g)
			}
		case timerSync:
			gen := g.syncTimer.generation
			g.syncTimer.active = false
			c.expirePendingSyncLocked(o, g, gen)
		}
		if c.mu.groups[g.name] != g {
			return
		}
	}
}
