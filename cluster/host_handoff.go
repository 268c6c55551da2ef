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
		to := transferee(g.rn, h.cfg.ID, func(peer uint64, _ tracker.Progress) bool { return slices.Contains(g.inSync, peer) })
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

// PeerLostState implements GroupReceiver: peer's node came back with a new
// incarnation (its data directory was wiped), so its replicas lost their
// logs, while a leader here keeps believing what it learned of them (the
// match index, which raft cannot lower): it would go on sending heartbeats
// committing entries the peer lacks (dropped by step) and never probe its
// log again. As Node.PeerLostState does for the metadata group, every
// group led here whose progress of peer is above zero hands its
// leadership to another voter (transferee): the new leader starts the
// peer's progress from zero, probes its log and sends the state row
// snapshot when its own log was compacted past it (host_compact.go). A
// group whose leader knows nothing of peer yet (match 0) needs nothing.
func (h *Host) PeerLostState(peer uint64) {
	select {
	case h.reportc <- func() { h.handOverFrom(peer) }: // not report: never dropped
	case <-h.done:
	}
}

// handOverFrom runs on the loop (PeerLostState): each group concerned
// remembers the peer (hostGroup.lost) until this node leads it no more.
func (h *Host) handOverFrom(lost uint64) {
	moved, stuck := 0, 0
	for _, g := range h.groups {
		if !g.leading || g.rn.BasicStatus().RaftState != raft.StateLeader || !slices.Contains(g.voters, lost) {
			continue
		}
		known := false
		g.rn.WithProgress(func(peer uint64, _ raft.ProgressType, pr tracker.Progress) {
			known = known || (peer == lost && pr.Match > 0)
		})
		if !known {
			continue
		}
		if !slices.Contains(g.lost, lost) {
			g.lost = append(g.lost, lost)
		}
		if h.handOver(g) {
			moved++
		} else { // no voter to take over: nothing to retry
			g.lost = slices.DeleteFunc(g.lost, func(id uint64) bool { return id == lost })
			stuck++
		}
	}
	if moved+stuck == 0 {
		return
	}
	h.log.Warn().Uint64("peer", lost).Int("moved", moved).Int("stuck", stuck).
		Msg("raft peer lost its state; handing over the leadership of the groups led here that knew its log, so that a new leader probes it from zero (stuck: no other voter to take over, the peer stays behind until the next election)")
}

// handOver asks raft to transfer g's leadership to a voter that did not
// lose its state; false when there is none. Raft abandons a transfer
// whose transferee does not catch up within an election timeout: tick
// asks again while g.lost is not empty (retryHandOver).
func (h *Host) handOver(g *hostGroup) bool {
	to := transferee(g.rn, h.cfg.ID, func(peer uint64, _ tracker.Progress) bool { return !slices.Contains(g.lost, peer) })
	if to == 0 {
		return false
	}
	h.wake(g)
	g.rn.TransferLeader(to)
	h.touched[g.id] = g
	return true
}

// retryHandOver hands g over again (tick) when a peer lost its state and
// no transfer is under way.
func (h *Host) retryHandOver(g *hostGroup) {
	if len(g.lost) > 0 && g.leading && g.rn.BasicStatus().LeadTransferee == raft.None {
		h.handOver(g)
	}
}
