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
)

var (
	// ErrTopicExists: a CreateTopic record names a topic that exists.
	ErrTopicExists = errors.New("cluster: topic already exists")
	// ErrTopicNotFound: a DeleteTopic record names no topic.
	ErrTopicNotFound = errors.New("cluster: topic does not exist")
	// ErrBadRecord: a record that cannot be applied (unknown type, bad
	// body, invalid fields); it changes nothing on any replica.
	ErrBadRecord = errors.New("cluster: metadata record cannot be applied")
)

// Broker is a broker's registration: its node ID and the Kafka address it
// advertises to clients.
type Broker struct {
	NodeID    int32  `json:"node_id"`
	KafkaAddr string `json:"kafka_addr"`
	// HTTPAddr is its HTTP listener, when dialable (empty for a listen
	// address such as :8080); named in a follower's answer to add-node.
	HTTPAddr string `json:"http_addr,omitempty"`
}

// Topic is a topic as the controller knows it.
type Topic struct {
	Name              string            `json:"name"`
	ID                [16]byte          `json:"id"`
	Partitions        int32             `json:"partitions"`
	ReplicationFactor int16             `json:"replication_factor"`
	Configs           map[string]string `json:"configs,omitempty"`
}

type deleteTopic struct {
	Name string `json:"name"`
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
}

// Metadata is the metadata group's state machine: broker registrations
// and topics, applied in log order. The node's goroutine applies; any
// goroutine reads View. mu is a leaf.
type Metadata struct {
	mu    sync.RWMutex
	state metadataState
}

// NewMetadata is an empty metadata state machine.
func NewMetadata() *Metadata {
	return &Metadata{state: metadataState{Brokers: map[int32]Broker{}, Topics: map[string]Topic{}}}
}

// Apply implements StateMachine.
func (m *Metadata) Apply(e Entry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.state.Applied = e.Index
	if len(e.Data) == 0 {
		return fmt.Errorf("%w: empty record at %d", ErrBadRecord, e.Index)
	}
	body := e.Data[1:]
	switch e.Data[0] {
	case recordRegisterBroker:
		var b Broker
		if err := json.Unmarshal(body, &b); err != nil || b.NodeID <= 0 || b.KafkaAddr == "" {
			return fmt.Errorf("%w: broker registration at %d needs a node ID > 0 and an address", ErrBadRecord, e.Index)
		}
		m.state.Brokers[b.NodeID] = b
	case recordCreateTopic:
		var t Topic
		if err := json.Unmarshal(body, &t); err != nil || strings.TrimSpace(t.Name) == "" || t.Partitions <= 0 {
			return fmt.Errorf("%w: topic creation at %d needs a name and at least one partition", ErrBadRecord, e.Index)
		}
		if _, ok := m.state.Topics[t.Name]; ok {
			return fmt.Errorf("%w: %q", ErrTopicExists, t.Name)
		}
		m.state.Topics[t.Name] = t
	case recordDeleteTopic:
		var d deleteTopic
		if err := json.Unmarshal(body, &d); err != nil {
			return fmt.Errorf("%w: topic deletion at %d: %v", ErrBadRecord, e.Index, err)
		}
		if _, ok := m.state.Topics[d.Name]; !ok {
			return fmt.Errorf("%w: %q", ErrTopicNotFound, d.Name)
		}
		delete(m.state.Topics, d.Name)
	default:
		return fmt.Errorf("%w: unknown record type %d at %d (written by a newer broker?)", ErrBadRecord, e.Data[0], e.Index)
	}
	return nil
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
	defer m.mu.Unlock()
	m.state = st
	return nil
}

// MetadataView is a copy of the applied metadata.
type MetadataView struct {
	// Applied is the index of the last record applied.
	Applied uint64
	// Brokers by node ID, Topics by name.
	Brokers []Broker
	Topics  []Topic
}

// View is a copy of the applied metadata, sorted.
func (m *Metadata) View() MetadataView {
	m.mu.RLock()
	defer m.mu.RUnlock()
	v := MetadataView{Applied: m.state.Applied}
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
