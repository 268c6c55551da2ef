package groups

// Share groups (KIP-932, "Queues for Kafka"): membership
// (ShareGroupHeartbeat), share sessions and the share-partition states
// that ShareFetch and ShareAcknowledge drive (share_fetch.go), their rows
// in Pebble, and their timers.
//
// Membership follows Kafka's GroupMetadataManager.shareGroupHeartbeat:
// a member joins with epoch 0 and its subscribed topic names, leaves with
// -1, and is fenced after the session timeout. Every member is assigned
// every partition of the topics it subscribes to; the acquisition locks,
// not the assignment, keep a record with one member at a time (Kafka's
// SimpleAssignor spreads partitions when members outnumber them only as an
// optimisation; clients cannot tell).
//
// State ownership: shareState.mu guards every share group, member,
// session and share-partition. It is never held together with
// Coordinator.mu. Writes are applied to Pebble under shareState.mu (so
// rows land in the order of the changes) and waited for (fsync) after it
// is released.
//
// Storage (pebblestore/keys.go):
//
//	0x23 group name                              -> empty (the share group exists)
//	0x24 topicID [16] | partition u32 | group   -> share-partition row (share_partition.go)
//
// Members and share sessions live in memory, as in Kafka: after a broker
// restart a member's heartbeat answers UNKNOWN_MEMBER_ID and it rejoins
// with the same member ID, so the records it held (kept Acquired, with
// their locks, in the rows) stay acknowledgeable by it.

import (
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/topics"
)

// Share group states, as ListGroups and ShareGroupDescribe name them.
const (
	shareStateEmpty  = "Empty"
	shareStateStable = "Stable"
)

// shareTP names a share-partition's topic partition.
type shareTP = SharePartitionID

type shareMember struct {
	id, rackID, clientID, clientHost string
	epoch                            int32
	topics                           []string
	assignment                       []TopicIDPartitions
	assignKey                        string // the assignment, to tell a change
	deadline                         time.Time
}

type shareGroup struct {
	name    string
	epoch   int32
	members map[string]*shareMember
	parts   map[shareTP]*sharePartition
	// queues are the queue topics (ID -> queue name) the group fetched
	// from since the broker started (share_queue.go): where a member's
	// leases are released when it goes.
	queues map[[16]byte]string
}

type shareSessionKey struct{ group, member string }

// shareSession is a member's ShareFetch session (KIP-932 "Share sessions"):
// the partitions it fetches and the epoch its next request must carry.
type shareSession struct {
	id    uint64 // names the session to the connection that opened it
	epoch int32
	parts map[shareTP]bool
}

type shareState struct {
	mu       sync.Mutex
	groups   map[string]*shareGroup
	sessions map[shareSessionKey]*shareSession
	nextID   uint64
	// configs are the group configs set per group (share_config.go).
	configs map[string]map[string]string
}

func shareGroupKey(name string) []byte {
	return append([]byte{pebblestore.PrefixShareGroup}, name...)
}

func sharePartitionKey(tp shareTP, group string) []byte {
	k := make([]byte, 0, 21+len(group))
	k = append(k, pebblestore.PrefixSharePartition)
	k = append(k, tp.TopicID[:]...)
	k = binary.BigEndian.AppendUint32(k, uint32(tp.Partition))
	return append(k, group...)
}

// shareWrite is a Pebble batch applied under shareState.mu; wait makes it
// durable after the lock is released.
type shareWrite struct {
	b   *pebblestore.Batch
	err error
	// queues are the waits of queue writes made with it (share_queue.go).
	queues []func() error
}

func (w *shareWrite) wait() error {
	if w == nil {
		return nil
	}
	for _, q := range w.queues {
		if err := q(); err != nil && w.err == nil {
			w.err = fmt.Errorf("%w: %w", ErrShareStorage, err)
		}
	}
	w.queues = nil
	if w.b == nil {
		return w.err
	}
	err := w.b.Wait()
	w.b = nil
	if err != nil && w.err == nil {
		w.err = fmt.Errorf("%w: %w", ErrShareStorage, err)
	}
	return w.err
}

// withQueues adds the waits of queue writes to w.
func (w *shareWrite) withQueues(waits []func() error) *shareWrite {
	if len(waits) == 0 {
		return w
	}
	if w == nil {
		w = &shareWrite{}
	}
	w.queues = append(w.queues, waits...)
	return w
}

