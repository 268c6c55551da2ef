package topics

import (
	"encoding/json"
	"fmt"

	"github.com/vibemq/broker/pebblestore"
)

// refreshSettings recomputes the parsed settings from the explicit configs.
// REQUIRES: t.mu held for writing, or t not yet visible to others.
func (t *Topic) refreshSettings() {
	s, _ := parseSettings(t.configs, t.m.cfg.BrokerDefaults)
	t.settings.Store(s)
}

// currentSettings returns the topic's effective settings.
func (t *Topic) currentSettings() *topicSettings {
	if s := t.settings.Load(); s != nil {
		return s
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	s, _ := parseSettings(t.configs, t.m.cfg.BrokerDefaults)
	return s
}

// ReplaceTopicConfigs makes configs the complete set of explicit configs of
// topic name, as AlterConfigs does: configs left out return to their
// defaults. The result is validated as a whole (ErrInvalidConfig); with
// validateOnly nothing changes. It returns ErrUnknownTopic for a topic that
// does not exist and an *OwnedError for an owned one.
func (m *Manager) ReplaceTopicConfigs(name string, configs map[string]string, validateOnly bool) error {
	return m.alterTopicConfigs(name, validateOnly, func(map[string]string) (map[string]string, error) {
		out := make(map[string]string, len(configs))
		for k, v := range configs {
			out[k] = v
		}
		return out, nil
	})
}

// AlterTopicConfigs applies IncrementalAlterConfigs operations to the
// explicit configs of topic name, validates the result as a whole and
// stores it. A DELETE of a config that is not set is a no-op; APPEND and
// SUBTRACT apply to list configs only (ErrInvalidConfig otherwise) and start
// from the effective value. With validateOnly nothing changes. An owned
// topic is an *OwnedError.
func (m *Manager) AlterTopicConfigs(name string, ops []ConfigOp, validateOnly bool) error {
	return m.alterTopicConfigs(name, validateOnly, func(current map[string]string) (map[string]string, error) {
		return applyConfigOps(current, m.cfg.BrokerDefaults, ops)
	})
}

func (m *Manager) alterTopicConfigs(name string, validateOnly bool, change func(map[string]string) (map[string]string, error)) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.mu.byName[name]
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownTopic, name)
	}
	if err := t.CheckClientChange(ChangeConfigs); err != nil {
		return err
	}
	next, err := change(t.Configs())
	if err != nil {
		return err
	}
	if err := ValidateTopicConfigs(next, m.cfg.BrokerDefaults); err != nil {
		return err
	}
	if validateOnly {
		return nil
	}
	if err := m.commitTopicRecordLocked(t.ID, topicRecord{Name: t.Name, Partitions: t.NumPartitions(), Configs: next, Owner: t.Owner(), Cluster: t.cluster}); err != nil {
		return err
	}
	t.mu.Lock()
	t.configs = next
	t.refreshSettings()
	t.mu.Unlock()
	m.log.Info().Str("topic", name).Interface("configs", next).Msg("topic configs changed")
	return nil
}

// CreatePartitions raises the partition count of topic name to count
// (CreatePartitions). The count can only grow: an equal or smaller count,
// or one above the per-topic limit, is ErrInvalidPartitions; an owned
// topic is an *OwnedError. With validateOnly nothing changes.
func (m *Manager) CreatePartitions(name string, count int32, validateOnly bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.mu.byName[name]
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownTopic, name)
	}
	if err := t.CheckClientChange(ChangePartitions); err != nil {
		return err
	}
	current := t.NumPartitions()
	switch {
	case count < current:
		return fmt.Errorf("%w: the topic %s currently has %d partition(s); %d would not be an increase", ErrInvalidPartitions, name, current, count)
	case count == current:
		return fmt.Errorf("%w: topic already has %d partition(s)", ErrInvalidPartitions, current)
	case count > m.cfg.MaxPartitionsPerTopic:
		return fmt.Errorf("%w: %d partitions requested, the limit is %d", ErrInvalidPartitions, count, m.cfg.MaxPartitionsPerTopic)
	}
	if validateOnly {
		return nil
	}
	if err := m.commitTopicRecordLocked(t.ID, topicRecord{Name: t.Name, Partitions: count, Configs: t.Configs(), Owner: t.Owner(), Cluster: t.cluster}); err != nil {
		return err
	}
	t.mu.Lock()
	t.growPartitionsLocked(current, count)
	t.mu.Unlock()
	m.log.Info().Str("topic", name).Int32("from", current).Int32("to", count).Msg("partitions added")
	return nil
}

// commitTopicRecordLocked writes one catalog row durably.
// REQUIRES: m.mu held (it serializes catalog writers).
func (m *Manager) commitTopicRecordLocked(id TopicID, rec topicRecord) error {
	val, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	b := m.store.NewBatch()
	b.Set(pebblestore.TopicKey(id), val)
	if err := b.Commit(); err != nil {
		return fmt.Errorf("%w: %w", ErrStorage, err)
	}
	return nil
}

// growPartitionsLocked adds empty partitions current..count-1 to t; t.mu
// is held. The slice is copied, never appended in place: readers hold the
// old one without the lock.
func (t *Topic) growPartitionsLocked(current, count int32) {
	parts := make([]*Partition, len(t.partitions), count)
	copy(parts, t.partitions)
	for i := current; i < count; i++ {
		parts = append(parts, newPartition(t, i, 0, 0))
	}
	t.partitions = parts
}
