package cluster

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/vibemq/broker/pebblestore"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
	"google.golang.org/protobuf/proto"
)

// ErrLeadershipLost is returned by Host.Propose when this replica stopped
// being the group's leader before its proposal was applied: the proposal
// may or may not be committed by the next leader (the outcome is unknown,
// as with Kafka's NOT_LEADER_OR_FOLLOWER after a send); retry on the new
// leader (an idempotent producer's retry is deduplicated).
var ErrLeadershipLost = errors.New("cluster: this replica lost the leadership before the proposal was applied; the outcome is unknown, retry on the new leader")

// ErrBusy: the leader refused a proposal, its group has too much not
// committed yet (64 MiB) or is handing its leadership over; retry later.
var ErrBusy = errors.New("cluster: the raft group's leader is busy (too much not committed yet, or a leadership transfer); retry later")

// ErrUnknownGroup: the host runs no replica of the group asked.
var ErrUnknownGroup = errors.New("cluster: this node runs no replica of that raft group")

// GroupStateMachine is what one group of a Host replicates (a partition
// log). The host calls it from its loop goroutine only, in log order.
type GroupStateMachine interface {
	// Apply applies a committed entry; it must be deterministic. Its
	// result and error are handed back to the proposer (an error is the
	// command's rejection, alike on every replica, never a failure of
	// the replica).
	Apply(e Entry) (result uint64, err error)
}

// HostConfig configures the replicas of many Raft groups on one node.
type HostConfig struct {
	// ID is this node's ID in every group, > 0.
	ID uint64
	// Store is the broker's Pebble store; every group's rows are there.
	Store *pebblestore.Store
	// Transport sends the groups' messages (GroupFrames on); the host
	// registers itself as its GroupReceiver.
	Transport *Transport
	// Ticker drives every group's clock.
	Ticker Ticker
	// ElectionTicks and HeartbeatTicks: Raft's timeouts in ticks; 10 and
	// 1 by default.
	ElectionTicks, HeartbeatTicks int
	// DisableQuiesce keeps every group ticking even when idle (the
	// behaviour before quiescing; benchmarks compare both).
	DisableQuiesce bool
	// EarlySend sends a Ready's messages that vouch for no local state (a
	// leader's appends) before the Ready is saved (sendEarly). Off: every
	// message after the save. Benchmarks only: it did not measurably help
	// on this machine (DESIGN.md, "Replicated throughput").
	EarlySend bool
	// CommittedPerReady bounds the committed entries one Ready of a group
	// applies (raft's MaxCommittedSizePerReady); 0 is raft's default,
	// MaxSizePerMsg (1 MiB). Benchmarks compare.
	CommittedPerReady uint64
	// Logger receives the host's and the Raft cores' events.
	Logger zerolog.Logger
}

// Validate checks the configuration and fills in defaults.
func (c *HostConfig) Validate() error {
	switch {
	case c.ID == 0:
		return errors.New("cluster: the node ID must be greater than 0")
	case c.Store == nil || c.Transport == nil || c.Ticker == nil:
		return errors.New("cluster: a host needs a store, a transport and a ticker")
	case !c.Transport.cfg.GroupFrames:
		return errors.New("cluster: a host needs a transport with GroupFrames (version 2 frames name the group)")
	}
	if c.ElectionTicks == 0 {
		c.ElectionTicks = 10
	}
	if c.HeartbeatTicks == 0 {
		c.HeartbeatTicks = 1
	}
	if c.ElectionTicks <= c.HeartbeatTicks {
		return fmt.Errorf("cluster: the election timeout (%d ticks) must be longer than the heartbeat interval (%d ticks)", c.ElectionTicks, c.HeartbeatTicks)
	}
	return nil
}

// Host runs this node's replicas of many Raft groups (the partitions'
// groups: multi-raft) on one loop goroutine. Each iteration collects the
// Ready of every group that has one, makes all of them durable in ONE
// synced Pebble batch (one fsync for every group), then sends every
// group's messages in one transport call (frames to one peer batched per
// write, heartbeats coalesced per peer), applies the committed entries
// and advances each group. The loop owns every RawNode, Storage and
// state machine; everything else reaches it through channels.
//
// Membership is static (the voters a group was added with). A group's
// log is compacted to a state row of its state machine (LogCompactor,
// host_compact.go), which is also the snapshot its leader sends a replica
// that lacks the entries (a wiped one: PeerLostState).
type Host struct {
	cfg HostConfig
	log zerolog.Logger

	recvc   chan groupMessage
	propc   chan *hostProposal
	reportc chan func()
	addc    chan *addGroup
	removec chan *removeGroup
	stopc   chan struct{}
	done    chan struct{}
	stopped sync.Once
	err     atomic.Pointer[error]

	statusMu sync.Mutex
	status   map[uint64]GroupStatus
	// saves counts the synced batches, readies the Readies they carried,
	// entries and entryBytes the log entries in them (Counters).
	saves, readiesSaved, entriesSaved, entryBytesSaved atomic.Uint64
	// leaderChanges: groups whose leadership this node took over from
	// another known leader; longest: the longest iteration (ns, not
	// counting the wait for input).
	leaderChanges atomic.Uint64
	longest       atomic.Int64
	// stats: the loop's time per stage (LoopStats).
	stats [numLoopStages]atomic.Int64
	loops atomic.Uint64
	// groupTicks counts the groups' Raft ticks; quiesced the groups
	// quiesced now.
	groupTicks atomic.Uint64
	quiesced   atomic.Int64
	// dead: the peer nodes found dead by checkLiveness (copy on write),
	// read by LeaderLease from any goroutine.
	dead atomic.Pointer[map[uint64]bool]
	// draining: HandOff was called; no leadership is taken any more.
	draining atomic.Bool

	// Owned by the loop goroutine.
	groups  map[uint64]*hostGroup
	touched map[uint64]*hostGroup
	// campaigns: the groups whose campaign waits for their committed
	// entries to be applied (campaignReady).
	campaigns map[uint64]*hostGroup
	// nodes: the liveness of every other voter's node (quiescing).
	nodes   map[uint64]*nodeLiveness
	nextSeq uint64
	// tickN counts the host's ticks (the clock of the in-sync views).
	tickN uint64
	// readies: scratch of one iteration.
	readies []groupReady
	// mustSync: a Ready of the batch being built needs a synced commit.
	mustSync bool
	// unsynced: batches applied without waiting for their sync (below).
	unsynced []*pebblestore.Batch
	msgs     []GroupMessage
}

