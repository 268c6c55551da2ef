package groups

// Online upgrade of a classic group with members to a consumer group and
// back (KIP-848, Kafka's group.consumer.migration.policy, default
// bidirectional), and the classic members inside a consumer group: their
// JoinGroup, SyncGroup and Heartbeat are answered from the consumer
// group's assignment, after Kafka's GroupMetadataManager
// (convertToConsumerGroup, classicGroupJoinToConsumerGroup,
// classicGroupSyncToConsumerGroup, classicGroupHeartbeatToConsumerGroup).
//
// What is served (DESIGN.md, "KIP-848 consumer groups"):
//   - A member of the new protocol joining a classic group of protocol
//     type "consumer" converts it: each classic member becomes a member of
//     the consumer group at the group's generation, keeping its
//     subscription (from its protocol metadata) and its assignment; a
//     JoinGroup or SyncGroup waiting in the classic rebalance is answered
//     REBALANCE_IN_PROGRESS (the member rejoins).
//   - A classic member (known, or new through MEMBER_ID_REQUIRED) joins:
//     its subscription is taken from its metadata, the owned partitions of
//     a cooperative member from its metadata (an eager member owns none
//     when it rejoins), and it is reconciled like a heartbeat of the new
//     protocol; JoinGroup answers at once with its member epoch as the
//     generation and no leader (the broker assigns), SyncGroup with its
//     assigned partitions. Its Heartbeat answers REBALANCE_IN_PROGRESS
//     while it has partitions to revoke or to receive, or a new epoch, so
//     that it rejoins.
//   - When the last member of the new protocol leaves or is fenced, a
//     group of classic members only becomes a classic group again
//     (maybeDowngradeLocked) and rebalances.
//   - A classic member's protocols and session timeout are stored as
//     Kafka's ClassicMemberMetadata tagged field (consumer_records.go).
//   - Config.ConsumerMigrationPolicy (group-consumer-migration-policy)
//     turns the upgrade and the downgrade off, as Kafka's policy does.

import (
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/topics"
)

// classicInfo is what a consumer group keeps of a classic member.
type classicInfo struct {
	protocols      []Protocol
	sessionTimeout time.Duration
}

// protocolName is the protocol a classic member is answered with: its
// first, as Kafka answers it.
func (ci *classicInfo) protocolName() string {
	if len(ci.protocols) == 0 {
		return ""
	}
	return ci.protocols[0].Name
}

