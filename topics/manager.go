// Package topics owns partition logs: the topic catalog and topic configs,
// appends with offset assignment and idempotent-producer checks, reads,
// producer IDs, and the decisions of retention (retention.go) and
// compaction (compaction.go) over log segments (segments.go). It
// stores everything through pebblestore and knows nothing of the Kafka wire
// protocol beyond the RecordBatch format that the logs are made of. Functions
// that depend on time take it as an argument.
package topics

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/rs/zerolog"
	"github.com/vibemq/broker/pebblestore"
)

// TopicID is a Kafka topic UUID.
type TopicID = pebblestore.TopicID

// Config configures a Manager.
type Config struct {
	Logger zerolog.Logger
	// AutoCreate lets Metadata and Produce create unknown topics.
	AutoCreate bool
	// DefaultPartitions is the partition count of auto-created topics.
	DefaultPartitions int32
	// BrokerDefaults overrides topic config defaults broker-wide, keyed by
	// topic config name (e.g. "max.message.bytes").
	BrokerDefaults map[string]string
	// MaxPartitionsPerTopic bounds CreateTopics; 0 means 10000.
	MaxPartitionsPerTopic int32
	// ClusterNodeID, in a cluster, is this broker's node ID: producer IDs
	// are then node ID << 32 | this store's counter, so that no two
	// brokers hand out the same ID (an ID names its producer's state on
	// every partition it writes). 0 (a single node) keeps the counter.
	ClusterNodeID int32

	// Background work (see retention.go and compaction.go); zero values
	// take the defaults.

	// RetentionDeletionsPerCall bounds how many partitions one
	// EnforceRetention call trims; default 64.
	RetentionDeletionsPerCall int
	// CompactionMapEntries bounds the keys one compaction pass
	// deduplicates, and so its memory (about 48 bytes a key, as Kafka's
	// log.cleaner.dedupe.buffer.size bounds its offset map); default 1<<20.
	CompactionMapEntries int
	// CompactionBytesPerCall bounds the batch bytes one Compact call reads;
	// a cleaning pass continues over as many calls as it needs; default 32 MiB.
	CompactionBytesPerCall int64
}

// Validate checks the config.
func (c *Config) Validate() error {
	if c.DefaultPartitions < 1 {
		return fmt.Errorf("topics: default partitions must be at least 1, got %d", c.DefaultPartitions)
	}
	if err := ValidateTopicConfigs(c.BrokerDefaults, nil); err != nil {
		return fmt.Errorf("topics: broker default: %w", err)
	}
	return nil
}

// Manager is the topic catalog and the owner of every partition log.
//
// Lock order: Manager.mu before Partition.mu; Partition.mu of several
// partitions in (topic ID, partition) order.
type Manager struct {
	cfg       Config
	store     *pebblestore.Store
	log       zerolog.Logger
	clusterID string

	// cleaning is the compaction pass in progress (compaction.go); only the
	// caller of Compact touches it, under cleaningMu.
	cleaningMu sync.Mutex
	cleaning   *cleaningPass

	mu struct {
		sync.RWMutex
		byName map[string]*Topic
		byID   map[TopicID]*Topic
	}

	producerIDs struct {
		sync.Mutex
		next, limit int64
	}
}

// Topic is one topic: its identity, partitions and explicit configs.
// Name and ID never change; Partitions only grows; Configs is replaced whole.
type Topic struct {
	Name string
	ID   TopicID

	mu         sync.RWMutex
	partitions []*Partition
	configs    map[string]string
	owner      Owner
	// cluster: the topic is a cluster's, created and changed only by
	// SyncClusterTopics from the metadata (cluster_topics.go).
	cluster bool
	deleted bool
	m       *Manager
	// settings are the effective configs parsed, replaced whole with
	// configs (under mu) and read without a lock.
	settings atomic.Pointer[topicSettings]
}