// GroupStatus is this node's view of one group.
type GroupStatus struct {
	Group, Leader, Term, Commit, Applied, Last uint64
	Leading                                    bool
	// Quiesced: the group does not tick (DESIGN.md "Cluster").
	Quiesced bool
	// InSync, on the leader: the voters in sync in its view (Kafka's
	// ISR), sorted, itself included: a follower whose node is live and
	// whose log reached the leader's last index of some tick within the
	// last InSyncLagTicks ticks (replica.lag.time.max.ms).
	InSync []uint64
	// Voters are the group's voters (static).
	Voters []uint64
	// Compacted: the log was compacted up to this index (a state row's,
	// host_compact.go; 0: never).
	Compacted uint64
}

// InSyncLagTicks is how long a follower may stay behind the leader's log
// and still count as in sync (30 ticks: 3 s at serve's 100 ms tick).
const InSyncLagTicks = 30

type groupMessage struct {
	group uint64
	m     *raftpb.Message
}

type hostProposal struct {
	ctx   context.Context
	group uint64
	data  []byte
	done  chan hostResult // buffered: the loop never blocks on it
}

type hostResult struct {
	index, result uint64
	err           error
}

type addGroup struct {
	group  uint64
	voters []uint64
	sm     GroupStateMachine
	done   chan error
}

type removeGroup struct {
	group uint64
	done  chan error
}

type hostGroup struct {
	voters  []uint64
	id      uint64
	rn      *raft.RawNode
	storage *Storage
	sm      GroupStateMachine
	pending map[uint64]*hostProposal
	applied uint64
	leading bool
	// quiesced: not ticked until a proposal, a message other than a
	// heartbeat response, or its leader's node failing wakes it.
	quiesced bool
	// caughtUp: per follower, the last tick its match reached lastAtTick
	// (the leader's last index at the tick before); inSync the view.
	caughtUp   map[uint64]uint64
	lastAtTick uint64
	inSync     []uint64
	// lastLead: the last leader this replica knew (0: none yet).
	lastLead uint64
	// lost: while this node leads, the peers that lost their state
	// (PeerLostState) whose stale progress it keeps: it hands the group
	// over (host_handoff.go) and never quiesces it.
	lost []uint64
}

// nodeLiveness: what this host knows of one peer node. A node is dead
// once no frame came from it for ElectionTicks ticks (every host sends
// every peer a node heartbeat each tick).
type nodeLiveness struct {
	heard  uint64 // Transport.Heard at the last tick
	silent int    // ticks since heard changed
	dead   bool
}

type groupReady struct {
	g    *hostGroup
	rd   raft.Ready
	next Storage
}

// StartHost starts the loop of a host with no group; AddGroup adds them.
func StartHost(cfg HostConfig) (*Host, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	h := &Host{
		cfg:       cfg,
		log:       cfg.Logger.With().Str("component", "raft-host").Uint64("node", cfg.ID).Logger(),
		recvc:     make(chan groupMessage, 8192),
		propc:     make(chan *hostProposal, 4096),
		reportc:   make(chan func(), 1024),
		addc:      make(chan *addGroup),
		removec:   make(chan *removeGroup),
		stopc:     make(chan struct{}),
		done:      make(chan struct{}),
		status:    map[uint64]GroupStatus{},
		groups:    map[uint64]*hostGroup{},
		touched:   map[uint64]*hostGroup{},
		campaigns: map[uint64]*hostGroup{},
		nodes:     map[uint64]*nodeLiveness{},
		// Sequences start at the clock, so that entries proposed before a
		// restart, applied again from the log, match no new proposal.
		nextSeq: uint64(time.Now().UnixNano()),
	}
	cfg.Transport.SetGroups(h)
	go h.run()
	return h, nil
}

// AddGroup starts this node's replica of group (> 0) with sm: on empty
// storage it bootstraps the group with voters; otherwise it restarts
// from the saved log, applying every committed entry again to sm (a
// fresh state machine), as KRaft replays a log.
func (h *Host) AddGroup(group uint64, voters []uint64, sm GroupStateMachine) error {
	if group == 0 || group == heartbeatsGroup {
		return fmt.Errorf("cluster: raft group %d is reserved (0: the metadata group)", group)
	}
	a := &addGroup{group: group, voters: slices.Clone(voters), sm: sm, done: make(chan error, 1)}
	select {
	case h.addc <- a:
	case <-h.done:
		return ErrStopped
	}
	return <-a.done
}

