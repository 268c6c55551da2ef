package cluster

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/vibemq/broker/pebblestore"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Membership changes, one node at a time (the Raft thesis' single-server
// changes, section 4.1, as ConfChangeV2 with one change and the automatic
// transition, so never joint consensus): a new node is added as a learner
// (it receives the log but does not vote), and the leader promotes it to a
// voter once it has caught up with the commit index, as etcd's learners
// (etcd-io/etcd docs "learner"); a node is removed by its ID. A change is
// proposed on the leader only, which checks it against its own view of the
// followers (the quorum guard needs the leader's progress).
//
// The context of every change this package proposes is, as part of the
// log's format:
//
//	proposer u64 | sequence u64 | the added node's inter-broker address
//
// so the proposer's waiter finds its entry, and every replica (and the
// transport) learns the new node's address from the log itself.

var (
	// ErrRemoved: this node was removed from its group. It stops; started
	// again on the same data it stops at once. A removed node comes back
	// only with an empty data directory, under a new node ID, through
	// add-node.
	ErrRemoved = errors.New("cluster: this node was removed from the raft group; wipe its data directory and add it again under a new node id (broker cluster add-node)")
	// ErrUnknownMember: remove-node named an ID that is not a member.
	ErrUnknownMember = errors.New("cluster: no member of the raft group has this node id; see broker cluster status for the members")
	// ErrMemberExists: add-node named an ID that is already a member.
	ErrMemberExists = errors.New("cluster: a member with this node id already exists; a node that lost its data joins under a new id (remove-node the old one first)")
	// ErrWouldLoseQuorum: removing the node would leave fewer live voters
	// than a majority of the remaining ones.
	ErrWouldLoseQuorum = errors.New("cluster: removing this node would leave no majority of live voters; start the stopped voters first, or remove a stopped one")
	// ErrLastVoter: the only voter cannot be removed.
	ErrLastVoter = errors.New("cluster: this is the group's only voter and cannot be removed")
	// ErrIDRemoved: add-node named the ID of a removed member. A node
	// joins under an ID never used in the group: a removed node may come
	// back with its old log and votes, or with a wiped one that forgot
	// them, and Raft cannot tell either from the member it was.
	ErrIDRemoved = errors.New("cluster: this node id belonged to a removed member and is never used again; give the node a new node-id")
	// ErrChangePending: a membership change is not applied yet.
	ErrChangePending = errors.New("cluster: another membership change is not applied yet; retry once it is")
)

// NotLeaderError: a membership change was asked of a node that is not the
// leader. Leader is the leader's node ID, 0 while none is known.
type NotLeaderError struct{ Leader uint64 }

func (e *NotLeaderError) Error() string {
	if e.Leader == 0 {
		return "cluster: this node is not the raft leader and no leader is known; retry once one is elected"
	}
	return fmt.Sprintf("cluster: this node is not the raft leader; ask the leader, node %d", e.Leader)
}

// Peers is told the addresses of the members that membership changes add
// and remove (a *Transport). The node calls it from its goroutine only.
type Peers interface {
	AddPeer(id uint64, addr string)
	RemovePeer(id uint64)
}

// Member is one member of the group as a node sees it.
type Member struct {
	ID      uint64
	Learner bool
	// Addr is the inter-broker address learned from the log (add-node);
	// empty for the voters the group was bootstrapped with.
	Addr string
	// Match and Active: the leader's view of the member's log (the highest
	// index known replicated there) and whether it answered within the
	// last election timeout; on followers Match is 0 and Active false.
	Match  uint64
	Active bool
}

type memberChange struct {
	add     bool
	id      uint64
	addr    string
	promote bool // add a caught-up learner as a voter (the leader's own)
	done    chan proposeResult
	ctx     context.Context
}

// AddLearner adds node id, listening on addr, as a learner: it receives
// the log; the leader makes it a voter once it has caught up. It returns
// once this node (the leader) applied the change.
func (n *Node) AddLearner(ctx context.Context, id uint64, addr string) (uint64, error) {
	if id == 0 || addr == "" {
		return 0, errors.New("cluster: add-node needs a node id > 0 and the node's inter-broker address")
	}
	return n.changeMembers(ctx, &memberChange{add: true, id: id, addr: addr})
}

// RemoveMember removes node id (voter or learner) from the group. It
// returns once this node (the leader) applied the change; a leader that
// removes itself stops then.
func (n *Node) RemoveMember(ctx context.Context, id uint64) (uint64, error) {
	return n.changeMembers(ctx, &memberChange{id: id})
}

func (n *Node) changeMembers(ctx context.Context, c *memberChange) (uint64, error) {
	c.ctx, c.done = ctx, make(chan proposeResult, 1)
	select {
	case n.confc <- c:
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-n.done:
		return 0, n.stoppedErr()
	}
	select {
	case r := <-c.done:
		return r.index, r.err
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-n.done:
		select {
		case r := <-c.done: // applied, and it removed this node
			return r.index, r.err
		default:
			return 0, n.stoppedErr()
		}
	}
}

