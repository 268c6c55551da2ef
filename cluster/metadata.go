package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
)

// The metadata group is the cluster's controller log, as KRaft's
// __cluster_metadata (KIP-500, KIP-631): every change of the cluster's
// metadata is a record in the log of Raft group 0, and every broker keeps
// the applied copy. A record is one type byte, then its JSON body; the
// types and member names are part of the file format (records stay in
// the log and in snapshots).
const (
	recordRegisterBroker byte = 1
	recordCreateTopic    byte = 2
	recordDeleteTopic    byte = 3
	// Issue 13 step 2: partition assignments (in the topic record),
	// partitions added, topic configs changed, coordinator placement.
	recordCreatePartitions byte = 4
	recordAlterConfigs     byte = 5
	recordPlaceCoordinator byte = 6
	// Liveness: a broker fenced or unfenced by the leader (KIP-631's
	// BrokerRegistrationChangeRecord fenced field).
	recordFenceBroker byte = 7
	// Issue 13 step 3: a replicated partition's leader, leader epoch and
	// ISR, proposed by the replica that leads its Raft group (KRaft's
	// PartitionChangeRecord; ISR changes as AlterPartition, KIP-497).
	recordPartitionLeader byte = 8
	// Group configs (KIP-932 share.*, IncrementalAlterConfigs GROUP), kept
	// in the metadata as Kafka's controller keeps ConfigResource GROUP.
	recordAlterGroupConfigs byte = 9
)

var (
	// ErrTopicExists: a CreateTopic record names a topic that exists.
	ErrTopicExists = errors.New("cluster: topic already exists")
	// ErrTopicNotFound: a DeleteTopic record names no topic.
	ErrTopicNotFound = errors.New("cluster: topic does not exist")
	// ErrBadRecord: a record that cannot be applied (unknown type, bad
	// body, invalid fields); it changes nothing on any replica.
	ErrBadRecord = errors.New("cluster: metadata record cannot be applied")
	// ErrConfigsChanged: an AlterConfigs record was computed from configs
	// that another record changed since; recompute from the applied copy
	// and propose again.
	ErrConfigsChanged = errors.New("cluster: the configs changed since the change was computed; retry")
	// ErrPlacementExists: a coordinator placement record for a placement
	// that exists; the applied one stands.
	ErrPlacementExists = errors.New("cluster: the coordinator placement exists")
	// ErrStaleLeader: a partition leader record older than the applied
	// one (a lower leader epoch); the applied one stands.
	ErrStaleLeader = errors.New("cluster: the partition leader record is older than the applied one")
)

// Broker is a broker's registration: its node ID and the Kafka address it
// advertises to clients.
type Broker struct {
	NodeID    int32  `json:"node_id"`
	KafkaAddr string `json:"kafka_addr"`
	// HTTPAddr is its HTTP listener, when dialable (empty for a listen
	// address such as :8080); named in a follower's answer to add-node.
	HTTPAddr string `json:"http_addr,omitempty"`
	// ClusterID is the Kafka cluster ID of the broker's store; the first
	// registration that carries one names the cluster (Metadata,
	// DescribeCluster), so every broker reports the same ID.
	ClusterID string `json:"cluster_id,omitempty"`
}

// Topic is a topic as the controller knows it.
type Topic struct {
	Name              string            `json:"name"`
	ID                [16]byte          `json:"id"`
	Partitions        int32             `json:"partitions"`
	ReplicationFactor int16             `json:"replication_factor"`
	Configs           map[string]string `json:"configs,omitempty"`
	// Assignments are the replicas of each partition, the leader first
	// (Kafka's PartitionRecord replicas and leader): len(Assignments) ==
	// Partitions. Records written before assignments existed have none,
	// and their partitions no leader.
	Assignments [][]int32 `json:"assignments,omitempty"`
	// Groups are the Raft groups of the partitions of a topic with a
	// replication factor above 1, one per partition, assigned when the
	// record is applied from the state's counter (a proposal's value is
	// ignored), so alike on every replica. Empty for RF 1.
	Groups []uint64 `json:"groups,omitempty"`
}

