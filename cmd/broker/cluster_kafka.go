package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync/atomic"

	"github.com/rs/zerolog"
	"github.com/vibemq/broker/cluster"
	"github.com/vibemq/broker/groups"
	"github.com/vibemq/broker/kafkaproto"
	"github.com/vibemq/broker/topics"
	"github.com/vibemq/broker/txns"
)

// kafkaCluster is the Kafka protocol's view of the cluster
// (kafkaproto.Cluster) over the metadata group: the applied copy answers
// Metadata, DescribeCluster and leadership; topic changes are proposals.
// Every broker keeps its topic store like the metadata (syncTopics, on
// the group's apply goroutine), so a proposal that returns has been
// applied to this broker's store too.
//
// newKafka creates it empty and startCluster binds it, before the Kafka
// listeners serve.
type kafkaCluster struct {
	nodeID int32
	tm     *topics.Manager
	log    zerolog.Logger
	// coordinatorPartitions are the partitions of __consumer_offsets and
	// __transaction_state placed at the first FindCoordinator (Kafka's
	// offsets.topic.num.partitions, transaction.state.log.num.partitions).
	coordinatorPartitions map[string]int32
	// offsetsReplication is offsets-topic-replication-factor: above 1,
	// __consumer_offsets is placed as Raft groups (coordinator failover).
	offsetsReplication int16
	// groups is the group coordinator: it loads and unloads the groups of
	// a replicated __consumer_offsets partition as this broker gains and
	// loses its leadership (cluster_replicas.go).
	groups *groups.Coordinator
	// offsetsReplicated is set once groups was switched to replicated
	// offsets partitions (CoordinatorLeaders).
	offsetsReplicated atomic.Bool
	// txnReplication is transaction-state-log-replication-factor: above
	// 1 (and with txns set), __transaction_state is placed as Raft
	// groups (transaction coordinator failover).
	txnReplication int16
	// txns is the transaction coordinator: it loads and unloads the
	// transactional IDs of a replicated partition as this broker gains
	// and loses its leadership.
	txns *txns.Coordinator
	// txnMarkers: this broker has the marker sender; without it, it
	// places __transaction_state with RF 1.
	txnMarkers bool
	// txnsReplicated is set once txns was switched to replicated
	// partitions (CoordinatorLeaders).
	txnsReplicated atomic.Bool

	node *cluster.Node
	md   *cluster.Metadata
	// replicas runs the replicated partitions' groups (cluster_replicas.go).
	replicas *replicaManager
	// serving is set once the node started (its own snapshot restored),
	// before the transport delivers anything.
	serving atomic.Bool
}

var _ kafkaproto.Cluster = (*kafkaCluster)(nil)

// transactionStatePartitions is Kafka's transaction.state.log.num.partitions default.
const transactionStatePartitions = 50

func newKafkaCluster(cfg *Config, tm *topics.Manager, offsetsPartitions int32, log zerolog.Logger) *kafkaCluster {
	return &kafkaCluster{
		nodeID: cfg.NodeID, tm: tm, log: log.With().Str("component", "cluster-metadata").Logger(),
		coordinatorPartitions: map[string]int32{groups.OffsetsTopic: offsetsPartitions, kafkaproto.TransactionStateTopic: transactionStatePartitions},
		offsetsReplication:    int16(max(cfg.OffsetsTopicReplicationFactor, 1)),
		txnReplication:        int16(max(cfg.TransactionStateLogReplicationFactor, 1)),
	}
}

// syncTopics applies a change of the metadata's topics to the local
// topic store, in log order (called by the metadata state machine on the
// group's goroutine). A snapshot restored at start (serving is false) is
// older than the store and the log replay that follows deletes by ID, so
// it deletes nothing; a snapshot received from the leader is newer than
// anything applied here, so cluster topics it lacks were deleted.
// A failure is logged; the broker serves on with the topic missing or
// stale, as the log says.
func (k *kafkaCluster) syncTopics(c cluster.TopicChange) {
	local := func(t cluster.Topic) topics.ClusterTopic {
		return topics.ClusterTopic{Name: t.Name, ID: t.ID, Partitions: t.Partitions, Configs: t.Configs}
	}
	var err error
	switch {
	case c.Restored:
		want := make([]topics.ClusterTopic, 0, len(c.View.Topics))
		for _, t := range c.View.Topics {
			want = append(want, local(t))
		}
		err = k.tm.SyncClusterTopics(want, k.serving.Load())
	case c.Deleted:
		err = k.tm.DeleteClusterTopic(c.Topic.Name, c.Topic.ID)
	default:
		err = k.tm.ApplyClusterTopic(local(c.Topic))
	}
	if err != nil {
		k.log.Error().Err(err).Str("topic", c.Topic.Name).Msg("this broker's topic store differs from the cluster's metadata")
	}
	if k.replicas != nil {
		k.replicas.changed()
	}
}