// topicRecord is the catalog row (value of pebblestore.TopicKey), JSON encoded.
type topicRecord struct {
	Name       string            `json:"name"`
	Partitions int32             `json:"partitions"`
	Configs    map[string]string `json:"configs,omitempty"`
	// Owner is the component that manages the topic (owner.go); absent
	// for a plain Kafka topic and in rows written before owners existed.
	Owner Owner `json:"owner,omitempty"`
	// Cluster marks a topic of the cluster's metadata (cluster_topics.go);
	// absent for a broker's own topics.
	Cluster bool `json:"cluster,omitempty"`
}

// Open loads the topic catalog and recovers every partition's offsets and
// producer state from the store. Its cost is a few seeks per partition,
// independent of the amount of data.
func Open(store *pebblestore.Store, cfg Config) (*Manager, error) {
	if cfg.MaxPartitionsPerTopic == 0 {
		cfg.MaxPartitionsPerTopic = 10000
	}
	if cfg.RetentionDeletionsPerCall <= 0 {
		cfg.RetentionDeletionsPerCall = 64
	}
	if cfg.CompactionMapEntries <= 0 {
		cfg.CompactionMapEntries = 1 << 20
	}
	if cfg.CompactionBytesPerCall <= 0 {
		cfg.CompactionBytesPerCall = 32 << 20
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := &Manager{cfg: cfg, store: store, log: cfg.Logger.With().Str("component", "topics").Logger()}
	m.mu.byName = make(map[string]*Topic)
	m.mu.byID = make(map[TopicID]*Topic)

	it, err := store.NewIter(pebblestore.TopicPrefix(), pebblestore.PrefixEnd(pebblestore.TopicPrefix()))
	if err != nil {
		return nil, err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		key := it.Key()
		if len(key) != 17 {
			return nil, fmt.Errorf("%w: topic catalog key %x has the wrong length", pebblestore.ErrCorruption, key)
		}
		val, err := it.Value()
		if err != nil {
			return nil, err
		}
		var rec topicRecord
		if err := json.Unmarshal(val, &rec); err != nil {
			return nil, fmt.Errorf("%w: topic catalog row %x: %v", pebblestore.ErrCorruption, key, err)
		}
		var id TopicID
		copy(id[:], key[1:])
		t := &Topic{Name: rec.Name, ID: id, configs: rec.Configs, owner: rec.Owner, cluster: rec.Cluster, m: m}
		if t.configs == nil {
			t.configs = map[string]string{}
		}
		t.refreshSettings()
		for i := int32(0); i < rec.Partitions; i++ {
			p, err := recoverPartition(store, t, i)
			if err != nil {
				return nil, err
			}
			t.partitions = append(t.partitions, p)
		}
		m.mu.byName[t.Name] = t
		m.mu.byID[id] = t
	}
	if err := m.loadProducerIDs(); err != nil {
		return nil, err
	}
	if err := m.loadClusterID(); err != nil {
		return nil, err
	}
	return m, nil
}

// ClusterID is the cluster's ID: 22 characters of URL-safe base64, chosen
// at first boot and kept in the store.
func (m *Manager) ClusterID() string { return m.clusterID }

func (m *Manager) loadClusterID() error {
	v, err := m.store.Get(pebblestore.ClusterIDKey())
	if err == nil {
		m.clusterID = string(v)
		return nil
	}
	if !errors.Is(err, pebblestore.ErrNotFound) {
		return err
	}
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return err
	}
	id := base64.RawURLEncoding.EncodeToString(raw[:])
	b := m.store.NewBatch()
	b.Set(pebblestore.ClusterIDKey(), []byte(id))
	if err := b.Commit(); err != nil {
		return fmt.Errorf("%w: saving the cluster id: %w", ErrStorage, err)
	}
	m.clusterID = id
	return nil
}

// AutoCreate reports whether unknown topics are created on first use.
func (m *Manager) AutoCreate() bool { return m.cfg.AutoCreate }

// DefaultPartitions is the partition count used when a request does not say.
func (m *Manager) DefaultPartitions() int32 { return m.cfg.DefaultPartitions }

// Topic returns the topic with the given name.
func (m *Manager) Topic(name string) (*Topic, bool) {
	m.mu.RLock()
	t, ok := m.mu.byName[name]
	m.mu.RUnlock()
	return t, ok
}