// RemoveGroup stops this node's replica of group and deletes its rows
// (log, hard state) with one range deletion: the partition was deleted,
// or this node is no longer one of its replicas. Its pending proposals
// fail with ErrUnknownGroup. Removing a group not running is a no-op
// that still deletes any rows left.
func (h *Host) RemoveGroup(group uint64) error {
	if group == 0 || group == heartbeatsGroup {
		return fmt.Errorf("cluster: raft group %d is reserved (0: the metadata group)", group)
	}
	r := &removeGroup{group: group, done: make(chan error, 1)}
	select {
	case h.removec <- r:
	case <-h.done:
		return ErrStopped
	}
	return <-r.done
}

func (h *Host) removeGroup(group uint64) error {
	if g := h.groups[group]; g != nil {
		g.failPending(ErrUnknownGroup)
		h.setQuiesced(g, false)
		delete(h.groups, group)
		delete(h.touched, group)
		h.statusMu.Lock()
		delete(h.status, group)
		h.statusMu.Unlock()
	}
	b := h.cfg.Store.NewBatch()
	prefix := pebblestore.RaftGroupPrefix(group)
	b.DeleteRange(prefix, pebblestore.PrefixEnd(prefix))
	if err := b.Commit(); err != nil {
		return fmt.Errorf("cluster: delete the rows of raft group %d: %w", group, err)
	}
	return nil
}

func (h *Host) addGroup(a *addGroup) error {
	if h.groups[a.group] != nil {
		return fmt.Errorf("cluster: raft group %d is already running on this node", a.group)
	}
	st, err := OpenStorage(h.cfg.Store, a.group)
	if err != nil {
		return err
	}
	if !raft.IsEmptySnap(st.snapshot) {
		return fmt.Errorf("cluster: raft group %d has a snapshot, which host groups never take: %w", a.group, pebblestore.ErrCorruption)
	}
	if err := restoreCompacted(st, a); err != nil {
		return err
	}
	rn, err := raft.NewRawNode(&raft.Config{
		ID: h.cfg.ID, ElectionTick: h.cfg.ElectionTicks, HeartbeatTick: h.cfg.HeartbeatTicks,
		Storage: st, MaxSizePerMsg: 1 << 20, MaxInflightMsgs: 256, MaxUncommittedEntriesSize: maxUncommitted,
		CheckQuorum: true, PreVote: true, DisableProposalForwarding: true,
		MaxCommittedSizePerReady: h.committedPerReady(),
		Logger:                   raftLogger{h.log.With().Uint64("group", a.group).Logger()},
	})
	if err != nil {
		return fmt.Errorf("cluster: start raft group %d: %w", a.group, err)
	}
	if st.lastIndex == 0 && raft.IsEmptyHardState(st.hardState) {
		voters := slices.Sorted(slices.Values(a.voters))
		peers := make([]raft.Peer, len(voters))
		for i, id := range voters {
			peers[i] = raft.Peer{ID: id}
		}
		if err := rn.Bootstrap(peers); err != nil {
			return fmt.Errorf("cluster: bootstrap raft group %d with voters %v: %w", a.group, voters, err)
		}
	}
	g := &hostGroup{voters: slices.Sorted(slices.Values(a.voters)), id: a.group, rn: rn, storage: st, sm: a.sm, pending: map[uint64]*hostProposal{}, caughtUp: map[uint64]uint64{}, applied: st.truncatedIndex}
	for _, id := range a.voters {
		if id != h.cfg.ID && h.nodes[id] == nil {
			h.nodes[id] = &nodeLiveness{}
		}
	}
	h.groups[a.group] = g
	h.touched[a.group] = g
	h.statusMu.Lock()
	h.status[a.group] = g.status()
	h.statusMu.Unlock()
	return nil
}

// maxUncommitted bounds a group's entries appended but not committed
// (raft's MaxUncommittedEntriesSize): a proposal beyond is refused (ErrBusy).
const maxUncommitted = 64 << 20

// committedPerReady is raft's MaxCommittedSizePerReady: 0 lets raft bound
// the committed entries of a Ready by MaxSizePerMsg (1 MiB).
func (h *Host) committedPerReady() uint64 { return h.cfg.CommittedPerReady }

// Propose replicates data through group and waits until this node (the
// group's leader) has applied it: the entry is then committed, durable
// on a majority, and applied in log order. It returns the entry's index
// and the state machine's result. On a follower it fails at once with a
// *NotLeaderError naming the leader; if this node loses the leadership
// first, with ErrLeadershipLost. When ctx ends first the entry may still
// be committed later.
func (h *Host) Propose(ctx context.Context, group uint64, data []byte) (index, result uint64, err error) {
	return h.Enqueue(ctx, group, data)()
}

// Enqueue is Propose in two steps: it hands the proposal to the loop and
// returns the wait for its outcome (Propose's results). Proposals
// enqueued one after the other by one goroutine reach the group's log in
// that order when they are accepted, which an idempotent producer's
// pipelined batches need (a batch proposed before its predecessor is
// refused as out of order).
func (h *Host) Enqueue(ctx context.Context, group uint64, data []byte) func() (index, result uint64, err error) {
	p := &hostProposal{ctx: ctx, group: group, data: data, done: make(chan hostResult, 1)}
	select {
	case h.propc <- p:
	case <-ctx.Done():
		return func() (uint64, uint64, error) { return 0, 0, ctx.Err() }
	case <-h.done:
		return func() (uint64, uint64, error) { return 0, 0, ErrStopped }
	}
	return func() (uint64, uint64, error) { return h.wait(ctx, p) }
}

// wait waits for the outcome of p, enqueued.
func (h *Host) wait(ctx context.Context, p *hostProposal) (index, result uint64, err error) {
	select {
	case r := <-p.done:
		return r.index, r.result, r.err
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	case <-h.done:
		return 0, 0, ErrStopped
	}
}

