package cluster

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/vibemq/broker/internal/loglimit"
	"github.com/vibemq/broker/pebblestore"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
	"google.golang.org/protobuf/proto"
)

var (
	// ErrStopped is returned by a node that was stopped or that stopped
	// itself after a storage failure (Err tells which).
	ErrStopped = errors.New("cluster: raft node is stopped")
	// ErrNoLeader is returned by Propose while the group has no leader
	// this node knows of (an election is running, or the node is cut off
	// from the majority): retry once a leader is elected.
	ErrNoLeader = errors.New("cluster: no raft leader is known; retry once one is elected")
	// ErrProposalLost is returned by Propose when another entry was
	// committed at the index where the proposal had been appended (its
	// leader lost leadership before replicating it): it was not applied
	// and never will be; propose again.
	ErrProposalLost = errors.New("cluster: the proposal was overwritten by a new raft leader and not applied; propose it again")
	// ErrLeaderChanged is returned by Propose when the leader this node
	// knew changed while the proposal was not in its log: it had been
	// forwarded to the old leader (a follower's proposal), which may have
	// died with it or replicated it before; so it may or may not be
	// applied. Check, or propose it again if the change is idempotent.
	ErrLeaderChanged = errors.New("cluster: the raft leader changed while the proposal was forwarded to it; it may or may not be applied: check and retry")
)

// Entry is one committed, normal log entry as the state machine sees it.
type Entry struct {
	Index, Term uint64
	Data        []byte
}

// StateMachine is what a Raft group replicates. The node calls it from its
// own goroutine only, in log order.
type StateMachine interface {
	// Apply applies a committed entry. It must be deterministic: every
	// replica applies the same entries in the same order and must reach
	// the same state. Its error is the entry's result, handed back to the
	// proposer (a rejected command, such as a topic that exists), never a
	// failure of the replica.
	Apply(e Entry) error
	// Snapshot returns the whole state as of the last applied entry.
	Snapshot() ([]byte, error)
	// Restore replaces the whole state with a snapshot's.
	Restore(data []byte) error
}

// Sender sends a Ready's messages to their peers; the node calls it from
// its goroutine only, after the Ready's state is durable.
type Sender interface {
	Send(msgs []*raftpb.Message)
}

// Ticker drives the Raft clock: one tick per value received on C. Tests
// inject a channel of their own and tick by hand.
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

type timeTicker struct{ t *time.Ticker }

func (t timeTicker) C() <-chan time.Time { return t.t.C }
func (t timeTicker) Stop()               { t.t.Stop() }

// NewTicker is a Ticker on the wall clock, one tick per d.
func NewTicker(d time.Duration) Ticker { return timeTicker{time.NewTicker(d)} }

// NodeConfig configures one replica of one Raft group.
type NodeConfig struct {
	// ID is this node's ID in the group, > 0.
	ID uint64
	// Group names the group's rows in the store (0: the metadata group).
	Group uint64
	// Voters are the IDs of the group's voters, used once: when the
	// group's storage is empty, the node bootstraps with them.
	Voters []uint64
	// Store is the broker's Pebble store.
	Store *pebblestore.Store
	// StateMachine is what the group replicates.
	StateMachine StateMachine
	// Sender sends messages to the peers (a *Transport).
	Sender Sender
	// Peers is told the addresses that membership changes add and remove
	// (the same *Transport); nil when nothing needs to know.
	Peers Peers
	// Join: with empty storage, wait to be added to an existing group
	// (AddLearner on its leader) instead of bootstrapping one with Voters.
	Join bool
	// Ticker drives elections and heartbeats.
	Ticker Ticker
	// ElectionTicks and HeartbeatTicks: Raft's timeouts in ticks; 10 and
	// 1 by default.
	ElectionTicks, HeartbeatTicks int
	// SnapshotEntries: a snapshot is taken once this many entries were
	// applied since the last one; 10000 by default.
	SnapshotEntries uint64
	// CompactKeep: entries kept in the log below a new snapshot, for
	// followers a little behind (beyond it they get the snapshot); 1000
	// by default.
	CompactKeep uint64
	// Logger receives the node's and the Raft core's events.
	Logger zerolog.Logger
}

