package groups

// The consumer group protocol (KIP-848, GA in Apache Kafka 4.0): members
// heartbeat with ConsumerGroupHeartbeat, the coordinator computes the
// target assignment with a server-side assignor and moves each member
// towards it epoch by epoch (consumer_reconcile.go). After Apache Kafka's
// GroupMetadataManager.consumerGroupHeartbeat and ConsumerGroup.
//
// A consumer group is a group (group.go) whose cg field is set: its
// committed offsets, partition of __consumer_offsets and store row are the
// group's, and only the membership differs. The classic fields stay empty.
// Its records are Kafka's (consumer_records.go).

import (
	"cmp"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Member epochs with a meaning (Kafka ConsumerGroupHeartbeatRequest).
const (
	joinGroupMemberEpoch        = 0
	leaveGroupMemberEpoch       = -1
	leaveGroupStaticMemberEpoch = -2
)

// consumerGroup is the membership state of a consumer group. Guarded by
// Coordinator.mu.
type consumerGroup struct {
	groupEpoch      int32
	assignmentEpoch int32
	members         map[string]*consumerMember
	// staticMembers maps instance ID to member ID.
	staticMembers map[string]string
	// target is the target assignment of each member at assignmentEpoch.
	target map[string]assignment
	// owners maps each partition a member holds (assigned or pending
	// revocation) to that member.
	owners map[topicIDPartition]string
	// metadataHash identifies the subscribed topics (names, IDs,
	// partition counts) the group epoch was last computed with.
	metadataHash uint64
}

type topicIDPartition struct {
	topic     [16]byte
	partition int32
}

func newConsumerGroup() *consumerGroup {
	return &consumerGroup{
		members:       map[string]*consumerMember{},
		staticMembers: map[string]string{},
		target:        map[string]assignment{},
		owners:        map[topicIDPartition]string{},
	}
}

// consumerMember is one member of a consumer group.
type consumerMember struct {
	id         string
	instanceID *string
	rackID     *string
	clientID   string
	clientHost string
	topicNames []string
	regex      *string
	re         *regexp.Regexp // compiled regex, nil without one
	// resolved caches the topic IDs the subscription resolves to over the
	// topics whose hash is resolvedKey; nil when not computed.
	resolved       map[[16]byte]bool
	resolvedKey    uint64
	serverAssignor *string
	// rebalanceTimeout bounds how long the member may take to revoke
	// partitions.
	rebalanceTimeout time.Duration

	epoch, previousEpoch int32
	state                memberState
	assigned             assignment
	pending              assignment // pending revocation

	sessionDeadline time.Time
	// revokeDeadline is when the member is fenced unless it revoked its
	// pending partitions; zero when it has none.
	revokeDeadline time.Time
	// classic is set for a member of the classic protocol
	// (consumer_classic.go).
	classic *classicInfo
}

// state is the group's state as Kafka names it (ConsumerGroupState).
func (cg *consumerGroup) state() string {
	switch {
	case len(cg.members) == 0:
		return "Empty"
	case cg.groupEpoch > cg.assignmentEpoch:
		return "Assigning"
	}
	for _, m := range cg.members {
		if m.state != memberStable || m.epoch != cg.assignmentEpoch {
			return "Reconciling"
		}
	}
	return "Stable"
}

// setHoldings replaces m's assigned and pending partitions, keeping the
// owner map in step.
func (cg *consumerGroup) setHoldings(m *consumerMember, assigned, pending assignment) {
	cg.releaseAll(m)
	m.assigned, m.pending = assigned, pending
	for _, a := range []assignment{assigned, pending} {
		for t, ps := range a {
			for _, p := range ps {
				cg.owners[topicIDPartition{t, p}] = m.id
			}
		}
	}
}

func (cg *consumerGroup) releaseAll(m *consumerMember) {
	for _, a := range []assignment{m.assigned, m.pending} {
		for t, ps := range a {
			for _, p := range ps {
				if cg.owners[topicIDPartition{t, p}] == m.id {
					delete(cg.owners, topicIDPartition{t, p})
				}
			}
		}
	}
}

func (cg *consumerGroup) heldByOtherThan(id string) func(t [16]byte, p int32) bool {
	return func(t [16]byte, p int32) bool {
		o, ok := cg.owners[topicIDPartition{t, p}]
		return ok && o != id
	}
}

// TopicIDPartitions is a topic, by ID, with partitions.
type TopicIDPartitions struct {
	TopicID    [16]byte
	Partitions []int32
}

// ConsumerHeartbeatRequest is a ConsumerGroupHeartbeat request. Nil fields
// are unchanged since the member's previous heartbeat.
type ConsumerHeartbeatRequest struct {
	Group       string
	MemberID    string
	MemberEpoch int32
	InstanceID  *string
	RackID      *string
	// RebalanceTimeoutMillis is -1 when unchanged.
	RebalanceTimeoutMillis int32
	SubscribedTopicNames   []string
	SubscribedTopicRegex   *string
	ServerAssignor         *string
	// Owned is what the member holds; nil when unchanged.
	Owned      []TopicIDPartitions
	ClientID   string
	ClientHost string
	// Version is the ConsumerGroupHeartbeat version: from v1 the client
	// chooses its member ID.
	Version int16
}

// ConsumerHeartbeatResult is the ConsumerGroupHeartbeat response.
type ConsumerHeartbeatResult struct {
	Err               error
	MemberID          string
	MemberEpoch       int32
	HeartbeatInterval time.Duration
	// Assignment is sent when the member must (re)learn it; nil otherwise.
	Assignment []TopicIDPartitions
}

func consumerHeartbeatFailed(res ConsumerHeartbeatResult, err error) ConsumerHeartbeatResult {
	return ConsumerHeartbeatResult{Err: err, MemberID: res.MemberID, MemberEpoch: res.MemberEpoch}
}

// validateConsumerHeartbeat is Kafka's
// throwIfConsumerGroupHeartbeatRequestIsInvalid.
func (c *Coordinator) validateConsumerHeartbeat(req *ConsumerHeartbeatRequest) error {
	invalid := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidRequest, fmt.Sprintf(format, a...))
	}
	switch {
	case strings.TrimSpace(req.Group) == "":
		return invalid("GroupId can't be empty.")
	case req.InstanceID != nil && *req.InstanceID == "":
		return invalid("InstanceId can't be empty.")
	case req.RackID != nil && *req.RackID == "":
		return invalid("RackId can't be empty.")
	case req.MemberEpoch < leaveGroupStaticMemberEpoch:
		return invalid("MemberEpoch %d is invalid.", req.MemberEpoch)
	case req.Version >= 1 && strings.TrimSpace(req.MemberID) == "":
		return invalid("MemberId can't be empty.")
	case req.MemberEpoch != joinGroupMemberEpoch && strings.TrimSpace(req.MemberID) == "":
		return invalid("MemberId can't be empty.")
	case req.MemberEpoch == leaveGroupStaticMemberEpoch && req.InstanceID == nil:
		return invalid("InstanceId can't be null.")
	}
	if req.MemberEpoch == joinGroupMemberEpoch {
		switch {
		case req.RebalanceTimeoutMillis == -1:
			return invalid("RebalanceTimeoutMs must be provided in first request.")
		case req.Owned == nil || len(req.Owned) > 0:
			return invalid("TopicPartitions must be empty when (re-)joining.")
		case req.SubscribedTopicNames == nil && req.SubscribedTopicRegex == nil:
			return invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
		}
	}
	if req.RebalanceTimeoutMillis < -1 {
		return invalid("RebalanceTimeoutMs %d is invalid.", req.RebalanceTimeoutMillis)
	}
	if req.ServerAssignor != nil && *req.ServerAssignor != AssignorUniform && *req.ServerAssignor != AssignorRange {
		return fmt.Errorf("%w: ServerAssignor %q is not supported; supported assignors: uniform, range", ErrUnsupportedAssignor, *req.ServerAssignor)
	}
	if req.SubscribedTopicRegex != nil {
		if len(*req.SubscribedTopicRegex) > maxTopicRegexBytes {
			return fmt.Errorf("%w: SubscribedTopicRegex is %d bytes, over the broker's %d", ErrInvalidRegularExpression, len(*req.SubscribedTopicRegex), maxTopicRegexBytes)
		}
		if _, err := compileTopicRegex(*req.SubscribedTopicRegex); err != nil {
			return err
		}
	}
	n := len(req.Group) + len(req.MemberID)
	if req.SubscribedTopicRegex != nil {
		n += len(*req.SubscribedTopicRegex)
	}
	for _, t := range req.SubscribedTopicNames {
		n += len(t)
	}
	if n > c.cfg.MaxMemberMetadataBytes {
		return invalid("the subscription is larger than the broker's %d bytes per member", c.cfg.MaxMemberMetadataBytes)
	}
	return nil
}