// Campaign makes this node start an election of group now (tests, and
// the preferred replica of a partition without a leader). A group just
// added has its bootstrap configuration committed but not yet applied,
// and Raft refuses to campaign until it is (an election would otherwise
// be lost to the first replica whose timeout fires, and the leadership
// handed back later); then the campaign waits for that apply.
func (h *Host) Campaign(group uint64) {
	h.report(func() {
		if g := h.groups[group]; g != nil {
			h.campaign(g)
		}
	})
}

// campaign campaigns g now, or marks it to campaign once its committed
// entries are applied (campaignReady).
func (h *Host) campaign(g *hostGroup) {
	h.wake(g)
	h.touched[g.id] = g
	if bs := g.rn.BasicStatus(); bs.Applied < bs.HardState.GetCommit() {
		h.campaigns[g.id] = g
		return
	}
	delete(h.campaigns, g.id)
	_ = g.rn.Campaign()
}

// campaignReady starts the elections campaign deferred: each group whose
// committed entries are applied now campaigns, unless it learnt of a
// leader meanwhile.
func (h *Host) campaignReady() {
	for id, g := range h.campaigns {
		switch bs := g.rn.BasicStatus(); {
		case h.groups[id] != g || bs.Lead != raft.None:
			delete(h.campaigns, id)
		case bs.Applied >= bs.HardState.GetCommit():
			delete(h.campaigns, id)
			_ = g.rn.Campaign()
			h.touched[id] = g
		}
	}
}

// TransferLeader asks this node, if it leads group, to hand the
// leadership to voter to (moving a partition's leader back to its
// preferred replica once that one is in sync again).
func (h *Host) TransferLeader(group, to uint64) {
	h.report(func() {
		if g := h.groups[group]; g != nil && g.leading {
			h.wake(g)
			g.rn.TransferLeader(to)
			h.touched[group] = g
		}
	})
}

// LeaderLease reports whether this node leads group and may serve reads
// as its leader: Raft says it leads, and the nodes of a majority of the
// group's voters (itself included) are live in its view (a frame heard
// within an election timeout). A leader cut off from the others stops
// serving after one election timeout, while the others elect a new one
// only after finding its node silent for as long and then an election
// timeout more (a quiesced group) or their own randomized election
// timeout with CheckQuorum deposing it meanwhile (an active one). This is
// a lease on the node clocks' rates, not a proof (no ReadIndex).
func (h *Host) LeaderLease(group uint64) bool {
	s, ok := h.Status(group)
	if !ok || !s.Leading || s.Leader != h.cfg.ID {
		return false
	}
	dead := h.dead.Load()
	live := 0
	for _, v := range s.Voters {
		if v == h.cfg.ID || dead == nil || !(*dead)[v] {
			live++
		}
	}
	return 2*live > len(s.Voters)
}

// Saves returns the synced batches the loop committed and the group
// Readies they carried (readies/saves: the group commit's width).
func (h *Host) Saves() (saves, readies uint64) { return h.saves.Load(), h.readiesSaved.Load() }

// HostCounters are the loop's cumulative counters since it started, for
// metrics and benchmarks (BENCHMARKS.md "Replicated cluster").
type HostCounters struct {
	// Loops: iterations; Saves: synced batches (one fsync each);
	// ReadiesSaved, EntriesSaved, EntryBytesSaved: the group Readies, log
	// entries and entry bytes those batches carried.
	Loops, Saves, ReadiesSaved, EntriesSaved, EntryBytesSaved uint64
	// LeaderChanges: groups whose leadership this node took over from
	// another leader it knew (a first election does not count).
	LeaderChanges uint64
	// Longest: the longest iteration, its wait for input excluded.
	Longest time.Duration
}

// Counters returns the loop's counters.
func (h *Host) Counters() HostCounters {
	return HostCounters{Loops: h.loops.Load(), Saves: h.saves.Load(), ReadiesSaved: h.readiesSaved.Load(),
		EntriesSaved: h.entriesSaved.Load(), EntryBytesSaved: h.entryBytesSaved.Load(),
		LeaderChanges: h.leaderChanges.Load(), Longest: time.Duration(h.longest.Load())}
}

// The loop's stages, for LoopStats.
const (
	StageWait  = iota // waiting for an input (message, proposal, tick)
	StageInput        // stepping inputs into the groups
	StageStage        // Ready and staging it in the batch
	StageSave         // committing the batch (the fsync when synced)
	StageApply        // sending, applying, advancing
	numLoopStages
)

// LoopStats is the loop's iteration count and the time it spent in each
// stage (StageWait...) since it started.
func (h *Host) LoopStats() (loops uint64, stages [numLoopStages]time.Duration) {
	for i := range stages {
		stages[i] = time.Duration(h.stats[i].Load())
	}
	return h.loops.Load(), stages
}

// lap adds the time since *t to stage and moves *t to now.
func (h *Host) lap(stage int, t *time.Time) {
	now := time.Now()
	h.stats[stage].Add(int64(now.Sub(*t)))
	*t = now
}

// GroupTicks returns how many Raft ticks the host gave its groups in all
// (a quiesced group takes none).
func (h *Host) GroupTicks() uint64 { return h.groupTicks.Load() }

// Quiesced returns how many of the host's groups are quiesced now.
func (h *Host) Quiesced() int { return int(h.quiesced.Load()) }

// Status is this node's view of group after the loop's last iteration.
func (h *Host) Status(group uint64) (GroupStatus, bool) {
	h.statusMu.Lock()
	defer h.statusMu.Unlock()
	s, ok := h.status[group]
	return s, ok
}