// PartitionLeader is a replicated partition's leader as its Raft group's
// leader proposed it (record 8): Epoch is the group's Raft term (the
// partition leader epoch, KIP-101/KIP-320), ISR its in-sync view.
type PartitionLeader struct {
	TopicID   [16]byte `json:"topic_id"`
	Partition int32    `json:"partition"`
	Leader    int32    `json:"leader"`
	Epoch     int32    `json:"epoch"`
	ISR       []int32  `json:"isr"`
	// Coordinator names a replicated coordinator topic
	// (__consumer_offsets placed with replicas, record 6) instead of
	// TopicID: such a topic is no cluster topic and has no ID.
	Coordinator string `json:"coordinator,omitempty"`
}

// PartitionLeaderRecord is the command that records a replicated
// partition's leader, epoch and ISR (ErrStaleLeader for an older epoch).
func PartitionLeaderRecord(l PartitionLeader) []byte {
	return encodeRecord(recordPartitionLeader, l)
}

type deleteTopic struct {
	Name string `json:"name"`
}

// createPartitions adds partitions to a topic (Kafka's CreatePartitions):
// Assignments are the new partitions', in order.
type createPartitions struct {
	Name        string    `json:"name"`
	Assignments [][]int32 `json:"assignments"`
}

// alterConfigs replaces a topic's explicit configs by Configs, if they
// are still Base (compare and set: the proposer computed Configs from
// Base, as IncrementalAlterConfigs computes from the current set).
type alterConfigs struct {
	Name    string            `json:"name"`
	Base    map[string]string `json:"base"`
	Configs map[string]string `json:"configs"`
}

// alterGroupConfigs (record 9) replaces a group's configs by Configs, if
// they are still Base, compare and set as alterConfigs (an empty Base is
// a group without configs). Empty Configs remove the group's entry. The
// group need not exist (Kafka accepts configs of any group name); the
// values were validated by the proposing broker.
type alterGroupConfigs struct {
	Group   string            `json:"group"`
	Base    map[string]string `json:"base"`
	Configs map[string]string `json:"configs"`
}

// AlterGroupConfigsRecord is the command that replaces the configs of
// group by configs, if they are base when it is applied (else
// ErrConfigsChanged).
func AlterGroupConfigsRecord(group string, base, configs map[string]string) []byte {
	if base == nil {
		base = map[string]string{}
	}
	if configs == nil {
		configs = map[string]string{}
	}
	return encodeRecord(recordAlterGroupConfigs, alterGroupConfigs{Group: group, Base: base, Configs: configs})
}

// placeCoordinator fixes the leaders of the partitions of a coordinator's
// internal topic (__consumer_offsets, __transaction_state): the broker
// that leads partition hash(key) % len(Leaders) coordinates key. Placed
// once. With Replicas (offsets-topic-replication-factor above 1) each
// partition is a Raft group of its replicas, as a replicated topic's
// (group IDs assigned at apply), and its coordinator is the group's
// current leader (record 8); Leaders are then the preferred leaders.
type placeCoordinator struct {
	Name     string    `json:"name"`
	Leaders  []int32   `json:"leaders"`
	Replicas [][]int32 `json:"replicas,omitempty"`
}

// fenceBroker fences a registered broker (new partitions are not placed
// on it) or unfences it. The metadata group's leader proposes it when its
// Raft view of the broker changes (cmd/broker: the broker stopped
// answering for a session timeout, or answers again), as KRaft's
// controller fences a broker that misses its heartbeats (KIP-631).
type fenceBroker struct {
	NodeID int32 `json:"node_id"`
	Fenced bool  `json:"fenced"`
}

// FenceBrokerRecord is the command that fences (or unfences) broker id.
func FenceBrokerRecord(id int32, fenced bool) []byte {
	return encodeRecord(recordFenceBroker, fenceBroker{NodeID: id, Fenced: fenced})
}

// RegisterBrokerRecord is the command that registers (or re-registers,
// with a new address) a broker.
func RegisterBrokerRecord(b Broker) []byte { return encodeRecord(recordRegisterBroker, b) }

// CreateTopicRecord is the command that creates a topic.
func CreateTopicRecord(t Topic) []byte { return encodeRecord(recordCreateTopic, t) }