// memberIDs are the node IDs of the metadata group's members (a removed
// broker's registration stays in the metadata; it is not served).
func (k *kafkaCluster) memberIDs() map[int32]bool {
	ids := map[int32]bool{}
	for _, m := range k.node.Status().Members {
		ids[int32(m.ID)] = true
	}
	return ids
}

// Brokers implements kafkaproto.Cluster: every registered member, fenced
// ones with Fenced set (placement, coordinator addresses and the marker
// sender's seeds need them all; kafkaproto leaves fenced ones out of
// what it tells clients).
func (k *kafkaCluster) Brokers() []kafkaproto.ClusterBroker {
	members := k.memberIDs()
	var out []kafkaproto.ClusterBroker
	for _, b := range k.md.Brokers() {
		if !members[b.NodeID] {
			continue
		}
		host, portText, err := net.SplitHostPort(b.KafkaAddr)
		port, perr := strconv.ParseInt(portText, 10, 32)
		if err != nil || perr != nil {
			continue // checked when registered
		}
		out = append(out, kafkaproto.ClusterBroker{NodeID: b.NodeID, Host: host, Port: int32(port), Fenced: k.md.Fenced(b.NodeID)})
	}
	return out
}

// Fenced implements kafkaproto.Cluster: the metadata's fencing
// (record 7, proposed by the leader's liveness watch).
func (k *kafkaCluster) Fenced(id int32) bool { return k.md.Fenced(id) }

// brokerIDs are the registered members' IDs, sorted.
func (k *kafkaCluster) brokerIDs() []int32 {
	var ids []int32
	for _, b := range k.Brokers() {
		ids = append(ids, b.NodeID)
	}
	return ids
}

// placementIDs are the registered members that are not fenced
// (cluster_liveness.go), sorted: where new partitions go, as KRaft's
// controller places them on unfenced brokers only.
func (k *kafkaCluster) placementIDs() []int32 {
	var ids []int32
	for _, b := range k.Brokers() {
		if !b.Fenced {
			ids = append(ids, b.NodeID)
		}
	}
	return ids
}

// Controller implements kafkaproto.Cluster.
func (k *kafkaCluster) Controller() int32 {
	if l := k.node.Status().Leader; l != 0 {
		return int32(l)
	}
	return -1
}

// ClusterID implements kafkaproto.Cluster.
func (k *kafkaCluster) ClusterID() string { return k.md.ClusterID() }

// Replicas implements kafkaproto.Cluster: a cluster topic's, or a
// replicated coordinator topic's (its preferred leader first).
func (k *kafkaCluster) Replicas(topic string, p int32) ([]int32, bool) {
	if r, ok := k.md.CoordinatorReplicas(topic, p); ok {
		return r, true
	}
	return k.md.Replicas(topic, p)
}

// CoordinatorLeaders implements kafkaproto.Cluster. For a coordinator
// topic placed with replicas, partition p's coordinator is the current
// leader of its Raft group as recorded by record 8 (-1 while none is),
// so coordinators move with leadership as Kafka's do.
func (k *kafkaCluster) CoordinatorLeaders(topic string) []int32 {
	placed := k.md.CoordinatorLeaders(topic)
	if _, replicated := k.md.CoordinatorGroup(topic, 0); !replicated {
		return placed
	}
	if topic == groups.OffsetsTopic && k.groups != nil && !k.offsetsReplicated.Load() {
		// Before anything is routed by these leaders: a group
		// coordinator still in its local mode would serve the groups of
		// a partition a stale record names this broker the leader of
		// (a restart replaying the metadata log) from its empty local
		// partition.
		k.groups.UseReplicatedOffsets()
		k.offsetsReplicated.Store(true)
	}
	if topic == kafkaproto.TransactionStateTopic {
		k.useReplicatedTxns() // likewise
	}
	leaders := make([]int32, len(placed))
	for p := range placed {
		leaders[p] = -1
		if g, ok := k.md.CoordinatorGroup(topic, int32(p)); ok {
			if l, found := k.md.Leader(g); found {
				leaders[p] = l.Leader
			}
		}
	}
	return leaders
}