// maxTopicRegexBytes bounds a subscription regex (a broker limit Kafka
// lacks): it is compiled, and matched against every topic.
const maxTopicRegexBytes = 16 << 10

// compileTopicRegex compiles a subscription regex (RE2J syntax, which Go's
// RE2 shares) matched against whole topic names, as Kafka matches it. The
// empty regex is no regex (nil, no error): Kafka's GroupMetadataManager
// subscribes by regex only when it `isNotEmpty`, and librdkafka's KIP-848
// consumer sends "" beside its topic names.
func compileTopicRegex(s string) (*regexp.Regexp, error) {
	if s == "" {
		return nil, nil
	}
	re, err := regexp.Compile("^(?:" + s + ")$")
	if err != nil {
		return nil, fmt.Errorf("%w: SubscribedTopicRegex %q: %v", ErrInvalidRegularExpression, s, err)
	}
	return re, nil
}

// generateConsumerMemberID is the member ID a ConsumerGroupHeartbeat v0
// join without one gets: 16 random bytes in hex (Kafka uses a base64 UUID;
// clients treat member IDs as opaque).
func generateConsumerMemberID() string {
	var u [16]byte
	_, _ = rand.Read(u[:])
	return hex.EncodeToString(u[:])
}

// ConsumerHeartbeat handles a ConsumerGroupHeartbeat request (KIP-848).
// The result waits until the records it wrote are durable.
func (c *Coordinator) ConsumerHeartbeat(req ConsumerHeartbeatRequest, now time.Time) *Future[ConsumerHeartbeatResult] {
	fail := func(err error) *Future[ConsumerHeartbeatResult] {
		return resolved(ConsumerHeartbeatResult{Err: err, MemberID: req.MemberID, MemberEpoch: req.MemberEpoch}, consumerHeartbeatFailed)
	}
	if err := c.validateConsumerHeartbeat(&req); err != nil {
		return fail(err)
	}
	if c.isShareGroup(req.Group) {
		// Kafka 4 (getOrMaybeCreateConsumerGroup): a group of another type.
		return fail(fmt.Errorf("%w: group %s is a share group, not a consumer group", ErrGroupIDNotFound, req.Group))
	}
	if req.MemberID == "" {
		req.MemberID = generateConsumerMemberID()
	}
	f := newFuture(consumerHeartbeatFailed)
	o := &op{now: now}
	c.mu.Lock()
	res := c.consumerHeartbeatLocked(o, &req)
	c.mu.Unlock()
	f.persists = o.persists
	f.ch <- res
	return f
}