// DeleteTopicRecord is the command that deletes a topic.
func DeleteTopicRecord(name string) []byte {
	return encodeRecord(recordDeleteTopic, deleteTopic{Name: name})
}

// CreatePartitionsRecord is the command that adds partitions, with their
// assignments, to topic name.
func CreatePartitionsRecord(name string, assignments [][]int32) []byte {
	return encodeRecord(recordCreatePartitions, createPartitions{Name: name, Assignments: assignments})
}

// AlterConfigsRecord is the command that replaces the explicit configs of
// topic name by configs, if they are base when it is applied (else
// ErrConfigsChanged).
func AlterConfigsRecord(name string, base, configs map[string]string) []byte {
	if base == nil {
		base = map[string]string{}
	}
	if configs == nil {
		configs = map[string]string{}
	}
	return encodeRecord(recordAlterConfigs, alterConfigs{Name: name, Base: base, Configs: configs})
}

// PlaceCoordinatorRecord is the command that places the partitions of
// the coordinator topic name (ErrPlacementExists once placed).
func PlaceCoordinatorRecord(name string, leaders []int32) []byte {
	return encodeRecord(recordPlaceCoordinator, placeCoordinator{Name: name, Leaders: leaders})
}

// PlaceReplicatedCoordinatorRecord places the coordinator topic name's
// partitions as Raft groups of replicas (the preferred leader first).
func PlaceReplicatedCoordinatorRecord(name string, replicas [][]int32) []byte {
	leaders := make([]int32, len(replicas))
	for p, r := range replicas {
		leaders[p] = r[0]
	}
	return encodeRecord(recordPlaceCoordinator, placeCoordinator{Name: name, Leaders: leaders, Replicas: replicas})
}

func encodeRecord(kind byte, body any) []byte {
	b, err := json.Marshal(body)
	if err != nil {
		panic(fmt.Sprintf("cluster: encode metadata record %d: %v", kind, err)) // plain structs always encode
	}
	return append([]byte{kind}, b...)
}

// metadataState is the applied copy; also the snapshot's JSON form.
type metadataState struct {
	Applied uint64           `json:"applied"`
	Brokers map[int32]Broker `json:"brokers"`
	Topics  map[string]Topic `json:"topics"`
	// ClusterID is the first registered broker's cluster ID.
	ClusterID string `json:"cluster_id,omitempty"`
	// Coordinators are the placed coordinator topics' partition leaders.
	Coordinators map[string][]int32 `json:"coordinators,omitempty"`
	// Fenced are the registered brokers fenced by the leader (record 7):
	// placement skips them. A registration leaves it as it is.
	Fenced map[int32]bool `json:"fenced,omitempty"`
	// NextGroup is the Raft group ID the next replicated partition gets
	// (0 stands for 1: group 0 is the metadata group).
	NextGroup uint64 `json:"next_group,omitempty"`
	// Leaders are the replicated partitions' leaders (record 8), by
	// Raft group.
	Leaders map[uint64]PartitionLeader `json:"leaders,omitempty"`
	// CoordinatorReplicas and CoordinatorGroups are the replicas and Raft
	// groups of a coordinator topic placed with replicas (record 6).
	CoordinatorReplicas map[string][][]int32 `json:"coordinator_replicas,omitempty"`
	CoordinatorGroups   map[string][]uint64  `json:"coordinator_groups,omitempty"`
	// GroupConfigs are the groups' configs (record 9), by group; a group
	// without configs has no entry (none in snapshots before record 9).
	GroupConfigs map[string]map[string]string `json:"group_configs,omitempty"`
}

// Metadata is the metadata group's state machine: broker registrations
// and topics, applied in log order. The node's goroutine applies; any
// goroutine reads View. mu is a leaf. Slices in the state (assignments,
// leaders) are never changed in place, only replaced, so readers may keep
// the ones they got.
type Metadata struct {
	mu    sync.RWMutex
	state metadataState
	// onTopics is called after every applied record that changes topics
	// and after Restore, on the applying goroutine, without mu.
	onTopics func(TopicChange)
	// onGroupConfigs is called after every applied record 9 and after
	// Restore, as onTopics.
	onGroupConfigs func(GroupConfigsChange)
}