func (n *Node) stoppedErr() error {
	if err := n.Err(); err != nil {
		return err
	}
	return ErrStopped
}

// changePending: a membership change may not be applied yet. Raft itself
// drops a change proposed while one is pending (it becomes an empty
// entry, which would leave the caller waiting), and a new leader counts
// every entry of its log at its election as possibly a change.
func (n *Node) changePending() bool {
	return n.confIndex > n.applied || n.leaderIndex > n.applied
}

// proposeChange checks c against the leader's view and proposes it.
func (n *Node) proposeChange(c *memberChange) {
	if err := n.checkChange(c); err != nil {
		c.done <- proposeResult{err: err}
		return
	}
	typ := raftpb.ConfChangeType_ConfChangeRemoveNode
	switch {
	case c.promote:
		typ = raftpb.ConfChangeType_ConfChangeAddNode
	case c.add:
		typ = raftpb.ConfChangeType_ConfChangeAddLearnerNode
	}
	n.nextSeq++
	seq := n.nextSeq
	cc := &raftpb.ConfChangeV2{
		Changes: []*raftpb.ConfChangeSingle{{Type: typ.Enum(), NodeId: new(c.id)}},
		Context: changeContext(n.cfg.ID, seq, c.addr),
	}
	if err := n.rn.ProposeConfChange(cc); err != nil {
		if errors.Is(err, raft.ErrProposalDropped) {
			err = &NotLeaderError{Leader: n.rn.BasicStatus().Lead}
		}
		c.done <- proposeResult{err: err}
		return
	}
	if !c.promote { // the leader's own promotion has no waiter
		n.pending[seq] = &proposal{ctx: c.ctx, done: c.done}
	}
}

func (n *Node) checkChange(c *memberChange) error {
	st := n.rn.Status()
	if st.RaftState != raft.StateLeader {
		return &NotLeaderError{Leader: st.Lead}
	}
	if n.changePending() {
		return ErrChangePending
	}
	voters := n.confState.GetVoters()
	isVoter := slices.Contains(voters, c.id)
	isLearner := slices.Contains(n.confState.GetLearners(), c.id)
	switch {
	case c.promote:
		if !isLearner {
			return ErrUnknownMember
		}
		return nil
	case c.add:
		if isVoter || isLearner {
			return ErrMemberExists
		}
		if n.removedIDs[c.id] {
			return ErrIDRemoved
		}
		return nil
	case !isVoter && !isLearner:
		return ErrUnknownMember
	case isLearner:
		return nil
	case len(voters) == 1:
		return ErrLastVoter
	}
	// The voters left must have a live majority, or nothing commits after
	// the change (and the change itself may never be known committed).
	live, left := 0, 0
	for _, id := range voters {
		if id == c.id {
			continue
		}
		left++
		if pr, ok := st.Progress[id]; id == n.cfg.ID || (ok && pr.RecentActive) {
			live++
		}
	}
	if live <= left/2 {
		return fmt.Errorf("%w (voters left %d, live %d)", ErrWouldLoseQuorum, left, live)
	}
	return nil
}

// promoteCaughtUp makes the leader propose, for the first learner whose
// log has reached the commit index, its promotion to a voter.
func (n *Node) promoteCaughtUp() {
	if n.changePending() || len(n.confState.GetLearners()) == 0 {
		return
	}
	st := n.rn.Status()
	if st.RaftState != raft.StateLeader {
		return
	}
	for _, id := range slices.Sorted(slices.Values(n.confState.GetLearners())) {
		if pr, ok := st.Progress[id]; ok && pr.RecentActive && pr.Match >= st.HardState.GetCommit() {
			n.log.Info().Uint64("learner", id).Uint64("match", pr.Match).Msg("raft learner caught up; promoting it to a voter")
			n.proposeChange(&memberChange{promote: true, id: id, addr: n.addrs[id], done: make(chan proposeResult, 1)})
			return
		}
	}
}

func changeContext(proposer, seq uint64, addr string) []byte {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 16+len(addr)), proposer)
	b = binary.BigEndian.AppendUint64(b, seq)
	return append(b, addr...)
}