func (c *Coordinator) consumerHeartbeatLocked(o *op, req *ConsumerHeartbeatRequest) ConsumerHeartbeatResult {
	failed := func(err error) ConsumerHeartbeatResult {
		return ConsumerHeartbeatResult{Err: err, MemberID: req.MemberID, MemberEpoch: req.MemberEpoch}
	}
	g := c.mu.groups[req.Group]
	if req.MemberEpoch < 0 {
		if g == nil || g.cg == nil {
			return failed(fmt.Errorf("%w: consumer group %s not found", ErrGroupIDNotFound, req.Group))
		}
		return c.consumerLeaveLocked(o, g, req)
	}
	if g == nil {
		if req.MemberEpoch != joinGroupMemberEpoch {
			// Kafka 4 (getOrMaybeCreateConsumerGroup): GROUP_ID_NOT_FOUND.
			return failed(fmt.Errorf("%w: consumer group %s not found; rejoin with member epoch 0", ErrGroupIDNotFound, req.Group))
		}
		g = c.newGroupLocked(req.Group)
		g.cg = newConsumerGroup()
	}
	if g.cg == nil {
		if req.MemberEpoch != joinGroupMemberEpoch {
			return failed(fmt.Errorf("%w: group %s is not a consumer group", ErrGroupIDNotFound, req.Group))
		}
		if !g.is(StateEmpty) || len(g.members) > 0 || len(g.pending) > 0 {
			// Online upgrade (migration policy bidirectional).
			if err := c.upgradeToConsumerLocked(o, g); err != nil {
				return failed(err)
			}
		} else {
			c.convertToConsumerLocked(g)
		}
	}
	w := &consumerWrite{now: o.now}
	m, err := c.consumerMemberForLocked(g, req, w)
	if err != nil {
		c.dropIfUnusedLocked(g)
		return failed(err)
	}
	owned := ownedAssignment(req.Owned)
	c.applyMemberUpdateLocked(g, m, req, w)
	before := struct {
		epoch    int32
		assigned assignment
	}{m.epoch, m.assigned}
	c.reconcileMemberLocked(g, m, owned, o.now, w)
	m.sessionDeadline = o.now.Add(c.cfg.ConsumerSessionTimeout)

	res := ConsumerHeartbeatResult{MemberID: m.id, MemberEpoch: m.epoch, HeartbeatInterval: c.cfg.ConsumerHeartbeatInterval}
	full := req.RebalanceTimeoutMillis != -1 && (req.SubscribedTopicNames != nil || req.SubscribedTopicRegex != nil) && req.Owned != nil
	if full || req.MemberEpoch == joinGroupMemberEpoch || before.epoch != m.epoch || !before.assigned.equal(m.assigned) ||
		(owned != nil && !owned.equal(m.assigned)) {
		res.Assignment = toTopicIDPartitions(m.assigned)
	}
	if err := c.writeConsumerLocked(o, g, w); err != nil {
		return failed(err)
	}
	return res
}