// GroupConfigsChange is a change of the groups' configs as applied: one
// group's new configs (empty: none left), or, Restored, all of them.
type GroupConfigsChange struct {
	Restored bool
	// All are every group's configs after a restore (Restored).
	All map[string]map[string]string
	// Group and Configs are one record's (not Restored).
	Group   string
	Configs map[string]string
}

// OnGroupConfigsChanged sets f to be called after every record that
// changes a group's configs and after a snapshot is restored, on the
// applying goroutine, in log order, as OnTopicsChanged: a broker stores
// them in its group coordinator. Set it before the node starts; f must
// not propose.
func (m *Metadata) OnGroupConfigsChanged(f func(GroupConfigsChange)) { m.onGroupConfigs = f }

// TopicChange is a change of the topics as applied: one record's topic,
// or a whole restored snapshot.
type TopicChange struct {
	// Restored: a snapshot replaced the state; View is the whole state.
	Restored bool
	View     MetadataView
	// Topic is the topic a record created or changed (as it is now), or
	// deleted (as it was, Deleted set).
	Topic   Topic
	Deleted bool
}

// OnTopicsChanged sets f to be called after every record that changes a
// topic and after a snapshot is restored, on the applying goroutine (so
// before Propose returns to the proposer), in log order. A broker uses
// it to keep its local topic store like the metadata: records, replayed
// at start from the log after the node's snapshot, carry the topic's ID
// so that applying one again never touches a later topic of the same
// name. Set it before the node starts; f must not propose.
func (m *Metadata) OnTopicsChanged(f func(TopicChange)) { m.onTopics = f }

// NewMetadata is an empty metadata state machine.
func NewMetadata() *Metadata {
	return &Metadata{state: metadataState{Brokers: map[int32]Broker{}, Topics: map[string]Topic{}}}
}

// Apply implements StateMachine.
func (m *Metadata) Apply(e Entry) error {
	m.mu.Lock()
	m.state.Applied = e.Index
	if len(e.Data) > 0 && e.Data[0] == recordAlterGroupConfigs {
		gc, err := m.alterGroupConfigsLocked(e.Index, e.Data[1:])
		m.mu.Unlock()
		if err == nil && m.onGroupConfigs != nil {
			m.onGroupConfigs(gc)
		}
		return err
	}
	change, err := m.applyLocked(e)
	m.mu.Unlock()
	if err == nil && change != nil && m.onTopics != nil {
		m.onTopics(*change)
	}
	return err
}

// alterGroupConfigsLocked applies record 9. REQUIRES: m.mu held.
func (m *Metadata) alterGroupConfigsLocked(index uint64, body []byte) (GroupConfigsChange, error) {
	var a alterGroupConfigs
	if err := json.Unmarshal(body, &a); err != nil || a.Group == "" {
		return GroupConfigsChange{}, fmt.Errorf("%w: group config change at %d needs a group name", ErrBadRecord, index)
	}
	if !maps.Equal(m.state.GroupConfigs[a.Group], a.Base) {
		return GroupConfigsChange{}, fmt.Errorf("%w: group %q", ErrConfigsChanged, a.Group)
	}
	if len(a.Configs) == 0 {
		delete(m.state.GroupConfigs, a.Group)
	} else {
		if m.state.GroupConfigs == nil {
			m.state.GroupConfigs = map[string]map[string]string{}
		}
		m.state.GroupConfigs[a.Group] = a.Configs
	}
	return GroupConfigsChange{Group: a.Group, Configs: maps.Clone(a.Configs)}, nil
}

// GroupConfigs are the applied configs of group (a copy; empty when none).
func (m *Metadata) GroupConfigs(group string) map[string]string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return maps.Clone(m.state.GroupConfigs[group])
}

// allGroupConfigs copies every group's configs. REQUIRES: m.mu held.
func (m *Metadata) allGroupConfigs() map[string]map[string]string {
	out := make(map[string]map[string]string, len(m.state.GroupConfigs))
	for g, c := range m.state.GroupConfigs {
		out[g] = maps.Clone(c)
	}
	return out
}

