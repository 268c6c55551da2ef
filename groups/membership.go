package groups

// The classic group membership protocol: JoinGroup, SyncGroup, Heartbeat,
// LeaveGroup and the rebalance they drive. Function for function this
// follows Apache Kafka's GroupMetadataManager (classicGroupJoin,
// completeClassicGroupJoin, classicGroupSync, ...).

import (
	"time"
)

func joinFailed(res JoinResult, err error) JoinResult {
	return JoinResult{Err: err, MemberID: res.MemberID, Generation: -1}
}

func syncFailed(_ SyncResult, err error) SyncResult { return SyncResult{Err: err} }

// Join handles a JoinGroup request. The result arrives through the Future:
// at once for errors and for members that need no rebalance, else when the
// rebalance's join phase completes.
func (c *Coordinator) Join(req JoinRequest, now time.Time) *Future[JoinResult] {
	fail := func(err error) *Future[JoinResult] {
		return resolved(JoinResult{Err: err, MemberID: req.MemberID, Generation: -1}, joinFailed)
	}
	if req.Group == "" {
		return fail(ErrInvalidGroupID)
	}
	if req.SessionTimeout < c.cfg.MinSessionTimeout || req.SessionTimeout > c.cfg.MaxSessionTimeout {
		return fail(ErrInvalidSessionTimeout)
	}
	size := 0
	for _, p := range req.Protocols {
		size += len(p.Name) + len(p.Metadata)
	}
	if size > c.cfg.MaxMemberMetadataBytes {
		return fail(ErrInvalidRequest)
	}
	req.RebalanceTimeout = max(req.RebalanceTimeout, 0)

	f := newFuture(joinFailed)
	o := &op{now: now}
	c.mu.Lock()
	g := c.mu.groups[req.Group]
	if g == nil {
		if req.MemberID != "" {
			c.mu.Unlock()
			return fail(ErrUnknownMemberID)
		}
		g = c.newGroupLocked(req.Group)
	}
	if g.cg != nil {
		if len(g.cg.members) > 0 {
			// A classic member of a consumer group (consumer_classic.go).
			f.ch <- c.classicJoinToConsumerLocked(o, g, req)
			c.mu.Unlock()
			f.persists = o.persists
			return f
		}
		if err := c.convertToClassicLocked(o, g); err != nil {
			c.mu.Unlock()
			return fail(err)
		}
	}
	c.joinLocked(o, g, req, f.ch)
	c.dropIfUnusedLocked(g)
	c.mu.Unlock()
	f.persists = o.persists
	return f
}

// acceptJoiningMemberLocked is Kafka's acceptJoiningMember: the group size
// limit.
func (c *Coordinator) acceptJoiningMemberLocked(g *group, memberID string) bool {
	m := g.members[memberID]
	switch g.state {
	case StatePreparingRebalance:
		return (m != nil && m.awaitingJoin()) || g.numAwaitingJoin < c.cfg.MaxGroupSize
	case StateCompletingRebalance, StateStable:
		return m != nil || len(g.members) < c.cfg.MaxGroupSize
	default:
		return true
	}
}

func (c *Coordinator) joinLocked(o *op, g *group, req JoinRequest, ch chan JoinResult) {
	if !c.acceptJoiningMemberLocked(g, req.MemberID) {
		if req.MemberID != "" {
			g.remove(req.MemberID)
		}
		ch <- JoinResult{Err: ErrGroupMaxSizeReached, Generation: -1}
		return
	}
	if req.MemberID == "" {
		c.joinNewMemberLocked(o, g, req, ch)
	} else {
		c.joinExistingMemberLocked(o, g, req, ch)
	}
}