// consumerMemberForLocked finds or creates the member a heartbeat is from
// and checks its epoch (Kafka getOrMaybeSubscribe*ConsumerGroupMember and
// throwIfMemberEpochIsInvalid). REQUIRES: c.mu held.
func (c *Coordinator) consumerMemberForLocked(g *group, req *ConsumerHeartbeatRequest, w *consumerWrite) (*consumerMember, error) {
	cg := g.cg
	if req.MemberEpoch == joinGroupMemberEpoch {
		if req.InstanceID != nil {
			if oldID, ok := cg.staticMembers[*req.InstanceID]; ok && oldID != req.MemberID {
				old := cg.members[oldID]
				if old.epoch != leaveGroupStaticMemberEpoch {
					return nil, fmt.Errorf("%w: instance %s is still held by member %s; it must leave (epoch -2) or time out first",
						ErrUnreleasedInstanceID, *req.InstanceID, oldID)
				}
				return c.replaceStaticConsumerLocked(g, old, req.MemberID, w), nil
			}
		}
		if m := cg.members[req.MemberID]; m != nil {
			if req.InstanceID != nil && (m.instanceID == nil || *m.instanceID != *req.InstanceID) {
				return nil, fmt.Errorf("%w: member %s has another instance id", ErrFencedInstanceID, req.MemberID)
			}
			return m, nil
		}
		if len(cg.members) >= c.cfg.MaxGroupSize {
			return nil, fmt.Errorf("%w: consumer group %s has %d members", ErrGroupMaxSizeReached, g.name, len(cg.members))
		}
		m := &consumerMember{id: req.MemberID, instanceID: req.InstanceID, state: memberStable, assigned: assignment{}, pending: assignment{}}
		cg.members[m.id] = m
		if m.instanceID != nil {
			cg.staticMembers[*m.instanceID] = m.id
		}
		w.memberMetadata(m.id)
		w.current(m.id)
		return m, nil
	}
	m := cg.members[req.MemberID]
	if m == nil {
		return nil, fmt.Errorf("%w: member %s is not in consumer group %s; rejoin with member epoch 0", ErrUnknownMemberID, req.MemberID, g.name)
	}
	if req.InstanceID != nil && (m.instanceID == nil || *m.instanceID != *req.InstanceID) {
		return nil, fmt.Errorf("%w: instance %s belongs to another member", ErrFencedInstanceID, *req.InstanceID)
	}
	if req.MemberEpoch > m.epoch {
		return nil, fmt.Errorf("%w: epoch %d is newer than the member's epoch %d", ErrFencedMemberEpoch, req.MemberEpoch, m.epoch)
	}
	if req.MemberEpoch < m.epoch {
		owned := ownedAssignment(req.Owned)
		if req.MemberEpoch != m.previousEpoch || owned == nil || !isSubset(owned, m.assigned) {
			return nil, fmt.Errorf("%w: epoch %d is older than the member's epoch %d", ErrFencedMemberEpoch, req.MemberEpoch, m.epoch)
		}
	}
	return m, nil
}

func isSubset(a, b assignment) bool {
	for t, ps := range a {
		for _, p := range ps {
			if !b.has(t, p) {
				return false
			}
		}
	}
	return true
}

// replaceStaticConsumerLocked gives a static member that left with epoch
// -2 a new member ID, keeping its epoch and assignment (KIP-848 static
// membership). REQUIRES: c.mu held.
func (c *Coordinator) replaceStaticConsumerLocked(g *group, old *consumerMember, newID string, w *consumerWrite) *consumerMember {
	cg := g.cg
	m := *old
	m.id = newID
	m.epoch = old.previousEpoch
	if old.previousEpoch <= 0 {
		m.epoch = cg.assignmentEpoch
	}
	cg.releaseAll(old)
	delete(cg.members, old.id)
	cg.members[newID] = &m
	cg.setHoldings(&m, old.assigned, old.pending)
	cg.staticMembers[*m.instanceID] = newID
	if t, ok := cg.target[old.id]; ok {
		cg.target[newID] = t
		delete(cg.target, old.id)
		w.targetMember(newID)
	}
	w.removed = append(w.removed, old.id)
	w.memberMetadata(newID)
	w.current(newID)
	return &m
}