// applyLocked applies one record; change is the topic it changed, if any.
// REQUIRES: m.mu held.
func (m *Metadata) applyLocked(e Entry) (change *TopicChange, err error) {
	if len(e.Data) == 0 {
		return nil, fmt.Errorf("%w: empty record at %d", ErrBadRecord, e.Index)
	}
	body := e.Data[1:]
	switch e.Data[0] {
	case recordRegisterBroker:
		var b Broker
		if err := json.Unmarshal(body, &b); err != nil || b.NodeID <= 0 || b.KafkaAddr == "" {
			return nil, fmt.Errorf("%w: broker registration at %d needs a node ID > 0 and an address", ErrBadRecord, e.Index)
		}
		m.state.Brokers[b.NodeID] = b
		if m.state.ClusterID == "" {
			m.state.ClusterID = b.ClusterID
		}
		return nil, nil
	case recordCreateTopic:
		return m.changed(m.createTopicLocked(e.Index, body))
	case recordDeleteTopic:
		var d deleteTopic
		if err := json.Unmarshal(body, &d); err != nil {
			return nil, fmt.Errorf("%w: topic deletion at %d: %v", ErrBadRecord, e.Index, err)
		}
		t, ok := m.state.Topics[d.Name]
		if !ok {
			return nil, fmt.Errorf("%w: %q", ErrTopicNotFound, d.Name)
		}
		delete(m.state.Topics, d.Name)
		for _, g := range t.Groups {
			delete(m.state.Leaders, g)
		}
		return &TopicChange{Topic: t, Deleted: true}, nil
	case recordCreatePartitions:
		return m.changed(m.createPartitionsLocked(e.Index, body))
	case recordAlterConfigs:
		return m.changed(m.alterConfigsLocked(e.Index, body))
	case recordFenceBroker:
		var f fenceBroker
		if err := json.Unmarshal(body, &f); err != nil {
			return nil, fmt.Errorf("%w: broker fencing at %d: %v", ErrBadRecord, e.Index, err)
		}
		if _, ok := m.state.Brokers[f.NodeID]; !ok {
			return nil, fmt.Errorf("%w: broker fencing at %d names broker %d, which is not registered", ErrBadRecord, e.Index, f.NodeID)
		}
		if !f.Fenced {
			delete(m.state.Fenced, f.NodeID)
			return nil, nil
		}
		if m.state.Fenced == nil {
			m.state.Fenced = map[int32]bool{}
		}
		m.state.Fenced[f.NodeID] = true
		return nil, nil
	case recordPartitionLeader:
		return nil, m.partitionLeaderLocked(e.Index, body)
	case recordPlaceCoordinator:
		var p placeCoordinator
		if err := json.Unmarshal(body, &p); err != nil || p.Name == "" || len(p.Leaders) == 0 {
			return nil, fmt.Errorf("%w: coordinator placement at %d needs a name and leaders", ErrBadRecord, e.Index)
		}
		if _, ok := m.state.Coordinators[p.Name]; ok {
			return nil, fmt.Errorf("%w: %s", ErrPlacementExists, p.Name)
		}
		if p.Replicas != nil && !validAssignments(p.Replicas, len(p.Leaders)) {
			return nil, fmt.Errorf("%w: coordinator placement at %d needs one non-empty replica list per partition", ErrBadRecord, e.Index)
		}
		if m.state.Coordinators == nil {
			m.state.Coordinators = map[string][]int32{}
		}
		m.state.Coordinators[p.Name] = p.Leaders
		if p.Replicas != nil {
			if m.state.CoordinatorReplicas == nil {
				m.state.CoordinatorReplicas, m.state.CoordinatorGroups = map[string][][]int32{}, map[string][]uint64{}
			}
			m.state.CoordinatorReplicas[p.Name] = p.Replicas
			m.state.CoordinatorGroups[p.Name] = m.newGroupsLocked(len(p.Replicas))
		}
		return nil, nil
	default:
		return nil, fmt.Errorf("%w: unknown record type %d at %d (written by a newer broker?)", ErrBadRecord, e.Data[0], e.Index)
	}
}