// upgradeToConsumerLocked converts a classic group with members into a
// consumer group (Kafka's convertToConsumerGroup). REQUIRES: c.mu held.
func (c *Coordinator) upgradeToConsumerLocked(o *op, g *group) error {
	if !c.cfg.upgradeEnabled() {
		return fmt.Errorf("%w: classic group %s has members and the online upgrade is off (group-consumer-migration-policy %s); stop its classic consumers first",
			ErrGroupIDNotFound, g.name, c.cfg.ConsumerMigrationPolicy)
	}
	if !g.usesConsumerProtocol() {
		return fmt.Errorf("%w: group %s is a classic group of protocol type %q; only groups of consumers (protocol type consumer) can be upgraded", ErrGroupIDNotFound, g.name, protocolTypeOf(g))
	}
	if len(g.members) >= c.cfg.MaxGroupSize {
		return fmt.Errorf("%w: classic group %s has %d members", ErrGroupMaxSizeReached, g.name, len(g.members))
	}
	all, _ := c.allTopicsLocked()
	ids := map[string][16]byte{}
	for _, t := range all {
		ids[t.name] = t.id
	}
	members := make([]*consumerMember, 0, len(g.members))
	for _, m := range g.orderedMembers() {
		cm, ok := classicToConsumerMember(g, m, ids)
		if !ok {
			return fmt.Errorf("%w: classic group %s cannot be upgraded: the metadata of member %s is no consumer subscription", ErrGroupIDNotFound, g.name, m.id)
		}
		members = append(members, cm)
	}
	cg := newConsumerGroup()
	cg.groupEpoch, cg.assignmentEpoch = g.generation, g.generation
	w := &consumerWrite{now: o.now, groupMetadata: true, targetMetadata: true}
	for i, m := range g.orderedMembers() {
		cm := members[i]
		cm.sessionDeadline = o.now.Add(m.sessionTimeout)
		cg.members[cm.id] = cm
		if cm.instanceID != nil {
			cg.staticMembers[*cm.instanceID] = cm.id
		}
		assigned := cm.assigned
		cm.assigned = assignment{}
		// A partition two members claim (a stale assignment) stays with
		// the first.
		kept := assignment{}
		for t, ps := range assigned {
			for _, p := range ps {
				if _, held := cg.owners[topicIDPartition{t, p}]; !held {
					kept.add(t, p)
				}
			}
		}
		cg.setHoldings(cm, kept, assignment{})
		cg.target[cm.id] = kept.clone()
		w.memberMetadata(cm.id)
		w.targetMember(cm.id)
		w.current(cm.id)
	}
	for _, m := range g.orderedMembers() {
		g.completeJoin(m, JoinResult{Err: ErrRebalanceInProgress, MemberID: m.id, Generation: -1})
		g.completeSync(m, SyncResult{Err: ErrRebalanceInProgress})
		g.remove(m.id)
	}
	g.pending = map[string]time.Time{}
	g.pendingSync = map[string]bool{}
	g.joinTimer.active, g.syncTimer.active = false, false
	g.protocolType, g.protocolName, g.leader = nil, nil, ""
	g.subscribedTopics = nil
	g.cg = cg
	c.log.Info().Str("group", g.name).Int("members", len(cg.members)).Int32("epoch", cg.groupEpoch).
		Msg("classic group with members upgraded to a consumer group")
	return c.writeConsumerLocked(o, g, w)
}

func protocolTypeOf(g *group) string {
	if g.protocolType == nil {
		return ""
	}
	return *g.protocolType
}

// classicToConsumerMember is a classic member as a member of a consumer
// group: subscription from the metadata of the group's protocol,
// assignment from its last SyncGroup; false when the metadata is no
// consumer subscription.
func classicToConsumerMember(g *group, m *member, ids map[string][16]byte) (*consumerMember, bool) {
	name := ""
	if g.protocolName != nil {
		name = *g.protocolName
	} else if len(m.protocols) > 0 {
		name = m.protocols[0].Name
	}
	topics, _, ok := classicSubscription(m.metadata(name))
	if !ok {
		return nil, false
	}
	assigned := assignment{}
	var a kmsg.ConsumerMemberAssignment
	if len(m.assignment) > 0 && a.ReadFrom(m.assignment) == nil {
		for _, t := range a.Topics {
			if id, ok := ids[t.Topic]; ok {
				for _, p := range t.Partitions {
					assigned.add(id, p)
				}
			}
		}
	}
	protocols := slices.Clone(m.protocols)
	if name != "" {
		// The group's protocol first: the one it is answered with.
		slices.SortStableFunc(protocols, func(a, b Protocol) int {
			switch {
			case a.Name == name && b.Name != name:
				return -1
			case b.Name == name && a.Name != name:
				return 1
			}
			return 0
		})
	}
	return &consumerMember{
		id: m.id, instanceID: m.instanceID, clientID: m.clientID, clientHost: m.clientHost,
		topicNames: topics, rebalanceTimeout: m.rebalanceTimeout,
		epoch: g.generation, previousEpoch: g.generation, state: memberStable,
		assigned: assigned, pending: assignment{},
		classic: &classicInfo{protocols: protocols, sessionTimeout: m.sessionTimeout},
	}, true
}