func (c *Coordinator) joinNewMemberLocked(o *op, g *group, req JoinRequest, ch chan JoinResult) {
	switch {
	case g.is(StateDead):
		ch <- JoinResult{Err: ErrCoordinatorNotAvailable, Generation: -1}
		return
	case !g.supportsProtocols(req.ProtocolType, req.Protocols):
		ch <- JoinResult{Err: ErrInconsistentGroupProtocol, Generation: -1}
		return
	}
	newID := generateMemberID(req.ClientID, req.InstanceID)
	if req.InstanceID != nil {
		if oldID, ok := g.staticMembers[*req.InstanceID]; ok {
			c.log.Info().Str("group", g.name).Str("instance", *req.InstanceID).Str("old_member", oldID).Str("member", newID).
				Msg("static member rejoined with an unknown member id; replacing the previous member")
			c.updateStaticMemberLocked(o, g, req, memberIDChange{from: oldID, to: newID}, ch)
			return
		}
		c.addMemberLocked(o, g, req, newID, ch)
		return
	}
	if req.Version >= 4 {
		// KIP-394: the member must come back with this ID, so that a
		// client retrying a lost response does not add a defunct member.
		g.pending[newID] = o.now.Add(req.SessionTimeout)
		ch <- JoinResult{Err: ErrMemberIDRequired, MemberID: newID, Generation: -1}
		return
	}
	c.addMemberLocked(o, g, req, newID, ch)
}

func (c *Coordinator) joinExistingMemberLocked(o *op, g *group, req JoinRequest, ch chan JoinResult) {
	id := req.MemberID
	fail := func(err error) { ch <- JoinResult{Err: err, MemberID: id, Generation: -1} }
	switch {
	case g.is(StateDead):
		fail(ErrCoordinatorNotAvailable)
		return
	case !g.supportsProtocols(req.ProtocolType, req.Protocols):
		fail(ErrInconsistentGroupProtocol)
		return
	}
	if _, ok := g.pending[id]; ok {
		if req.InstanceID != nil {
			// A pending member is never static (Kafka treats this as
			// an illegal state); refuse without changing anything.
			fail(ErrUnknownMemberID)
			return
		}
		c.addMemberLocked(o, g, req, id, ch)
		return
	}
	if err := g.validateMember(id, req.InstanceID); err != nil {
		fail(err)
		return
	}
	m := g.members[id]
	current := func(withMembers bool) JoinResult {
		res := JoinResult{MemberID: id, Generation: g.generation, ProtocolType: g.protocolType, ProtocolName: g.protocolName, Leader: g.leader}
		if withMembers {
			res.Members = g.currentMembers()
		}
		return res
	}
	switch g.state {
	case StatePreparingRebalance:
		c.updateMemberLocked(o, g, m, req, ch)
	case StateCompletingRebalance:
		if m.matches(req.Protocols) {
			// The member lost its JoinGroup response: answer again.
			ch <- current(g.isLeader(id))
			return
		}
		c.updateMemberLocked(o, g, m, req, ch)
	case StateStable:
		if g.isLeader(id) || !m.matches(req.Protocols) {
			// The leader rejoining forces a rebalance: that is how a
			// consumer leader reacts to metadata changes.
			c.updateMemberLocked(o, g, m, req, ch)
			return
		}
		ch <- current(false)
	default:
		fail(ErrUnknownMemberID)
	}
}

func (c *Coordinator) updateMemberLocked(o *op, g *group, m *member, req JoinRequest, ch chan JoinResult) {
	g.updateMember(m, req.Protocols, req.RebalanceTimeout, req.SessionTimeout, ch)
	c.maybePrepareRebalanceOrCompleteJoinLocked(o, g)
}