func (w *shareWrite) errOrNil() error {
	if w == nil {
		return nil
	}
	return w.err
}

// applyShareLocked writes the rows of fill in one batch. REQUIRES:
// share.mu held.
func (c *Coordinator) applyShareLocked(fill func(b *pebblestore.Batch)) *shareWrite {
	b := c.store.NewBatch()
	fill(b)
	if b.Empty() {
		b.Close()
		return nil
	}
	if err := b.Apply(); err != nil {
		b.Close()
		return &shareWrite{err: fmt.Errorf("%w: %w", ErrShareStorage, err)}
	}
	return &shareWrite{b: b}
}

// ShareHeartbeatRequest is a ShareGroupHeartbeat request.
// SubscribedTopicNames nil means unchanged since the previous heartbeat.
type ShareHeartbeatRequest struct {
	Group, MemberID, RackID string
	MemberEpoch             int32
	SubscribedTopicNames    []string
	ClientID, ClientHost    string
}

// ShareHeartbeatResult is its answer; Assignment is nil when unchanged.
type ShareHeartbeatResult struct {
	MemberID          string
	MemberEpoch       int32
	HeartbeatInterval time.Duration
	Assignment        []TopicIDPartitions
}

// ShareHeartbeat joins, keeps or removes a share group member. The error
// is one of ErrInvalidRequest, ErrGroupIDNotFound (the name belongs to a
// classic or consumer group), ErrUnknownMemberID, ErrFencedMemberEpoch,
// ErrGroupMaxSizeReached, or a storage error. wait makes the group's row
// durable; call it without locks before answering.
func (c *Coordinator) ShareHeartbeat(req ShareHeartbeatRequest, now time.Time) (res ShareHeartbeatResult, wait func() error, err error) {
	nop := func() error { return nil }
	if err := validateShareHeartbeat(req); err != nil {
		return res, nop, err
	}
	c.mu.Lock()
	other := c.mu.groups[req.Group]
	c.mu.Unlock()
	if other != nil {
		return res, nop, fmt.Errorf("%w: group %s is a classic or consumer group, not a share group", ErrGroupIDNotFound, req.Group)
	}
	s := &c.share
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[req.Group]
	if req.MemberEpoch == -1 {
		if g == nil || g.members[req.MemberID] == nil {
			return res, nop, fmt.Errorf("%w: member %s is not in share group %s", ErrUnknownMemberID, req.MemberID, req.Group)
		}
		w := c.removeShareMemberLocked(g, req.MemberID, now)
		return ShareHeartbeatResult{MemberID: req.MemberID, MemberEpoch: -1}, w.wait, nil
	}
	var w *shareWrite
	if g == nil {
		if req.MemberEpoch != 0 {
			return res, nop, fmt.Errorf("%w: share group %s has no member %s; rejoin with member epoch 0", ErrUnknownMemberID, req.Group, req.MemberID)
		}
		g = c.createShareGroupLocked(req.Group)
		w = c.applyShareLocked(func(b *pebblestore.Batch) { b.Set(shareGroupKey(req.Group), nil) })
	}
	res, err = c.shareHeartbeatMemberLocked(g, req, now)
	return res, w.wait, err
}

// createShareGroupLocked creates share group name in memory; its row is
// the caller's to write (with the write the creation is for).
// REQUIRES: share.mu held, no group of that name.
func (c *Coordinator) createShareGroupLocked(name string) *shareGroup {
	g := &shareGroup{name: name, members: map[string]*shareMember{}, parts: map[shareTP]*sharePartition{}}
	c.share.groups[name] = g
	c.log.Info().Str("group", name).Msg("share group created")
	return g
}

func validateShareHeartbeat(req ShareHeartbeatRequest) error {
	switch {
	case req.Group == "":
		return fmt.Errorf("%w: the group ID is empty", ErrInvalidRequest)
	case req.MemberID == "" || len(req.MemberID) > 255:
		return fmt.Errorf("%w: the member ID must be 1 to 255 characters (the client generates it, KIP-1082)", ErrInvalidRequest)
	case req.MemberEpoch < -1:
		return fmt.Errorf("%w: member epoch %d; share members use 0 to join, -1 to leave", ErrInvalidRequest, req.MemberEpoch)
	case req.MemberEpoch == 0 && len(req.SubscribedTopicNames) == 0:
		return fmt.Errorf("%w: a joining member must subscribe to at least one topic", ErrInvalidRequest)
	}
	return nil
}