// Validate checks the configuration and fills in defaults.
func (c *NodeConfig) Validate() error {
	switch {
	case c.ID == 0:
		return errors.New("cluster: the node ID must be greater than 0")
	case c.Store == nil || c.StateMachine == nil || c.Sender == nil || c.Ticker == nil:
		return errors.New("cluster: a node needs a store, a state machine, a sender and a ticker")
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
	if c.SnapshotEntries == 0 {
		c.SnapshotEntries = 10000
	}
	if c.CompactKeep == 0 {
		c.CompactKeep = 1000
	}
	return nil
}

// Status is a replica's view of its group.
type Status struct {
	ID, Leader       uint64
	Term, Vote       uint64
	Commit, Applied  uint64
	State            string // "StateLeader", "StateFollower", ...
	Voters, Learners []uint64
	// Members: every voter and learner; with the leader's view of their
	// logs on the leader.
	Members          []Member
	SnapshotIndex    uint64
	FirstIndex, Last uint64
}

// Node runs one replica of one Raft group: the Ready loop on one goroutine
// that owns the raft.RawNode, the Storage and the state machine's apply.
// Everything else reaches it through channels.
type Node struct {
	cfg NodeConfig
	log zerolog.Logger

	recvc     chan *raftpb.Message
	propc     chan *proposal
	reportc   chan func(*raft.RawNode)
	campaignc chan struct{}
	confc     chan *memberChange
	stopc     chan struct{}
	done      chan struct{}
	stopOnce  sync.Once

	status        atomic.Pointer[Status]
	leaderChanges atomic.Uint64
	limiter       loglimit.Limiter
	err           atomic.Pointer[error]

	// Owned by the loop goroutine.
	rn      *raft.RawNode
	storage *Storage
	pending map[uint64]*proposal
	// appendedAt: the sequence of this node's pending proposal appended
	// to its log at each index; another entry applied at that index means
	// the proposal was lost (ErrProposalLost).
	appendedAt map[uint64]uint64
	nextSeq    uint64
	applied    uint64
	confState  *raftpb.ConfState
	// confIndex is the index of the last membership change this node
	// appended to its log: while it is beyond applied, a change is pending.
	confIndex uint64
	// leaderIndex is this node's last index when it last became leader.
	leaderIndex uint64
	// lead is the leader this node knew at its last Ready (0: none).
	lead uint64
	// addrs: the inter-broker addresses learned from add-node (the log and
	// the snapshot), by node ID.
	addrs map[uint64]string
	// removedIDs: the IDs of removed members, never added again.
	removedIDs map[uint64]bool
	// snapNow: a membership change was applied; snapshot at once (below).
	snapNow bool
}

type proposal struct {
	ctx  context.Context
	data []byte
	done chan proposeResult // buffered: the loop never blocks on it
}

type proposeResult struct {
	index uint64
	err   error
}

// StartNode opens the group's storage, restores the state machine from
// the saved snapshot (entries after it are applied again), or bootstraps
// an empty group with cfg.Voters, and starts the loop.
func StartNode(cfg NodeConfig) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	st, err := OpenStorage(cfg.Store, cfg.Group)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger.With().Str("component", "raft").Uint64("group", cfg.Group).Uint64("node", cfg.ID).Logger()
	n := &Node{
		cfg: cfg, log: log, storage: st,
		recvc:      make(chan *raftpb.Message, 1024),
		propc:      make(chan *proposal, 256),
		reportc:    make(chan func(*raft.RawNode), 256),
		campaignc:  make(chan struct{}, 1),
		confc:      make(chan *memberChange),
		addrs:      map[uint64]string{},
		removedIDs: map[uint64]bool{},
		stopc:      make(chan struct{}),
		done:       make(chan struct{}),
		pending:    map[uint64]*proposal{},
		appendedAt: map[uint64]uint64{},
		// Sequences start at the clock, so that entries proposed before a
		// restart, applied again from the log, match no new proposal.
		nextSeq: uint64(time.Now().UnixNano()),
	}
	snap := st.snapshot
	n.applied = snap.GetMetadata().GetIndex()
	n.confState = raftpb.EnsureConfState(proto.Clone(snap.GetMetadata().GetConfState()).(*raftpb.ConfState))
	if !raft.IsEmptySnap(snap) {
		if !isMember(n.confState, cfg.ID) {
			return nil, fmt.Errorf("cluster: raft group %d: node %d: %w", cfg.Group, cfg.ID, ErrRemoved)
		}
		members, data, err := decodeSnapshot(snap.GetData())
		if err == nil {
			err = cfg.StateMachine.Restore(data)
		}
		if err != nil {
			return nil, fmt.Errorf("cluster: restore the state machine of raft group %d from its snapshot at %d: %w", cfg.Group, snap.GetMetadata().GetIndex(), err)
		}
		n.restoreMembership(members)
	}
	rn, err := raft.NewRawNode(&raft.Config{
		ID: cfg.ID, ElectionTick: cfg.ElectionTicks, HeartbeatTick: cfg.HeartbeatTicks,
		Storage: st, Applied: n.applied,
		MaxSizePerMsg: 1 << 20, MaxInflightMsgs: 256, MaxUncommittedEntriesSize: 64 << 20,
		CheckQuorum: true, PreVote: true, StepDownOnRemoval: true,
		Logger: raftLogger{log},
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: start raft group %d: %w", cfg.Group, err)
	}
	n.rn = rn
	if st.lastIndex == 0 && raft.IsEmptyHardState(st.hardState) && !cfg.Join {
		// Sorted: the bootstrap entries (term 1, index i: add voter i)
		// must be the same on every node, whatever order its list has.
		voters := slices.Sorted(slices.Values(cfg.Voters))
		peers := make([]raft.Peer, len(voters))
		for i, id := range voters {
			peers[i] = raft.Peer{ID: id}
		}
		if err := rn.Bootstrap(peers); err != nil {
			return nil, fmt.Errorf("cluster: bootstrap raft group %d with voters %v: %w", cfg.Group, cfg.Voters, err)
		}
	}
	n.publishStatus()
	go n.run()
	return n, nil
}

// Stop stops the loop and waits for it. Pending proposals fail with
// ErrStopped.
func (n *Node) Stop() {
	n.stopOnce.Do(func() { close(n.stopc) })
	<-n.done
}

// Err is the failure that stopped the node by itself (a storage failure),
// or nil.
func (n *Node) Err() error {
	if p := n.err.Load(); p != nil {
		return *p
	}
	return nil
}

// Done is closed once the loop has returned.
func (n *Node) Done() <-chan struct{} { return n.done }

// Status is the node's view of its group after its last loop iteration.
func (n *Node) Status() Status { return *n.status.Load() }

// Propose replicates data through the group and waits until this node has
// applied it: it returns the entry's index and the state machine's result.
// When ctx ends first, the entry may still be committed later.
func (n *Node) Propose(ctx context.Context, data []byte) (uint64, error) {
	p := &proposal{ctx: ctx, data: data, done: make(chan proposeResult, 1)}
	select {
	case n.propc <- p:
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-n.done:
		return 0, ErrStopped
	}
	select {
	case r := <-p.done:
		return r.index, r.err
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-n.done:
		return 0, ErrStopped
	}
}

// Campaign makes this node start an election now (tests and leadership
// hand-over; elections otherwise start from ticks).
func (n *Node) Campaign() {
	select {
	case n.campaignc <- struct{}{}:
	default:
	}
}

// Step hands the node a message from a peer. When the node is busy the
// message is dropped; Raft retransmits.
func (n *Node) Step(m *raftpb.Message) {
	if raft.IsLocalMsg(m.GetType()) {
		return
	}
	select {
	case n.recvc <- m:
	default:
	}
}

// ReportUnreachable tells Raft that messages to id could not be sent.
func (n *Node) ReportUnreachable(id uint64) {
	select {
	case n.reportc <- func(rn *raft.RawNode) { rn.ReportUnreachable(id) }:
	default:
	}
}

// ReportSnapshot tells Raft whether a snapshot sent to id arrived. It is
// never lost (Raft would wait for it), and never blocks: the transport
// may call it from the node's own loop (Send on a full queue).
func (n *Node) ReportSnapshot(id uint64, status raft.SnapshotStatus) {
	f := func(rn *raft.RawNode) { rn.ReportSnapshot(id, status) }
	select {
	case n.reportc <- f:
	default:
		go func() {
			select {
			case n.reportc <- f:
			case <-n.done:
			}
		}()
	}
}

// PeerLostState tells the node that peer id lost its Raft state (its data
// directory was wiped). A leader keeps what it learned of each follower's
// log (the match index) for its whole term, and Raft has no way to lower
// it: it would go on telling the peer to commit entries it no longer has.
// So a leader hands its leadership to another up-to-date voter: the new
// leader starts every follower's progress from zero and sends the wiped
// one a snapshot.
//
// A wiped node also forgot its votes; re-adding it under a new identity
// (remove-node, add-node) closes that gap and comes with membership
// changes (DESIGN.md, "Cluster").
func (n *Node) PeerLostState(id uint64) {
	select {
	case n.reportc <- func(*raft.RawNode) { n.handOverFrom(id) }:
	case <-n.done:
	}
}

func (n *Node) handOverFrom(lost uint64) {
	if n.rn.BasicStatus().RaftState != raft.StateLeader {
		return
	}
	to := transferee(n.rn, n.cfg.ID, func(id uint64, _ tracker.Progress) bool { return id != lost })
	if to == 0 {
		n.log.Warn().Uint64("peer", lost).Msg("raft peer lost its state and no other voter can take over the leadership; it stays behind until the next election")
		return
	}
	n.log.Warn().Uint64("peer", lost).Uint64("transferee", to).Msg("raft peer lost its state; handing over the leadership so that its progress starts again from zero")
	n.rn.TransferLeader(to)
}

// stepSafe steps a peer's message, except a heartbeat that would commit
// entries beyond this node's log: a leader that has not learned that this
// node lost its state sends those, and Raft would panic on it. Dropped,
// the heartbeat goes unanswered until a new leader probes from zero.
func (n *Node) stepSafe(m *raftpb.Message) {
	if m.GetType() == raftpb.MsgHeartbeat && m.GetCommit() > n.storage.lastIndex {
		if ok, _ := n.limiter.Allow("lost-state", time.Now()); ok {
			n.log.Error().Uint64("leader", m.GetFrom()).Uint64("leader_commit", m.GetCommit()).Uint64("last_index", n.storage.lastIndex).
				Msg("the raft leader believes this node has entries it does not have (was its data directory wiped?); waiting for a new leader to send a snapshot")
		}
		return
	}
	_ = n.rn.Step(m) // a message from an unknown peer or of a stale term: ignored
}

func (n *Node) run() {
	defer close(n.done)
	defer n.failPending(ErrStopped)
	defer n.cfg.Ticker.Stop()
	for {
		select {
		case <-n.cfg.Ticker.C():
			n.rn.Tick()
			n.forgetAbandoned()
			n.promoteCaughtUp()
		case m := <-n.recvc:
			n.stepSafe(m)
		case p := <-n.propc:
			n.propose(p)
		case c := <-n.confc:
			n.proposeChange(c)
		case f := <-n.reportc:
			f(n.rn)
		case <-n.campaignc:
			_ = n.rn.Campaign()
		case <-n.stopc:
			return
		}
		for n.rn.HasReady() {
			if err := n.handleReady(n.rn.Ready()); err != nil {
				if errors.Is(err, ErrRemoved) {
					n.log.Warn().Msg("this node was removed from the raft group; its replica stops")
					n.publishStatus()
				} else {
					n.log.Error().Err(err).Msg("raft node stops: its state cannot be saved or applied")
				}
				n.err.Store(&err)
				n.failPending(err)
				return
			}
		}
		n.publishStatus()
	}
}

func (n *Node) propose(p *proposal) {
	n.nextSeq++
	seq := n.nextSeq
	data := make([]byte, 16, 16+len(p.data))
	binary.BigEndian.PutUint64(data, n.cfg.ID)
	binary.BigEndian.PutUint64(data[8:], seq)
	data = append(data, p.data...)
	if err := n.rn.Propose(data); err != nil {
		if errors.Is(err, raft.ErrProposalDropped) {
			err = ErrNoLeader
		}
		p.done <- proposeResult{err: err}
		return
	}
	n.pending[seq] = p
}

// forgetAbandoned drops the proposals whose callers stopped waiting.
func (n *Node) forgetAbandoned() {
	for seq, p := range n.pending {
		if p.ctx.Err() != nil {
			delete(n.pending, seq)
		}
	}
}

func (n *Node) failPending(err error) {
	for seq, p := range n.pending {
		p.done <- proposeResult{err: err}
		delete(n.pending, seq)
	}
}

// handleReady follows the Ready contract of go.etcd.io/raft: the hard
// state, entries and snapshot are durable (one synced batch) before any
// message is sent; then the snapshot and the committed entries are
// applied, and the node advances.
func (n *Node) handleReady(rd raft.Ready) error {
	if err := n.storage.Save(rd.HardState, rd.Entries, rd.Snapshot); err != nil {
		return err
	}
	if rd.SoftState != nil && rd.SoftState.RaftState == raft.StateLeader {
		n.leaderIndex = n.storage.lastIndex
	}
	for _, e := range rd.Entries {
		if t := e.GetType(); t == raftpb.EntryConfChange || t == raftpb.EntryConfChangeV2 {
			n.confIndex = e.GetIndex()
		} else if d := e.GetData(); len(d) >= 16 && binary.BigEndian.Uint64(d) == n.cfg.ID {
			if seq := binary.BigEndian.Uint64(d[8:]); n.pending[seq] != nil {
				n.appendedAt[e.GetIndex()] = seq
			}
		}
	}
	if rd.SoftState != nil && rd.SoftState.Lead != n.lead {
		n.lead = rd.SoftState.Lead
		n.answerForwarded()
	}
	if !raft.IsEmptySnap(rd.Snapshot) {
		members, data, err := decodeSnapshot(rd.Snapshot.GetData())
		if err == nil {
			err = n.cfg.StateMachine.Restore(data)
		}
		if err != nil {
			return fmt.Errorf("cluster: restore the snapshot at %d: %w", rd.Snapshot.GetMetadata().GetIndex(), err)
		}
		n.restoreMembership(members)
		n.applied = rd.Snapshot.GetMetadata().GetIndex()
		// A proposal appended at or below the snapshot may or may not be in
		// it: its caller waits for its context, as for a dropped message.
		for i := range n.appendedAt {
			if i <= n.applied {
				delete(n.appendedAt, i)
			}
		}
		n.confState = proto.Clone(raftpb.EnsureConfState(rd.Snapshot.GetMetadata().GetConfState())).(*raftpb.ConfState)
	}
	n.cfg.Sender.Send(rd.Messages)
	for _, e := range rd.CommittedEntries {
		if err := n.apply(e); err != nil {
			return err
		}
	}
	n.rn.Advance(rd)
	return n.maybeSnapshot()
}

func (n *Node) apply(e *raftpb.Entry) error {
	defer n.settleAppended(e)
	switch e.GetType() {
	case raftpb.EntryConfChange, raftpb.EntryConfChangeV2:
		return n.applyConfChange(e)
	default:
		n.applyNormal(e)
	}
	n.applied = e.GetIndex()
	return nil
}

// applyNormal applies a proposal: 16 bytes of envelope (proposer node ID,
// proposal sequence), then the state machine's command. Empty entries
// (a new leader's) and entries too short for the envelope change nothing,
// alike on every replica.
func (n *Node) applyNormal(e *raftpb.Entry) {
	data := e.GetData()
	if len(data) < 16 {
		return
	}
	result := n.cfg.StateMachine.Apply(Entry{Index: e.GetIndex(), Term: e.GetTerm(), Data: data[16:]})
	if binary.BigEndian.Uint64(data) != n.cfg.ID {
		return
	}
	seq := binary.BigEndian.Uint64(data[8:])
	if p, ok := n.pending[seq]; ok {
		p.done <- proposeResult{index: e.GetIndex(), err: result}
		delete(n.pending, seq)
	}
}

// answerForwarded answers ErrLeaderChanged to every pending proposal of
// data that is not in this node's log once the leader changed. Such a
// proposal was forwarded to the old leader (raft sends a follower's
// MsgProp there and forgets it): if that leader died or was cut off, the
// message is gone and nothing else would ever answer it, so its caller
// waited for its whole context (30 s for a Kafka request). Proposals in
// the log (appendedAt) are settled when their index is applied
// (settleAppended), and membership changes, proposed on the leader only
// and never in appendedAt, by their own entry.
func (n *Node) answerForwarded() {
	inLog := make(map[uint64]bool, len(n.appendedAt))
	for _, seq := range n.appendedAt {
		inLog[seq] = true
	}
	for seq, p := range n.pending {
		if p.data != nil && !inLog[seq] {
			p.done <- proposeResult{err: ErrLeaderChanged}
			delete(n.pending, seq)
		}
	}
}

// settleAppended answers ErrProposalLost to this node's pending proposal
// that had been appended at e's index when e is another entry: Raft
// committed e there, so the proposal can never be committed (an entry
// lives at one index only).
func (n *Node) settleAppended(e *raftpb.Entry) {
	seq, ok := n.appendedAt[e.GetIndex()]
	if !ok {
		return
	}
	delete(n.appendedAt, e.GetIndex())
	if p := n.pending[seq]; p != nil {
		p.done <- proposeResult{err: ErrProposalLost}
		delete(n.pending, seq)
	}
}

// maybeSnapshot snapshots the state machine every SnapshotEntries applied
// entries and compacts the log below it, keeping CompactKeep entries.
//
// It also snapshots right after a membership change: a leader sends a
// node behind its log the saved snapshot, and Raft drops a snapshot whose
// configuration does not name the receiving node (raft.restore), so a
// learner just added must get one taken after its addition. (etcd's
// server builds a fresh snapshot for each MsgSnap for the same reason.)
func (n *Node) maybeSnapshot() error {
	snapIndex := n.storage.snapshot.GetMetadata().GetIndex()
	force := n.snapNow && n.applied > snapIndex
	n.snapNow = false
	if !force && n.applied < snapIndex+n.cfg.SnapshotEntries {
		return nil
	}
	smData, err := n.cfg.StateMachine.Snapshot()
	if err != nil {
		return fmt.Errorf("cluster: snapshot the state machine at %d: %w", n.applied, err)
	}
	data, err := encodeSnapshot(n.membership(), smData)
	if err != nil {
		return fmt.Errorf("cluster: snapshot the addresses at %d: %w", n.applied, err)
	}
	compactTo := uint64(0)
	if n.applied > n.cfg.CompactKeep {
		compactTo = n.applied - n.cfg.CompactKeep
	}
	if err := n.storage.CreateSnapshot(n.applied, n.confState, data, compactTo); err != nil {
		return err
	}
	n.log.Debug().Uint64("index", n.applied).Int("bytes", len(data)).Uint64("compacted_to", compactTo).Msg("raft snapshot taken")
	return nil
}

func (n *Node) publishStatus() {
	bs := n.rn.BasicStatus()
	s := &Status{
		ID: bs.ID, Leader: bs.Lead, Term: bs.HardState.GetTerm(), Vote: bs.HardState.GetVote(),
		Commit: bs.HardState.GetCommit(), Applied: n.applied, State: bs.RaftState.String(),
		Voters:        slices.Sorted(slices.Values(n.confState.GetVoters())),
		Learners:      slices.Sorted(slices.Values(n.confState.GetLearners())),
		Members:       n.members(bs.RaftState == raft.StateLeader),
		SnapshotIndex: n.storage.snapshot.GetMetadata().GetIndex(),
		FirstIndex:    n.storage.truncatedIndex + 1, Last: n.storage.lastIndex,
	}
	if prev := n.status.Load(); prev != nil && prev.Leader != s.Leader && s.Leader != 0 {
		n.leaderChanges.Add(1)
	}
	n.status.Store(s)
}

func (n *Node) members(leader bool) []Member {
	progress := map[uint64]tracker.Progress{}
	if leader {
		n.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) { progress[id] = pr })
	}
	var out []Member
	add := func(ids []uint64, learner bool) {
		for _, id := range ids {
			m := Member{ID: id, Learner: learner, Addr: n.addrs[id]}
			if pr, ok := progress[id]; ok {
				m.Match, m.Active = pr.Match, pr.RecentActive || id == n.cfg.ID
			}
			out = append(out, m)
		}
	}
	add(n.confState.GetVoters(), false)
	add(n.confState.GetLearners(), true)
	slices.SortFunc(out, func(a, b Member) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// LeaderChanges counts the times this node saw a new leader elected.
func (n *Node) LeaderChanges() uint64 { return n.leaderChanges.Load() }

// raftLogger routes the Raft core's log into zerolog.
type raftLogger struct{ log zerolog.Logger }

func (l raftLogger) Debug(v ...any)                 { l.log.Debug().Msg(fmt.Sprint(v...)) }
func (l raftLogger) Debugf(format string, v ...any) { l.log.Debug().Msgf(format, v...) }
func (l raftLogger) Info(v ...any)                  { l.log.Info().Msg(fmt.Sprint(v...)) }
func (l raftLogger) Infof(format string, v ...any)  { l.log.Info().Msgf(format, v...) }
func (l raftLogger) Warning(v ...any)               { l.log.Warn().Msg(fmt.Sprint(v...)) }
func (l raftLogger) Warningf(format string, v ...any) {
	l.log.Warn().Msgf(format, v...)
}
func (l raftLogger) Error(v ...any)                 { l.log.Error().Msg(fmt.Sprint(v...)) }
func (l raftLogger) Errorf(format string, v ...any) { l.log.Error().Msgf(format, v...) }
func (l raftLogger) Fatal(v ...any)                 { l.Panic(v...) }
func (l raftLogger) Fatalf(format string, v ...any) { l.Panicf(format, v...) }
func (l raftLogger) Panic(v ...any) {
	l.log.Error().Msg(fmt.Sprint(v...))
	panic(fmt.Sprint(v...))
}
func (l raftLogger) Panicf(format string, v ...any) {
	l.log.Error().Msgf(format, v...)
	panic(fmt.Sprintf(format, v...))
}