// TopicByID returns the topic with the given ID.
func (m *Manager) TopicByID(id TopicID) (*Topic, bool) {
	m.mu.RLock()
	t, ok := m.mu.byID[id]
	m.mu.RUnlock()
	return t, ok
}

// Topics returns every topic sorted by name.
func (m *Manager) Topics() []*Topic {
	m.mu.RLock()
	out := make([]*Topic, 0, len(m.mu.byName))
	for _, t := range m.mu.byName {
		out = append(out, t)
	}
	m.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// ValidateTopicName applies Kafka's topic name rules.
func ValidateTopicName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: the name is empty", ErrInvalidTopic)
	}
	if name == "." || name == ".." {
		return fmt.Errorf("%w: %q is not allowed", ErrInvalidTopic, name)
	}
	if len(name) > 249 {
		return fmt.Errorf("%w: the name is %d characters, the limit is 249", ErrInvalidTopic, len(name))
	}
	for _, c := range []byte(name) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return fmt.Errorf("%w: %q has a character outside [a-zA-Z0-9._-]", ErrInvalidTopic, name)
		}
	}
	return nil
}

// CreateTopic creates a topic with the given partitions (<= 0 means the
// default) and explicit configs. With validateOnly it checks everything and
// changes nothing. It returns ErrTopicExists, ErrInvalidTopic,
// ErrInvalidPartitions or ErrInvalidConfig.
func (m *Manager) CreateTopic(name string, partitions int32, configs map[string]string, validateOnly bool) (*Topic, error) {
	return m.createTopic(name, partitions, configs, validateOnly, OwnerNone)
}

func (m *Manager) createTopic(name string, partitions int32, configs map[string]string, validateOnly bool, owner Owner) (*Topic, error) {
	if err := ValidateTopicName(name); err != nil {
		return nil, err
	}
	if partitions <= 0 {
		partitions = m.cfg.DefaultPartitions
	}
	if partitions > m.cfg.MaxPartitionsPerTopic {
		return nil, fmt.Errorf("%w: %d partitions requested, the limit is %d", ErrInvalidPartitions, partitions, m.cfg.MaxPartitionsPerTopic)
	}
	clean := make(map[string]string, len(configs))
	for k, v := range configs {
		clean[k] = v
	}
	if err := ValidateTopicConfigs(clean, m.cfg.BrokerDefaults); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.mu.byName[name]; ok {
		return nil, fmt.Errorf("%w: %s", ErrTopicExists, name)
	}
	// Kafka refuses names that differ only in '.' versus '_': both map to
	// the same metric names.
	if collide := metricName(name); collide != name || strings.ContainsRune(name, '_') {
		for other := range m.mu.byName {
			if metricName(other) == collide {
				return nil, fmt.Errorf("%w: %q collides with existing topic %q ('.' and '_' are the same in metric names)", ErrInvalidTopic, name, other)
			}
		}
	}
	if validateOnly {
		t := &Topic{Name: name, configs: clean, m: m, partitions: make([]*Partition, partitions)}
		t.refreshSettings()
		return t, nil
	}
	var id TopicID
	for {
		if _, err := rand.Read(id[:]); err != nil {
			return nil, fmt.Errorf("%w: cannot generate a topic ID: %w", ErrStorage, err)
		}
		if _, taken := m.mu.byID[id]; !taken && id != (TopicID{}) {
			break
		}
	}
	t := &Topic{Name: name, ID: id, configs: clean, owner: owner, m: m}
	t.refreshSettings()
	for i := int32(0); i < partitions; i++ {
		t.partitions = append(t.partitions, newPartition(t, i, 0, 0))
	}
	if err := m.writeTopicRecordLocked(t); err != nil {
		return nil, err
	}
	m.mu.byName[name] = t
	m.mu.byID[id] = t
	m.log.Info().Str("topic", name).Int32("partitions", partitions).Str("owner", string(owner)).Msg("topic created")
	return t, nil
}

