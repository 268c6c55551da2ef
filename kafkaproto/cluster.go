package kafkaproto

// A sharded cluster (issue 13, second step): with Config.Cluster set, the
// brokers form one Kafka cluster whose metadata is the metadata Raft
// group's applied copy. Each partition of a cluster topic of replication
// factor 1 lives on one broker, its leader; a partition of a higher factor
// is a Raft group of its replicas, served by its leader (replicated.go);
// the others answer NOT_LEADER_OR_FOLLOWER for it so that clients
// re-route. Topic changes (CreateTopics, DeleteTopics,
// CreatePartitions, AlterConfigs, IncrementalAlterConfigs, auto-creation)
// are proposed to the group from any broker. A group or transactional ID
// is coordinated by the leader of its partition of __consumer_offsets or
// __transaction_state, as in Kafka; the others answer NOT_COORDINATOR.
// Without Config.Cluster (a single node) none of this runs: every check
// below is one nil comparison.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
	"github.com/vibemq/broker/groups"
	"github.com/vibemq/broker/topics"
	"github.com/vibemq/broker/txns"
)

// TransactionStateTopic is Kafka's internal topic of transaction state;
// its partitions place the transaction coordinators in a cluster.
const TransactionStateTopic = "__transaction_state"

// Errors a Cluster returns (errors.go maps them).
var (
	// ErrNoController: no leader of the metadata group is known (an
	// election, or no quorum); Kafka's NOT_CONTROLLER, which clients retry.
	ErrNoController = errors.New("kafkaproto: no controller (metadata raft leader) is known; retry once one is elected")
	// ErrReplicationNotBuilt: a replication factor above 1 refused (not
	// used since partitions replicate; kept for its error mapping).
	ErrReplicationNotBuilt = errors.New("kafkaproto: this replication factor is not supported")
	// ErrNotLeader: this broker does not lead the replicated partition
	// (now); NOT_LEADER_OR_FOLLOWER, the client refreshes its metadata.
	ErrNotLeader = errors.New("kafkaproto: this broker does not lead the partition; refresh metadata and send to its leader")
	// ErrNotEnoughReplicas: fewer in-sync replicas than the topic's
	// min.insync.replicas for an acks=all produce.
	ErrNotEnoughReplicas = errors.New("kafkaproto: fewer in-sync replicas than min.insync.replicas; retry once the replicas are back")
	// ErrBrokersUnavailable: fewer registered brokers than replicas, or a
	// replica assignment naming an unregistered broker.
	ErrBrokersUnavailable = errors.New("kafkaproto: not enough registered brokers for the replicas")
)

// Cluster is the metadata of the cluster a broker serves in and the way
// to change it; cmd/broker implements it over package cluster. Every
// method is safe for concurrent use. Changes return once this broker has
// applied them to its topic store (topics.Manager.SyncClusterTopics).
type Cluster interface {
	// Brokers are the registered brokers, sorted by node ID, fenced
	// ones included (ClusterBroker.Fenced): where the brokers are, for
	// addresses and checks. What clients are told is clusterBrokers.
	Brokers() []ClusterBroker
	// Fenced reports whether the metadata group's leader fenced broker
	// id: it did not hear from it for the broker session timeout
	// (KIP-631). Metadata and DescribeCluster leave it out, and a
	// partition or coordinator it leads has no leader for clients.
	Fenced(id int32) bool
	// Controller is the metadata group's leader, -1 while none is known.
	Controller() int32
	// ClusterID is the cluster's ID, "" before it is known.
	ClusterID() string
	// Replicas are partition p of topic's replicas, the leader first; ok
	// is false for a topic or partition the cluster's metadata lacks (a
	// broker's own topics: queues, event stores, internal topics).
	Replicas(topic string, p int32) (replicas []int32, ok bool)
	// CoordinatorLeaders are the leaders of the partitions of the
	// coordinator topic (groups.OffsetsTopic or TransactionStateTopic),
	// nil while they are not placed; for a topic placed with replicas,
	// the current recorded leaders (-1 for a partition without one).
	CoordinatorLeaders(topic string) []int32
	// PlaceCoordinator places the coordinator topic's partitions over
	// the registered brokers if they are not (a proposal), and returns
	// their leaders.
	PlaceCoordinator(ctx context.Context, topic string) ([]int32, error)
	// CreateTopic proposes a topic (validated by the caller).
	CreateTopic(ctx context.Context, t ClusterTopic) error
	// DeleteTopic proposes the deletion of topic name.
	DeleteTopic(ctx context.Context, name string) error
	// CreatePartitions proposes raising topic name's partition count to
	// count; assignment, when not nil, places the new partitions.
	CreatePartitions(ctx context.Context, name string, count int32, assignment [][]int32) error
	// AlterTopicConfigs proposes the configs that change computes from
	// topic name's current explicit configs (again, when another change
	// was applied first).
	AlterTopicConfigs(ctx context.Context, name string, change func(current map[string]string) (map[string]string, error)) error
	// AlterGroupConfigs proposes the configs that change computes from
	// group's current configs (KIP-932 GROUP resources; again, when
	// another change was applied first); once it returns, every broker
	// that applied it serves them (groups.Coordinator).
	AlterGroupConfigs(ctx context.Context, group string, change func(current map[string]string) (map[string]string, error)) error
	// ReplicatedLog is the log of partition p of a topic with a
	// replication factor above 1 (its Raft group's), nil for any other
	// partition. Its methods answer ErrNotLeader where this broker does
	// not lead it.
	ReplicatedLog(topic string, p int32) ReplicatedLog
	// ReplicatedState is the leader (-1 when none is recorded), leader
	// epoch and ISR of partition p of a replicated topic as the metadata
	// has them; ok is false for any other partition.
	ReplicatedState(topic string, p int32) (leader, epoch int32, isr []int32, ok bool)
}

