package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/urfave/cli/v2"

	"github.com/rs/zerolog"
	"github.com/vibemq/broker/cluster"
	"github.com/vibemq/broker/httpapi"
	"github.com/vibemq/broker/internal/metrics"
	"github.com/vibemq/broker/pebblestore"
)

// Cluster settings (issue 13): with cluster-peers set, serve starts this
// node's replica of the metadata Raft group (package cluster) on the
// inter-broker listener and registers the broker's advertised Kafka
// address in it; `broker cluster status` shows the group. Kafka's topics
// are the group's (cluster_kafka.go): each partition lives on one broker,
// its leader, until partitions are replicated.

// clusterTick is the Raft clock of the metadata group: elections after
// 10 ticks without a leader (1 to 2 s, randomized), heartbeats every tick.
const clusterTick = 100 * time.Millisecond

// clusterPeer is one entry of cluster-peers.
type clusterPeer struct {
	id   uint64
	addr string
}

// parseClusterPeers parses "1@host:port,2@host:port,...".
func parseClusterPeers(s string) ([]clusterPeer, error) {
	var peers []clusterPeer
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		idText, addr, ok := strings.Cut(item, "@")
		if !ok {
			return nil, fmt.Errorf("has the entry %q, which is not id@host:port; use e.g. 1@broker1:9093,2@broker2:9093,3@broker3:9093", item)
		}
		id, err := strconv.ParseUint(idText, 10, 31)
		if err != nil || id == 0 {
			return nil, fmt.Errorf("has the entry %q, whose node id is not a number between 1 and 2147483647", item)
		}
		if problem := checkHostPort(addr, hostPortRules{example: "broker1:9093", dialable: true}); problem != "" {
			return nil, fmt.Errorf("has the entry %q, whose address %s", item, problem)
		}
		if slices.ContainsFunc(peers, func(p clusterPeer) bool { return p.id == id }) {
			return nil, fmt.Errorf("names node %d twice; give each node one entry", id)
		}
		peers = append(peers, clusterPeer{id: id, addr: addr})
	}
	return peers, nil
}

// checkClusterPeers is the key's own check.
func checkClusterPeers(v string) string {
	if v == "" {
		return ""
	}
	if _, err := parseClusterPeers(v); err != nil {
		return err.Error()
	}
	return ""
}

// validateCluster checks the rules between the cluster keys and the others.
func (c *Config) validateCluster() []error {
	if c.ClusterPeers == "" {
		if c.ClusterJoin {
			return []error{fmt.Errorf("cluster-join%s is set but cluster-peers is empty; list the cluster's members and this node in cluster-peers", c.from("cluster-join"))}
		}
		if c.InterBrokerAddr != "" {
			return []error{fmt.Errorf("inter-broker-addr %q%s is set but cluster-peers is empty; set cluster-peers to form a cluster, or remove inter-broker-addr", c.InterBrokerAddr, c.from("inter-broker-addr"))}
		}
		return nil
	}
	peers, _ := parseClusterPeers(c.ClusterPeers) // checked with the key
	if !slices.ContainsFunc(peers, func(p clusterPeer) bool { return p.id == uint64(c.NodeID) }) {
		return []error{fmt.Errorf("node-id %d%s is not in cluster-peers %q%s; give this broker the id of its own entry", c.NodeID, c.from("node-id"), c.ClusterPeers, c.from("cluster-peers"))}
	}
	if c.ClusterJoin && len(peers) < 2 {
		return []error{fmt.Errorf("cluster-join%s is set but cluster-peers %q names only this node; list the members of the cluster it joins too", c.from("cluster-join"), c.ClusterPeers)}
	}
	listen := c.interBrokerListenAddr(peers)
	for _, other := range []struct{ key, addr string }{{"kafka-addr", c.KafkaAddr}, {"http-addr", c.HTTPAddr}} {
		if sameListenAddr(listen, other.addr) {
			return []error{fmt.Errorf("the inter-broker listener %q is the address of %s; give it its own port (inter-broker-addr, or this node's entry in cluster-peers)", listen, other.key)}
		}
	}
	return nil
}

