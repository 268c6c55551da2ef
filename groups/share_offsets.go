package groups

// AlterShareGroupOffsets (91) and DeleteShareGroupOffsets (92) of KIP-932:
// an administrator sets or removes the start offset of a share group's
// share-partitions while the group has no members. Behaviour checked
// against Apache Kafka 4.2 (compat-tests/share_offsets_test.go): altering
// a group that does not exist creates it; unknown topics and partitions
// are UNKNOWN_TOPIC_OR_PARTITION per partition (per topic for a delete,
// also for a topic the group has no state of); a group with members is
// NON_EMPTY_GROUP and nothing changes. Plain topics only: a queue's
// share-partitions are the queue's delivery state (share_queue.go), and
// event stores' topics have no share groups (INVALID_REQUEST).

import (
	"fmt"

	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/topics"
)

// ShareOffsetTopic names the partitions of one topic to alter, with their
// new start offsets.
type ShareOffsetTopic struct {
	Topic      string
	Partitions map[int32]int64
}

// ShareOffsetResult is the outcome for one topic: its ID (zero when it is
// unknown), and an error per partition (Alter) or for the topic (Delete),
// nil when applied.
type ShareOffsetResult struct {
	Topic      string
	TopicID    [16]byte
	Partitions map[int32]error
	Err        error
}

// checkShareOffsetsGroup checks that group may have its offsets changed:
// a share group (or, with create, no group at all) without members.
// REQUIRES: share.mu held, not Coordinator.mu.
func (c *Coordinator) checkShareOffsetsGroup(group string, other bool, create bool) (*shareGroup, error) {
	if group == "" {
		return nil, fmt.Errorf("%w: the group ID is empty", ErrInvalidGroupID)
	}
	if other {
		return nil, fmt.Errorf("%w: group %s is a classic or consumer group, not a share group", ErrGroupIDNotFound, group)
	}
	g := c.share.groups[group]
	switch {
	case g == nil && !create:
		return nil, fmt.Errorf("%w: share group %s does not exist", ErrGroupIDNotFound, group)
	case g != nil && len(g.members) > 0:
		return nil, fmt.Errorf("%w: share group %s has %d members; its offsets change only while it is empty", ErrNonEmptyGroup, group, len(g.members))
	}
	return g, nil
}

// shareOffsetsTopic resolves a topic for the offset APIs: nil when it is
// unknown; err when its share-partitions cannot be changed.
func (c *Coordinator) shareOffsetsTopic(name string) (*topics.Topic, error) {
	t, ok := c.tm.Topic(name)
	if !ok {
		return nil, nil
	}
	switch {
	case c.shareQueueTopic(t):
		return t, fmt.Errorf("%w: topic %s is a native queue: share groups consume its one delivery state, which has no start offset to change; purge or redrive the queue instead", ErrInvalidRequest, name)
	case t.Owner() != topics.OwnerNone:
		return t, fmt.Errorf("%w: topic %s is managed by the broker (%s); share groups read plain topics and native queues only", ErrInvalidRequest, name, t.Owner())
	}
	return t, nil
}

// AlterShareGroupOffsets sets the start offset of the named share-partitions
// of group, dropping their in-flight state: the next fetch delivers from
// there. An offset below the log start moves to the log start. The group is
// created if it does not exist. The error is for the whole request
// (ErrInvalidGroupID, ErrGroupIDNotFound for another kind of group,
// ErrNonEmptyGroup, a storage error); it is durable when it returns.
func (c *Coordinator) AlterShareGroupOffsets(group string, req []ShareOffsetTopic) ([]ShareOffsetResult, error) {
	other := c.isClassicOrConsumer(group)
	s := &c.share
	s.mu.Lock()
	g, err := c.checkShareOffsetsGroup(group, other, true)
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}
	out := make([]ShareOffsetResult, len(req))
	set := map[shareTP]*sharePartition{}
	for i, rt := range req {
		out[i] = ShareOffsetResult{Topic: rt.Topic, Partitions: map[int32]error{}}
		t, terr := c.shareOffsetsTopic(rt.Topic)
		if t != nil {
			out[i].TopicID = t.ID
		}
		for p, off := range rt.Partitions {
			lp, ok := (*topics.Partition)(nil), false
			if t != nil {
				lp, ok = t.Partition(p)
			}
			switch {
			case !ok:
				out[i].Partitions[p] = fmt.Errorf("%w: %s partition %d", topics.ErrUnknownTopic, rt.Topic, p)
			case terr != nil:
				out[i].Partitions[p] = terr
			default:
				set[shareTP{TopicID: t.ID, Partition: p}] = &sharePartition{start: max(off, lp.LogStartOffset())}
			}
		}
	}
	created := g == nil
	w := c.applyShareLocked(func(b *pebblestore.Batch) {
		if created {
			b.Set(shareGroupKey(group), nil)
		}
		for tp, sp := range set {
			b.Set(sharePartitionKey(tp, group), sp.encodeRow())
		}
	})
	if err := w.errOrNil(); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	if created {
		g = &shareGroup{name: group, members: map[string]*shareMember{}, parts: map[shareTP]*sharePartition{}}
		s.groups[group] = g
		c.log.Info().Str("group", group).Msg("share group created by AlterShareGroupOffsets")
	}
	for tp, sp := range set {
		g.parts[tp] = sp
	}
	s.mu.Unlock()
	return out, w.wait()
}

// DeleteShareGroupOffsets deletes the share-partition states of group for
// the named topics: a later fetch starts them again by
// share.auto.offset.reset. Per topic: topics.ErrUnknownTopic for a topic
// unknown or without state in the group, ErrInvalidRequest for a queue's
// or event store's. The error is for the whole request
// (ErrInvalidGroupID, ErrGroupIDNotFound, ErrNonEmptyGroup, a storage
// error); it is durable when it returns.
func (c *Coordinator) DeleteShareGroupOffsets(group string, names []string) ([]ShareOffsetResult, error) {
	other := c.isClassicOrConsumer(group)
	s := &c.share
	s.mu.Lock()
	g, err := c.checkShareOffsetsGroup(group, other, false)
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}
	out := make([]ShareOffsetResult, len(names))
	var gone []shareTP
	for i, name := range names {
		out[i] = ShareOffsetResult{Topic: name}
		t, terr := c.shareOffsetsTopic(name)
		if terr != nil {
			out[i].TopicID, out[i].Err = t.ID, terr
			continue
		}
		n := 0
		if t != nil {
			for tp := range g.parts {
				if tp.TopicID == t.ID {
					gone = append(gone, tp)
					n++
				}
			}
		}
		if n == 0 {
			out[i].Err = fmt.Errorf("%w: share group %s has no state of topic %s", topics.ErrUnknownTopic, group, name)
			continue
		}
		out[i].TopicID = t.ID
	}
	w := c.applyShareLocked(func(b *pebblestore.Batch) {
		for _, tp := range gone {
			b.Delete(sharePartitionKey(tp, group))
		}
	})
	if err := w.errOrNil(); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	for _, tp := range gone {
		delete(g.parts, tp)
	}
	s.mu.Unlock()
	return out, w.wait()
}

// isClassicOrConsumer reports whether name is a classic or consumer group.
func (c *Coordinator) isClassicOrConsumer(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.groups[name] != nil
}