// ReplicatedLog is a replicated partition's log as its leader serves it
// (replicated.go): the Raft group's log is the partition log.
type ReplicatedLog interface {
	// LeaderEpoch is the partition leader epoch (the Raft term) when this
	// broker leads the partition, else ErrNotLeader.
	LeaderEpoch() (int32, error)
	// Append starts replicating one record batch and returns the wait for
	// its base offset, known once it is committed (on a majority, durably)
	// and applied; a duplicate of an idempotent producer's batch gets its
	// original base offset. Batches appended one after the other by one
	// goroutine reach the log in that order (a connection's pipelined
	// Produce requests: an idempotent producer's sequence order). acksAll
	// checks min.insync.replicas first (ErrNotEnoughReplicas).
	Append(ctx context.Context, batch []byte, acksAll bool) func() (int64, error)
	// Read appends the batches from the one holding offset on, up to
	// maxBytes (the first whole when minOne), to dst.
	Read(offset int64, maxBytes int, minOne bool, dst []byte) ([]byte, error)
	// HighWatermark is the next offset (every offset below is committed).
	HighWatermark() int64
	// EndOffsetForEpoch is OffsetForLeaderEpoch's (epoch, end offset).
	EndOffsetForEpoch(epoch int32) (int32, int64)
	// OffsetForTimestamp is the first batch with a max timestamp at or
	// after ts (-1, -1 when none); MaxTimestamp the batch of the largest.
	OffsetForTimestamp(ts int64) (offset, timestamp int64)
	MaxTimestamp() (offset, timestamp int64)
	// AddWaiter and RemoveWaiter register a channel signalled when a batch
	// is applied (long-polling fetches).
	AddWaiter(w chan struct{})
	RemoveWaiter(w chan struct{})
	// LogStart is the log start offset, the same on every replica at
	// every log position (moved by retention and DeleteRecords).
	LogStart() int64
	// DeleteRecords moves the log start to offset (-1: the high
	// watermark) through the group's log and returns the log start once
	// applied, i.e. committed on a majority (an offset at or below it
	// answers it at once); above the high watermark ErrOffsetOutOfRange.
	DeleteRecords(ctx context.Context, offset int64) (int64, error)
	// LastStableOffset is the offset below which every transaction is
	// ended (KIP-98): the first offset of the oldest ongoing transaction,
	// else the high watermark; never below the log start.
	LastStableOffset() int64
	// AbortedTransactions is the aborted transactions whose data may lie
	// in [from, to] (marker at or after from, first offset at or before
	// to), for read_committed fetches.
	AbortedTransactions(from, to int64) []topics.AbortedTxn
	// WriteMarker starts ending the producer's transaction on the
	// partition with a COMMIT or ABORT control batch proposed through
	// the group's log (on the leader, else ErrNotLeader) and returns the
	// wait for it, answered once committed and applied. A marker that
	// ends nothing is answered nil and writes nothing; an epoch older
	// than the producer's is topics.ErrInvalidProducerEpoch.
	WriteMarker(ctx context.Context, producerID int64, epoch int16, commit bool, coordinatorEpoch int32) func() error
	// Producers is the producers the partition's state machine keeps
	// (DescribeProducers, KIP-664), by producer ID, on the leader, else
	// ErrNotLeader.
	Producers() ([]topics.ProducerInfo, error)
}

