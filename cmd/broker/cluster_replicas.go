package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/vibemq/broker/cluster"
	"github.com/vibemq/broker/groups"
	"github.com/vibemq/broker/httpapi"
	"github.com/vibemq/broker/kafkaproto"
	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/topics"
	"github.com/vibemq/broker/txns"
)

// replicaManager runs this broker's replicas of the replicated partitions
// (topics with a replication factor above 1) on one cluster.Host: one
// Raft group per partition, whose log is the partition log
// (cluster.PartitionLog). It follows the metadata (DESIGN.md "Cluster",
// "Replicated partitions"):
//
//   - reconcile: the groups this broker is a replica of, from the applied
//     metadata, are added to the host (voters = the partition's replicas;
//     a group found on disk is replayed: its PartitionLog is rebuilt from
//     the whole log), and groups no longer wanted (topic deleted) are
//     removed with their rows. The preferred replica (first) campaigns
//     when its group has no leader;
//   - leaders: a replica leading its group proposes record 8 (leader,
//     epoch = Raft term, ISR = its in-sync view) when the applied record
//     differs, so every broker answers Metadata with it.
//
// Both run on its own goroutine: reconciling on the metadata's topic
// changes (and every second), the leaders every 100 ms.
type replicaManager struct {
	self  int32
	host  *cluster.Host
	md    *cluster.Metadata
	node  *cluster.Node
	store *pebblestore.Store
	log   zerolog.Logger
	// groups is the group coordinator, which follows the leadership of a
	// replicated __consumer_offsets (cluster_coordinators.go); nil in tests
	// without one.
	groups *groups.Coordinator
	// txns is the transaction coordinator, which follows the leadership
	// of a replicated __transaction_state (cluster_txn_coordinators.go);
	// nil without a marker sender.
	txns *txns.Coordinator

	kick chan struct{}
	// stopping: the broker is shutting down (cluster_shutdown.go): it
	// campaigns no more and hands no leadership around.
	stopping atomic.Bool

	// topics and retentionEvery: retention of the partitions led here
	// (cluster_retention.go); set before run.
	topics         *topics.Manager
	retentionEvery time.Duration

	mu   sync.RWMutex
	logs map[uint64]*replica

	// Owned by run.
	proposing map[uint64]bool
	campaigns map[uint64]time.Time
	// leadingSince: when this broker was first seen leading a group whose
	// preferred replica is another, in sync.
	leadingSince map[uint64]time.Time
	results      chan uint64
	// coordinators: this broker's leadership of replicated
	// __consumer_offsets partitions, by group; offsetsReplicated once the
	// group coordinator was switched to them.
	coordinators      map[uint64]*coordinatorLoad
	offsetsReplicated bool
	txnsReplicated    bool
	// ticker paces the leader checks (leadersEvery when nil; tests tick
	// by hand); set before run.
	ticker cluster.Ticker
}

type replica struct {
	rp  cluster.ReplicatedPartition
	log *cluster.PartitionLog
}

// leadersEvery: how often the leaders are checked (the leader records
// follow leadership changes at this pace); the replicas are reconciled on
// every kick and every reconcileTicks of these.
const (
	leadersEvery   = 100 * time.Millisecond
	reconcileTicks = 10
)

func newReplicaManager(self int32, host *cluster.Host, md *cluster.Metadata, store *pebblestore.Store, log zerolog.Logger) *replicaManager {
	return &replicaManager{
		self: self, host: host, md: md, store: store, log: log.With().Str("component", "replicas").Logger(),
		kick: make(chan struct{}, 1), logs: map[uint64]*replica{},
		proposing: map[uint64]bool{}, campaigns: map[uint64]time.Time{}, leadingSince: map[uint64]time.Time{}, results: make(chan uint64, 64),
		coordinators: map[uint64]*coordinatorLoad{},
	}
}

// changed kicks a reconcile (the metadata's topics changed).
func (m *replicaManager) changed() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

