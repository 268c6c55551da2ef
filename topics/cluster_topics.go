package topics

import (
	"errors"
	"fmt"
	"maps"
	"time"
)

// ClusterTopic is a topic as a cluster's metadata defines it (issue 13):
// every broker of the cluster keeps it in its catalog under the same ID,
// partition count and configs, so that topic IDs, DescribeConfigs and
// offsets lookups agree on every broker. Only the partitions a broker
// leads receive records there; the others stay empty logs (no rows).
type ClusterTopic struct {
	Name       string
	ID         TopicID
	Partitions int32
	Configs    map[string]string
}

// ErrClusterTopicConflict: the metadata names a topic that this broker
// has as its own (created before it joined the cluster, or a queue or
// event store of the same name); the broker's own topic is kept.
var ErrClusterTopicConflict = errors.New("topics: a topic of the cluster's metadata has the name of one of this broker's own topics")

// IsClusterTopic reports whether the topic is a cluster's (created by
// SyncClusterTopics).
func (t *Topic) IsClusterTopic() bool { return t.cluster }

// SyncClusterTopics makes this broker's cluster topics want (a metadata
// snapshot): missing ones are created with their IDs, partition counts
// grow, configs are replaced, and a cluster topic whose name want gives
// another ID is deleted with its data. With deleteAbsent, cluster topics
// not in want are deleted too: right for a snapshot newer than anything
// this broker applied (a leader's), wrong for its own older snapshot at
// start, whose log replay then deletes by ID. Topics of the broker's own
// (not created by these methods) are never changed: a name of want that
// one of them has is left out and reported as ErrClusterTopicConflict.
// Callers serialize calls (the metadata group's apply goroutine).
func (m *Manager) SyncClusterTopics(want []ClusterTopic, deleteAbsent bool) error {
	var errs []error
	if deleteAbsent {
		for _, t := range m.Topics() {
			if _, ok := findClusterTopic(want, t.Name); t.cluster && !ok {
				if err := m.DeleteClusterTopic(t.Name, t.ID); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	for _, w := range want {
		if err := m.ApplyClusterTopic(w); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// DeleteClusterTopic deletes cluster topic name with its data if its ID
// is id (a metadata record deleting it, applied in log order: a replayed
// deletion never touches a later topic of the same name).
func (m *Manager) DeleteClusterTopic(name string, id TopicID) error {
	err := m.deleteTopic(name, func(t *Topic) error {
		if !t.cluster || t.ID != id {
			return errSkip
		}
		return nil
	})
	if errors.Is(err, errSkip) || errors.Is(err, ErrUnknownTopic) {
		return nil
	}
	return err
}

var errSkip = errors.New("topics: skipped")

func findClusterTopic(want []ClusterTopic, name string) (ClusterTopic, bool) {
	for _, w := range want {
		if w.Name == name {
			return w, true
		}
	}
	return ClusterTopic{}, false
}

// ApplyClusterTopic creates or updates cluster topic w (a metadata record
// that created or changed it, applied in log order; again is harmless). A
// cluster topic of the same name under another ID was deleted since: it
// is deleted with its data first.
func (m *Manager) ApplyClusterTopic(w ClusterTopic) error {
	if t, ok := m.Topic(w.Name); ok && t.cluster && t.ID != w.ID {
		if err := m.DeleteClusterTopic(t.Name, t.ID); err != nil {
			return err
		}
	}
	return m.applyClusterTopic(w)
}

func (m *Manager) applyClusterTopic(w ClusterTopic) error {
	if w.Partitions < 1 || w.ID == (TopicID{}) {
		return fmt.Errorf("%w: cluster topic %q needs an ID and partitions", ErrInvalidRequest, w.Name)
	}
	configs := maps.Clone(w.Configs)
	if configs == nil {
		configs = map[string]string{}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.mu.byName[w.Name]
	if ok && !t.cluster {
		return fmt.Errorf("%w: %q (this broker's topic is kept and the cluster's is not served here; delete one of them)", ErrClusterTopicConflict, w.Name)
	}
	if ok && t.ID != w.ID {
		return fmt.Errorf("%w: cluster topic %q changed its ID while being applied; it is applied again at the next change", ErrInvalidRequest, w.Name)
	}
	if !ok {
		if other, taken := m.mu.byID[w.ID]; taken {
			return fmt.Errorf("%w: cluster topic %q has the ID of this broker's topic %q", ErrClusterTopicConflict, w.Name, other.Name)
		}
		t = &Topic{Name: w.Name, ID: w.ID, configs: configs, cluster: true, m: m}
		t.refreshSettings()
		for i := int32(0); i < w.Partitions; i++ {
			t.partitions = append(t.partitions, newPartition(t, i, 0, 0))
		}
		if err := m.writeTopicRecordLocked(t); err != nil {
			return err
		}
		m.mu.byName[t.Name] = t
		m.mu.byID[t.ID] = t
		m.log.Info().Str("topic", t.Name).Int32("partitions", w.Partitions).Msg("cluster topic created")
		return nil
	}
	current := t.NumPartitions()
	if current >= w.Partitions && maps.Equal(t.Configs(), configs) {
		return nil
	}
	count := max(current, w.Partitions)
	if err := m.commitTopicRecordLocked(t.ID, topicRecord{Name: t.Name, Partitions: count, Configs: configs, Owner: t.Owner(), Cluster: true}); err != nil {
		return err
	}
	t.mu.Lock()
	t.configs = configs
	t.refreshSettings()
	t.growPartitionsLocked(current, count)
	t.mu.Unlock()
	m.log.Info().Str("topic", t.Name).Int32("partitions", count).Msg("cluster topic changed")
	return nil
}

// NextTopicConfigs computes and validates a cluster topic's next explicit
// configs without changing anything: replace, when not nil, is the whole
// new set (AlterConfigs); else ops apply to current
// (IncrementalAlterConfigs, as AlterTopicConfigs). ErrInvalidConfig names
// the first problem.
func (m *Manager) NextTopicConfigs(current, replace map[string]string, ops []ConfigOp) (map[string]string, error) {
	next := maps.Clone(replace)
	if replace == nil {
		var err error
		if next, err = applyConfigOps(maps.Clone(current), m.cfg.BrokerDefaults, ops); err != nil {
			return nil, err
		}
	}
	if err := ValidateTopicConfigs(next, m.cfg.BrokerDefaults); err != nil {
		return nil, err
	}
	return next, nil
}

// PrepareReplicatedBatch checks batch, produced to p, a partition whose
// log is a Raft group's (issue 13), against p's topic settings exactly as
// a local append is checked (checkAppend: one whole batch, sizes, CRC, the
// records, timestamps, producer fields, the free-space guard), rewrites it
// in the topic's compression.type when that differs, and stamps the
// LogAppendTime when the topic asks for it: on the leader, before it
// proposes, as Kafka's leader stamps it, so that every replica stores the
// same bytes. It returns the batch to propose (batch itself, changed in
// place, or a new one) and the append time, -1 for CreateTime topics.
func (m *Manager) PrepareReplicatedBatch(p *Partition, batch []byte, now time.Time) ([]byte, int64, error) {
	a := &Append{Partition: p, Batch: batch}
	ms := now.UnixMilli()
	if _, err := m.checkAppend(a, ms); err != nil {
		return nil, -1, err
	}
	if p.Topic.logAppendTime() {
		SetLogAppendTime(a.Batch, ms)
		return a.Batch, ms, nil
	}
	return a.Batch, -1, nil
}
