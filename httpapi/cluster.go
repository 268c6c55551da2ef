package httpapi

import "net/http"

// The cluster route (issue 13):
//
//	GET /v1/admin/cluster   this broker's view of the cluster: its mode, the
//	                        metadata Raft group (leader, term, commit and
//	                        applied index) and the members
//
// A broker without cluster settings answers mode "single-node" and itself
// as the only member. cmd/broker computes the status (package cluster);
// this file only puts it on the wire.

// ClusterStatus is the answer of GET /v1/admin/cluster and `broker cluster
// status`.
type ClusterStatus struct {
	NodeID int32 `json:"node_id"`
	// Mode is "single-node" or "raft".
	Mode string `json:"mode"`
	// Raft is the metadata group as this node sees it (mode "raft" only).
	Raft    *ClusterRaft    `json:"raft,omitempty"`
	Members []ClusterMember `json:"members"`
}

// ClusterRaft is one node's view of the metadata Raft group.
type ClusterRaft struct {
	// Leader is the leader's node ID, 0 while none is known.
	Leader        uint64 `json:"leader"`
	Term          uint64 `json:"term"`
	State         string `json:"state"`
	Commit        uint64 `json:"commit_index"`
	Applied       uint64 `json:"applied_index"`
	SnapshotIndex uint64 `json:"snapshot_index"`
	FirstIndex    uint64 `json:"first_index"`
	LastIndex     uint64 `json:"last_index"`
}

// ClusterMember is one configured member.
type ClusterMember struct {
	NodeID          int32  `json:"node_id"`
	InterBrokerAddr string `json:"inter_broker_addr,omitempty"`
	// KafkaAddr is the address the broker registered in the metadata log;
	// empty until its registration is applied here.
	KafkaAddr string `json:"kafka_addr,omitempty"`
	Voter     bool   `json:"voter"`
	Leader    bool   `json:"leader"`
}

// ClusterConfig wires the cluster route.
type ClusterConfig struct {
	// Status computes the status at each request.
	Status func() ClusterStatus
}

// RegisterCluster adds GET /v1/admin/cluster. Call before Start.
func (s *Server) RegisterCluster(cfg ClusterConfig) {
	s.Handle("GET /v1/admin/cluster", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, cfg.Status())
	}))
}