func (m *replicaManager) run(ctx context.Context, done chan struct{}) {
	defer close(done)
	retentionDone := make(chan struct{})
	go m.runRetention(ctx, retentionDone)
	defer func() { <-retentionDone }()
	t := m.ticker
	if t == nil {
		t = cluster.NewTicker(leadersEvery)
	}
	defer t.Stop()
	reconcile, check := true, true
	for ticks := 0; ; {
		if reconcile {
			m.reconcile()
			reconcile = false
		}
		if check {
			m.leaders(ctx)
		}
		check = true
		select {
		case <-ctx.Done():
			return
		case <-m.kick:
			reconcile = true
		case <-t.C():
			ticks++
			reconcile = ticks%reconcileTicks == 0 // a retry of what failed
		case g := <-m.results:
			// Proposed again at the next tick, not now: while the
			// metadata group has no leader a proposal fails at once, and
			// checking again on its result proposed every leader record
			// in a busy loop (tens of thousands a second).
			delete(m.proposing, g)
			check = false
		}
	}
}

// reconcile adds and removes groups to match the metadata.
func (m *replicaManager) reconcile() {
	want := map[uint64]cluster.ReplicatedPartition{}
	for _, rp := range m.md.ReplicatedPartitions(m.self) {
		want[rp.Group] = rp
	}
	m.mu.RLock()
	var add []cluster.ReplicatedPartition
	var remove []uint64
	for g, rp := range want {
		if m.logs[g] == nil {
			add = append(add, rp)
		}
	}
	for g := range m.logs {
		if _, ok := want[g]; !ok {
			remove = append(remove, g)
		}
	}
	m.mu.RUnlock()
	for _, rp := range add {
		l := cluster.NewPartitionLog(m.store, rp.Group, topics.ReplicatedCompactor{})
		voters := make([]uint64, len(rp.Replicas))
		for i, id := range rp.Replicas {
			voters[i] = uint64(id)
		}
		if err := m.host.AddGroup(rp.Group, voters, l); err != nil {
			m.log.Error().Err(err).Str("topic", rp.Topic).Int32("partition", rp.Partition).Msg("cannot start this broker's replica of the partition")
			continue
		}
		m.mu.Lock()
		m.logs[rp.Group] = &replica{rp: rp, log: l}
		m.mu.Unlock()
		m.log.Info().Str("topic", rp.Topic).Int32("partition", rp.Partition).Uint64("group", rp.Group).Ints32("replicas", rp.Replicas).Msg("replica started")
	}
	for _, g := range remove {
		m.mu.Lock()
		delete(m.logs, g)
		m.mu.Unlock()
		if err := m.host.RemoveGroup(g); err != nil {
			m.log.Error().Err(err).Uint64("group", g).Msg("cannot remove the replica of a deleted partition")
		}
	}
}

// leaders proposes the leader records of the groups this broker leads
// whose applied record differs, and makes a preferred replica campaign in
// a group without a leader (at most once per campaignEvery).
func (m *replicaManager) leaders(ctx context.Context) {
	m.useReplicatedOffsets()
	m.useReplicatedTxns()
	m.mu.RLock()
	defer m.mu.RUnlock()
	now := time.Now()
	for g, r := range m.logs {
		st, ok := m.host.Status(g)
		m.followCoordinator(g, r, st, ok)
		m.followTxnCoordinator(g, r, st, ok)
		if !ok {
			continue
		}
		if m.stopping.Load() {
			continue
		}
		if st.Leader == 0 && r.rp.Replicas[0] == m.self && now.Sub(m.campaigns[g]) > campaignEvery {
			m.campaigns[g] = now
			m.host.Campaign(g)
			continue
		}
		if !st.Leading || len(st.InSync) == 0 || m.proposing[g] {
			continue
		}
		want := cluster.PartitionLeader{TopicID: r.rp.TopicID, Partition: r.rp.Partition, Leader: m.self, Epoch: int32(min(st.Term, 1<<31-1))}
		if r.rp.Coordinator {
			want.Coordinator = r.rp.Topic
		}
		for _, id := range st.InSync {
			want.ISR = append(want.ISR, int32(id))
		}
		if cur, ok := m.md.Leader(g); ok && cur.Leader == want.Leader && cur.Epoch == want.Epoch && slices.Equal(cur.ISR, want.ISR) {
			m.preferLeader(g, r, st, now)
			continue
		}
		m.proposing[g] = true
		go func() {
			// Short: a proposal forwarded to a metadata leader that just
			// died is lost without an answer, and the partition stays
			// unannounced until the next try.
			pctx, cancel := context.WithTimeout(ctx, leaderRecordTimeout)
			defer cancel()
			if _, err := m.node.Propose(pctx, cluster.PartitionLeaderRecord(want)); err != nil && !errors.Is(err, cluster.ErrStaleLeader) {
				m.log.Debug().Err(err).Uint64("group", g).Msg("partition leader record not applied; proposed again")
			} else if err == nil {
				m.log.Info().Str("topic", r.rp.Topic).Int32("partition", r.rp.Partition).Int32("epoch", want.Epoch).Ints32("isr", want.ISR).Msg("partition leader recorded")
			}
			select {
			case m.results <- g:
			case <-ctx.Done():
			}
		}()
	}
}