// Stop stops the loop and waits for it; pending proposals fail with
// ErrStopped. The transport is the caller's to close.
func (h *Host) Stop() {
	h.stopped.Do(func() { close(h.stopc) })
	<-h.done
}

// Err is the failure that stopped the host by itself (a storage failure),
// or nil.
func (h *Host) Err() error {
	if p := h.err.Load(); p != nil {
		return *p
	}
	return nil
}

// StepGroup implements GroupReceiver. When the loop is busy the message
// is dropped; Raft retransmits.
func (h *Host) StepGroup(group uint64, m *raftpb.Message) {
	if raft.IsLocalMsg(m.GetType()) {
		return
	}
	select {
	case h.recvc <- groupMessage{group, m}:
	default:
	}
}

// ReportGroupUnreachable implements GroupReceiver.
func (h *Host) ReportGroupUnreachable(group, id uint64) {
	h.report(func() {
		if g := h.groups[group]; g != nil {
			g.rn.ReportUnreachable(id)
		}
	})
}

// ReportGroupSnapshot implements GroupReceiver: whether a snapshot (a
// state row, host_compact.go) reached its follower.
func (h *Host) ReportGroupSnapshot(group, id uint64, status raft.SnapshotStatus) {
	h.report(func() {
		if g := h.groups[group]; g != nil {
			g.rn.ReportSnapshot(id, status)
		}
	})
}

// report queues f for the loop, dropping it when the loop is that far
// behind (unreachability reports are hints).
func (h *Host) report(f func()) {
	select {
	case h.reportc <- f:
	default:
	}
}

func (h *Host) run() {
	defer close(h.done)
	defer func() { _ = h.releaseUnsynced() }()
	defer h.failAll(ErrStopped)
	defer h.cfg.Ticker.Stop()
	t := time.Now()
	for {
		select {
		case <-h.cfg.Ticker.C():
			h.tick()
		case m := <-h.recvc:
			h.step(m)
		case p := <-h.propc:
			h.propose(p)
		case f := <-h.reportc:
			f()
		case a := <-h.addc:
			a.done <- h.addGroup(a)
		case r := <-h.removec:
			r.done <- h.removeGroup(r.group)
		case <-h.stopc:
			return
		}
		h.loops.Add(1)
		h.lap(StageWait, &t) // with the first input's handling
		start := t
		h.drainInputs()
		h.lap(StageInput, &t)
		if err := h.handleReadies(&t); err != nil {
			h.log.Error().Err(err).Msg("raft host stops: its groups' state cannot be saved or applied")
			h.err.Store(&err)
			return
		}
		if d := int64(t.Sub(start)); d > h.longest.Load() {
			h.longest.Store(d)
		}
	}
}

// drainInputs takes whatever else is waiting, so that one iteration (one
// fsync) carries as many messages and proposals as arrived meanwhile.
func (h *Host) drainInputs() {
	for range 4096 {
		select {
		case m := <-h.recvc:
			h.step(m)
		case p := <-h.propc:
			h.propose(p)
		case f := <-h.reportc:
			f()
		default:
			return
		}
	}
}

// tick ticks every group not quiesced, quiescing the idle ones this node
// leads, and sends every peer node a node heartbeat.
func (h *Host) tick() {
	h.cfg.Transport.SendNodeHeartbeats()
	h.checkLiveness()
	h.tickN++
	for _, g := range h.groups {
		if g.leading {
			h.trackInSync(g)
		}
	}
	h.msgs = h.msgs[:0]
	var ticked uint64
	for id, g := range h.groups {
		if g.quiesced {
			continue
		}
		for seq, p := range g.pending {
			if p.ctx.Err() != nil {
				delete(g.pending, seq)
			}
		}
		if !h.cfg.DisableQuiesce && h.quiesceLeader(g) {
			continue
		}
		h.retryHandOver(g)
		g.rn.Tick()
		ticked++
		h.touched[id] = g
	}
	h.groupTicks.Add(ticked)
	if len(h.msgs) > 0 {
		h.cfg.Transport.SendGroups(h.msgs)
	}
}

// quiesceContext marks a leader's quiesce heartbeat (DESIGN.md "Cluster",
// transport.go): an ordinary MsgHeartbeat otherwise, so a receiver that
// does not know it steps it as one.
var quiesceContext = []byte("vmq.quiesce")

// quiesceLeader quiesces g if this node leads it and it has nothing in
// flight: no proposal waiting, nothing to save, send or apply, every
// replica's log matching the leader's last index in replicate state, the
// commit index there, already sent to every follower by Raft (so that a
// late append response makes Raft send nothing), and applied here. The quiesce heartbeats (to
// h.msgs) tell the followers the commit index and to stop ticking.
func (h *Host) quiesceLeader(g *hostGroup) bool {
	if !g.leading || len(g.pending) > 0 || len(g.lost) > 0 || g.rn.HasReady() {
		return false
	}
	bs := g.rn.BasicStatus()
	last := g.storage.lastIndex
	if bs.RaftState != raft.StateLeader || bs.LeadTransferee != 0 || bs.HardState.GetCommit() != last || g.applied != last {
		return false
	}
	idle := true
	g.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		if pr.Match != last || (id != h.cfg.ID && (pr.State != tracker.StateReplicate || pr.CanBumpCommit(last))) {
			idle = false
		}
	})
	if !idle {
		return false
	}
	g.rn.WithProgress(func(id uint64, _ raft.ProgressType, _ tracker.Progress) {
		if id != h.cfg.ID {
			h.msgs = append(h.msgs, GroupMessage{Group: g.id, Msg: &raftpb.Message{
				Type: raftpb.MsgHeartbeat.Enum(), From: new(h.cfg.ID), To: new(id),
				Term: new(bs.HardState.GetTerm()), Commit: new(last), Context: quiesceContext}})
		}
	})
	h.setQuiesced(g, true)
	return true
}

