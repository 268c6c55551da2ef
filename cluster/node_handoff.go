package cluster

import (
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/tracker"
)

// HandOff asks this node, if it leads its group, to transfer the
// leadership to the voter with the longest log among those recently
// active (controlled shutdown, DESIGN.md "Cluster"). It returns the
// transferee, or 0 when this node does not lead or no voter qualifies.
// The caller waits for the new leader (Status).
func (n *Node) HandOff() uint64 {
	res := make(chan uint64, 1)
	f := func(rn *raft.RawNode) {
		var to uint64
		if rn.BasicStatus().RaftState == raft.StateLeader {
			to = transferee(rn, n.cfg.ID, func(_ uint64, pr tracker.Progress) bool { return pr.RecentActive })
		}
		if to != 0 {
			rn.TransferLeader(to)
		}
		res <- to
	}
	select {
	case n.reportc <- f:
	case <-n.done:
		return 0
	}
	select {
	case to := <-res:
		return to
	case <-n.done:
		return 0
	}
}

// transferee is the voter of rn (a leader) other than self to hand the
// leadership to: among those ok accepts, the one whose log is the longest
// in the leader's view (the highest match); 0 when none. Shared by the
// controlled shutdowns (Node.HandOff, Host.HandOff) and the hand-overs
// from a peer that lost its state (Node.PeerLostState,
// Host.PeerLostState).
func transferee(rn *raft.RawNode, self uint64, ok func(id uint64, pr tracker.Progress) bool) uint64 {
	var to, best uint64
	rn.WithProgress(func(id uint64, typ raft.ProgressType, pr tracker.Progress) {
		if id == self || typ != raft.ProgressTypePeer || !ok(id, pr) {
			return
		}
		if to == 0 || pr.Match > best {
			to, best = id, pr.Match
		}
	})
	return to
}