// PlaceCoordinator implements kafkaproto.Cluster: the topic's partitions
// round robin over the registered unfenced brokers, once.
func (k *kafkaCluster) PlaceCoordinator(ctx context.Context, topic string) ([]int32, error) {
	n, ok := k.coordinatorPartitions[topic]
	if !ok {
		return nil, fmt.Errorf("no coordinator topic %q", topic)
	}
	// Placed once for good: wait until every voter has registered, so
	// that the coordinators of a new cluster spread over all its brokers
	// (Kafka too answers COORDINATOR_NOT_AVAILABLE until it has the
	// brokers offsets.topic.replication.factor asks for).
	registered := k.brokerIDs()
	for _, m := range k.node.Status().Members {
		if !m.Learner && !slices.Contains(registered, int32(m.ID)) {
			return nil, fmt.Errorf("%w: broker %d has not registered yet; the coordinators are placed once every voter has", kafkaproto.ErrBrokersUnavailable, m.ID)
		}
	}
	rf := int16(1)
	switch {
	case topic == groups.OffsetsTopic:
		rf = k.offsetsReplication
	case topic == kafkaproto.TransactionStateTopic && k.txnMarkers:
		rf = k.txnReplication
	case topic == kafkaproto.TransactionStateTopic && k.txnReplication > 1:
		k.log.Warn().Int16("transaction_state_log_replication_factor", k.txnReplication).
			Msg("__transaction_state is placed with replication factor 1: without the marker sender (a PLAINTEXT first listener) its transactions cannot complete through markers")
	}
	placed := cluster.PlaceReplicas(k.placementIDs(), n, rf, 0)
	if placed == nil {
		return nil, fmt.Errorf("%w: replication factor %d of %s, %d unfenced registered broker(s)", kafkaproto.ErrBrokersUnavailable, rf, topic, len(k.placementIDs()))
	}
	record := cluster.PlaceReplicatedCoordinatorRecord(topic, placed)
	if rf == 1 {
		leaders := make([]int32, n)
		for p, replicas := range placed {
			leaders[p] = replicas[0]
		}
		record = cluster.PlaceCoordinatorRecord(topic, leaders)
	}
	err := k.propose(ctx, record)
	if err != nil && !errors.Is(err, cluster.ErrPlacementExists) {
		return nil, err
	}
	if k.replicas != nil {
		k.replicas.changed() // start the replicas of a replicated placement
	}
	return k.CoordinatorLeaders(topic), nil
}

// CreateTopic implements kafkaproto.Cluster.
func (k *kafkaCluster) CreateTopic(ctx context.Context, t kafkaproto.ClusterTopic) error {
	rf := max(t.ReplicationFactor, 1)
	assignment := t.Assignment
	if assignment == nil {
		ids := k.placementIDs()
		assignment = cluster.PlaceReplicas(ids, t.Partitions, rf, len(k.md.View().Topics))
		if assignment == nil {
			return fmt.Errorf("%w: replication factor %d, %d unfenced registered broker(s)", kafkaproto.ErrBrokersUnavailable, rf, len(ids))
		}
	}
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return fmt.Errorf("%w: cannot generate a topic ID: %w", topics.ErrStorage, err)
	}
	return k.propose(ctx, cluster.CreateTopicRecord(cluster.Topic{
		Name: t.Name, ID: id, Partitions: t.Partitions, ReplicationFactor: rf, Configs: t.Configs, Assignments: assignment,
	}))
}

// DeleteTopic implements kafkaproto.Cluster.
func (k *kafkaCluster) DeleteTopic(ctx context.Context, name string) error {
	return k.propose(ctx, cluster.DeleteTopicRecord(name))
}

// CreatePartitions implements kafkaproto.Cluster. The caller checked the
// count against this broker's copy; the record adds exactly the
// partitions placed here, so a concurrent change that got there first
// makes the count differ and the topic grows by the same number.
func (k *kafkaCluster) CreatePartitions(ctx context.Context, name string, count int32, assignment [][]int32) error {
	t, ok := k.md.Topic(name)
	if !ok {
		return fmt.Errorf("%w: %s", topics.ErrUnknownTopic, name)
	}
	add := count - t.Partitions
	if add <= 0 {
		return fmt.Errorf("%w: topic %s already has %d partition(s)", topics.ErrInvalidPartitions, name, t.Partitions)
	}
	if assignment == nil {
		assignment = cluster.PlaceReplicas(k.placementIDs(), add, max(t.ReplicationFactor, 1), int(t.Partitions))
		if assignment == nil {
			return kafkaproto.ErrBrokersUnavailable
		}
	}
	return k.propose(ctx, cluster.CreatePartitionsRecord(name, assignment))
}