// changed is the TopicChange of a record that created or changed topic
// name, or its error. REQUIRES: m.mu held.
func (m *Metadata) changed(name string, err error) (*TopicChange, error) {
	if err != nil {
		return nil, err
	}
	t := m.state.Topics[name]
	t.Configs = maps.Clone(t.Configs)
	return &TopicChange{Topic: t}, nil
}

func (m *Metadata) createTopicLocked(index uint64, body []byte) (string, error) {
	var t Topic
	if err := json.Unmarshal(body, &t); err != nil || strings.TrimSpace(t.Name) == "" || t.Partitions <= 0 {
		return "", fmt.Errorf("%w: topic creation at %d needs a name and at least one partition", ErrBadRecord, index)
	}
	if t.Assignments != nil && !validAssignments(t.Assignments, int(t.Partitions)) {
		return "", fmt.Errorf("%w: topic creation at %d needs one non-empty replica list per partition", ErrBadRecord, index)
	}
	if _, ok := m.state.Topics[t.Name]; ok {
		return "", fmt.Errorf("%w: %q", ErrTopicExists, t.Name)
	}
	t.Groups = nil
	if t.ReplicationFactor > 1 {
		t.Groups = m.newGroupsLocked(int(t.Partitions))
	}
	m.state.Topics[t.Name] = t
	return t.Name, nil
}

func (m *Metadata) createPartitionsLocked(index uint64, body []byte) (string, error) {
	var c createPartitions
	if err := json.Unmarshal(body, &c); err != nil || !validAssignments(c.Assignments, len(c.Assignments)) || len(c.Assignments) == 0 {
		return "", fmt.Errorf("%w: partition creation at %d needs a topic and one non-empty replica list per new partition", ErrBadRecord, index)
	}
	t, ok := m.state.Topics[c.Name]
	if !ok {
		return "", fmt.Errorf("%w: %q", ErrTopicNotFound, c.Name)
	}
	if len(t.Assignments) != int(t.Partitions) {
		return "", fmt.Errorf("%w: topic %q has no partition assignments (created before they existed)", ErrBadRecord, c.Name)
	}
	t.Assignments = slices.Concat(t.Assignments, c.Assignments) // a new slice: readers keep theirs
	if len(t.Groups) > 0 {
		t.Groups = slices.Concat(t.Groups, m.newGroupsLocked(len(c.Assignments)))
	}
	t.Partitions += int32(len(c.Assignments))
	m.state.Topics[c.Name] = t
	return c.Name, nil
}

func (m *Metadata) alterConfigsLocked(index uint64, body []byte) (string, error) {
	var a alterConfigs
	if err := json.Unmarshal(body, &a); err != nil {
		return "", fmt.Errorf("%w: config change at %d: %v", ErrBadRecord, index, err)
	}
	t, ok := m.state.Topics[a.Name]
	if !ok {
		return "", fmt.Errorf("%w: %q", ErrTopicNotFound, a.Name)
	}
	if !maps.Equal(t.Configs, a.Base) {
		return "", fmt.Errorf("%w: topic %q", ErrConfigsChanged, a.Name)
	}
	t.Configs = a.Configs
	m.state.Topics[a.Name] = t
	return a.Name, nil
}

// newGroupsLocked assigns n new Raft group IDs. REQUIRES: m.mu held.
func (m *Metadata) newGroupsLocked(n int) []uint64 {
	if m.state.NextGroup == 0 {
		m.state.NextGroup = 1
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = m.state.NextGroup
		m.state.NextGroup++
	}
	return out
}

// partitionLeaderLocked applies record 8. REQUIRES: m.mu held.
func (m *Metadata) partitionLeaderLocked(index uint64, body []byte) error {
	var l PartitionLeader
	if err := json.Unmarshal(body, &l); err != nil || l.Leader <= 0 || l.Epoch < 0 {
		return fmt.Errorf("%w: partition leader at %d needs a leader and an epoch", ErrBadRecord, index)
	}
	var group uint64
	for _, t := range m.state.Topics {
		if l.Coordinator == "" && t.ID == l.TopicID && l.Partition >= 0 && int(l.Partition) < len(t.Groups) {
			group = t.Groups[l.Partition]
		}
	}
	if gs := m.state.CoordinatorGroups[l.Coordinator]; l.Coordinator != "" && l.Partition >= 0 && int(l.Partition) < len(gs) {
		group = gs[l.Partition]
	}
	if group == 0 {
		return fmt.Errorf("%w: partition leader at %d names no replicated partition", ErrTopicNotFound, index)
	}
	if old, ok := m.state.Leaders[group]; ok && l.Epoch < old.Epoch {
		return fmt.Errorf("%w: epoch %d, applied %d", ErrStaleLeader, l.Epoch, old.Epoch)
	}
	if m.state.Leaders == nil {
		m.state.Leaders = map[uint64]PartitionLeader{}
	}
	m.state.Leaders[group] = l
	return nil
}