func (c *Coordinator) addMemberLocked(o *op, g *group, req JoinRequest, id string, ch chan JoinResult) {
	m := &member{
		id:               id,
		instanceID:       req.InstanceID,
		clientID:         req.ClientID,
		clientHost:       req.ClientHost,
		protocolType:     req.ProtocolType,
		protocols:        req.Protocols,
		rebalanceTimeout: req.RebalanceTimeout,
		sessionTimeout:   req.SessionTimeout,
		isNew:            true,
	}
	if g.is(StatePreparingRebalance) && g.previousState == StateEmpty {
		g.newMemberAdded = true // extends the initial delay
	}
	g.add(m, ch)
	// A new member cannot heartbeat while it waits in JoinGroup; bound
	// that wait instead (KIP-394).
	m.heartbeatDeadline = o.now.Add(c.cfg.NewMemberJoinTimeout)
	c.maybePrepareRebalanceOrCompleteJoinLocked(o, g)
}

// replaceStaticMemberLocked gives a static member a new member ID, keeping
// its protocols and assignment, and fences whoever waits under the old ID.
func (c *Coordinator) replaceStaticMemberLocked(g *group, instanceID, oldID, newID string) *member {
	old := g.members[oldID]
	if old.joinWait != nil {
		old.joinWait <- JoinResult{Err: ErrFencedInstanceID, MemberID: oldID, Generation: -1}
		old.joinWait = nil
		g.numAwaitingJoin--
	}
	g.completeSync(old, SyncResult{Err: ErrFencedInstanceID})
	m := &member{
		id:               newID,
		instanceID:       old.instanceID,
		clientID:         old.clientID,
		clientHost:       old.clientHost,
		protocolType:     old.protocolType,
		protocols:        old.protocols,
		rebalanceTimeout: old.rebalanceTimeout,
		sessionTimeout:   old.sessionTimeout,
		assignment:       old.assignment,
	}
	delete(g.members, oldID)
	g.members[newID] = m
	for i, mid := range g.memberOrder {
		if mid == oldID {
			g.memberOrder[i] = newID
		}
	}
	if g.leader == oldID {
		g.leader = newID
	}
	delete(g.pendingSync, oldID)
	g.staticMembers[instanceID] = newID
	return m
}

// updateStaticMemberLocked is Kafka's
// updateStaticMemberThenRebalanceOrCompleteJoin: a static member coming
// back (e.g. after a restart) takes its old place; in a Stable group whose
// protocol it does not change, without a rebalance (KIP-345).
func (c *Coordinator) updateStaticMemberLocked(o *op, g *group, req JoinRequest, ids memberIDChange, ch chan JoinResult) {
	oldID, newID := ids.from, ids.to
	currentLeader := g.leader
	m := c.replaceStaticMemberLocked(g, *req.InstanceID, oldID, newID)
	m.heartbeatDeadline = o.now.Add(m.sessionTimeout)
	oldProtocols, oldRebalance, oldSession := m.protocols, m.rebalanceTimeout, m.sessionTimeout
	g.updateMember(m, req.Protocols, req.RebalanceTimeout, req.SessionTimeout, ch)

	switch g.state {
	case StateStable:
		if g.protocolName == nil || *g.protocolName != g.selectProtocol() {
			c.maybePrepareRebalanceOrCompleteJoinLocked(o, g)
			return
		}
		if _, err := c.persistMetadataLocked(o, g); err != nil {
			// Not stored: put the old member back.
			g.updateMember(m, oldProtocols, oldRebalance, oldSession, nil)
			old := c.replaceStaticMemberLocked(g, *req.InstanceID, newID, oldID)
			old.heartbeatDeadline = o.now.Add(old.sessionTimeout)
			ch <- JoinResult{Err: err, Generation: g.generation, ProtocolType: g.protocolType, ProtocolName: g.protocolName, Leader: currentLeader}
			return
		}
		res := JoinResult{MemberID: newID, Generation: g.generation, ProtocolType: g.protocolType, ProtocolName: g.protocolName, Leader: currentLeader}
		if req.Version >= 9 {
			// KIP-814: a leader that needs no new assignment learns the
			// members and skips assigning.
			res.Leader = g.leader
			if g.isLeader(newID) {
				res.Members = g.currentMembers()
				res.SkipAssignment = true
			}
		}
		g.completeJoin(m, res)
	case StateCompletingRebalance:
		// The leader may already have assigned to the old ID: rebalance.
		c.prepareRebalanceLocked(o, g)
	default:
		c.maybeCompleteJoinPhaseLocked(o, g)
	}
}