// preferLeader moves the leadership of g, led here, back to its
// preferred replica (the first) once it is in sync and this broker has
// led for preferredAfter, as Kafka's auto.leader.rebalance.enable does
// (at most once per preferredAfter), so leaders stay spread.
func (m *replicaManager) preferLeader(g uint64, r *replica, st cluster.GroupStatus, now time.Time) {
	preferred := r.rp.Replicas[0]
	if preferred == m.self || !slices.Contains(st.InSync, uint64(preferred)) {
		delete(m.leadingSince, g)
		return
	}
	since, ok := m.leadingSince[g]
	if !ok {
		m.leadingSince[g] = now
		return
	}
	if now.Sub(since) < preferredAfter {
		return
	}
	m.leadingSince[g] = now
	m.host.TransferLeader(g, uint64(preferred))
	m.log.Info().Str("topic", r.rp.Topic).Int32("partition", r.rp.Partition).Int32("to", preferred).Msg("leadership handed back to the preferred replica")
}

// leaderRecordTimeout bounds one proposal of a leader record.
const leaderRecordTimeout = time.Second

// campaignEvery: how often the preferred replica of a group without a
// leader campaigns. Its first campaign, right after adding the group,
// is often lost: the other replicas apply the topic a heartbeat later
// and drop the vote requests of a group they do not have yet. A retry
// well inside the shortest election timeout (10 ticks, 1 s) lets it win
// before another replica's timeout fires, which would elect that one
// and hand the leadership back after preferredAfter, under the first
// writes (BENCHMARKS.md "Replicated cluster"). With PreVote a retry
// moves no term.
const campaignEvery = 250 * time.Millisecond

// preferredAfter: how long a replica that is not the preferred one leads
// before handing the leadership back to the preferred replica in sync.
const preferredAfter = 2 * time.Second

// status lists this broker's replicas for GET /v1/admin/cluster.
func (m *replicaManager) status() []httpapi.ClusterPartition {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]httpapi.ClusterPartition, 0, len(m.logs))
	for g, r := range m.logs {
		st, _ := m.host.Status(g)
		p := httpapi.ClusterPartition{
			Topic: r.rp.Topic, Partition: r.rp.Partition, Group: g, Replicas: r.rp.Replicas,
			Leader: st.Leader, Term: st.Term, HighWatermark: r.log.HighWatermark(), LogStart: r.log.LogStart(),
			Commit: st.Commit, Applied: st.Applied, LastIndex: st.Last, CompactedIndex: st.Compacted, Quiesced: st.Quiesced,
			CleanEnd: r.log.CleanEnd(), Bytes: r.log.Bytes(),
		}
		for _, id := range st.InSync {
			p.ISR = append(p.ISR, int32(id))
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b httpapi.ClusterPartition) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
	return out
}