// PartitionGroup is the Raft group of partition p of a replicated topic;
// ok is false for an RF 1 topic or an unknown partition.
func (m *Metadata) PartitionGroup(topic string, p int32) (uint64, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	t, found := m.state.Topics[topic]
	if !found || p < 0 || int(p) >= len(t.Groups) {
		return 0, false
	}
	return t.Groups[p], true
}

// Leader is the applied leader record of Raft group group (its ISR
// shared: do not change it).
func (m *Metadata) Leader(group uint64) (PartitionLeader, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	l, ok := m.state.Leaders[group]
	return l, ok
}

// ReplicatedPartition is one partition of a replicated topic.
type ReplicatedPartition struct {
	Group     uint64
	Topic     string
	TopicID   [16]byte
	Partition int32
	Replicas  []int32
	// Coordinator: a partition of a coordinator topic placed with
	// replicas (Topic is its name, TopicID zero).
	Coordinator bool
}

// ReplicatedPartitions are the replicated partitions node is a replica of.
func (m *Metadata) ReplicatedPartitions(node int32) []ReplicatedPartition {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []ReplicatedPartition
	for _, t := range m.state.Topics {
		for p, g := range t.Groups {
			if p < len(t.Assignments) && slices.Contains(t.Assignments[p], node) {
				out = append(out, ReplicatedPartition{Group: g, Topic: t.Name, TopicID: t.ID, Partition: int32(p), Replicas: t.Assignments[p]})
			}
		}
	}
	for name, gs := range m.state.CoordinatorGroups {
		for p, g := range gs {
			if replicas := m.state.CoordinatorReplicas[name][p]; slices.Contains(replicas, node) {
				out = append(out, ReplicatedPartition{Group: g, Topic: name, Partition: int32(p), Replicas: replicas, Coordinator: true})
			}
		}
	}
	return out
}

// CoordinatorGroup is the Raft group of partition p of the coordinator
// topic name when it was placed with replicas.
func (m *Metadata) CoordinatorGroup(name string, p int32) (uint64, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	gs := m.state.CoordinatorGroups[name]
	if p < 0 || int(p) >= len(gs) {
		return 0, false
	}
	return gs[p], true
}

// CoordinatorReplicas are the replicas of partition p of the coordinator
// topic name placed with replicas (shared: do not change them).
func (m *Metadata) CoordinatorReplicas(name string, p int32) ([]int32, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	rs := m.state.CoordinatorReplicas[name]
	if p < 0 || int(p) >= len(rs) {
		return nil, false
	}
	return rs[p], true
}

// validAssignments: n replica lists, each non-empty with positive
// distinct node IDs.
func validAssignments(a [][]int32, n int) bool {
	if len(a) != n {
		return false
	}
	for _, replicas := range a {
		if len(replicas) == 0 {
			return false
		}
		for i, id := range replicas {
			if id <= 0 || slices.Contains(replicas[:i], id) {
				return false
			}
		}
	}
	return true
}

// Snapshot implements StateMachine.
func (m *Metadata) Snapshot() ([]byte, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return json.Marshal(m.state)
}

// Restore implements StateMachine.
func (m *Metadata) Restore(data []byte) error {
	st := metadataState{}
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("cluster: decode the metadata snapshot: %w", err)
	}
	if st.Brokers == nil {
		st.Brokers = map[int32]Broker{}
	}
	if st.Topics == nil {
		st.Topics = map[string]Topic{}
	}
	m.mu.Lock()
	m.state = st
	all := m.allGroupConfigs()
	m.mu.Unlock()
	if m.onTopics != nil {
		m.onTopics(TopicChange{Restored: true, View: m.View()})
	}
	if m.onGroupConfigs != nil {
		m.onGroupConfigs(GroupConfigsChange{Restored: true, All: all})
	}
	return nil
}

