package cluster

import (
	"slices"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/tracker"
)

// HandOff starts a controlled shutdown of this node's replicas (KIP-631's
// controlled shutdown, DESIGN.md "Cluster"): for every group it leads it
// asks Raft to transfer the leadership to the follower of the in-sync view
// whose log is the longest (the highest match), and from then on the node
// refuses to take any leadership (it ignores MsgTimeoutNow, the message by
// which a leader hands its group over), so that a preferred-leader
// hand-back cannot give a group to a node that is stopping. It returns the
// groups it asked to move, with their transferees; a group led here with
// no follower in sync stays (its leader stops with it, and the others
// elect after an election timeout). The caller waits for the new leaders
// (Status). HandOff cannot be undone: it is called just before Stop.
func (h *Host) HandOff() map[uint64]uint64 {
	h.draining.Store(true)
	moved := make(chan map[uint64]uint64, 1)
	f := func() { moved <- h.handOff() }
	select {
	case h.reportc <- f:
	case <-h.done:
		return nil
	}
	select {
	case m := <-moved:
		return m
	case <-h.done:
		return nil
	}
}

// handOff runs on the loop (HandOff).
func (h *Host) handOff() map[uint64]uint64 {
	moved := map[uint64]uint64{}
	for id, g := range h.groups {
		if !g.leading || g.rn.BasicStatus().RaftState != raft.StateLeader {
			continue
		}
		var to, best uint64
		g.rn.WithProgress(func(peer uint64, typ raft.ProgressType, pr tracker.Progress) {
			if peer == h.cfg.ID || typ != raft.ProgressTypePeer || !slices.Contains(g.inSync, peer) {
				return
			}
			if to == 0 || pr.Match > best {
				to, best = peer, pr.Match
			}
		})
		if to == 0 {
			continue
		}
		h.wake(g)
		g.rn.TransferLeader(to)
		h.touched[id] = g
		moved[id] = to
	}
	return moved
}