// shareHeartbeatMemberLocked handles a join (epoch 0) or a heartbeat.
// REQUIRES: share.mu held.
func (c *Coordinator) shareHeartbeatMemberLocked(g *shareGroup, req ShareHeartbeatRequest, now time.Time) (ShareHeartbeatResult, error) {
	m := g.members[req.MemberID]
	switch {
	case req.MemberEpoch == 0 && m == nil:
		if len(g.members) >= c.cfg.MaxGroupSize {
			return ShareHeartbeatResult{}, fmt.Errorf("%w: share group %s has %d members", ErrGroupMaxSizeReached, g.name, len(g.members))
		}
		m = &shareMember{id: req.MemberID}
		g.members[m.id] = m
		g.epoch++
		c.log.Info().Str("group", g.name).Str("member", m.id).Msg("share member joined")
	case m == nil:
		return ShareHeartbeatResult{}, fmt.Errorf("%w: share group %s has no member %s; rejoin with member epoch 0", ErrUnknownMemberID, g.name, req.MemberID)
	case req.MemberEpoch != 0 && req.MemberEpoch != m.epoch && req.MemberEpoch != m.epoch-1:
		return ShareHeartbeatResult{}, fmt.Errorf("%w: member %s is at epoch %d, not %d", ErrFencedMemberEpoch, m.id, m.epoch, req.MemberEpoch)
	}
	m.clientID, m.clientHost, m.rackID = req.ClientID, req.ClientHost, req.RackID
	if req.SubscribedTopicNames != nil {
		m.topics = slices.Clone(req.SubscribedTopicNames)
		slices.Sort(m.topics)
		m.topics = slices.Compact(m.topics)
	}
	session, heartbeat := c.shareTiming(c.share.configs[g.name]) // share.session.timeout.ms, share.heartbeat.interval.ms
	m.deadline = now.Add(session)
	assignment, key := c.shareAssignment(m.topics)
	res := ShareHeartbeatResult{MemberID: m.id, HeartbeatInterval: heartbeat}
	if key != m.assignKey || m.epoch == 0 || req.MemberEpoch == 0 {
		if key != m.assignKey || m.epoch == 0 {
			g.epoch++
			m.epoch = g.epoch
		}
		m.assignment, m.assignKey = assignment, key
		res.Assignment = assignment
	}
	res.MemberEpoch = m.epoch
	return res, nil
}

// shareAssignment is every partition of the subscribed topics that exist
// (internal ones excluded, as Kafka), and a key to tell a change.
func (c *Coordinator) shareAssignment(names []string) ([]TopicIDPartitions, string) {
	out := []TopicIDPartitions{}
	var key strings.Builder
	for _, name := range names {
		t, ok := c.tm.Topic(name)
		if !ok || name == OffsetsTopic || strings.HasPrefix(name, "__") {
			continue
		}
		tp := TopicIDPartitions{TopicID: t.ID}
		for i := int32(0); i < t.NumPartitions(); i++ {
			tp.Partitions = append(tp.Partitions, i)
		}
		out = append(out, tp)
		fmt.Fprintf(&key, "%x:%d;", tp.TopicID, len(tp.Partitions))
	}
	return out, key.String()
}

// removeShareMemberLocked removes a member: its sessions close and the
// records it holds are released. REQUIRES: share.mu held.
func (c *Coordinator) removeShareMemberLocked(g *shareGroup, member string, now time.Time) *shareWrite {
	delete(g.members, member)
	delete(c.share.sessions, shareSessionKey{g.name, member})
	g.epoch++
	return c.releaseShareMemberLocked(g, member, now)
}

// releaseShareMemberLocked releases what member holds in every partition
// of g. REQUIRES: share.mu held.
func (c *Coordinator) releaseShareMemberLocked(g *shareGroup, member string, now time.Time) *shareWrite {
	lim := c.shareLimitsLocked(g.name)
	w := c.applyShareLocked(func(b *pebblestore.Batch) {
		for tp, sp := range g.parts {
			if sp.releaseMember(member, lim) {
				b.Set(sharePartitionKey(tp, g.name), sp.encodeRow())
			}
		}
	})
	return w.withQueues(c.releaseQueuesLocked(g, member, now))
}