// MetadataView is a copy of the applied metadata.
type MetadataView struct {
	// Applied is the index of the last record applied.
	Applied uint64
	// Brokers by node ID, Topics by name.
	Brokers []Broker
	Topics  []Topic
	// ClusterID is the cluster's Kafka cluster ID ("" before the first
	// registration that carries one).
	ClusterID string
	// Coordinators are the placed coordinator topics' partition leaders.
	Coordinators map[string][]int32
}

// View is a copy of the applied metadata, sorted.
func (m *Metadata) View() MetadataView {
	m.mu.RLock()
	defer m.mu.RUnlock()
	v := MetadataView{Applied: m.state.Applied, ClusterID: m.state.ClusterID, Coordinators: maps.Clone(m.state.Coordinators)}
	for _, id := range slices.Sorted(maps.Keys(m.state.Brokers)) {
		v.Brokers = append(v.Brokers, m.state.Brokers[id])
	}
	for _, name := range slices.Sorted(maps.Keys(m.state.Topics)) {
		t := m.state.Topics[name]
		t.Configs = maps.Clone(t.Configs)
		v.Topics = append(v.Topics, t)
	}
	return v
}

// Replicas are the replicas of partition p of topic, the leader first;
// ok is false for a topic or partition the metadata does not have, or
// one without an assignment. The slice is shared: do not change it.
func (m *Metadata) Replicas(topic string, p int32) (replicas []int32, ok bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	t, found := m.state.Topics[topic]
	if !found || p < 0 || int(p) >= len(t.Assignments) {
		return nil, false
	}
	return t.Assignments[p], true
}

// Topic is the applied copy of one topic (its slices shared: do not
// change them).
func (m *Metadata) Topic(name string) (Topic, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	t, ok := m.state.Topics[name]
	t.Configs = maps.Clone(t.Configs)
	return t, ok
}

// Broker is the registration of node id.
func (m *Metadata) Broker(id int32) (Broker, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	b, ok := m.state.Brokers[id]
	return b, ok
}

// CoordinatorLeaders are the partition leaders of the coordinator topic
// name, nil until placed. The slice is shared: do not change it.
func (m *Metadata) CoordinatorLeaders(name string) []int32 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.state.Coordinators[name]
}

// PlaceReplicas assigns replicationFactor replicas to each of partitions
// partitions over brokers (node IDs, sorted), round robin as Kafka's
// controller places them without racks (KIP-500's
// StripedReplicaPlacer): partition p is led by brokers[(start+p) % n],
// its followers are the next brokers in order. start spreads the
// leaders of successive topics (the caller passes e.g. the number of
// topics). It returns nil when there are fewer brokers than replicas.
func PlaceReplicas(brokers []int32, partitions int32, replicationFactor int16, start int) [][]int32 {
	n := len(brokers)
	if n == 0 || int(replicationFactor) > n || replicationFactor < 1 || partitions < 0 {
		return nil
	}
	start = ((start % n) + n) % n
	out := make([][]int32, partitions)
	for p := range out {
		replicas := make([]int32, replicationFactor)
		for r := range replicas {
			replicas[r] = brokers[(start+p+r)%n]
		}
		out[p] = replicas
	}
	return out
}

// Fenced reports whether broker id is fenced (record 7).
func (m *Metadata) Fenced(id int32) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.state.Fenced[id]
}

// ClusterID is the cluster's Kafka cluster ID: the first registered
// broker's ("" before).
func (m *Metadata) ClusterID() string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.state.ClusterID
}

// Brokers are the registered brokers, sorted by node ID (View without
// copying the topics).
func (m *Metadata) Brokers() []Broker {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]Broker, 0, len(m.state.Brokers))
	for _, id := range slices.Sorted(maps.Keys(m.state.Brokers)) {
		out = append(out, m.state.Brokers[id])
	}
	return out
}