// maybePrepareRebalanceOrCompleteJoinLocked starts a rebalance if the state
// allows one, else tries to finish the current join phase.
func (c *Coordinator) maybePrepareRebalanceOrCompleteJoinLocked(o *op, g *group) {
	if g.state.canRebalanceFrom() {
		c.prepareRebalanceLocked(o, g)
	} else {
		c.maybeCompleteJoinPhaseLocked(o, g)
	}
}

// prepareRebalanceLocked enters PreparingRebalance. From Empty the join
// phase lasts at least the initial rebalance delay; otherwise it completes
// as soon as every member has rejoined, or at the rebalance timeout.
func (c *Coordinator) prepareRebalanceLocked(o *op, g *group) {
	if g.is(StateCompletingRebalance) {
		c.resetAndPropagateAssignmentErrorLocked(o, g, ErrRebalanceInProgress)
	}
	g.syncTimer.active = false
	clear(g.pendingSync)

	initial := g.is(StateEmpty)
	if initial {
		d := c.cfg.InitialRebalanceDelay
		g.joinTimer = timer{active: true, deadline: o.now.Add(d), initial: true, delay: d, remaining: max(g.rebalanceTimeout()-d, 0)}
	}
	g.transitionTo(StatePreparingRebalance, o.now)
	c.metrics.rebalances.Inc()
	c.log.Debug().Str("group", g.name).Int32("generation", g.generation).Int("members", len(g.members)).Msg("preparing to rebalance")
	if initial {
		return
	}
	if g.hasAllMembersJoined() {
		c.completeJoinLocked(o, g)
		return
	}
	g.joinTimer = timer{active: true, deadline: o.now.Add(g.rebalanceTimeout())}
}

// maybeCompleteJoinPhaseLocked completes the join phase when every member
// has rejoined, except during an initial rebalance, which waits its delay.
func (c *Coordinator) maybeCompleteJoinPhaseLocked(o *op, g *group) {
	if !g.is(StatePreparingRebalance) || g.previousState == StateEmpty || !g.hasAllMembersJoined() {
		return
	}
	c.completeJoinLocked(o, g)
}

// tryCompleteInitialRebalanceLocked fires when an initial delay ends:
// while new members keep arriving, the delay is extended up to the
// rebalance timeout.
func (c *Coordinator) tryCompleteInitialRebalanceLocked(o *op, g *group, delay, remaining time.Duration) {
	if g.newMemberAdded && remaining != 0 {
		g.newMemberAdded = false
		newDelay := min(c.cfg.InitialRebalanceDelay, remaining)
		newRemaining := max(remaining-delay, 0)
		g.joinTimer = timer{active: true, deadline: o.now.Add(newDelay), initial: true, delay: newDelay, remaining: newRemaining}
		return
	}
	c.completeJoinLocked(o, g)
}