// ClusterBroker is a registered broker: node ID, advertised address, and
// whether it is fenced (Cluster.Fenced).
type ClusterBroker struct {
	NodeID int32
	Host   string
	Port   int32
	Fenced bool
}

// ClusterTopic is a topic to create in the cluster.
type ClusterTopic struct {
	Name              string
	Partitions        int32
	ReplicationFactor int16
	// Assignment places each partition's replicas (the leader first);
	// nil places them round robin over the registered brokers.
	Assignment [][]int32
	Configs    map[string]string
}

// clusterTimeout bounds a proposal made for a request whose own timeout
// is absent or unusable.
const clusterTimeout = 30 * time.Second

// clusterContext bounds a proposal by the request's timeout in
// milliseconds (CreateTopics, DeleteTopics, CreatePartitions), 30 s when
// it has none.
func clusterContext(timeoutMillis int32) (context.Context, context.CancelFunc) {
	d := clusterTimeout
	if timeoutMillis > 0 && time.Duration(timeoutMillis)*time.Millisecond < d {
		d = time.Duration(timeoutMillis) * time.Millisecond
	}
	return context.WithTimeout(context.Background(), d)
}

// leads reports whether this broker leads partition p of topic: always on
// a single node and for topics the cluster's metadata does not have.
func (s *Server) leads(topic string, p int32) bool {
	if s.cfg.Cluster == nil {
		return true
	}
	if leader, _, _, ok := s.cfg.Cluster.ReplicatedState(topic, p); ok {
		return leader == s.cfg.NodeID
	}
	replicas, ok := s.cfg.Cluster.Replicas(topic, p)
	return !ok || replicas[0] == s.cfg.NodeID
}

// errNotShareLeader answers ShareFetch and ShareAcknowledge for a
// partition another broker leads (NOT_LEADER_OR_FOLLOWER, as Kafka's
// share-partition leader answers).
var errNotShareLeader = errors.New("kafkaproto: another broker leads this partition, where its share-partition state lives; refresh metadata and send to the leader")

// errShareReplicated answers ShareFetch and ShareAcknowledge for a
// partition of a topic with a replication factor above 1: its
// share-partition state is not replicated yet (DESIGN.md "Replicating
// queues and event stores: the plan"), and a share-partition over the
// leader's local partition would deliver nothing, silently. Kafka has no
// code for it; INVALID_REPLICATION_FACTOR names the cause and is not
// retriable, so clients surface it (franz-go as the partition's fetch
// error, the Java KafkaShareConsumer's poll as an unexpected error code).
var errShareReplicated = errors.New("kafkaproto: share groups cannot consume a topic with a replication factor above 1 yet (its share-partition state is not replicated); use a topic of replication factor 1 or a consumer group")

// shareRefused is why a ShareFetch or ShareAcknowledge partition of topic
// id is not served here: the principal may not READ the topic
// (errTopicAuthorization), the topic is replicated (errShareReplicated,
// on every broker alike), or another broker leads the partition
// (errNotShareLeader); nil to serve it. An unknown topic ID is left to
// the share-partition's own answer.
func (s *Server) shareRefused(r *request, id [16]byte, p int32) error {
	t, ok := s.topics.TopicByID(id)
	switch {
	case !ok:
		return nil
	case !r.allowedTopic(auth.OpRead, t.Name):
		return errTopicAuthorization
	case s.replicatedLog(t.Name, p) != nil:
		s.warnLimited("share-replicated", func(e *zerolog.Event) {
			e.Str("topic", t.Name).Msg("a share group fetched a topic with a replication factor above 1, which share groups do not serve yet; " +
				"its consumers get INVALID_REPLICATION_FACTOR: give them a topic of replication factor 1")
		})
		return errShareReplicated
	case !s.leads(t.Name, p):
		return errNotShareLeader
	}
	return nil
}