// printReplicatedPartitions is the part of `broker cluster status` that
// lists a broker's replicas of replicated partitions; under-replicated
// ones (led here, ISR smaller than the replicas) are marked.
func printReplicatedPartitions(out io.Writer, ps []httpapi.ClusterPartition) {
	if len(ps) == 0 {
		return
	}
	fmt.Fprintln(out)
	tw := newTable(out)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tGROUP\tREPLICAS\tLEADER\tEPOCH\tISR\tLOG-START\tHIGH-WATERMARK\tCOMMIT\tAPPLIED")
	for _, p := range ps {
		isr := "-"
		if p.ISR != nil {
			isr = fmt.Sprint(p.ISR)
			if len(p.ISR) < len(p.Replicas) {
				isr += " (under-replicated)"
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%v\t%d\t%d\t%s\t%d\t%d\t%d\t%d\n", p.Topic, p.Partition, p.Group, p.Replicas, p.Leader, p.Term, isr, p.LogStart, p.HighWatermark, p.Commit, p.Applied)
	}
	_ = tw.Flush()
}

// replicaCounts are the replicated partitions' gauges (/metrics).
type replicaCounts struct{ replicas, leading, underReplicated int }

func (m *replicaManager) counts() replicaCounts {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var c replicaCounts
	for g, r := range m.logs {
		c.replicas++
		if st, ok := m.host.Status(g); ok && st.Leading {
			c.leading++
			if len(st.InSync) < len(r.rp.Replicas) {
				c.underReplicated++
			}
		}
	}
	return c
}

// replicatedLog is the kafkaproto.ReplicatedLog of group g.
func (m *replicaManager) replicatedLog(topic string, g uint64) kafkaproto.ReplicatedLog {
	m.mu.RLock()
	r := m.logs[g]
	m.mu.RUnlock()
	if r == nil {
		return notReplica{}
	}
	return &replicaLog{m: m, r: r, topic: topic}
}

// notReplica is a replicated partition this broker has no replica of.
type notReplica struct{}

func (notReplica) LeaderEpoch() (int32, error) { return -1, kafkaproto.ErrNotLeader }
func (notReplica) Append(context.Context, []byte, bool) func() (int64, error) {
	return func() (int64, error) { return -1, kafkaproto.ErrNotLeader }
}
func (notReplica) Read(_ int64, _ int, _ bool, dst []byte) ([]byte, error) {
	return dst, kafkaproto.ErrNotLeader
}
func (notReplica) HighWatermark() int64                    { return -1 }
func (notReplica) EndOffsetForEpoch(int32) (int32, int64)  { return -1, -1 }
func (notReplica) OffsetForTimestamp(int64) (int64, int64) { return -1, -1 }
func (notReplica) MaxTimestamp() (int64, int64)            { return -1, -1 }
func (notReplica) AddWaiter(chan struct{})                 {}
func (notReplica) RemoveWaiter(chan struct{})              {}
func (notReplica) LogStart() int64                         { return -1 }
func (notReplica) DeleteRecords(context.Context, int64) (int64, error) {
	return -1, kafkaproto.ErrNotLeader
}

// replicaLog serves one replica's log to Kafka's APIs.
type replicaLog struct {
	m     *replicaManager
	r     *replica
	topic string
}

// LeaderEpoch implements kafkaproto.ReplicatedLog: this broker's replica
// must lead the group and hold its lease (cluster.Host.LeaderLease: the
// nodes of a majority of the replicas live in its view).
func (l *replicaLog) LeaderEpoch() (int32, error) {
	st, ok := l.m.host.Status(l.r.rp.Group)
	if !ok || !l.m.host.LeaderLease(l.r.rp.Group) {
		return -1, kafkaproto.ErrNotLeader
	}
	return int32(min(st.Term, 1<<31-1)), nil
}

// Append implements kafkaproto.ReplicatedLog.
func (l *replicaLog) Append(ctx context.Context, batch []byte, acksAll bool) func() (int64, error) {
	if err := l.checkISR(acksAll); err != nil {
		return func() (int64, error) { return -1, err }
	}
	wait := l.m.host.Enqueue(ctx, l.r.rp.Group, batch)
	return func() (int64, error) {
		_, base, err := wait()
		return appendResult(base, err)
	}
}

// checkISR refuses an acks=all batch while the in-sync replicas are fewer
// than min.insync.replicas.
func (l *replicaLog) checkISR(acksAll bool) error {
	if acksAll {
		st, _ := l.m.host.Status(l.r.rp.Group)
		minISR := 1
		if t, ok := l.m.md.Topic(l.topic); ok {
			if v, err := strconv.Atoi(t.Configs["min.insync.replicas"]); err == nil {
				minISR = v
			}
		}
		if len(st.InSync) < minISR {
			return fmt.Errorf("%w: %d in sync, min.insync.replicas %d", kafkaproto.ErrNotEnoughReplicas, len(st.InSync), minISR)
		}
	}
	return nil
}

// appendResult is the base offset of an applied batch, or the Kafka error
// of a failed proposal.
func appendResult(base uint64, err error) (int64, error) {
	var nl *cluster.NotLeaderError
	switch {
	case err == nil:
		return int64(base), nil
	case errors.As(err, &nl), errors.Is(err, cluster.ErrLeadershipLost), errors.Is(err, cluster.ErrUnknownGroup), errors.Is(err, cluster.ErrStopped):
		return -1, fmt.Errorf("%w (%v)", kafkaproto.ErrNotLeader, err)
	case errors.Is(err, cluster.ErrBusy):
		return -1, fmt.Errorf("%w (%v)", kafkaproto.ErrNotEnoughReplicas, err)
	case errors.Is(err, cluster.ErrOutOfOrderSequence):
		return -1, fmt.Errorf("%w: %w", topics.ErrOutOfOrderSequence, err)
	case errors.Is(err, cluster.ErrInvalidProducerEpoch):
		return -1, fmt.Errorf("%w: %w", topics.ErrInvalidProducerEpoch, err)
	case errors.Is(err, cluster.ErrTransactionCoordinatorFenced):
		return -1, fmt.Errorf("%w: %w", topics.ErrTransactionCoordinatorFenced, err)
	case errors.Is(err, cluster.ErrInvalidBatch):
		return -1, fmt.Errorf("%w: %w", topics.ErrCorruptMessage, err)
	case errors.Is(err, cluster.ErrOffsetOutOfRange):
		return -1, fmt.Errorf("%w: %w", topics.ErrOffsetOutOfRange, err)
	}
	return -1, err
}

// Read implements kafkaproto.ReplicatedLog.
func (l *replicaLog) Read(offset int64, maxBytes int, minOne bool, dst []byte) ([]byte, error) {
	out, err := l.r.log.ReadRange(offset, maxBytes, minOne, dst)
	if errors.Is(err, cluster.ErrOffsetOutOfRange) {
		err = fmt.Errorf("%w: %w", topics.ErrOffsetOutOfRange, err)
	}
	return out, err
}

// HighWatermark implements kafkaproto.ReplicatedLog.
func (l *replicaLog) HighWatermark() int64 { return l.r.log.HighWatermark() }

// EndOffsetForEpoch implements kafkaproto.ReplicatedLog.
func (l *replicaLog) EndOffsetForEpoch(epoch int32) (int32, int64) {
	current, err := l.LeaderEpoch()
	if err != nil {
		return -1, -1
	}
	return l.r.log.EndOffsetForEpoch(epoch, current)
}

// OffsetForTimestamp implements kafkaproto.ReplicatedLog.
func (l *replicaLog) OffsetForTimestamp(ts int64) (int64, int64) {
	return l.r.log.OffsetForTimestamp(ts)
}

// MaxTimestamp implements kafkaproto.ReplicatedLog.
func (l *replicaLog) MaxTimestamp() (int64, int64) { return l.r.log.MaxTimestamp() }

// AddWaiter implements kafkaproto.ReplicatedLog.
func (l *replicaLog) AddWaiter(w chan struct{}) { l.r.log.AddWaiter(w) }

// RemoveWaiter implements kafkaproto.ReplicatedLog.
func (l *replicaLog) RemoveWaiter(w chan struct{}) { l.r.log.RemoveWaiter(w) }