// updateConsumerMemberLocked applies a heartbeat's fields to m; true when
// its subscription changed (or it is new), which bumps the group epoch.
// REQUIRES: c.mu held.
func (c *Coordinator) updateConsumerMemberLocked(m *consumerMember, req *ConsumerHeartbeatRequest, w *consumerWrite) bool {
	isNew := m.epoch == 0 && len(m.assigned) == 0 && m.clientID == "" && m.topicNames == nil && m.regex == nil
	if m.clientID != req.ClientID || m.clientHost != req.ClientHost {
		m.clientID, m.clientHost = req.ClientID, req.ClientHost
		w.memberMetadata(m.id)
	}
	if req.RackID != nil && (m.rackID == nil || *m.rackID != *req.RackID) {
		m.rackID = req.RackID
		w.memberMetadata(m.id)
	}
	if req.RebalanceTimeoutMillis >= 0 {
		if d := time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond; d != m.rebalanceTimeout {
			m.rebalanceTimeout = d
			w.memberMetadata(m.id)
		}
	}
	subscription := false
	if req.SubscribedTopicNames != nil {
		names := slices.Clone(req.SubscribedTopicNames)
		slices.Sort(names)
		names = slices.Compact(names)
		if !slices.Equal(names, m.topicNames) || m.topicNames == nil {
			m.topicNames = names
			subscription = true
		}
	}
	if req.SubscribedTopicRegex != nil && (m.regex == nil || *m.regex != *req.SubscribedTopicRegex) {
		re, _ := compileTopicRegex(*req.SubscribedTopicRegex) // validated
		r := *req.SubscribedTopicRegex
		m.regex, m.re = &r, re
		subscription = true
	}
	if req.ServerAssignor != nil && (m.serverAssignor == nil || *m.serverAssignor != *req.ServerAssignor) {
		a := *req.ServerAssignor
		m.serverAssignor = &a
		subscription = true
	}
	if subscription {
		m.resolved = nil
		w.memberMetadata(m.id)
	}
	return subscription || isNew
}

// subscribedTopicsLocked resolves m's subscription against the topics that
// exist now (all, whose hash is key): names, and the regex over every topic
// but internal ones. The result is cached until the topics or the
// subscription change; callers must not modify it.
func (c *Coordinator) subscribedTopicsLocked(m *consumerMember, all []assignTopic, key uint64) map[[16]byte]bool {
	if m.resolved != nil && m.resolvedKey == key {
		return m.resolved
	}
	out := map[[16]byte]bool{}
	defer func() { m.resolved, m.resolvedKey = out, key }()
	for _, t := range all {
		if _, ok := slices.BinarySearch(m.topicNames, t.name); ok {
			out[t.id] = true
			continue
		}
		if m.re != nil && !isInternalTopic(t.name) && m.re.MatchString(t.name) {
			out[t.id] = true
		}
	}
	return out
}

// isInternalTopic is Kafka's Topic.isInternal: regex subscriptions do not
// match these.
func isInternalTopic(name string) bool {
	return name == OffsetsTopic || name == "__transaction_state" || name == "__share_group_state"
}

// allTopicsLocked lists the topics a subscription may resolve to, with a
// hash of their names, IDs and partition counts.
func (c *Coordinator) allTopicsLocked() ([]assignTopic, uint64) {
	ts := c.tm.Topics()
	out := make([]assignTopic, 0, len(ts))
	h := fnv.New64a()
	var buf []byte
	for _, t := range ts {
		out = append(out, assignTopic{id: t.ID, name: t.Name, partitions: t.NumPartitions()})
		buf = append(buf[:0], t.Name...)
		buf = append(buf, 0)
		buf = append(buf, t.ID[:]...)
		buf = binary.BigEndian.AppendUint32(buf, uint32(t.NumPartitions()))
		_, _ = h.Write(buf)
	}
	return out, h.Sum64()
}

// subscriptionHashLocked hashes the topics the group's members subscribe
// to as they exist now; a new matching topic or a partition count change
// changes it (Kafka's metadata hash, KIP-1101).
func (c *Coordinator) subscriptionHashLocked(cg *consumerGroup) uint64 {
	all, key := c.allTopicsLocked()
	used := map[[16]byte]bool{}
	for _, m := range cg.members {
		for id := range c.subscribedTopicsLocked(m, all, key) {
			used[id] = true
		}
	}
	h := fnv.New64a()
	var buf []byte
	for _, t := range all {
		if used[t.id] {
			buf = append(buf[:0], t.name...)
			buf = append(buf, 0)
			buf = append(buf, t.id[:]...)
			buf = binary.BigEndian.AppendUint32(buf, uint32(t.partitions))
			_, _ = h.Write(buf)
		}
	}
	return h.Sum64()
}