// interBrokerListenAddr is inter-broker-addr, or this node's cluster-peers
// address.
func (c *Config) interBrokerListenAddr(peers []clusterPeer) string {
	if c.InterBrokerAddr != "" {
		return c.InterBrokerAddr
	}
	for _, p := range peers {
		if p.id == uint64(c.NodeID) {
			return p.addr
		}
	}
	return ""
}

// clusterNode is the running metadata replica of a clustered broker.
type clusterNode struct {
	peers     []clusterPeer
	transport *cluster.Transport
	node      *cluster.Node
	metadata  *cluster.Metadata
	cancel    context.CancelFunc
	done      chan struct{}
	// livenessDone closes when watchLiveness (cluster_liveness.go) ends.
	livenessDone chan struct{}
	// host runs the replicated partitions' groups; replicasDone closes
	// when their manager (cluster_replicas.go) ends.
	host         *cluster.Host
	replicas     *replicaManager
	replicasDone chan struct{}
}

// startCluster starts the metadata replica when cluster-peers is set, and
// registers kafkaAddr (the advertised address) once a leader is known.
// It returns nil without cluster settings.
//
// kc, bound here, becomes the Kafka protocol's view of the cluster: the
// metadata's topics are synced into its topic store as they are applied.
func startCluster(cfg *Config, store *pebblestore.Store, kc *kafkaCluster, kafkaAddr string, log zerolog.Logger) (*clusterNode, error) {
	if cfg.ClusterPeers == "" {
		return nil, nil
	}
	peers, err := parseClusterPeers(cfg.ClusterPeers)
	if err != nil {
		return nil, fmt.Errorf("cluster-peers %w", err)
	}
	listen := cfg.interBrokerListenAddr(peers)
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("cannot start the inter-broker listener on %s: %w; choose a free address with --inter-broker-addr", listen, err)
	}
	inc, err := cluster.Incarnation(store, 0)
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	addrs := map[uint64]string{}
	var voters []uint64
	for _, p := range peers {
		addrs[p.id] = p.addr
		voters = append(voters, p.id)
	}
	id := uint64(cfg.NodeID)
	tr, err := cluster.NewTransport(cluster.TransportConfig{ID: id, Incarnation: inc, Listener: ln, Peers: addrs, GroupFrames: true, Logger: log})
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	// The partitions' groups share the listener: version-2 frames name
	// their group, 0 is the metadata node's, the others the host's.
	host, err := cluster.StartHost(cluster.HostConfig{ID: id, Store: store, Transport: tr, Ticker: cluster.NewTicker(clusterTick), Logger: log})
	if err != nil {
		_ = tr.Close()
		return nil, err
	}
	md := cluster.NewMetadata()
	kc.md = md
	rm := newReplicaManager(cfg.NodeID, host, md, store, log)
	rm.topics, rm.retentionEvery = kc.tm, cfg.LogRetentionCheckInterval
	rm.groups = kc.groups
	rm.txns = kc.txns
	kc.replicas = rm
	md.OnTopicsChanged(kc.syncTopics) // before the node replays its log
	md.OnGroupConfigsChanged(kc.syncGroupConfigs)
	node, err := cluster.StartNode(cluster.NodeConfig{
		ID: id, Group: 0, Voters: voters, Store: store, StateMachine: md, Sender: tr, Peers: tr,
		Join: cfg.ClusterJoin, Ticker: cluster.NewTicker(clusterTick), Logger: log,
	})
	if err != nil {
		host.Stop()
		_ = tr.Close()
		return nil, fmt.Errorf("starting the metadata raft group in %s: %w", cfg.DataDir, err)
	}
	kc.node = node
	rm.node = node
	kc.serving.Store(true) // before the transport can bring a leader's snapshot
	tr.Start(node)
	ctx, cancel := context.WithCancel(context.Background())
	c := &clusterNode{peers: peers, transport: tr, node: node, metadata: md, host: host, replicas: rm, cancel: cancel, done: make(chan struct{}), livenessDone: make(chan struct{}), replicasDone: make(chan struct{})}
	go rm.run(ctx, c.replicasDone)
	go c.register(ctx, cluster.Broker{NodeID: cfg.NodeID, KafkaAddr: kafkaAddr, HTTPAddr: dialableHTTPAddr(cfg.HTTPAddr), ClusterID: kc.tm.ClusterID()}, log)
	go c.watchLiveness(ctx, log)
	log.Warn().Str("inter_broker_addr", ln.Addr().String()).Int("peers", len(peers)).
		Msg("cluster-peers is set: this broker joins the metadata raft group; topics are the cluster's, partitions of replication factor 1 live on their leader, the others on raft groups")
	return c, nil
}