// classicSubscription reads a classic member's consumer protocol metadata:
// its topics and, from version 1 (cooperative rebalancing), the partitions
// it still owns, by topic name.
func classicSubscription(meta []byte) (topics []string, owned map[string][]int32, ok bool) {
	var s kmsg.ConsumerMemberMetadata
	if err := s.ReadFrom(meta); err != nil {
		return nil, nil, false
	}
	topics = slices.Clone(s.Topics)
	slices.Sort(topics)
	topics = slices.Compact(topics)
	if topics == nil {
		topics = []string{}
	}
	owned = map[string][]int32{}
	for _, t := range s.OwnedPartitions {
		owned[t.Topic] = append(owned[t.Topic], t.Partitions...)
	}
	return topics, owned, true
}

// classicJoinToConsumerLocked answers a JoinGroup sent to a consumer group
// (Kafka's classicGroupJoinToConsumerGroup). REQUIRES: c.mu held.
func (c *Coordinator) classicJoinToConsumerLocked(o *op, g *group, req JoinRequest) JoinResult {
	cg := g.cg
	if req.ProtocolType != "consumer" || len(req.Protocols) == 0 {
		return JoinResult{Err: fmt.Errorf("%w: group %s is a consumer group; only consumers (protocol type consumer) can join it", ErrInconsistentGroupProtocol, g.name), MemberID: req.MemberID, Generation: -1}
	}
	topics, ownedNames, ok := classicSubscription(req.Protocols[0].Metadata)
	if !ok {
		return JoinResult{Err: fmt.Errorf("%w: the metadata of protocol %s is no consumer subscription", ErrInconsistentGroupProtocol, req.Protocols[0].Name), MemberID: req.MemberID, Generation: -1}
	}
	if req.MemberID == "" {
		id := generateMemberID(req.ClientID, req.InstanceID)
		if req.Version >= 4 && req.InstanceID == nil {
			return JoinResult{Err: ErrMemberIDRequired, MemberID: id, Generation: -1}
		}
		req.MemberID = id
	}
	w := &consumerWrite{now: o.now}
	m := cg.members[req.MemberID]
	if m == nil && req.InstanceID != nil {
		if old, ok := cg.staticMembers[*req.InstanceID]; ok && cg.members[old] != nil {
			m = c.replaceStaticConsumerLocked(g, cg.members[old], req.MemberID, w)
		}
	}
	if m == nil {
		if len(cg.members) >= c.cfg.MaxGroupSize {
			return JoinResult{Err: fmt.Errorf("%w: consumer group %s has %d members", ErrGroupMaxSizeReached, g.name, len(cg.members)), MemberID: req.MemberID, Generation: -1}
		}
		m = &consumerMember{id: req.MemberID, instanceID: req.InstanceID, state: memberStable, assigned: assignment{}, pending: assignment{}}
		cg.members[m.id] = m
		if m.instanceID != nil {
			cg.staticMembers[*m.instanceID] = m.id
		}
		w.current(m.id)
	}
	m.classic = &classicInfo{protocols: slices.Clone(req.Protocols), sessionTimeout: req.SessionTimeout}
	w.memberMetadata(m.id)
	hb := ConsumerHeartbeatRequest{
		Group: g.name, MemberID: m.id, InstanceID: req.InstanceID, ClientID: req.ClientID, ClientHost: req.ClientHost,
		RebalanceTimeoutMillis: int32(min(req.RebalanceTimeout.Milliseconds(), int64(1<<31-1))),
		SubscribedTopicNames:   topics,
	}
	c.applyMemberUpdateLocked(g, m, &hb, w)
	// What the member owns now: an eager member revoked everything before
	// it rejoined; a cooperative one lists what it kept.
	owned := assignment{}
	all, _ := c.allTopicsLocked()
	for _, t := range all {
		for _, p := range ownedNames[t.name] {
			if m.assigned.has(t.id, p) || m.pending.has(t.id, p) {
				owned.add(t.id, p)
			}
		}
	}
	// The rejoin ends the wait for it; revoking again starts a new one.
	m.revokeDeadline = time.Time{}
	c.reconcileMemberLocked(g, m, owned, o.now, w)
	if m.state == memberUnrevokedPartitions && m.revokeDeadline.IsZero() {
		m.revokeDeadline = o.now.Add(m.rebalanceTimeout)
	}
	m.sessionDeadline = o.now.Add(req.SessionTimeout)
	if err := c.writeConsumerLocked(o, g, w); err != nil {
		return JoinResult{Err: err, MemberID: m.id, Generation: -1}
	}
	pt, pn := "consumer", m.classic.protocolName()
	return JoinResult{MemberID: m.id, Generation: m.epoch, ProtocolType: &pt, ProtocolName: &pn}
}