func (m *Manager) writeTopicRecordLocked(t *Topic) error {
	rec := topicRecord{Name: t.Name, Partitions: int32(len(t.partitions)), Configs: t.configs, Owner: t.owner, Cluster: t.cluster}
	val, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	b := m.store.NewBatch()
	b.Set(pebblestore.TopicKey(t.ID), val)
	if err := b.Commit(); err != nil {
		return fmt.Errorf("%w: %w", ErrStorage, err)
	}
	return nil
}

// DeleteTopic removes a topic and all its data. Readers and waiters of its
// partitions see ErrUnknownTopic afterwards. An owned topic is refused with
// an *OwnedError (ErrTopicOwned): its owner deletes it (DeleteOwnedTopic).
func (m *Manager) DeleteTopic(name string) error {
	return m.deleteTopic(name, func(t *Topic) error { return t.CheckClientChange(ChangeDelete) })
}

// deleteTopic deletes topic name when allowed(topic) returns nil, checked
// under m.mu.
func (m *Manager) deleteTopic(name string, allowed func(*Topic) error) error {
	m.mu.Lock()
	t, ok := m.mu.byName[name]
	if !ok {
		m.mu.Unlock()
		return fmt.Errorf("%w: %s", ErrUnknownTopic, name)
	}
	if err := allowed(t); err != nil {
		m.mu.Unlock()
		return err
	}
	delete(m.mu.byName, name)
	delete(m.mu.byID, t.ID)
	m.mu.Unlock()

	t.mu.Lock()
	t.deleted = true
	parts := t.partitions
	t.mu.Unlock()

	// Mark the partitions first: background work (retention, compaction)
	// checks the mark under the partition lock before it applies a write, so
	// none can land after the range deletions below.
	for _, p := range parts {
		p.markDeleted()
	}
	b := m.store.NewBatch()
	b.Delete(pebblestore.TopicKey(t.ID))
	for _, prefix := range []byte{pebblestore.PrefixBatch, pebblestore.PrefixBatchIndex, pebblestore.PrefixPartitionState, pebblestore.PrefixProducerState, pebblestore.PrefixSegment, pebblestore.PrefixTxnOngoing, pebblestore.PrefixTxnAborted} {
		p := pebblestore.TopicTablePrefix(prefix, t.ID)
		b.DeleteRange(p, pebblestore.PrefixEnd(p))
	}
	err := b.Commit()
	if err != nil {
		return fmt.Errorf("%w: deleting topic %s: %w", ErrStorage, name, err)
	}
	m.log.Info().Str("topic", name).Msg("topic deleted")
	return nil
}

// Partitions returns the topic's partitions.
func (t *Topic) Partitions() []*Partition {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.partitions
}

// Partition returns partition i.
func (t *Topic) Partition(i int32) (*Partition, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if i < 0 || int(i) >= len(t.partitions) {
		return nil, false
	}
	return t.partitions[i], true
}

// NumPartitions is the partition count.
func (t *Topic) NumPartitions() int32 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return int32(len(t.partitions))
}

// Configs returns a copy of the topic's explicitly set configs.
func (t *Topic) Configs() map[string]string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make(map[string]string, len(t.configs))
	for k, v := range t.configs {
		out[k] = v
	}
	return out
}

// Config returns the effective value of a topic config.
func (t *Topic) Config(name string) string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return effectiveConfig(t.configs, t.m.cfg.BrokerDefaults, name)
}

// ConfigSource says where an effective value comes from.
type ConfigSource int8

// Sources, numbered as Kafka's DescribeConfigs config_source.
const (
	SourceTopic         ConfigSource = 1
	SourceStaticBroker  ConfigSource = 4
	SourceDefault       ConfigSource = 5
	SourceDynamicBroker ConfigSource = 2
)

// ConfigEntry is one effective topic config.
type ConfigEntry struct {
	Def    *ConfigDef
	Value  string
	Source ConfigSource
}