// tickShare fences members past their session timeout and releases the
// records whose acquisition lock expired.
func (c *Coordinator) tickShare(now time.Time) {
	s := &c.share
	var writes []*shareWrite
	s.mu.Lock()
	for _, g := range s.groups {
		lim := c.shareLimitsLocked(g.name)
		for id, m := range g.members {
			if !now.Before(m.deadline) {
				c.log.Info().Str("group", g.name).Str("member", id).Msg("share member session expired; removing it")
				writes = append(writes, c.removeShareMemberLocked(g, id, now))
			}
		}
		writes = append(writes, c.applyShareLocked(func(b *pebblestore.Batch) {
			for tp, sp := range g.parts {
				if d := sp.nextDeadline(); !d.IsZero() && !now.Before(d) && sp.expire(lim, now) {
					b.Set(sharePartitionKey(tp, g.name), sp.encodeRow())
				}
			}
		}))
	}
	s.mu.Unlock()
	for _, w := range writes {
		if err := w.wait(); err != nil {
			c.log.Warn().Err(err).Msg("a share-partition change made by a timer was not stored")
		}
	}
}

// recoverShare reads the share groups and their share-partition rows.
// Rows of deleted topics are deleted.
func (c *Coordinator) recoverShare() error {
	s := &c.share
	s.groups = map[string]*shareGroup{}
	s.sessions = map[shareSessionKey]*shareSession{}
	if err := c.recoverShareConfigs(); err != nil {
		return err
	}
	lower := []byte{pebblestore.PrefixShareGroup}
	it, err := c.store.NewIter(lower, pebblestore.PrefixEnd(lower))
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		name := string(it.Key()[1:])
		s.groups[name] = &shareGroup{name: name, members: map[string]*shareMember{}, parts: map[shareTP]*sharePartition{}}
	}
	if err := it.Close(); err != nil {
		return err
	}
	var stray [][]byte
	lower = []byte{pebblestore.PrefixSharePartition}
	it, err = c.store.NewIter(lower, pebblestore.PrefixEnd(lower))
	if err != nil {
		return err
	}
	defer func() { _ = it.Close() }()
	for ok := it.First(); ok; ok = it.Next() {
		key := it.Key()
		if len(key) < 21 {
			return fmt.Errorf("%w: share-partition key %x is too short", pebblestore.ErrCorruption, key)
		}
		var tp shareTP
		copy(tp.TopicID[:], key[1:17])
		tp.Partition = int32(binary.BigEndian.Uint32(key[17:]))
		g := s.groups[string(key[21:])]
		if _, ok := c.tm.TopicByID(tp.TopicID); !ok || g == nil {
			stray = append(stray, slices.Clone(key))
			continue
		}
		val, err := it.Value()
		if err != nil {
			return err
		}
		sp, err := decodeShareRow(val)
		if err != nil {
			return fmt.Errorf("%w: share group %s: %v", pebblestore.ErrCorruption, g.name, err)
		}
		g.parts[tp] = sp
	}
	if len(stray) > 0 {
		b := c.store.NewBatch()
		for _, k := range stray {
			b.Delete(k)
		}
		return b.Commit()
	}
	return nil
}

// ShareGroupMember is one member as ShareGroupDescribe shows it.
type ShareGroupMember struct {
	MemberID, RackID, ClientID, ClientHost string
	MemberEpoch                            int32
	SubscribedTopicNames                   []string
	Assignment                             []TopicIDPartitions
}

// SharePartitionView is one share-partition's delivery state.
type SharePartitionView struct {
	TopicID            [16]byte
	Topic              string
	Partition          int32
	StartOffset        int64
	InFlight, Acquired int
	// Available counts the window's records waiting for delivery; Lag the
	// offsets from the start offset to the high watermark not yet final
	// (KIP-1226's share-partition lag).
	Available, Lag int64
}

// ShareGroupView describes a share group.
type ShareGroupView struct {
	Group      string
	State      string
	GroupEpoch int32
	Members    []ShareGroupMember
	Partitions []SharePartitionView
}

// DescribeShareGroup describes a share group; ok is false when there is
// none of that name.
func (c *Coordinator) DescribeShareGroup(name string) (ShareGroupView, bool) {
	v, queues, ok := c.describeShareGroupLocked(name)
	if !ok {
		return v, false
	}
	v.Partitions = append(v.Partitions, c.describeShareQueues(queues)...)
	sort.Slice(v.Partitions, func(i, j int) bool {
		a, b := v.Partitions[i], v.Partitions[j]
		return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
	})
	return v, true
}