// notGroupCoordinator reports whether, in a cluster, another broker
// coordinates group (or none is placed yet): its requests here are
// answered NOT_COORDINATOR and the client finds the coordinator again.
func (s *Server) notGroupCoordinator(group string) bool {
	return s.notCoordinator(groups.OffsetsTopic, group)
}

// notTxnCoordinator is notGroupCoordinator for a transactional ID.
func (s *Server) notTxnCoordinator(id string) bool {
	return s.notCoordinator(TransactionStateTopic, id)
}

// coordinatedElsewhere reports whether a transactional Produce of
// transactional ID id is for a transaction another broker coordinates,
// in a cluster whose coordinators send markers between brokers (C3 of the
// plan in DESIGN.md, issue 13): its partition leader accepts the batch
// without txns.CheckProduce.
func (s *Server) coordinatedElsewhere(id *string) bool {
	return s.cfg.CrossBrokerTxns && s.cfg.Cluster != nil && id != nil && s.notTxnCoordinator(*id)
}

func (s *Server) notCoordinator(topic, key string) bool {
	if s.cfg.Cluster == nil {
		return false
	}
	leaders := s.cfg.Cluster.CoordinatorLeaders(topic)
	if len(leaders) == 0 || coordinatorOf(leaders, key) != s.cfg.NodeID {
		return true
	}
	// A replicated __consumer_offsets or __transaction_state partition
	// is served once this broker has loaded it (groups/replicated.go,
	// txns/replicated.go).
	switch topic {
	case groups.OffsetsTopic:
		return s.cfg.Groups != nil && s.cfg.Groups.Serves(key) != nil
	case TransactionStateTopic:
		return s.cfg.Txns != nil && s.cfg.Txns.Serves(key) != nil
	}
	return false
}

// txnCoordinatorCode is groupCoordinatorCode for a transactional ID:
// COORDINATOR_LOAD_IN_PROGRESS while this broker loads its replicated
// partition of __transaction_state, else NOT_COORDINATOR.
func (s *Server) txnCoordinatorCode(id string) int16 {
	if s.cfg.Txns != nil && errors.Is(s.cfg.Txns.Serves(id), txns.ErrCoordinatorLoadInProgress) {
		leaders := s.cfg.Cluster.CoordinatorLeaders(TransactionStateTopic)
		if len(leaders) > 0 && coordinatorOf(leaders, id) == s.cfg.NodeID {
			return kerr.CoordinatorLoadInProgress.Code
		}
	}
	return kerr.NotCoordinator.Code
}

// groupCoordinatorCode is the error a group request answers when
// notGroupCoordinator: COORDINATOR_LOAD_IN_PROGRESS while this broker,
// the group's coordinator, loads its replicated partition of
// __consumer_offsets (the client retries here), else NOT_COORDINATOR (it
// finds the coordinator again).
func (s *Server) groupCoordinatorCode(group string) int16 {
	if s.cfg.Groups != nil && errors.Is(s.cfg.Groups.Serves(group), groups.ErrCoordinatorLoadInProgress) {
		leaders := s.cfg.Cluster.CoordinatorLeaders(groups.OffsetsTopic)
		if len(leaders) > 0 && coordinatorOf(leaders, group) == s.cfg.NodeID {
			return kerr.CoordinatorLoadInProgress.Code
		}
	}
	return kerr.NotCoordinator.Code
}

// coordinatorOf is the leader of key's partition, Kafka's
// abs(key.hashCode()) % partitions (GroupCoordinator.partitionFor,
// TransactionStateManager.partitionFor).
// REQUIRES: len(leaders) > 0.
func coordinatorOf(leaders []int32, key string) int32 {
	return leaders[groups.PartitionFor(key, int32(len(leaders)))]
}

// listedBroker is a broker Metadata or DescribeCluster lists.
type listedBroker struct {
	kmsg.MetadataResponseBroker
	fenced bool
}

