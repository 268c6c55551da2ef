package cluster

import "go.etcd.io/raft/v3"

// HandOff asks this node, if it leads its group, to transfer the
// leadership to the voter with the longest log among those recently
// active (controlled shutdown, DESIGN.md "Cluster"). It returns the
// transferee, or 0 when this node does not lead or no voter qualifies.
// The caller waits for the new leader (Status).
func (n *Node) HandOff() uint64 {
	res := make(chan uint64, 1)
	f := func(rn *raft.RawNode) {
		st := rn.Status()
		var to, best uint64
		if st.RaftState == raft.StateLeader {
			for id, pr := range st.Progress {
				if id != n.cfg.ID && !pr.IsLearner && pr.RecentActive && (to == 0 || pr.Match > best) {
					to, best = id, pr.Match
				}
			}
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