// AlterTopicConfigs implements kafkaproto.Cluster: compare and set on the
// applied configs, again while another change gets there first.
func (k *kafkaCluster) AlterTopicConfigs(ctx context.Context, name string, change func(map[string]string) (map[string]string, error)) error {
	for {
		t, ok := k.md.Topic(name)
		if !ok {
			return fmt.Errorf("%w: %s", topics.ErrUnknownTopic, name)
		}
		next, err := change(t.Configs)
		if err != nil {
			return err
		}
		err = k.propose(ctx, cluster.AlterConfigsRecord(name, t.Configs, next))
		if !errors.Is(err, cluster.ErrConfigsChanged) {
			return err
		}
	}
}

// ReplicatedLog implements kafkaproto.Cluster.
func (k *kafkaCluster) ReplicatedLog(topic string, p int32) kafkaproto.ReplicatedLog {
	g, ok := k.md.PartitionGroup(topic, p)
	if !ok || k.replicas == nil {
		return nil
	}
	return k.replicas.replicatedLog(topic, g)
}

// ReplicatedState implements kafkaproto.Cluster: from the leader record
// (record 8) of the partition's group.
func (k *kafkaCluster) ReplicatedState(topic string, p int32) (leader, epoch int32, isr []int32, ok bool) {
	g, ok := k.md.PartitionGroup(topic, p)
	if !ok {
		g, ok = k.md.CoordinatorGroup(topic, p)
	}
	if !ok {
		return -1, -1, nil, false
	}
	l, found := k.md.Leader(g)
	if !found {
		return -1, 0, nil, true
	}
	return l.Leader, l.Epoch, l.ISR, true
}

// propose proposes a metadata record and maps the group's errors to the
// ones package kafkaproto knows.
func (k *kafkaCluster) propose(ctx context.Context, record []byte) error {
	_, err := k.node.Propose(ctx, record)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, cluster.ErrNoLeader), errors.Is(err, cluster.ErrStopped), errors.Is(err, cluster.ErrProposalLost),
		errors.Is(err, cluster.ErrLeaderChanged):
		// Not applied (ErrLeaderChanged: maybe applied, as a timeout):
		// the client retries (NOT_CONTROLLER is retriable).
		return fmt.Errorf("%w (%v)", kafkaproto.ErrNoController, err)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("the metadata group did not apply the change in time, it may still be applied: %w", err)
	case errors.Is(err, cluster.ErrTopicExists):
		return fmt.Errorf("%w: %w", topics.ErrTopicExists, err)
	case errors.Is(err, cluster.ErrTopicNotFound):
		return fmt.Errorf("%w: %w", topics.ErrUnknownTopic, err)
	}
	return err
}

// AlterGroupConfigs implements kafkaproto.Cluster: compare and set on the
// group's configs in the metadata (record 9), again while another change
// gets there first, as AlterTopicConfigs.
func (k *kafkaCluster) AlterGroupConfigs(ctx context.Context, group string, change func(map[string]string) (map[string]string, error)) error {
	for {
		current := k.md.GroupConfigs(group)
		next, err := change(current)
		if err != nil {
			return err
		}
		err = k.propose(ctx, cluster.AlterGroupConfigsRecord(group, current, next))
		if !errors.Is(err, cluster.ErrConfigsChanged) {
			return err
		}
	}
}

// syncGroupConfigs stores the metadata's group configs in this broker's
// group coordinator (called by the metadata state machine on the group's
// goroutine, in log order), so that DescribeConfigs GROUP and the share
// groups' settings are alike on every broker, the group's coordinator
// included. A snapshot restored at start is older than the store (the log
// replay that follows sets what changed since), so it removes nothing; a
// snapshot from the leader is newer than anything applied here, so
// configs it lacks were removed. A failure is logged; the broker serves
// on with the configs it has.
func (k *kafkaCluster) syncGroupConfigs(c cluster.GroupConfigsChange) {
	if k.groups == nil {
		return
	}
	var err error
	if c.Restored {
		err = k.groups.SyncShareGroupConfigs(c.All, k.serving.Load())
	} else {
		err = k.groups.SetShareGroupConfigs(c.Group, c.Configs)
	}
	if err != nil {
		k.log.Error().Err(err).Str("group", c.Group).Msg("this broker's group configs differ from the cluster's metadata")
	}
}
