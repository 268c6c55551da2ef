package topics

import (
	"fmt"
)

// Owner names the broker component that manages a topic through its own
// API. Kafka clients may read an owned topic (Fetch, ListOffsets, Metadata,
// DescribeConfigs, consumer groups), but the Manager refuses every change a
// Kafka client could make to it (delete, partitions, configs, records) with
// an *OwnedError; kafkaproto also refuses Produce. The owner makes its own
// changes through the *Owned* methods.
//
// The owner is stored in the topic's catalog row ("owner", JSON); a row
// without it is an unowned topic, so catalogs written before owners existed
// read unchanged. An owner this broker does not know still protects its
// topic.
type Owner string

// Owners.
const (
	// OwnerNone is a plain Kafka topic.
	OwnerNone Owner = ""
	// OwnerQueue is a native queue or dead-letter queue (package queues)
	// named like the topic.
	OwnerQueue Owner = "queue"
	// OwnerEventStore is an event store (package events) named like the topic.
	OwnerEventStore Owner = "event-store"
)

// Change is a kind of change to a topic that its owner refuses to Kafka
// clients.
type Change uint8

// Changes.
const (
	ChangeDelete        Change = iota // DeleteTopics
	ChangePartitions                  // CreatePartitions
	ChangeConfigs                     // AlterConfigs, IncrementalAlterConfigs
	ChangeDeleteRecords               // DeleteRecords
	ChangeProduce                     // Produce, AddPartitionsToTxn
)

// OwnedError refuses a change to an owned topic. errors.Is(err,
// ErrTopicOwned) holds for it. Its text names the owner and what to use
// instead; kafkaproto sends it as the error message where the response has
// one.
type OwnedError struct {
	Topic  string
	Owner  Owner
	Change Change
}

// Is makes errors.Is(err, ErrTopicOwned) true.
func (e *OwnedError) Is(target error) bool { return target == ErrTopicOwned }

func (e *OwnedError) Error() string {
	var what string
	switch e.Change {
	case ChangeDelete:
		what = "cannot be deleted"
	case ChangePartitions:
		what = "cannot get more partitions"
	case ChangeConfigs:
		what = "cannot have its configs changed"
	case ChangeDeleteRecords:
		what = "cannot have records deleted"
	default:
		what = "cannot be written"
	}
	return fmt.Sprintf("topics: topic %q belongs to %s, so it is read-only to Kafka clients and %s through Kafka; %s",
		e.Topic, e.ownerName(), what, e.instead())
}

func (e *OwnedError) ownerName() string {
	switch e.Owner {
	case OwnerQueue:
		return fmt.Sprintf("the native queue %q", e.Topic)
	case OwnerEventStore:
		return fmt.Sprintf("the event store %q", e.Topic)
	}
	return fmt.Sprintf("the broker component %q", string(e.Owner))
}

// instead says what to use in place of the refused change.
func (e *OwnedError) instead() string {
	n := e.Topic
	switch e.Owner {
	case OwnerQueue:
		switch e.Change {
		case ChangeDelete:
			return fmt.Sprintf("delete the queue instead: 'broker queue delete %s' or HTTP DELETE /v1/queues/%s", n, n)
		case ChangePartitions:
			return "a queue's partition count is fixed when it is created"
		case ChangeConfigs:
			return fmt.Sprintf("change the queue's attributes instead: HTTP PATCH /v1/queues/%s", n)
		case ChangeDeleteRecords:
			return fmt.Sprintf("remove its messages instead: 'broker queue purge %s' or HTTP POST /v1/queues/%s/purge", n, n)
		default:
			return fmt.Sprintf("send messages instead: 'broker queue send %s' or HTTP POST /v1/queues/%s/messages", n, n)
		}
	case OwnerEventStore:
		switch e.Change {
		case ChangeDelete:
			return fmt.Sprintf("delete the store instead: HTTP DELETE /v1/stores/%s", n)
		case ChangePartitions:
			return "an event store has exactly one partition"
		case ChangeConfigs:
			return "an event store's topic configs are fixed"
		case ChangeDeleteRecords:
			return fmt.Sprintf("events stay in the store's log; delete a stream instead: 'broker events delete %s STREAM' or HTTP DELETE /v1/stores/%s/streams/{stream}", n, n)
		default:
			return fmt.Sprintf("append events instead: 'broker events append %s STREAM' or HTTP POST /v1/stores/%s/streams/{stream}/events", n, n)
		}
	}
	return "use the API of its owner"
}

// Owner returns the component that manages the topic, OwnerNone for a plain
// Kafka topic.
func (t *Topic) Owner() Owner {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.owner
}

// CheckClientChange returns an *OwnedError when the topic is owned, nil for
// a plain topic, which Kafka clients may change.
func (t *Topic) CheckClientChange(change Change) error {
	if o := t.Owner(); o != OwnerNone {
		return &OwnedError{Topic: t.Name, Owner: o, Change: change}
	}
	return nil
}

// CreateOwnedTopic creates a topic that owner manages, as CreateTopic does
// (without validate-only). The owner is in the catalog row from the start,
// so no crash leaves the topic unprotected.
func (m *Manager) CreateOwnedTopic(name string, partitions int32, configs map[string]string, owner Owner) (*Topic, error) {
	return m.createTopic(name, partitions, configs, false, owner)
}

// SetOwner marks topic name as managed by owner (OwnerNone releases it to
// Kafka clients). Owners call it at start to mark topics created before
// owners were stored. Setting the current owner changes nothing; a topic
// owned by another owner is ErrTopicOwned.
func (m *Manager) SetOwner(name string, owner Owner) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.mu.byName[name]
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownTopic, name)
	}
	current := t.Owner()
	if current == owner {
		return nil
	}
	if current != OwnerNone && owner != OwnerNone {
		return fmt.Errorf("%w: topic %q belongs to %q, not %q", ErrTopicOwned, name, current, owner)
	}
	if err := m.commitTopicRecordLocked(t.ID, topicRecord{Name: t.Name, Partitions: t.NumPartitions(), Configs: t.Configs(), Owner: owner, Cluster: t.cluster}); err != nil {
		return err
	}
	t.mu.Lock()
	t.owner = owner
	t.mu.Unlock()
	m.log.Info().Str("topic", name).Str("owner", string(owner)).Str("previous", string(current)).Msg("topic owner set")
	return nil
}

// DeleteOwnedTopic deletes a topic on behalf of its owner, as DeleteTopic
// does. A topic of another owner is ErrTopicOwned; an unowned one is
// deleted (a topic the owner created before owners were stored).
func (m *Manager) DeleteOwnedTopic(name string, owner Owner) error {
	return m.deleteTopic(name, func(t *Topic) error {
		if o := t.Owner(); o != OwnerNone && o != owner {
			return &OwnedError{Topic: name, Owner: o, Change: ChangeDelete}
		}
		return nil
	})
}

// OwnedTopics returns the names of the topics owner manages, sorted.
func (m *Manager) OwnedTopics(owner Owner) []string {
	var out []string
	for _, t := range m.Topics() {
		if t.Owner() == owner {
			out = append(out, t.Name)
		}
	}
	return out
}