// preferredAssignor is the assignor most members ask for (Kafka
// computePreferredServerAssignor), uniform by default.
func (cg *consumerGroup) preferredAssignor() string {
	counts := map[string]int{}
	for _, m := range cg.members {
		if m.serverAssignor != nil {
			counts[*m.serverAssignor]++
		}
	}
	best := AssignorUniform
	for _, name := range []string{AssignorUniform, AssignorRange} {
		if counts[name] > counts[best] {
			best = name
		}
	}
	return best
}

// applyMemberUpdateLocked applies a member's heartbeat fields (KIP-848):
// the group epoch is bumped when the member's subscription or the
// subscribed topics' metadata changed, and a new target assignment is
// computed for a group epoch beyond the assignment's.
// REQUIRES: c.mu held.
func (c *Coordinator) applyMemberUpdateLocked(g *group, m *consumerMember, req *ConsumerHeartbeatRequest, w *consumerWrite) {
	cg := g.cg
	bump := c.updateConsumerMemberLocked(m, req, w)
	if hash := c.subscriptionHashLocked(cg); hash != cg.metadataHash {
		cg.metadataHash = hash
		bump = true
	}
	if bump {
		cg.groupEpoch++
		w.groupMetadata = true
	}
	if cg.groupEpoch > cg.assignmentEpoch {
		c.computeTargetLocked(g, w)
	}
}