// EffectiveConfigs returns every known topic config with its value and source.
func (t *Topic) EffectiveConfigs() []ConfigEntry {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]ConfigEntry, 0, len(topicConfigDefs))
	for i := range topicConfigDefs {
		d := &topicConfigDefs[i]
		if d.Internal {
			continue
		}
		if _, set := t.configs[d.Name]; d.Removed && !set {
			continue
		}
		e := ConfigEntry{Def: d, Value: d.Default, Source: SourceDefault}
		if v, ok := t.m.cfg.BrokerDefaults[d.Name]; ok {
			e.Value, e.Source = v, SourceStaticBroker
		}
		if v, ok := t.configs[d.Name]; ok {
			e.Value, e.Source = v, SourceTopic
		}
		out = append(out, e)
	}
	return out
}

// BrokerConfigEntries returns the broker-level defaults of topic configs,
// under their broker names, for DescribeConfigs on a broker resource.
func (m *Manager) BrokerConfigEntries() []ConfigEntry {
	out := make([]ConfigEntry, 0, len(topicConfigDefs))
	for i := range topicConfigDefs {
		d := &topicConfigDefs[i]
		if d.Internal || d.Removed || d.BrokerSynonym == "" {
			continue
		}
		e := ConfigEntry{Def: d, Value: d.Default, Source: SourceDefault}
		if v, ok := m.cfg.BrokerDefaults[d.Name]; ok {
			e.Value, e.Source = v, SourceStaticBroker
		}
		out = append(out, e)
	}
	return out
}

func (t *Topic) maxMessageBytes() int { return t.currentSettings().maxMessageBytes }

func (t *Topic) isCompacted() bool { return t.currentSettings().compact }

func (t *Topic) logAppendTime() bool { return t.currentSettings().logAppendTime }

func splitList(v string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(v); i++ {
		if i == len(v) || v[i] == ',' {
			s := v[start:i]
			for len(s) > 0 && s[0] == ' ' {
				s = s[1:]
			}
			for len(s) > 0 && s[len(s)-1] == ' ' {
				s = s[:len(s)-1]
			}
			if s != "" {
				out = append(out, s)
			}
			start = i + 1
		}
	}
	return out
}

// producerIDBlock is how many producer IDs one durable counter update reserves.
const producerIDBlock = 1000

func (m *Manager) loadProducerIDs() error {
	v, err := m.store.Get(pebblestore.ProducerIDNextKey())
	if errors.Is(err, pebblestore.ErrNotFound) {
		m.producerIDs.next, m.producerIDs.limit = 1000, 1000
		return nil
	}
	if err != nil {
		return err
	}
	if len(v) != 8 {
		return fmt.Errorf("%w: producer id counter has %d bytes", pebblestore.ErrCorruption, len(v))
	}
	n := int64(binary.BigEndian.Uint64(v))
	m.producerIDs.next, m.producerIDs.limit = n, n
	return nil
}

// AllocateProducerID returns a producer ID never handed out before, even
// across restarts: IDs are reserved in durable blocks.
func (m *Manager) AllocateProducerID() (int64, error) {
	m.producerIDs.Lock()
	defer m.producerIDs.Unlock()
	if m.producerIDs.next >= m.producerIDs.limit {
		limit := m.producerIDs.limit + producerIDBlock
		b := m.store.NewBatch()
		b.Set(pebblestore.ProducerIDNextKey(), binary.BigEndian.AppendUint64(nil, uint64(limit)))
		if err := b.Commit(); err != nil {
			return 0, fmt.Errorf("%w: reserving producer ids: %w", ErrStorage, err)
		}
		m.producerIDs.limit = limit
	}
	id := m.producerIDs.next
	if m.cfg.ClusterNodeID > 0 {
		if id >= 1<<32 {
			return 0, fmt.Errorf("%w: this broker handed out 2^32 producer ids, the most a cluster member may", ErrStorage)
		}
		id |= int64(m.cfg.ClusterNodeID) << 32
	}
	m.producerIDs.next++
	return id, nil
}

func metricName(topic string) string { return strings.ReplaceAll(topic, ".", "_") }

// IsInternalTopic reports whether name is one of Kafka's internal topics.
func IsInternalTopic(name string) bool {
	return name == "__consumer_offsets" || name == "__transaction_state"
}