// quiesceFollower quiesces g after it stepped the quiesce heartbeat m,
// if g follows m's sender in m's term, its log ends at the commit index m
// carries, and the sender's node is live; otherwise g is (stays) awake.
func (h *Host) quiesceFollower(g *hostGroup, m *raftpb.Message) {
	bs := g.rn.BasicStatus()
	if h.cfg.DisableQuiesce || bs.RaftState != raft.StateFollower || bs.Lead != m.GetFrom() ||
		bs.HardState.GetTerm() != m.GetTerm() || g.storage.lastIndex != m.GetCommit() {
		h.wake(g)
		return
	}
	if n := h.nodes[m.GetFrom()]; n == nil || n.dead {
		h.wake(g)
		return
	}
	h.setQuiesced(g, true)
}

// trackInSync refreshes the leader's in-sync view of g (GroupStatus.InSync).
func (h *Host) trackInSync(g *hostGroup) {
	isr := make([]uint64, 0, len(g.inSync)+1)
	g.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		if id == h.cfg.ID {
			isr = append(isr, id)
			return
		}
		if pr.Match >= g.lastAtTick {
			g.caughtUp[id] = h.tickN
		}
		n := h.nodes[id]
		if at, ok := g.caughtUp[id]; ok && h.tickN-at <= InSyncLagTicks && (n == nil || !n.dead) {
			isr = append(isr, id)
		}
	})
	g.lastAtTick = g.storage.lastIndex
	slices.Sort(isr)
	if slices.Equal(isr, g.inSync) {
		return
	}
	g.inSync = isr
	h.statusMu.Lock()
	s := h.status[g.id]
	s.InSync = isr
	h.status[g.id] = s
	h.statusMu.Unlock()
}

func (h *Host) wake(g *hostGroup) {
	if g.quiesced {
		h.setQuiesced(g, false)
	}
}

func (h *Host) setQuiesced(g *hostGroup, q bool) {
	if g.quiesced == q {
		return
	}
	g.quiesced = q
	if q {
		h.quiesced.Add(1)
	} else {
		h.quiesced.Add(-1)
	}
	h.statusMu.Lock()
	s := h.status[g.id]
	s.Quiesced = q
	h.status[g.id] = s
	h.statusMu.Unlock()
}

// checkLiveness updates what this host knows of the peer nodes; a node
// found dead wakes the quiesced groups it leads, so that their followers
// tick and elect another leader.
func (h *Host) checkLiveness() {
	changed := false
	defer func() {
		if changed {
			dead := map[uint64]bool{}
			for id, n := range h.nodes {
				if n.dead {
					dead[id] = true
				}
			}
			h.dead.Store(&dead)
		}
	}()
	for id, n := range h.nodes {
		if heard := h.cfg.Transport.Heard(id); heard != n.heard {
			changed = changed || n.dead
			n.heard, n.silent, n.dead = heard, 0, false
			continue
		}
		n.silent++
		if n.dead || n.silent < h.cfg.ElectionTicks {
			continue
		}
		n.dead, changed = true, true
		woken := 0
		for _, g := range h.groups {
			if g.quiesced && g.rn.BasicStatus().Lead == id {
				h.setQuiesced(g, false)
				woken++
			}
		}
		h.log.Info().Uint64("peer", id).Int("woken", woken).Msg("raft peer node silent for an election timeout: the quiesced groups it leads wake up")
	}
}

func (h *Host) step(m groupMessage) {
	g := h.groups[m.group]
	if g == nil {
		return // a group not started here (yet): its leader retransmits
	}
	typ := m.m.GetType()
	if typ == raftpb.MsgHeartbeat && m.m.GetCommit() > g.storage.lastIndex {
		return // a leader that believes this replica has entries it lost
	}
	if typ == raftpb.MsgTimeoutNow && h.draining.Load() {
		return // stopping (HandOff): the transferring leader keeps its group
	}
	quiesce := typ == raftpb.MsgHeartbeat && bytes.Equal(m.m.GetContext(), quiesceContext)
	if quiesce {
		m.m.Context = nil // an ordinary heartbeat for Raft (its response is coalesced)
	} else if g.quiesced && !lateResponse(g, m.m) {
		h.wake(g)
	}
	_ = g.rn.Step(m.m) // a message of a stale term or an unknown peer: ignored
	h.touched[m.group] = g
	if quiesce {
		h.quiesceFollower(g, m.m)
	}
}

// lateResponse: a message that does not wake a quiesced group, a
// heartbeat response or an append response accepting entries, of the
// group's term (a leader quiesces only once every follower acknowledged
// its whole log, which grows only after a proposal woke the group).
// Anything else wakes it.
func lateResponse(g *hostGroup, m *raftpb.Message) bool {
	if m.GetTerm() != g.rn.BasicStatus().HardState.GetTerm() {
		return false
	}
	switch m.GetType() {
	case raftpb.MsgHeartbeatResp:
		return true
	case raftpb.MsgAppResp:
		return !m.GetReject()
	}
	return false
}