// clusterBrokers are the brokers of a cluster as Metadata and
// DescribeCluster list them: this broker as the listener c came in on
// advertises it, the others as registered. A fenced broker, this one
// included, is left out unless withFenced (DescribeCluster v2
// IncludeFencedBrokers, KIP-1073), as Kafka's KafkaApis lists
// KRaftMetadataCache.getAliveBrokerNodes (getBrokerNodes with the flag),
// so that clients stop dialing a dead broker and look for the new
// leaders and coordinators. This broker before it is registered is
// listed: clients still reach it.
func (s *Server) clusterBrokers(c *conn, withFenced bool) []listedBroker {
	self := s.brokerEntry(c)
	out := []listedBroker{}
	seenSelf := false
	for _, b := range s.cfg.Cluster.Brokers() {
		if b.Fenced && !withFenced {
			seenSelf = seenSelf || b.NodeID == s.cfg.NodeID
			continue
		}
		if b.NodeID == s.cfg.NodeID {
			out = append(out, listedBroker{self, b.Fenced})
			seenSelf = true
			continue
		}
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID, mb.Host, mb.Port = b.NodeID, b.Host, b.Port
		out = append(out, listedBroker{mb, b.Fenced})
	}
	if !seenSelf { // not registered yet: clients still reach this broker
		out = append(out, listedBroker{MetadataResponseBroker: self})
	}
	return out
}

// brokerFenced reports whether broker id is fenced in a cluster: a
// partition or coordinator it leads is shown without a leader.
func (s *Server) brokerFenced(id int32) bool {
	return s.cfg.Cluster != nil && id >= 0 && s.cfg.Cluster.Fenced(id)
}

// clusterController is the controller ID Metadata and DescribeCluster
// report: the metadata group's leader, this node on a single node.
func (s *Server) clusterController() int32 {
	if s.cfg.Cluster == nil {
		return s.cfg.NodeID
	}
	return s.cfg.Cluster.Controller()
}

// clusterID is the cluster ID Metadata and DescribeCluster report.
func (s *Server) clusterID() string {
	if s.cfg.Cluster != nil {
		if id := s.cfg.Cluster.ClusterID(); id != "" {
			return id
		}
	}
	return s.cfg.ClusterID
}

// partitionReplicas are the leader and replicas Metadata reports for
// partition p of topic t: from the cluster's assignment, from the
// coordinator placement for __consumer_offsets and __transaction_state
// (no leader while it is not known), else this broker.
func (s *Server) partitionReplicas(t *topics.Topic, p int32) (leader int32, replicas []int32) {
	self := []int32{s.cfg.NodeID}
	if s.cfg.Cluster == nil {
		return s.cfg.NodeID, self
	}
	if r, ok := s.cfg.Cluster.Replicas(t.Name, p); ok {
		return r[0], r
	}
	if t.IsClusterTopic() { // a partition the metadata does not place
		return -1, []int32{}
	}
	if t.Name == groups.OffsetsTopic || t.Name == TransactionStateTopic {
		// The coordinator of the groups (IDs) of partition p leads it.
		if leaders := s.cfg.Cluster.CoordinatorLeaders(t.Name); len(leaders) > 0 {
			id := leaders[int(p)%len(leaders)]
			return id, []int32{id}
		}
		// Not placed in the metadata this broker applied (yet: a
		// restarted broker replaying its log): no leader to name, not
		// this broker's local copy.
		return -1, []int32{}
	}
	return s.cfg.NodeID, self
}

// clusterTopic reports whether topic name is a cluster topic, whose
// changes go through the cluster's metadata.
func (s *Server) clusterTopic(name string) bool {
	if s.cfg.Cluster == nil {
		return false
	}
	t, ok := s.topics.Topic(name)
	return ok && t.IsClusterTopic()
}

// alterClusterTopicConfigs proposes the configs next computes from the
// current ones (AlterConfigs, IncrementalAlterConfigs); with validateOnly
// it computes them from this broker's copy and proposes nothing.
func (s *Server) alterClusterTopicConfigs(name string, validateOnly bool, next func(map[string]string) (map[string]string, error)) error {
	if validateOnly {
		t, ok := s.topics.Topic(name)
		if !ok {
			return fmt.Errorf("%w: %s", topics.ErrUnknownTopic, name)
		}
		_, err := next(t.Configs())
		return err
	}
	ctx, cancel := clusterContext(0)
	defer cancel()
	return s.cfg.Cluster.AlterTopicConfigs(ctx, name, next)
}