// classicMemberLocked finds a classic member of a consumer group and checks
// its generation against its member epoch. REQUIRES: c.mu held.
func classicMemberLocked(g *group, memberID string, instanceID *string, generation int32) (*consumerMember, error) {
	m := g.cg.members[memberID]
	if m == nil {
		return nil, fmt.Errorf("%w: member %s is not in consumer group %s", ErrUnknownMemberID, memberID, g.name)
	}
	if instanceID != nil && (m.instanceID == nil || *m.instanceID != *instanceID) {
		return nil, fmt.Errorf("%w: instance %s belongs to another member", ErrFencedInstanceID, *instanceID)
	}
	if generation != m.epoch {
		return nil, fmt.Errorf("%w: generation %d, the member is at epoch %d", ErrIllegalGeneration, generation, m.epoch)
	}
	return m, nil
}

// classicSyncToConsumerLocked answers a SyncGroup sent to a consumer
// group: the member's assigned partitions in the consumer protocol's
// assignment format (Kafka's classicGroupSyncToConsumerGroup).
// REQUIRES: c.mu held.
func (c *Coordinator) classicSyncToConsumerLocked(g *group, req SyncRequest) SyncResult {
	m, err := classicMemberLocked(g, req.MemberID, req.InstanceID, req.Generation)
	if err != nil {
		return SyncResult{Err: err}
	}
	pt, pn := "consumer", ""
	if m.classic != nil {
		pn = m.classic.protocolName()
	}
	if inconsistent(req.ProtocolType, &pt) || (pn != "" && inconsistent(req.ProtocolName, &pn)) {
		return SyncResult{Err: ErrInconsistentGroupProtocol}
	}
	names := map[[16]byte]string{}
	all, _ := c.allTopicsLocked()
	for _, t := range all {
		names[t.id] = t.name
	}
	a := kmsg.NewConsumerMemberAssignment()
	for _, t := range m.assigned.sortedTopics() {
		if name, ok := names[t]; ok {
			a.Topics = append(a.Topics, kmsg.ConsumerMemberAssignmentTopic{Topic: name, Partitions: slices.Clone(m.assigned[t])})
		}
	}
	return SyncResult{ProtocolType: &pt, ProtocolName: &pn, Assignment: a.AppendTo(nil)}
}

// classicHeartbeatToConsumerLocked answers a Heartbeat sent to a consumer
// group (Kafka's classicGroupHeartbeatToConsumerGroup): it keeps the
// member's session and answers REBALANCE_IN_PROGRESS while the member is
// behind the group epoch, has partitions to revoke, or waits for one that
// is free now, so that it rejoins; the member itself changes only when it
// rejoins (its generation stays valid for its commits until then). A
// member told to rejoin that does not within its rebalance timeout is
// fenced. REQUIRES: c.mu held.
func (c *Coordinator) classicHeartbeatToConsumerLocked(o *op, g *group, req HeartbeatRequest) error {
	m, err := classicMemberLocked(g, req.MemberID, req.InstanceID, req.Generation)
	if err != nil {
		return err
	}
	cg := g.cg
	timeout := c.cfg.ConsumerSessionTimeout
	if m.classic != nil {
		timeout = m.classic.sessionTimeout
	}
	m.sessionDeadline = o.now.Add(timeout)
	if m.epoch != cg.groupEpoch || m.state == memberUnrevokedPartitions ||
		(m.state == memberUnreleasedPartitions && cg.waitingOnFreePartition(m)) {
		if m.revokeDeadline.IsZero() {
			m.revokeDeadline = o.now.Add(m.rebalanceTimeout)
		}
		return ErrRebalanceInProgress
	}
	return nil
}