func (h *Host) propose(p *hostProposal) {
	g := h.groups[p.group]
	if g == nil {
		p.done <- hostResult{err: ErrUnknownGroup}
		return
	}
	h.wake(g)
	if bs := g.rn.BasicStatus(); bs.RaftState != raft.StateLeader {
		p.done <- hostResult{err: &NotLeaderError{Leader: bs.Lead}}
		return
	}
	h.nextSeq++
	seq := h.nextSeq
	data := make([]byte, 16, 16+len(p.data))
	binary.BigEndian.PutUint64(data, h.cfg.ID)
	binary.BigEndian.PutUint64(data[8:], seq)
	data = append(data, p.data...)
	if err := g.rn.Propose(data); err != nil {
		switch bs := g.rn.BasicStatus(); {
		case !errors.Is(err, raft.ErrProposalDropped):
		case bs.RaftState != raft.StateLeader:
			err = &NotLeaderError{Leader: bs.Lead}
		default: // a leadership transfer, or 64 MiB not committed yet
			err = ErrBusy
		}
		p.done <- hostResult{err: err}
		return
	}
	g.pending[seq] = p
	h.touched[p.group] = g
}

func (h *Host) failAll(err error) {
	for _, g := range h.groups {
		g.failPending(err)
	}
}

func (g *hostGroup) failPending(err error) {
	for seq, p := range g.pending {
		p.done <- hostResult{err: err}
		delete(g.pending, seq)
	}
}

// handleReadies follows the Ready contract for every touched group at
// once: all their hard states and entries in one synced batch, then the
// messages, then the committed entries, then Advance. Groups with more
// to do stay touched for the next round.
func (h *Host) handleReadies(t *time.Time) error {
	for len(h.touched) > 0 {
		h.campaignReady()
		h.readies = h.readies[:0]
		b := h.cfg.Store.NewBatch()
		for id, g := range h.touched {
			if !g.rn.HasReady() {
				delete(h.touched, id)
				continue
			}
			rd := g.rn.Ready()
			if !h.mustSync {
				// A snapshot replaces the log: synced before its acknowledgement.
				h.mustSync = raft.MustSync(rd.HardState, g.storage.hardState, len(rd.Entries)) || !raft.IsEmptySnap(rd.Snapshot)
			}
			next, err := g.storage.stage(b, rd.HardState, rd.Entries, rd.Snapshot)
			if err != nil {
				b.Close()
				return err
			}
			h.readies = append(h.readies, groupReady{g: g, rd: rd, next: next})
		}
		if len(h.readies) == 0 {
			b.Close()
			break
		}
		h.lap(StageStage, t)
		h.sendEarly()
		if err := h.save(b); err != nil {
			return err
		}
		h.lap(StageSave, t)
		if err := h.afterSave(); err != nil {
			return err
		}
		h.publishStatus()
		h.lap(StageApply, t)
	}
	h.lap(StageStage, t)
	return nil
}

// save commits b. Synced when one of its Readies changes a term, a vote
// or the log (raft.MustSync, as etcd's server decides): those must be
// durable before any message vouches for them. A batch that only moves
// commit indexes is applied without waiting for its sync: a commit index
// is volatile in Raft (a replica that loses it learns it again from the
// leader), and its entries were synced when they were appended. Such a
// batch is released after the next synced one (the WAL syncs in order).
func (h *Host) save(b *pebblestore.Batch) error {
	sync := h.mustSync
	h.mustSync = false
	if b.Empty() {
		b.Close()
		return nil
	}
	if !sync {
		if err := b.Apply(); err != nil {
			return fmt.Errorf("cluster: save the commit indexes of %d raft groups: %w", len(h.readies), err)
		}
		h.unsynced = append(h.unsynced, b)
		return nil
	}
	if err := b.Commit(); err != nil {
		return fmt.Errorf("cluster: save the raft state of %d groups: %w", len(h.readies), err)
	}
	h.saves.Add(1)
	h.readiesSaved.Add(uint64(len(h.readies)))
	var entries, size uint64
	for i := range h.readies {
		for _, e := range h.readies[i].rd.Entries {
			entries++
			size += uint64(len(e.GetData()))
		}
	}
	h.entriesSaved.Add(entries)
	h.entryBytesSaved.Add(size)
	return h.releaseUnsynced()
}

// releaseUnsynced waits for (and releases) the batches applied without a
// sync wait.
func (h *Host) releaseUnsynced() error {
	for i, u := range h.unsynced {
		if err := u.Wait(); err != nil {
			h.unsynced = h.unsynced[i+1:]
			return fmt.Errorf("cluster: sync the commit indexes of raft groups: %w", err)
		}
	}
	h.unsynced = h.unsynced[:0]
	return nil
}

// sendEarly (HostConfig.EarlySend) sends, before the Readies are saved, the messages that vouch
// for no local state: everything but append and (pre-)vote responses.
// Those are the messages etcd raft itself lets go before the local write
// in its AsyncStorageWrites mode (raft.send puts the others in
// msgsAfterAppend): a leader's appends, heartbeats, vote requests. It is
// the Raft thesis' section 10.2.1: the leader writes its log in parallel
// with its followers, and counts itself towards a commit only once its
// own write is durable, which RawNode (without AsyncStorageWrites) does
// by stepping the leader's self-acknowledgement at Advance, after the
// save. A leader that crashes before its save may leave entries on
// followers that it lacks; the followers may commit them without it, as
// with any leader that fails after sending: Raft's log matching repairs
// it (the restarted node's log is shorter, never conflicting in its
// term). A commit index sent early was computed from durable
// acknowledgements only.
func (h *Host) sendEarly() {
	if !h.cfg.EarlySend {
		return
	}
	h.msgs = h.msgs[:0]
	for i := range h.readies {
		r := &h.readies[i]
		for _, m := range r.rd.Messages {
			if !mustFollowSave(m) {
				h.msgs = append(h.msgs, GroupMessage{Group: r.g.id, Msg: m})
			}
		}
	}
	if len(h.msgs) > 0 {
		h.cfg.Transport.SendGroups(h.msgs)
	}
}