// completeJoinLocked ends the join phase: dynamic members that did not
// rejoin are removed, the next generation starts, and every waiting member
// gets its JoinGroup response (the leader with the member list).
func (c *Coordinator) completeJoinLocked(o *op, g *group) {
	g.joinTimer.active = false
	for _, m := range g.orderedMembers() {
		if !m.awaitingJoin() && m.instanceID == nil {
			c.log.Info().Str("group", g.name).Str("member", m.id).Msg("member did not rejoin in time; removing it")
			g.remove(m.id)
		}
	}
	if g.is(StateDead) {
		return
	}
	if !g.maybeElectNewJoinedLeader() && len(g.members) > 0 {
		// No member rejoined: wait another rebalance timeout, until the
		// session timeouts remove the silent members.
		g.joinTimer = timer{active: true, deadline: o.now.Add(g.rebalanceTimeout())}
		return
	}
	g.initNextGeneration(o.now)
	if g.is(StateEmpty) {
		c.log.Info().Str("group", g.name).Int32("generation", g.generation).Msg("group is empty")
		_, _ = c.persistMetadataLocked(o, g)
		return
	}
	c.log.Info().Str("group", g.name).Int32("generation", g.generation).Int("members", len(g.members)).
		Str("protocol", *g.protocolName).Msg("group rebalanced: waiting for the leader's assignment")
	for _, m := range g.orderedMembers() {
		res := JoinResult{MemberID: m.id, Generation: g.generation, ProtocolType: g.protocolType, ProtocolName: g.protocolName, Leader: g.leader}
		if g.isLeader(m.id) {
			res.Members = g.currentMembers()
		}
		g.completeJoin(m, res)
		m.heartbeatDeadline = o.now.Add(m.sessionTimeout)
		m.isNew = false
		g.pendingSync[m.id] = true
	}
	g.syncTimer = timer{active: true, deadline: o.now.Add(g.rebalanceTimeout()), generation: g.generation}
}

// expirePendingSyncLocked removes the members that did not send SyncGroup
// within the rebalance timeout of generation gen, and rebalances.
func (c *Coordinator) expirePendingSyncLocked(o *op, g *group, gen int32) {
	if gen != g.generation || !(g.is(StateCompletingRebalance) || g.is(StateStable)) || len(g.pendingSync) == 0 {
		return
	}
	for _, m := range g.orderedMembers() {
		if g.pendingSync[m.id] {
			c.log.Info().Str("group", g.name).Str("member", m.id).Msg("member did not sync in time; removing it")
			g.remove(m.id)
		}
	}
	clear(g.pendingSync)
	c.prepareRebalanceLocked(o, g)
}

// removeMemberAndUpdateLocked removes an expired member and moves the
// rebalance on.
func (c *Coordinator) removeMemberAndUpdateLocked(o *op, g *group, m *member) {
	g.remove(m.id)
	switch {
	case g.is(StateStable) || g.is(StateCompletingRebalance):
		c.maybePrepareRebalanceOrCompleteJoinLocked(o, g)
	case g.is(StatePreparingRebalance) && g.hasAllMembersJoined():
		c.completeJoinLocked(o, g)
	}
}

func (c *Coordinator) resetAndPropagateAssignmentErrorLocked(o *op, g *group, err error) {
	for _, m := range g.members {
		m.assignment = nil
	}
	c.propagateAssignmentLocked(o, g, err, nil)
}

// propagateAssignmentLocked answers every waiting SyncGroup with the
// member's assignment (or err). durable is the write the answers must not
// overtake.
func (c *Coordinator) propagateAssignmentLocked(o *op, g *group, err error, durable *persist) {
	for _, m := range g.orderedMembers() {
		res := SyncResult{Err: err, Assignment: nonNil(m.assignment), durable: durable}
		if err == nil {
			res.ProtocolType, res.ProtocolName = g.protocolType, g.protocolName
		}
		if g.completeSync(m, res) {
			m.heartbeatDeadline = o.now.Add(m.sessionTimeout)
		}
	}
}