// computeTargetLocked computes the target assignment of the group epoch.
// REQUIRES: c.mu held.
func (c *Coordinator) computeTargetLocked(g *group, w *consumerWrite) {
	cg := g.cg
	all, key := c.allTopicsLocked()
	ids := make([]string, 0, len(cg.members))
	for id := range cg.members {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	members := make([]assignMember, 0, len(ids))
	used := map[[16]byte]bool{}
	for _, id := range ids {
		m := cg.members[id]
		sub := c.subscribedTopicsLocked(m, all, key)
		for t := range sub {
			used[t] = true
		}
		members = append(members, assignMember{id: id, subscribed: sub, current: cg.target[id]})
	}
	var topics []assignTopic
	for _, t := range all {
		if used[t.id] {
			topics = append(topics, t)
		}
	}
	slices.SortFunc(topics, func(a, b assignTopic) int { return cmp.Compare(a.name, b.name) })
	out := assign(cg.preferredAssignor(), members, topics)
	for id, a := range out {
		if old, ok := cg.target[id]; !ok || !old.equal(a) {
			w.targetMember(id)
		}
		cg.target[id] = a
	}
	for id := range cg.target {
		if _, ok := out[id]; !ok {
			delete(cg.target, id)
		}
	}
	cg.assignmentEpoch = cg.groupEpoch
	w.targetMetadata = true
}

// reconcileMemberLocked moves m towards its target assignment.
// REQUIRES: c.mu held.
func (c *Coordinator) reconcileMemberLocked(g *group, m *consumerMember, owned assignment, now time.Time, w *consumerWrite) {
	cg := g.cg
	if m.epoch == leaveGroupStaticMemberEpoch {
		return
	}
	out := reconcile(reconcileInput{
		epoch: m.epoch, previousEpoch: m.previousEpoch, state: m.state,
		assigned: m.assigned, pending: m.pending,
		targetEpoch: cg.assignmentEpoch, target: cg.target[m.id],
		heldByOther: cg.heldByOtherThan(m.id), owned: owned,
	})
	if out.epoch == m.epoch && out.previousEpoch == m.previousEpoch && out.state == m.state &&
		out.assigned.equal(m.assigned) && out.pending.equal(m.pending) {
		return
	}
	if out.state == memberUnrevokedPartitions && m.state != memberUnrevokedPartitions {
		m.revokeDeadline = now.Add(m.rebalanceTimeout)
	} else if out.state != memberUnrevokedPartitions {
		m.revokeDeadline = time.Time{}
	}
	m.epoch, m.previousEpoch, m.state = out.epoch, out.previousEpoch, out.state
	cg.setHoldings(m, out.assigned, out.pending)
	w.current(m.id)
}

func ownedAssignment(owned []TopicIDPartitions) assignment {
	if owned == nil {
		return nil
	}
	a := assignment{}
	for _, t := range owned {
		for _, p := range t.Partitions {
			a.add(t.TopicID, p)
		}
	}
	return a
}

func toTopicIDPartitions(a assignment) []TopicIDPartitions {
	out := make([]TopicIDPartitions, 0, len(a))
	for _, t := range a.sortedTopics() {
		out = append(out, TopicIDPartitions{TopicID: t, Partitions: slices.Clone(a[t])})
	}
	return out
}

// consumerLeaveLocked handles a heartbeat with epoch -1 (leave) or -2 (a
// static member leaving for now: it keeps its assignment until it rejoins
// or its session expires). REQUIRES: c.mu held.
func (c *Coordinator) consumerLeaveLocked(o *op, g *group, req *ConsumerHeartbeatRequest) ConsumerHeartbeatResult {
	cg := g.cg
	res := ConsumerHeartbeatResult{MemberID: req.MemberID, MemberEpoch: req.MemberEpoch}
	m := cg.members[req.MemberID]
	if req.InstanceID != nil {
		id, ok := cg.staticMembers[*req.InstanceID]
		switch {
		case !ok:
			return ConsumerHeartbeatResult{Err: fmt.Errorf("%w: instance %s is not in group %s", ErrUnknownMemberID, *req.InstanceID, g.name), MemberID: req.MemberID, MemberEpoch: req.MemberEpoch}
		case id != req.MemberID:
			return ConsumerHeartbeatResult{Err: fmt.Errorf("%w: instance %s belongs to member %s", ErrFencedInstanceID, *req.InstanceID, id), MemberID: req.MemberID, MemberEpoch: req.MemberEpoch}
		}
		m = cg.members[id]
	}
	if m == nil {
		return ConsumerHeartbeatResult{Err: fmt.Errorf("%w: member %s is not in group %s", ErrUnknownMemberID, req.MemberID, g.name), MemberID: req.MemberID, MemberEpoch: req.MemberEpoch}
	}
	w := &consumerWrite{now: o.now}
	if req.MemberEpoch == leaveGroupStaticMemberEpoch {
		m.previousEpoch = m.epoch
		if m.epoch == leaveGroupStaticMemberEpoch {
			m.previousEpoch = cg.assignmentEpoch
		}
		m.epoch = leaveGroupStaticMemberEpoch
		m.revokeDeadline = time.Time{}
		m.sessionDeadline = o.now.Add(c.cfg.ConsumerSessionTimeout)
		w.current(m.id)
	} else {
		c.removeConsumerMemberLocked(g, m, w)
	}
	if err := c.writeConsumerLocked(o, g, w); err != nil {
		res.Err = err
		return res
	}
	c.maybeDowngradeLocked(o, g)
	return res
}

// removeConsumerMemberLocked fences m out of the group: its partitions are
// free and the group epoch moves on. REQUIRES: c.mu held.
func (c *Coordinator) removeConsumerMemberLocked(g *group, m *consumerMember, w *consumerWrite) {
	cg := g.cg
	cg.releaseAll(m)
	delete(cg.members, m.id)
	if m.instanceID != nil && cg.staticMembers[*m.instanceID] == m.id {
		delete(cg.staticMembers, *m.instanceID)
	}
	delete(cg.target, m.id)
	w.removed = append(w.removed, m.id)
	cg.groupEpoch++
	w.groupMetadata = true
}

// syncConsumerState keeps the classic state of a consumer group in step
// with its members: Empty without members, else Stable. The offset rules
// (retention, deletion) read it.
func (g *group) syncConsumerState(now time.Time) {
	empty := len(g.cg.members) == 0
	switch {
	case empty && !g.is(StateEmpty):
		g.transitionTo(StateEmpty, now)
	case !empty && !g.is(StateStable):
		g.transitionTo(StateStable, now)
	}
}

// isSubscribed reports whether a member of the consumer group subscribes
// to topic, by name or by regex.
func (cg *consumerGroup) isSubscribed(topic string) bool {
	for _, m := range cg.members {
		if _, ok := slices.BinarySearch(m.topicNames, topic); ok {
			return true
		}
		if m.re != nil && !isInternalTopic(topic) && m.re.MatchString(topic) {
			return true
		}
	}
	return false
}

// convertToClassicLocked turns an empty consumer group back into a classic
// group when a classic member joins it (Kafka's downgrade with the
// bidirectional migration policy): its records get tombstones, its offsets
// stay. REQUIRES: c.mu held; g.cg has no members.
func (c *Coordinator) convertToClassicLocked(o *op, g *group) error {
	if g.rowWritten {
		recs, rows := consumerDeleteRecords(g)
		if _, _, err := c.appendLocked(o, g, recs, rows); err != nil {
			return metadataAppendError(err)
		}
	}
	c.log.Info().Str("group", g.name).Msg("empty consumer group converted to a classic group")
	g.cg = nil
	g.transitionTo(StateEmpty, o.now)
	return nil
}

// convertToConsumerLocked turns an empty classic group into a consumer
// group (Kafka's group.consumer.migration.policy, default bidirectional):
// its offsets stay. REQUIRES: c.mu held; g is an empty classic group.
func (c *Coordinator) convertToConsumerLocked(g *group) {
	c.log.Info().Str("group", g.name).Msg("empty classic group converted to a consumer group")
	g.cg = newConsumerGroup()
	g.protocolType = nil
	g.protocolName = nil
	g.leader = ""
}

// runConsumerTimersLocked fences the members whose session expired and
// those that did not revoke partitions within their rebalance timeout.
// REQUIRES: c.mu held.
func (c *Coordinator) runConsumerTimersLocked(o *op, g *group) {
	cg := g.cg
	w := &consumerWrite{now: o.now}
	var expired []*consumerMember
	for _, m := range cg.members {
		if !o.now.Before(m.sessionDeadline) || (!m.revokeDeadline.IsZero() && !o.now.Before(m.revokeDeadline)) {
			expired = append(expired, m)
		}
	}
	slices.SortFunc(expired, func(a, b *consumerMember) int { return cmp.Compare(a.id, b.id) })
	for _, m := range expired {
		reason := "session expired"
		if o.now.Before(m.sessionDeadline) {
			reason = "did not revoke its partitions within the rebalance timeout"
		}
		c.log.Info().Str("group", g.name).Str("member", m.id).Msg("consumer group member fenced: " + reason)
		c.metrics.expiredMembers.Inc()
		c.removeConsumerMemberLocked(g, m, w)
	}
	if len(expired) > 0 {
		if err := c.writeConsumerLocked(o, g, w); err != nil {
			c.log.Warn().Err(err).Str("group", g.name).Msg("storing a consumer group change failed")
			return
		}
		c.maybeDowngradeLocked(o, g)
	}
}

// validateConsumerOffsetCommit is Kafka's ConsumerGroup.validateOffsetCommit
// (KIP-848): a member must commit at its current epoch.
func validateConsumerOffsetCommit(g *group, memberID string, epoch int32) error {
	cg := g.cg
	if epoch < 0 && memberID == "" {
		if len(cg.members) == 0 {
			return nil // admin tools and manual assignment
		}
		return fmt.Errorf("%w: consumer group %s has members; commit as one of them", ErrUnknownMemberID, g.name)
	}
	m := cg.members[memberID]
	if m == nil {
		return fmt.Errorf("%w: member %s is not in consumer group %s", ErrUnknownMemberID, memberID, g.name)
	}
	if epoch != m.epoch {
		return fmt.Errorf("%w: member %s is at epoch %d, not %d", ErrStaleMemberEpoch, memberID, m.epoch, epoch)
	}
	return nil
}

// consumerAdminLeaveLocked is LeaveGroup on a consumer group: an
// administrative removal of members (by instance ID, as
// Admin.removeMembersFromConsumerGroup sends it, or by member ID).
// REQUIRES: c.mu held.
func (c *Coordinator) consumerAdminLeaveLocked(o *op, g *group, members []LeaveMember) LeaveResult {
	cg := g.cg
	res := LeaveResult{Members: make([]error, len(members))}
	w := &consumerWrite{now: o.now}
	for i, lm := range members {
		id := lm.MemberID
		if lm.InstanceID != nil {
			sid, ok := cg.staticMembers[*lm.InstanceID]
			if !ok || (id != "" && id != sid) {
				res.Members[i] = fmt.Errorf("%w: instance %s is not in consumer group %s", ErrUnknownMemberID, *lm.InstanceID, g.name)
				continue
			}
			id = sid
		}
		m := cg.members[id]
		if m == nil {
			res.Members[i] = fmt.Errorf("%w: member %s is not in consumer group %s", ErrUnknownMemberID, id, g.name)
			continue
		}
		c.log.Info().Str("group", g.name).Str("member", id).Str("reason", lm.Reason).Msg("consumer group member removed by LeaveGroup")
		c.removeConsumerMemberLocked(g, m, w)
	}
	if err := c.writeConsumerLocked(o, g, w); err != nil {
		return LeaveResult{Err: err}
	}
	c.maybeDowngradeLocked(o, g)
	return res
}