// mustFollowSave: m acknowledges state of this node (a log append, a
// vote) and may leave only once that state is durable.
func mustFollowSave(m *raftpb.Message) bool {
	switch m.GetType() {
	case raftpb.MsgAppResp, raftpb.MsgVoteResp, raftpb.MsgPreVoteResp:
		return true
	}
	return false
}

// afterSave sends the messages sendEarly left, then applies and advances
// the Readies just made durable.
func (h *Host) afterSave() error {
	h.msgs = h.msgs[:0]
	for i := range h.readies {
		r := &h.readies[i]
		*r.g.storage = r.next
		for _, m := range r.rd.Messages {
			if !h.cfg.EarlySend || mustFollowSave(m) {
				h.msgs = append(h.msgs, GroupMessage{Group: r.g.id, Msg: m})
			}
		}
	}
	if len(h.msgs) > 0 {
		h.cfg.Transport.SendGroups(h.msgs)
	}
	for i := range h.readies {
		r := &h.readies[i]
		if !raft.IsEmptySnap(r.rd.Snapshot) {
			if err := r.g.restoreSnapshot(r.rd.Snapshot); err != nil {
				return err
			}
			h.log.Info().Uint64("group", r.g.id).Uint64("index", r.g.applied).Msg("raft group: this replica restored the leader's snapshot (its log had been compacted past this replica's)")
		}
		for _, e := range r.rd.CommittedEntries {
			if err := r.g.apply(h.cfg.ID, e); err != nil {
				return err
			}
		}
		if err := h.compactApplied(r.g); err != nil {
			return err
		}
		r.g.rn.Advance(r.rd)
		if r.rd.SoftState != nil {
			h.noteLeader(r.g, r.rd.SoftState)
			leading := r.rd.SoftState.RaftState == raft.StateLeader
			if r.g.leading && !leading {
				r.g.failPending(ErrLeadershipLost)
			}
			if leading != r.g.leading {
				clear(r.g.caughtUp)
				r.g.lastAtTick, r.g.inSync, r.g.lost = 0, nil, nil
			}
			r.g.leading = leading
		}
	}
	return nil
}

// noteLeader counts (and logs) a leadership this node takes over from
// another leader it knew: the benchmark's and operator's view of leader
// changes (the new leader counts it, so the nodes' sum is the changes).
func (h *Host) noteLeader(g *hostGroup, ss *raft.SoftState) {
	if ss.Lead == raft.None {
		return
	}
	if ss.Lead == h.cfg.ID && g.lastLead != raft.None && g.lastLead != h.cfg.ID {
		h.leaderChanges.Add(1)
		h.log.Info().Uint64("group", g.id).Uint64("previous_leader", g.lastLead).Uint64("term", g.rn.BasicStatus().HardState.GetTerm()).
			Msg("raft group: this node took over the leadership")
	}
	g.lastLead = ss.Lead
}

func (g *hostGroup) apply(self uint64, e *raftpb.Entry) error {
	switch e.GetType() {
	case raftpb.EntryConfChange:
		cc := &raftpb.ConfChange{}
		if err := proto.Unmarshal(e.GetData(), cc); err != nil {
			return fmt.Errorf("cluster: raft group %d: decode the configuration change at %d: %v: %w", g.id, e.GetIndex(), err, pebblestore.ErrCorruption)
		}
		g.rn.ApplyConfChange(cc)
	case raftpb.EntryConfChangeV2:
		cc := &raftpb.ConfChangeV2{}
		if err := proto.Unmarshal(e.GetData(), cc); err != nil {
			return fmt.Errorf("cluster: raft group %d: decode the configuration change at %d: %v: %w", g.id, e.GetIndex(), err, pebblestore.ErrCorruption)
		}
		g.rn.ApplyConfChange(cc)
	default:
		g.applyNormal(self, e)
	}
	g.applied = e.GetIndex()
	return nil
}

// applyNormal applies a proposal (16 bytes of envelope: proposer node ID,
// sequence; then the command); a new leader's empty entry and entries too
// short for the envelope change nothing, alike on every replica.
func (g *hostGroup) applyNormal(self uint64, e *raftpb.Entry) {
	data := e.GetData()
	if len(data) < 16 {
		return
	}
	result, err := g.sm.Apply(Entry{Index: e.GetIndex(), Term: e.GetTerm(), Data: data[16:]})
	if binary.BigEndian.Uint64(data) != self {
		return
	}
	seq := binary.BigEndian.Uint64(data[8:])
	if p, ok := g.pending[seq]; ok {
		p.done <- hostResult{index: e.GetIndex(), result: result, err: err}
		delete(g.pending, seq)
	}
}

// publishStatus publishes the status of the groups of h.readies.
func (h *Host) publishStatus() {
	h.statusMu.Lock()
	defer h.statusMu.Unlock()
	for _, r := range h.readies {
		h.status[r.g.id] = r.g.status()
	}
}

func (g *hostGroup) status() GroupStatus {
	bs := g.rn.BasicStatus()
	return GroupStatus{Group: g.id, Leader: bs.Lead, Term: bs.HardState.GetTerm(), Commit: bs.HardState.GetCommit(),
		Applied: g.applied, Last: g.storage.lastIndex, Leading: bs.RaftState == raft.StateLeader, Quiesced: g.quiesced, InSync: g.inSync, Voters: g.voters,
		Compacted: g.storage.truncatedIndex}
}