// Sync handles a SyncGroup request. The leader's assignment completes the
// rebalance; followers that sync first wait for it.
func (c *Coordinator) Sync(req SyncRequest, now time.Time) *Future[SyncResult] {
	fail := func(err error) *Future[SyncResult] { return resolved(SyncResult{Err: err}, syncFailed) }
	if req.Group == "" {
		return fail(ErrInvalidGroupID)
	}
	f := newFuture(syncFailed)
	f.dependsOn = func(res SyncResult) *persist { return res.durable }
	o := &op{now: now}
	c.mu.Lock()
	defer func() {
		c.mu.Unlock()
		f.persists = o.persists
	}()
	g := c.mu.groups[req.Group]
	if g != nil && g.cg != nil {
		f.ch <- c.classicSyncToConsumerLocked(g, req)
		return f
	}
	if g == nil || g.is(StateEmpty) {
		f.ch <- SyncResult{Err: ErrUnknownMemberID}
		return f
	}
	if err := validateSync(g, req); err != nil {
		f.ch <- SyncResult{Err: err}
		return f
	}
	m := g.members[req.MemberID]
	switch g.state {
	case StatePreparingRebalance:
		f.ch <- SyncResult{Err: ErrRebalanceInProgress}
	case StateCompletingRebalance:
		if g.isLeader(m.id) {
			for _, a := range req.Assignments {
				if len(a.Assignment) > c.cfg.MaxMemberMetadataBytes {
					// Refused before anything changes: the leader
					// may sync again before the deadline.
					f.ch <- SyncResult{Err: ErrInvalidRequest}
					return f
				}
			}
		}
		if m.syncWait != nil {
			m.syncWait <- SyncResult{Err: ErrRebalanceInProgress} // a duplicate sync: free the first
		}
		m.syncWait = f.ch
		delete(g.pendingSync, m.id)
		if len(g.pendingSync) == 0 {
			g.syncTimer.active = false
		}
		if g.isLeader(m.id) {
			c.leaderSyncLocked(o, g, req)
		}
	case StateStable:
		delete(g.pendingSync, m.id)
		if len(g.pendingSync) == 0 {
			g.syncTimer.active = false
		}
		f.ch <- SyncResult{ProtocolType: g.protocolType, ProtocolName: g.protocolName, Assignment: nonNil(m.assignment), durable: g.metadataPersist}
	default:
		f.ch <- SyncResult{Err: ErrUnknownMemberID}
	}
	return f
}

func validateSync(g *group, req SyncRequest) error {
	if g.is(StateDead) {
		return ErrCoordinatorNotAvailable
	}
	if err := g.validateMember(req.MemberID, req.InstanceID); err != nil {
		return err
	}
	if req.Generation != g.generation {
		return ErrIllegalGeneration
	}
	if inconsistent(req.ProtocolType, g.protocolType) || inconsistent(req.ProtocolName, g.protocolName) {
		return ErrInconsistentGroupProtocol
	}
	return nil
}

func inconsistent(asked, have *string) bool { return asked != nil && have != nil && *asked != *have }

// leaderSyncLocked takes the leader's assignment: it is stored with the
// group's metadata, then every waiting member gets its part and the group
// is Stable. Members the leader left out get an empty assignment.
func (c *Coordinator) leaderSyncLocked(o *op, g *group, req SyncRequest) {
	assignment := make(map[string][]byte, len(req.Assignments))
	for _, a := range req.Assignments {
		assignment[a.MemberID] = a.Assignment
	}
	for _, m := range g.members {
		m.assignment = nonNil(assignment[m.id])
	}
	ps, err := c.persistMetadataLocked(o, g)
	if err != nil {
		c.resetAndPropagateAssignmentErrorLocked(o, g, err)
		c.maybePrepareRebalanceOrCompleteJoinLocked(o, g)
		return
	}
	gen := g.generation
	ps.after = func(err error) {
		if err == nil {
			return
		}
		// The assignment was not stored: make the members rejoin.
		o2 := &op{now: o.now}
		c.mu.Lock()
		if c.mu.groups[g.name] == g && g.generation == gen && g.is(StateStable) {
			c.prepareRebalanceLocked(o2, g)
		}
		c.mu.Unlock()
		_ = o2.waitAll()
	}
	g.metadataPersist = ps
	g.transitionTo(StateStable, o.now)
	c.metrics.completedRebalances.Inc()
	c.log.Info().Str("group", g.name).Int32("generation", g.generation).Int("members", len(g.members)).Msg("group is stable")
	c.propagateAssignmentLocked(o, g, nil, ps)
}