// registerMetrics exposes the metadata group's state on /metrics
// (cluster mode only, so a single node's series are unchanged).
func (c *clusterNode) registerMetrics(reg prometheus.Registerer) {
	gauge := func(name, help string, value func(cluster.Status) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return value(c.node.Status()) })
	}
	metrics.Register(reg,
		gauge("broker_raft_term", "Current Raft term of the metadata group on this node.", func(s cluster.Status) float64 { return float64(s.Term) }),
		gauge("broker_raft_leader", "Node ID of the metadata group's leader as this node knows it; 0 while none is known.", func(s cluster.Status) float64 { return float64(s.Leader) }),
		gauge("broker_raft_commit_index", "Highest log index of the metadata group known committed on this node.", func(s cluster.Status) float64 { return float64(s.Commit) }),
		gauge("broker_raft_applied_index", "Highest log index of the metadata group applied on this node.", func(s cluster.Status) float64 { return float64(s.Applied) }),
		gauge("broker_raft_snapshot_index", "Log index of the metadata group's latest snapshot on this node.", func(s cluster.Status) float64 { return float64(s.SnapshotIndex) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "broker_raft_leader_changes_total", Help: "New leaders of the metadata group this node has seen."},
			func() float64 { return float64(c.node.LeaderChanges()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "broker_replicated_partitions", Help: "Replicas of partitions with a replication factor above 1 (raft groups) on this broker."},
			func() float64 { return float64(c.replicas.counts().replicas) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "broker_replicated_partitions_leading", Help: "Replicated partitions this broker leads."},
			func() float64 { return float64(c.replicas.counts().leading) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "broker_replicated_partitions_under_replicated", Help: "Replicated partitions this broker leads whose ISR is smaller than their replicas."},
			func() float64 { return float64(c.replicas.counts().underReplicated) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "broker_replicated_partitions_quiesced", Help: "Replicated partitions whose raft group is quiesced (idle, not ticking) on this broker."},
			func() float64 { return float64(c.host.Quiesced()) }),
	)
	c.registerHostMetrics(reg)
}

// registerHostMetrics exposes the partition groups' Raft loop counters
// (cluster.HostCounters): what bench/cluster-run.sh reads.
func (c *clusterNode) registerHostMetrics(reg prometheus.Registerer) {
	counter := func(name, help string, value func(cluster.HostCounters) float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return value(c.host.Counters()) })
	}
	metrics.Register(reg,
		counter("broker_raft_host_loops_total", "Iterations of the partition groups' Raft loop.", func(h cluster.HostCounters) float64 { return float64(h.Loops) }),
		counter("broker_raft_host_saves_total", "Synced batches (fsyncs) of the partition groups' Raft loop.", func(h cluster.HostCounters) float64 { return float64(h.Saves) }),
		counter("broker_raft_host_readies_saved_total", "Group Readies carried by those synced batches.", func(h cluster.HostCounters) float64 { return float64(h.ReadiesSaved) }),
		counter("broker_raft_host_entries_saved_total", "Raft log entries carried by those synced batches.", func(h cluster.HostCounters) float64 { return float64(h.EntriesSaved) }),
		counter("broker_raft_host_entry_bytes_saved_total", "Bytes of the Raft log entries carried by those synced batches.", func(h cluster.HostCounters) float64 { return float64(h.EntryBytesSaved) }),
		counter("broker_raft_host_leader_changes_total", "Partition groups whose leadership this broker took over from another leader.", func(h cluster.HostCounters) float64 { return float64(h.LeaderChanges) }),
		hostStageSeconds{host: c.host},
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "broker_raft_host_longest_iteration_seconds", Help: "Longest iteration of the partition groups' Raft loop since start, its wait for input excluded."},
			func() float64 { return c.host.Counters().Longest.Seconds() }),
	)
}

