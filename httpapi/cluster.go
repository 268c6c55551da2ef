package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strconv"
)

// The cluster route (issue 13):
//
//	GET /v1/admin/cluster   this broker's view of the cluster: its mode, the
//	                        metadata Raft group (leader, term, commit and
//	                        applied index) and the members
//	POST /v1/admin/cluster/nodes       add-node: {"node_id", "address"} (the
//	                        new node's inter-broker address), added as a
//	                        learner, made a voter by the leader once it
//	                        has caught up
//	DELETE /v1/admin/cluster/nodes/{id} remove-node
//
// A membership change is made on the metadata group's leader: a follower
// answers 421 not_leader with the leader's ID and registered addresses
// (details leader_id, leader_http_addr, leader_kafka_addr), which `broker
// cluster add-node|remove-node` follows once.
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
	// Partitions are this broker's replicas of replicated partitions
	// (replication factor above 1), sorted by topic and partition.
	Partitions []ClusterPartition `json:"partitions,omitempty"`
}

// ClusterPartition is this broker's replica of one replicated partition:
// its Raft group as this broker sees it.
type ClusterPartition struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Group     uint64  `json:"group"`
	Replicas  []int32 `json:"replicas"`
	// Leader is the group's leader as this replica knows it (0: none),
	// Term the leader epoch; ISR is the leader's in-sync view (on the
	// leader only).
	Leader        uint64  `json:"leader"`
	Term          uint64  `json:"term"`
	ISR           []int32 `json:"isr,omitempty"`
	HighWatermark int64   `json:"high_watermark"`
	// LogStart: the log start offset (retention, DeleteRecords), the same
	// on every replica that applied as far.
	LogStart  int64  `json:"log_start_offset"`
	Commit    uint64 `json:"commit_index"`
	Applied   uint64 `json:"applied_index"`
	LastIndex uint64 `json:"last_index"`
	// CompactedIndex: the group's log was compacted up to this index (its
	// entries start after it; 0: never compacted).
	CompactedIndex uint64 `json:"compacted_index,omitempty"`
	Quiesced       bool   `json:"quiesced,omitempty"`
	// CleanEnd: the clean range end of the last compaction command this
	// replica applied since it started (cleanup.policy=compact; 0: none);
	// Bytes: the bytes of the batches it serves (from the log start,
	// compacted batches as rewritten). Both the same on every replica
	// that applied as far.
	CleanEnd int64 `json:"clean_end,omitempty"`
	Bytes    int64 `json:"bytes"`
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
	// Removed: this node was removed from the group; its replica stopped.
	Removed bool `json:"removed,omitempty"`
}

// ClusterMember is one configured member.
type ClusterMember struct {
	NodeID          int32  `json:"node_id"`
	InterBrokerAddr string `json:"inter_broker_addr,omitempty"`
	// KafkaAddr is the address the broker registered in the metadata log;
	// empty until its registration is applied here.
	KafkaAddr string `json:"kafka_addr,omitempty"`
	Voter     bool   `json:"voter"`
	// Learner: added, receiving the log, not voting yet.
	Learner bool `json:"learner,omitempty"`
	Leader  bool `json:"leader"`
	// MatchIndex and Active: the leader's view of the member's log and
	// whether it answered lately (on the leader only).
	MatchIndex uint64 `json:"match_index,omitempty"`
	Active     *bool  `json:"active,omitempty"`
	// Fenced: the metadata says the leader fenced the broker (inactive
	// for the broker session timeout): new partitions are not placed on it.
	Fenced bool `json:"fenced,omitempty"`
}

// ClusterChange is the answer of a membership change: the node and the
// metadata log index at which the change was applied.
type ClusterChange struct {
	NodeID uint64 `json:"node_id"`
	Index  uint64 `json:"index"`
}

type clusterAddNode struct {
	NodeID  uint64 `json:"node_id"`
	Address string `json:"address"`
}

// ClusterError is a refused membership change; Code is one of the
// cluster codes of nativeCodeStatus (not_clustered, not_leader,
// no_leader, node_not_found, node_exists, node_id_removed,
// would_lose_quorum, last_voter, change_pending, invalid_address).
// cmd/broker maps package cluster's errors to it.
type ClusterError struct {
	Code, Message string
	Details       map[string]any
}

func (e *ClusterError) Error() string { return e.Code + ": " + e.Message }

// ClusterConfig wires the cluster route.
type ClusterConfig struct {
	// Status computes the status at each request.
	Status func() ClusterStatus
	// AddNode and RemoveNode change the membership and return the log
	// index of the applied change; their refusals are *ClusterError.
	AddNode    func(ctx context.Context, id uint64, addr string) (uint64, error)
	RemoveNode func(ctx context.Context, id uint64) (uint64, error)
}

// RegisterCluster adds the cluster routes. Call before Start.
func (s *Server) RegisterCluster(cfg ClusterConfig) {
	s.Handle("GET /v1/admin/cluster", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, cfg.Status())
	}))
	s.Handle("POST /v1/admin/cluster/nodes", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req clusterAddNode
		if e := decodeBody(w, r, bodyRule{limit: 4 << 10, required: true}, &req); e != nil {
			writeError(w, e)
			return
		}
		if req.NodeID == 0 || req.NodeID > 1<<31-1 {
			writeError(w, newNativeError("invalid_id", "node_id must be between 1 and 2147483647").with("field", "node_id"))
			return
		}
		if req.Address == "" {
			writeError(w, newNativeError("invalid_address", "address is missing: the new node's inter-broker address, host:port").with("field", "address"))
			return
		}
		index, err := cfg.AddNode(r.Context(), req.NodeID, req.Address)
		clusterAnswer(w, req.NodeID, index, err)
	}))
	s.Handle("DELETE /v1/admin/cluster/nodes/{id}", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseUint(r.PathValue("id"), 10, 31)
		if err != nil || id == 0 {
			writeError(w, newNativeError("invalid_id", "node id %q is not a number between 1 and 2147483647", r.PathValue("id")))
			return
		}
		index, err := cfg.RemoveNode(r.Context(), id)
		clusterAnswer(w, id, index, err)
	}))
}

func clusterAnswer(w http.ResponseWriter, id, index uint64, err error) {
	var ce *ClusterError
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, ClusterChange{NodeID: id, Index: index})
	case errors.As(err, &ce):
		writeError(w, &nativeError{Code: ce.Code, Message: ce.Message, Details: ce.Details})
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		writeError(w, newNativeError("change_pending", "the membership change was not applied in time (it may still be); see broker cluster status"))
	default:
		writeError(w, err)
	}
}