// waitingOnFreePartition reports whether a partition of m's target that m
// does not have yet is held by no member any more (Kafka's
// ConsumerGroup.waitingOnUnreleasedPartition).
func (cg *consumerGroup) waitingOnFreePartition(m *consumerMember) bool {
	for t, ps := range cg.target[m.id] {
		for _, p := range ps {
			if _, held := cg.owners[topicIDPartition{t, p}]; !held && !m.assigned.has(t, p) {
				return true
			}
		}
	}
	return false
}

// maybeDowngradeLocked turns a consumer group whose members are all
// classic back into a classic group (Kafka's convertToClassicGroup, policy
// bidirectional), after a member of the new protocol left or was fenced:
// the classic group starts at the group epoch as its generation, its
// members keep their protocols and last assignment, and it prepares a
// rebalance, which the members join on their next heartbeat. Its
// consumer-group records get tombstones; its GroupMetadata is written when
// that rebalance completes, as for any classic group. REQUIRES: c.mu held.
func (c *Coordinator) maybeDowngradeLocked(o *op, g *group) {
	cg := g.cg
	if cg == nil || len(cg.members) == 0 || !c.cfg.downgradeEnabled() {
		return
	}
	for _, m := range cg.members {
		if m.classic == nil {
			return
		}
	}
	recs, rows := consumerDeleteRecords(g)
	for _, m := range cg.sortedMembers() {
		id := m.id
		for _, typ := range []int16{recConsumerCurrentAssignment, recConsumerTargetMember, recConsumerMemberMetadata} {
			recs = append(recs, topics.Record{Key: consumerRecordKey(typ, g.name, &id)})
		}
	}
	if _, _, err := c.appendLocked(o, g, recs, rows); err != nil {
		c.log.Warn().Err(err).Str("group", g.name).Msg("downgrading a consumer group to a classic group failed; it stays a consumer group")
		return
	}
	names := map[[16]byte]string{}
	all, _ := c.allTopicsLocked()
	for _, t := range all {
		names[t.id] = t.name
	}
	members := cg.sortedMembers()
	g.cg = nil
	g.generation = cg.groupEpoch
	for _, cm := range members {
		a := kmsg.NewConsumerMemberAssignment()
		for _, t := range cm.assigned.sortedTopics() {
			if name, ok := names[t]; ok {
				a.Topics = append(a.Topics, kmsg.ConsumerMemberAssignmentTopic{Topic: name, Partitions: slices.Clone(cm.assigned[t])})
			}
		}
		m := &member{
			id: cm.id, instanceID: cm.instanceID, clientID: cm.clientID, clientHost: cm.clientHost,
			protocolType: "consumer", protocols: cm.classic.protocols,
			rebalanceTimeout: cm.rebalanceTimeout, sessionTimeout: cm.classic.sessionTimeout,
			assignment: a.AppendTo(nil), heartbeatDeadline: o.now.Add(cm.classic.sessionTimeout),
		}
		g.add(m, nil)
	}
	name := g.selectProtocol()
	g.protocolName = &name
	g.transitionTo(StateStable, o.now)
	c.log.Info().Str("group", g.name).Int("members", len(members)).Int32("generation", g.generation).
		Msg("consumer group with only classic members downgraded to a classic group")
	c.prepareRebalanceLocked(o, g)
}