// Heartbeat handles a Heartbeat request: it keeps the member's session
// and tells it of a rebalance with ErrRebalanceInProgress.
func (c *Coordinator) Heartbeat(req HeartbeatRequest, now time.Time) error {
	if req.Group == "" {
		return ErrInvalidGroupID
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.mu.groups[req.Group]
	if g == nil {
		return ErrUnknownMemberID
	}
	if g.is(StateDead) {
		return ErrCoordinatorNotAvailable
	}
	if g.cg != nil {
		return c.classicHeartbeatToConsumerLocked(&op{now: now}, g, req)
	}
	if err := g.validateMember(req.MemberID, req.InstanceID); err != nil {
		return err
	}
	if req.Generation != g.generation {
		return ErrIllegalGeneration
	}
	m := g.members[req.MemberID]
	switch g.state {
	case StatePreparingRebalance:
		m.heartbeatDeadline = now.Add(m.sessionTimeout)
		return ErrRebalanceInProgress
	case StateCompletingRebalance, StateStable:
		m.heartbeatDeadline = now.Add(m.sessionTimeout)
		return nil
	default:
		return ErrUnknownMemberID
	}
}

// Leave handles a LeaveGroup request for one or more members.
func (c *Coordinator) Leave(groupName string, members []LeaveMember, now time.Time) *Future[LeaveResult] {
	failed := func(res LeaveResult, err error) LeaveResult { return LeaveResult{Err: err} }
	if groupName == "" {
		return resolved(LeaveResult{Err: ErrInvalidGroupID}, failed)
	}
	f := newFuture(failed)
	o := &op{now: now}
	c.mu.Lock()
	g := c.mu.groups[groupName]
	switch {
	case g == nil:
		f.ch <- LeaveResult{Err: ErrUnknownMemberID}
	case g.is(StateDead):
		f.ch <- LeaveResult{Err: ErrCoordinatorNotAvailable}
	default:
		f.ch <- c.leaveLocked(o, g, members)
	}
	c.mu.Unlock()
	f.persists = o.persists
	return f
}

func (c *Coordinator) leaveLocked(o *op, g *group, members []LeaveMember) LeaveResult {
	if g.cg != nil {
		return c.consumerAdminLeaveLocked(o, g, members)
	}
	res := LeaveResult{Members: make([]error, len(members))}
	left := 0
	for i, lm := range members {
		switch {
		case lm.MemberID == "":
			// Administrative removal of a static member by instance ID.
			if lm.InstanceID == nil {
				res.Members[i] = ErrUnknownMemberID
				continue
			}
			id, ok := g.staticMembers[*lm.InstanceID]
			if !ok {
				res.Members[i] = ErrUnknownMemberID
				continue
			}
			c.log.Info().Str("group", g.name).Str("member", id).Str("reason", lm.Reason).Msg("static member removed by LeaveGroup")
			g.remove(id)
			left++
		default:
			if _, ok := g.pending[lm.MemberID]; ok {
				g.remove(lm.MemberID)
				left++
				continue
			}
			if err := g.validateMember(lm.MemberID, lm.InstanceID); err != nil {
				res.Members[i] = err
				continue
			}
			c.log.Info().Str("group", g.name).Str("member", lm.MemberID).Str("reason", lm.Reason).Msg("member left the group")
			g.remove(lm.MemberID)
			left++
		}
	}
	if left > 0 {
		switch g.state {
		case StateStable, StateCompletingRebalance:
			c.maybePrepareRebalanceOrCompleteJoinLocked(o, g)
		case StatePreparingRebalance:
			c.maybeCompleteJoinPhaseLocked(o, g)
		}
	}
	return res
}

// memberIDChange is a static member's old member ID and the new one that
// replaces it.
type memberIDChange struct {
	from, to string
}