// hostStageSeconds: the Raft loop's time per stage (Host.LoopStats), one
// series per stage.
type hostStageSeconds struct{ host *cluster.Host }

var hostStageDesc = prometheus.NewDesc("broker_raft_host_loop_seconds_total",
	"Time the partition groups' Raft loop spent per stage: wait (for input), input (stepping it), stage (Readies into the batch), save (commit, the fsync when synced), apply (send, apply, advance).",
	[]string{"stage"}, nil)

func (hostStageSeconds) Describe(ch chan<- *prometheus.Desc) { ch <- hostStageDesc }

func (s hostStageSeconds) Collect(ch chan<- prometheus.Metric) {
	_, stages := s.host.LoopStats()
	for i, name := range [...]string{"wait", "input", "stage", "save", "apply"} {
		ch <- prometheus.MustNewConstMetric(hostStageDesc, prometheus.CounterValue, stages[i].Seconds(), name)
	}
}

// register proposes this broker's registration until it is applied (a
// leader may not be elected yet), unless the applied copy already has it.
func (c *clusterNode) register(ctx context.Context, b cluster.Broker, log zerolog.Logger) {
	defer close(c.done)
	for {
		if slices.Contains(c.metadata.View().Brokers, b) {
			return
		}
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := c.node.Propose(pctx, cluster.RegisterBrokerRecord(b))
		cancel()
		if err == nil {
			log.Info().Int32("node_id", b.NodeID).Str("kafka_addr", b.KafkaAddr).Msg("broker registered in the cluster metadata")
			return
		}
		if errors.Is(err, cluster.ErrStopped) || ctx.Err() != nil || c.node.Err() != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// stop stops the registration, the node and the transport (before the
// store closes).
func (c *clusterNode) stop() {
	if c == nil {
		return
	}
	c.cancel()
	<-c.done
	<-c.livenessDone
	<-c.replicasDone
	c.host.Stop()
	c.node.Stop()
	_ = c.transport.Close()
}

// status is GET /v1/admin/cluster: single-node, or this node's view of
// the metadata group.
func (c *clusterNode) status(nodeID int32, kafkaAddr string) httpapi.ClusterStatus {
	if c == nil {
		return httpapi.ClusterStatus{NodeID: nodeID, Mode: "single-node", Members: []httpapi.ClusterMember{{NodeID: nodeID, KafkaAddr: kafkaAddr, Voter: true, Leader: true}}}
	}
	st := c.node.Status()
	out := httpapi.ClusterStatus{NodeID: nodeID, Mode: "raft", Raft: &httpapi.ClusterRaft{
		Leader: st.Leader, Term: st.Term, State: st.State, Commit: st.Commit, Applied: st.Applied,
		SnapshotIndex: st.SnapshotIndex, FirstIndex: st.FirstIndex, LastIndex: st.Last,
		Removed: errors.Is(c.node.Err(), cluster.ErrRemoved),
	}}
	registered := map[int32]string{}
	for _, b := range c.metadata.View().Brokers {
		registered[b.NodeID] = b.KafkaAddr
	}
	configured := map[uint64]string{}
	for _, p := range c.peers {
		configured[p.id] = p.addr
	}
	leader := st.State == "StateLeader"
	for _, m := range st.Members {
		addr := m.Addr // learned from add-node, else configured
		if addr == "" {
			addr = configured[m.ID]
		}
		cm := httpapi.ClusterMember{
			NodeID: int32(m.ID), InterBrokerAddr: addr, KafkaAddr: registered[int32(m.ID)],
			Voter: !m.Learner, Learner: m.Learner, Leader: m.ID == st.Leader,
			Fenced: c.metadata.Fenced(int32(m.ID)),
		}
		if leader {
			cm.MatchIndex, cm.Active = m.Match, &m.Active
		}
		out.Members = append(out.Members, cm)
	}
	out.Partitions = c.replicas.status()
	return out
}

// dialableHTTPAddr is the HTTP address registered for the other brokers to
// name (a follower's answer to a membership change names the leader's),
// or "" when http-addr is a listen address such as :8080.
func dialableHTTPAddr(addr string) string {
	if checkHostPort(addr, hostPortRules{example: "broker1:8080", dialable: true}) != "" {
		return ""
	}
	return addr
}

// addNode is POST /v1/admin/cluster/nodes.
func (c *clusterNode) addNode(ctx context.Context, id uint64, addr string) (uint64, error) {
	if c == nil {
		return 0, notClustered()
	}
	if problem := checkHostPort(addr, hostPortRules{example: "broker4:9093", dialable: true}); problem != "" {
		return 0, &httpapi.ClusterError{Code: "invalid_address", Message: fmt.Sprintf("address %q %s", addr, problem)}
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	index, err := c.node.AddLearner(ctx, id, addr)
	return index, c.changeError(err, id)
}

// removeNode is DELETE /v1/admin/cluster/nodes/{id}.
func (c *clusterNode) removeNode(ctx context.Context, id uint64) (uint64, error) {
	if c == nil {
		return 0, notClustered()
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	index, err := c.node.RemoveMember(ctx, id)
	return index, c.changeError(err, id)
}

func notClustered() error {
	return &httpapi.ClusterError{Code: "not_clustered", Message: "this broker runs as a single node (no cluster-peers); membership changes need a cluster"}
}

// changeError maps package cluster's refusals to the API's codes.
func (c *clusterNode) changeError(err error, id uint64) error {
	var nl *cluster.NotLeaderError
	code := ""
	switch {
	case err == nil:
		return nil
	case errors.As(err, &nl) && nl.Leader == 0, errors.Is(err, cluster.ErrStopped):
		return &httpapi.ClusterError{Code: "no_leader", Message: "no leader of the metadata group is known to this broker (" + err.Error() + "); retry, or ask another broker"}
	case errors.As(err, &nl):
		details := map[string]any{"leader_id": nl.Leader}
		for _, b := range c.metadata.View().Brokers {
			if uint64(b.NodeID) == nl.Leader {
				details["leader_kafka_addr"] = b.KafkaAddr
				if b.HTTPAddr != "" {
					details["leader_http_addr"] = b.HTTPAddr
				}
			}
		}
		return &httpapi.ClusterError{Code: "not_leader", Message: fmt.Sprintf("this broker is not the leader of the metadata group; send the change to the leader, node %d (its HTTP address is in details.leader_http_addr when it registered one)", nl.Leader), Details: details}
	case errors.Is(err, cluster.ErrUnknownMember):
		code = "node_not_found"
	case errors.Is(err, cluster.ErrMemberExists):
		code = "node_exists"
	case errors.Is(err, cluster.ErrIDRemoved):
		code = "node_id_removed"
	case errors.Is(err, cluster.ErrWouldLoseQuorum):
		code = "would_lose_quorum"
	case errors.Is(err, cluster.ErrLastVoter):
		code = "last_voter"
	case errors.Is(err, cluster.ErrChangePending):
		code = "change_pending"
	default:
		return err
	}
	return &httpapi.ClusterError{Code: code, Message: fmt.Sprintf("node %d: %s", id, strings.TrimPrefix(err.Error(), "cluster: ")), Details: map[string]any{"node_id": id}}
}

func clusterCommand() *cli.Command {
	return &cli.Command{
		Name:  "cluster",
		Usage: "the cluster a broker belongs to",
		Subcommands: []*cli.Command{{
			Name:   "status",
			Usage:  "mode, metadata raft group (leader, term, commit and applied index) and members (voters and learners), as the broker at --server sees them",
			Flags:  clientFlags(),
			Action: clusterStatus,
		}, {
			Name:      "add-node",
			Usage:     "add a node, started with --cluster-join on an empty data directory, to the cluster: it joins as a learner and the leader makes it a voter once it has caught up",
			UsageText: "broker cluster add-node --id 4 --address broker4:9093 [--server host:port]",
			Flags: append(clientFlags(),
				&cli.Uint64Flag{Name: "id", Usage: "the new node's node-id", Required: true},
				&cli.StringFlag{Name: "address", Usage: "the new node's inter-broker address, host:port", Required: true}),
			Action: func(cCtx *cli.Context) error {
				return clusterChange(cCtx, apiCall{method: http.MethodPost, path: "/v1/admin/cluster/nodes",
					body: map[string]any{"node_id": cCtx.Uint64("id"), "address": cCtx.String("address")}}, "added as a learner")
			},
		}, {
			Name:      "remove-node",
			Usage:     "remove a node from the cluster (refused when the voters left would have no live majority); a removed node's replica stops",
			UsageText: "broker cluster remove-node --id 3 [--server host:port]",
			Flags:     append(clientFlags(), &cli.Uint64Flag{Name: "id", Usage: "the node-id to remove", Required: true}),
			Action: func(cCtx *cli.Context) error {
				return clusterChange(cCtx, apiCall{method: http.MethodDelete, path: fmt.Sprintf("/v1/admin/cluster/nodes/%d", cCtx.Uint64("id"))}, "removed")
			},
		}},
	}
}

// clusterChange sends a membership change; a follower's not_leader
// answer that names the leader's HTTP address is followed once.
func clusterChange(cCtx *cli.Context, ac apiCall, done string) error {
	format, c, err := outputAndClient(cCtx)
	if err != nil {
		return err
	}
	var res httpapi.ClusterChange
	_, err = c.call(cCtx.Context, ac, &res)
	var ae *apiError
	if errors.As(err, &ae) && ae.Code == "not_leader" {
		if leader, ok := ae.Details["leader_http_addr"].(string); ok && leader != "" {
			base, perr := url.Parse("http://" + leader)
			if perr == nil {
				fmt.Fprintf(cCtx.App.ErrWriter, "the leader of the metadata group is at %s; sending the change there\n", leader)
				c.base = base
				_, err = c.call(cCtx.Context, ac, &res)
			}
		}
	}
	if err != nil {
		return err
	}
	if format == "json" {
		return printJSON(cCtx.App.Writer, res)
	}
	fmt.Fprintf(cCtx.App.Writer, "node %d %s (metadata log index %d)\n", res.NodeID, done, res.Index)
	return nil
}

func clusterStatus(cCtx *cli.Context) error {
	format, c, err := outputAndClient(cCtx)
	if err != nil {
		return err
	}
	var st httpapi.ClusterStatus
	if _, err := c.call(cCtx.Context, apiCall{method: http.MethodGet, path: "/v1/admin/cluster"}, &st); err != nil {
		return err
	}
	out := cCtx.App.Writer
	if format == "json" {
		return printJSON(out, st)
	}
	fmt.Fprintf(out, "node %d, mode %s\n", st.NodeID, st.Mode)
	if r := st.Raft; r != nil {
		leader := "none"
		if r.Leader != 0 {
			leader = fmt.Sprint(r.Leader)
		}
		fmt.Fprintf(out, "metadata raft group: leader %s, term %d, %s, commit %d, applied %d, log [%d, %d], snapshot %d\n",
			leader, r.Term, r.State, r.Commit, r.Applied, r.FirstIndex, r.LastIndex, r.SnapshotIndex)
	}
	tw := newTable(out)
	if r := st.Raft; r != nil && r.Removed {
		fmt.Fprintln(out, "this node was removed from the cluster; its replica stopped")
	}
	defer printReplicatedPartitions(out, st.Partitions)
	fmt.Fprintln(tw, "NODE\tINTER-BROKER\tKAFKA\tROLE\tLEADER\tMATCH")
	for _, m := range st.Members {
		role := "voter"
		if m.Learner {
			role = "learner"
		}
		if m.Fenced {
			role += " (fenced)"
		}
		match := "-"
		if m.Active != nil {
			match = fmt.Sprint(m.MatchIndex)
			if !*m.Active {
				match += " (inactive)"
			}
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%v\t%s\n", m.NodeID, dash(m.InterBrokerAddr), dash(m.KafkaAddr), role, m.Leader, match)
	}
	return tw.Flush()
}