// applyConfChange applies a committed membership change: Raft's
// configuration, the address learned, the transport, the proposer's
// waiter. It returns ErrRemoved when the change removed this node.
func (n *Node) applyConfChange(e *raftpb.Entry) error {
	var cc raftpb.ConfChangeI
	var ctx []byte
	switch e.GetType() {
	case raftpb.EntryConfChange:
		v1 := &raftpb.ConfChange{}
		if err := proto.Unmarshal(e.GetData(), v1); err != nil {
			return fmt.Errorf("cluster: decode the configuration change at %d: %v: %w", e.GetIndex(), err, pebblestore.ErrCorruption)
		}
		cc = v1 // the bootstrap's, without a context of ours
	default:
		v2 := &raftpb.ConfChangeV2{}
		if err := proto.Unmarshal(e.GetData(), v2); err != nil {
			return fmt.Errorf("cluster: decode the configuration change at %d: %v: %w", e.GetIndex(), err, pebblestore.ErrCorruption)
		}
		cc, ctx = v2, v2.GetContext()
	}
	n.confState = n.rn.ApplyConfChange(cc)
	var addr string
	if len(ctx) >= 16 {
		addr = string(ctx[16:])
	}
	removedSelf := false
	for _, ch := range cc.AsV2().GetChanges() {
		id := ch.GetNodeId()
		switch ch.GetType() {
		case raftpb.ConfChangeType_ConfChangeAddNode, raftpb.ConfChangeType_ConfChangeAddLearnerNode:
			if addr != "" {
				n.addrs[id] = addr
				if id != n.cfg.ID && n.cfg.Peers != nil {
					n.cfg.Peers.AddPeer(id, addr)
				}
			}
		case raftpb.ConfChangeType_ConfChangeRemoveNode:
			delete(n.addrs, id)
			n.removedIDs[id] = true
			if id == n.cfg.ID {
				removedSelf = true
			} else if n.cfg.Peers != nil {
				n.cfg.Peers.RemovePeer(id)
			}
		}
	}
	n.log.Info().Uint64("index", e.GetIndex()).Str("change", raftpb.ConfChangesToString(cc.AsV2().GetChanges())).
		Str("voters", fmt.Sprint(n.confState.GetVoters())).Str("learners", fmt.Sprint(n.confState.GetLearners())).Msg("raft membership change applied")
	n.applied = e.GetIndex()
	n.snapNow = true
	if len(ctx) >= 16 && binary.BigEndian.Uint64(ctx) == n.cfg.ID {
		seq := binary.BigEndian.Uint64(ctx[8:])
		if p, ok := n.pending[seq]; ok {
			p.done <- proposeResult{index: e.GetIndex()}
			delete(n.pending, seq)
		}
	}
	if removedSelf {
		return ErrRemoved
	}
	return nil
}

// isMember: id is a voter or a learner (or in a joint configuration).
func isMember(cs *raftpb.ConfState, id uint64) bool {
	return slices.Contains(cs.GetVoters(), id) || slices.Contains(cs.GetLearners(), id) ||
		slices.Contains(cs.GetVotersOutgoing(), id) || slices.Contains(cs.GetLearnersNext(), id)
}

// The node's snapshot holds what the membership changes taught it beside
// the state machine's data (both part of the format):
//
//	magic "VMQSNAP1" [8] | length u32 | JSON membership | state machine's data
//
// A snapshot without the magic is the state machine's data alone (taken
// before membership changes existed).
var snapMagic = [8]byte{'V', 'M', 'Q', 'S', 'N', 'A', 'P', '1'}

// membership is the JSON of a snapshot's membership (member names are
// part of the format): the addresses learned from add-node, by node ID,
// and the IDs removed, never to be used again.
type membership struct {
	Addrs   map[uint64]string `json:"addrs,omitempty"`
	Removed []uint64          `json:"removed,omitempty"`
}

func (n *Node) membership() membership {
	return membership{Addrs: n.addrs, Removed: slices.Sorted(maps.Keys(n.removedIDs))}
}

func encodeSnapshot(m membership, data []byte) ([]byte, error) {
	a, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	out := append(snapMagic[:], binary.BigEndian.AppendUint32(nil, uint32(len(a)))...)
	out = append(out, a...)
	return append(out, data...), nil
}

func decodeSnapshot(b []byte) (membership, []byte, error) {
	var m membership
	if len(b) < 8 || [8]byte(b[:8]) != snapMagic {
		return m, b, nil
	}
	if len(b) < 12 {
		return m, nil, fmt.Errorf("cluster: snapshot of %d bytes is too short for its header: %w", len(b), pebblestore.ErrCorruption)
	}
	n := binary.BigEndian.Uint32(b[8:])
	if uint64(n) > uint64(len(b)-12) {
		return m, nil, fmt.Errorf("cluster: snapshot's membership of %d bytes is beyond its %d bytes: %w", n, len(b), pebblestore.ErrCorruption)
	}
	if err := json.Unmarshal(b[12:12+n], &m); err != nil {
		return m, nil, fmt.Errorf("cluster: decode the snapshot's membership: %v: %w", err, pebblestore.ErrCorruption)
	}
	return m, b[12+n:], nil
}

// restoreMembership replaces the learned addresses and removed IDs with a
// snapshot's and tells the transport.
func (n *Node) restoreMembership(m membership) {
	addrs := m.Addrs
	n.addrs = maps.Clone(addrs)
	if n.addrs == nil {
		n.addrs = map[uint64]string{}
	}
	n.removedIDs = map[uint64]bool{}
	for _, id := range m.Removed {
		n.removedIDs[id] = true
	}
	if n.cfg.Peers == nil {
		return
	}
	for _, id := range slices.Sorted(maps.Keys(addrs)) {
		if id != n.cfg.ID {
			n.cfg.Peers.AddPeer(id, addrs[id])
		}
	}
}