// describeShareGroupLocked describes a group's members and plain
// share-partitions, and returns the queue topics it fetched from.
func (c *Coordinator) describeShareGroupLocked(name string) (ShareGroupView, map[[16]byte]string, bool) {
	s := &c.share
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[name]
	if g == nil {
		return ShareGroupView{}, nil, false
	}
	v := ShareGroupView{Group: name, State: g.state(), GroupEpoch: g.epoch}
	for _, m := range g.members {
		v.Members = append(v.Members, ShareGroupMember{MemberID: m.id, RackID: m.rackID, ClientID: m.clientID, ClientHost: m.clientHost,
			MemberEpoch: m.epoch, SubscribedTopicNames: m.topics, Assignment: m.assignment})
	}
	sort.Slice(v.Members, func(i, j int) bool { return v.Members[i].MemberID < v.Members[j].MemberID })
	for tp, sp := range g.parts {
		t, ok := c.tm.TopicByID(tp.TopicID)
		if !ok {
			continue
		}
		pv := SharePartitionView{TopicID: tp.TopicID, Topic: t.Name, Partition: tp.Partition, StartOffset: sp.start, InFlight: len(sp.window)}
		acq, avail := sp.counts()
		pv.Acquired, pv.Available = acq, int64(avail)
		if p, ok := t.Partition(tp.Partition); ok {
			pv.Lag = max(0, p.HighWatermark()-sp.end()) + int64(acq+avail)
		}
		v.Partitions = append(v.Partitions, pv)
	}
	return v, maps.Clone(g.queues), true
}

func (g *shareGroup) state() string {
	if len(g.members) == 0 {
		return shareStateEmpty
	}
	return shareStateStable
}

// shareListings lists the share groups for ListGroups.
func (c *Coordinator) shareListings() []GroupListing {
	s := &c.share
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]GroupListing, 0, len(s.groups))
	for _, g := range s.groups {
		out = append(out, GroupListing{Group: g.name, State: g.state(), Type: "share", ProtocolType: "share"})
	}
	return out
}

// isShareGroup reports whether name is a share group.
func (c *Coordinator) isShareGroup(name string) bool {
	c.share.mu.Lock()
	defer c.share.mu.Unlock()
	return c.share.groups[name] != nil
}

// topicPartition resolves a share-partition's log partition.
func (c *Coordinator) sharePartitionLog(tp shareTP) (*topics.Topic, *topics.Partition, bool) {
	t, ok := c.tm.TopicByID(tp.TopicID)
	if !ok {
		return nil, nil, false
	}
	p, ok := t.Partition(tp.Partition)
	return t, p, ok
}

// ShareRecordLockDuration is the acquisition lock's duration of group, as
// ShareFetch announces it.
func (c *Coordinator) ShareRecordLockDuration(group string) time.Duration {
	c.share.mu.Lock()
	defer c.share.mu.Unlock()
	return c.shareLimitsLocked(group).lock
}

// deleteShareGroups deletes the named share groups that have no members
// (their rows, share-partition states and configs; ErrNonEmptyGroup for
// one with members), setting res for them, and reports which names were
// share groups. The deletion is durable when it returns.
func (c *Coordinator) deleteShareGroups(names []string, res []error) []bool {
	out := make([]bool, len(names))
	s := &c.share
	s.mu.Lock()
	var gone []string
	w := c.applyShareLocked(func(b *pebblestore.Batch) {
		for i, name := range names {
			g := s.groups[name]
			if g == nil {
				continue
			}
			out[i] = true
			if len(g.members) > 0 {
				res[i] = fmt.Errorf("%w: share group %s has %d members", ErrNonEmptyGroup, name, len(g.members))
				continue
			}
			b.Delete(shareGroupKey(name))
			b.Delete(shareConfigKey(name))
			for tp := range g.parts {
				b.Delete(sharePartitionKey(tp, name))
			}
			gone = append(gone, name)
		}
	})
	if w.errOrNil() == nil {
		for _, name := range gone {
			delete(s.groups, name)
			delete(s.configs, name)
			c.log.Info().Str("group", name).Msg("share group deleted")
		}
	}
	s.mu.Unlock()
	if err := w.wait(); err != nil {
		for i, name := range names {
			if slices.Contains(gone, name) {
				res[i] = err
			}
		}
	}
	return out
}
