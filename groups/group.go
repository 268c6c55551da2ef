package groups

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"math"
	"time"
	"unicode/utf16"
)

// State is a classic group's state (Kafka ClassicGroupState).
type State int8

// The states of a classic group.
const (
	StateEmpty State = iota
	StatePreparingRebalance
	StateCompletingRebalance
	StateStable
	StateDead
)

var stateNames = [...]string{"Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"}

// String is the state's name as Kafka reports it.
func (s State) String() string {
	if s < 0 || int(s) >= len(stateNames) {
		return "Unknown"
	}
	return stateNames[s]
}

// canRebalanceFrom reports whether PreparingRebalance may follow s.
func (s State) canRebalanceFrom() bool {
	return s == StateStable || s == StateCompletingRebalance || s == StateEmpty
}

// member is one member of a group. Fields are guarded by Coordinator.mu.
type member struct {
	id           string
	instanceID   *string
	clientID     string
	clientHost   string
	protocolType string
	protocols    []Protocol
	// rebalanceTimeout and sessionTimeout are the latest join's.
	rebalanceTimeout time.Duration
	sessionTimeout   time.Duration
	assignment       []byte
	// isNew is set until the member's first join completes: a new member
	// can be expired while it waits in JoinGroup (Kafka KIP-394).
	isNew bool

	// joinWait and syncWait are the waiting JoinGroup and SyncGroup
	// requests, nil when none. Each is buffered (capacity 1) and receives
	// exactly one result; it is set to nil when it does.
	joinWait chan JoinResult
	syncWait chan SyncResult

	// heartbeatDeadline is when the member expires unless it heartbeats;
	// zero when no expiration is scheduled.
	heartbeatDeadline time.Time
}

func (m *member) awaitingJoin() bool { return m.joinWait != nil }
func (m *member) awaitingSync() bool { return m.syncWait != nil }

// hasSatisfiedHeartbeat is Kafka's ClassicGroupMember.hasSatisfiedHeartbeat:
// a member parked in a rebalance does not expire, unless it is new.
func (m *member) hasSatisfiedHeartbeat() bool {
	if m.isNew {
		return false
	}
	return m.awaitingJoin() || m.awaitingSync()
}

// matches reports whether protocols equals the member's, in order.
func (m *member) matches(protocols []Protocol) bool {
	if len(m.protocols) != len(protocols) {
		return false
	}
	for i := range protocols {
		if m.protocols[i].Name != protocols[i].Name || !bytes.Equal(m.protocols[i].Metadata, protocols[i].Metadata) {
			return false
		}
	}
	return true
}

// metadata returns the member's metadata for protocol name.
func (m *member) metadata(name string) []byte {
	for _, p := range m.protocols {
		if p.Name == name {
			return p.Metadata
		}
	}
	return nil
}

// vote is the member's most preferred protocol among candidates.
func (m *member) vote(candidates map[string]bool) string {
	for _, p := range m.protocols {
		if candidates[p.Name] {
			return p.Name
		}
	}
	return ""
}

// topicPartition names one partition in a group's committed offsets.
type topicPartition struct {
	topic     string
	partition int32
}

// offsetEntry is one committed offset.
type offsetEntry struct {
	offset      int64
	leaderEpoch int32
	metadata    string
	commitTime  time.Time
	expireTime  time.Time // zero: governed by the group's retention
	topicID     [16]byte  // the topic the commit was made to
	logOffset   int64     // position of its record in __consumer_offsets
}

// timer is a group-level deadline (Kafka's join and sync timer keys).
type timer struct {
	active   bool
	deadline time.Time
	// initial marks the join timer of an initial rebalance, with the delay
	// it was scheduled with and the rebalance time remaining after it.
	initial          bool
	delay, remaining time.Duration
	// generation is the generation a sync timer was scheduled for.
	generation int32
}

// group is one classic group. Every field is guarded by Coordinator.mu.
type group struct {
	name      string
	id        uint64 // key of the group's rows in the store
	partition int32  // its partition of __consumer_offsets
	// rowWritten is set once the group's store row exists.
	rowWritten bool

	state          State
	previousState  State
	stateTimestamp time.Time // when state was entered; zero if unknown

	generation   int32
	protocolType *string
	protocolName *string
	leader       string // "" when none

	members     map[string]*member
	memberOrder []string // member IDs in the order they were added
	// staticMembers maps instance ID to member ID.
	staticMembers map[string]string
	// pending maps the member IDs handed out with MEMBER_ID_REQUIRED to
	// the deadline by which they must join.
	pending map[string]time.Time
	// pendingSync holds the members that got their JoinGroup response but
	// have not sent SyncGroup.
	pendingSync map[string]bool
	// supportedProtocols counts, per protocol name, the members supporting it.
	supportedProtocols map[string]int
	numAwaitingJoin    int
	newMemberAdded     bool

	joinTimer timer
	syncTimer timer

	// subscribedTopics is the union of the members' subscriptions for a
	// "consumer" group whose metadata parses; nil when unknown.
	subscribedTopics map[string]bool

	offsets map[topicPartition]*offsetEntry
	// pendingCommits counts commits appended but not yet durable; while
	// any is, deletedAt remembers the log position of offsets deleted
	// meanwhile, so that an older commit completing late does not revive
	// them.
	pendingCommits int
	pendingTPs     map[topicPartition]int // partitions with commits not yet durable
	deletedAt      map[topicPartition]int64
	// txnOffsets holds, per producer ID, the offsets a transaction
	// coordinated by another broker committed with TxnOffsetCommit, until
	// its marker commits or drops them (txn_offsets.go); nil when none.
	txnOffsets map[int64]*txnPending
	// lastMetadata is the encoded GroupMetadataValue last stored, nil if
	// none; it is rewritten with the group's store row.
	lastMetadata []byte
	// metadataPersist is the write of lastMetadata, which SyncGroup
	// answers in Stable must not overtake.
	metadataPersist *persist

	// cg is set for a consumer group (KIP-848, consumer.go); the classic
	// membership fields above are then empty, and state is Empty or Stable
	// as the group has members or not (cg.state() is the real state).
	cg *consumerGroup
}

func newGroup(name string, id uint64, partition int32) *group {
	return &group{
		name:               name,
		id:                 id,
		partition:          partition,
		members:            map[string]*member{},
		staticMembers:      map[string]string{},
		pending:            map[string]time.Time{},
		pendingSync:        map[string]bool{},
		supportedProtocols: map[string]int{},
		offsets:            map[topicPartition]*offsetEntry{},
		pendingTPs:         map[topicPartition]int{},
		deletedAt:          map[topicPartition]int64{},
	}
}

func (g *group) is(s State) bool { return g.state == s }

func (g *group) transitionTo(s State, now time.Time) {
	g.previousState = g.state
	g.state = s
	g.stateTimestamp = now
}

func (g *group) orderedMembers() []*member {
	out := make([]*member, 0, len(g.memberOrder))
	for _, id := range g.memberOrder {
		out = append(out, g.members[id])
	}
	return out
}

func (g *group) isLeader(id string) bool { return g.leader != "" && g.leader == id }

// hasAllMembersJoined: every member waits in JoinGroup and no member ID
// handed out with MEMBER_ID_REQUIRED is outstanding.
func (g *group) hasAllMembersJoined() bool {
	return len(g.members) == g.numAwaitingJoin && len(g.pending) == 0
}

// rebalanceTimeout is the largest rebalance timeout of the members.
func (g *group) rebalanceTimeout() time.Duration {
	var out time.Duration
	for _, m := range g.members {
		out = max(out, m.rebalanceTimeout)
	}
	return out
}

// supportsProtocols is Kafka's ClassicGroup.supportsProtocols.
func (g *group) supportsProtocols(protocolType string, protocols []Protocol) bool {
	if g.is(StateEmpty) {
		return protocolType != "" && len(protocols) > 0
	}
	if g.protocolType == nil || *g.protocolType != protocolType {
		return false
	}
	for _, p := range protocols {
		if g.supportedProtocols[p.Name] == len(g.members) {
			return true
		}
	}
	return false
}

func (g *group) incrementProtocols(m *member, delta int) {
	seen := make(map[string]bool, len(m.protocols))
	for _, p := range m.protocols {
		if seen[p.Name] {
			continue // a duplicate name counts once
		}
		seen[p.Name] = true
		g.supportedProtocols[p.Name] += delta
		if g.supportedProtocols[p.Name] <= 0 {
			delete(g.supportedProtocols, p.Name)
		}
	}
}

// add adds m to the group, waiting in JoinGroup on wait (nil: not waiting).
// REQUIRES: the group supports m's protocols; m's instance ID is unmapped.
func (g *group) add(m *member, wait chan JoinResult) {
	if m.instanceID != nil {
		g.staticMembers[*m.instanceID] = m.id
	}
	if len(g.members) == 0 {
		pt := m.protocolType
		g.protocolType = &pt
	}
	if g.leader == "" {
		g.leader = m.id
	}
	g.members[m.id] = m
	g.memberOrder = append(g.memberOrder, m.id)
	g.incrementProtocols(m, 1)
	m.joinWait = wait
	if wait != nil {
		g.numAwaitingJoin++
	}
	delete(g.pending, m.id)
}

// remove drops a member. A JoinGroup or SyncGroup it still waits in is
// answered with UNKNOWN_MEMBER_ID (Kafka answers the join; a waiting sync
// would otherwise hang its connection).
func (g *group) remove(id string) {
	if m, ok := g.members[id]; ok {
		g.completeJoin(m, JoinResult{Err: ErrUnknownMemberID, Generation: -1})
		g.completeSync(m, SyncResult{Err: ErrUnknownMemberID})
		g.incrementProtocols(m, -1)
		delete(g.members, id)
		for i, mid := range g.memberOrder {
			if mid == id {
				g.memberOrder = append(g.memberOrder[:i], g.memberOrder[i+1:]...)
				break
			}
		}
		if m.instanceID != nil && g.staticMembers[*m.instanceID] == id {
			delete(g.staticMembers, *m.instanceID)
		}
	}
	if g.isLeader(id) {
		g.leader = ""
		if len(g.memberOrder) > 0 {
			g.leader = g.memberOrder[0]
		}
	}
	delete(g.pending, id)
	delete(g.pendingSync, id)
}

// updateMember replaces a member's protocols and timeouts and sets (or
// clears, with nil) its waiting JoinGroup.
func (g *group) updateMember(m *member, protocols []Protocol, rebalanceTimeout, sessionTimeout time.Duration, wait chan JoinResult) {
	g.incrementProtocols(m, -1)
	m.protocols = protocols
	g.incrementProtocols(m, 1)
	m.rebalanceTimeout = rebalanceTimeout
	m.sessionTimeout = sessionTimeout
	if m.joinWait != nil && wait != nil {
		// A second JoinGroup from the same member: the first one's
		// connection is answered so that it is not left hanging.
		m.joinWait <- JoinResult{Err: ErrRebalanceInProgress, MemberID: m.id, Generation: -1}
	} else if wait != nil {
		g.numAwaitingJoin++
	} else if m.joinWait != nil {
		g.numAwaitingJoin--
	}
	m.joinWait = wait
}

// completeJoin answers a member's waiting JoinGroup; false if none waits.
func (g *group) completeJoin(m *member, res JoinResult) bool {
	if m.joinWait == nil {
		return false
	}
	m.joinWait <- res
	m.joinWait = nil
	g.numAwaitingJoin--
	return true
}

// completeSync answers a member's waiting SyncGroup; false if none waits.
func (g *group) completeSync(m *member, res SyncResult) bool {
	if m.syncWait == nil {
		return false
	}
	m.syncWait <- res
	m.syncWait = nil
	return true
}

// maybeElectNewJoinedLeader keeps the leader if it rejoined, else picks a
// member that did; false when no member rejoined or there is no leader.
func (g *group) maybeElectNewJoinedLeader() bool {
	if g.leader == "" {
		return false
	}
	if l := g.members[g.leader]; l != nil && l.awaitingJoin() {
		return true
	}
	for _, m := range g.orderedMembers() {
		if m.awaitingJoin() {
			g.leader = m.id
			return true
		}
	}
	return false
}

// selectProtocol lets each member vote for its most preferred protocol
// among those all members support; the most votes win, ties going to the
// protocol first reached in member order.
// REQUIRES: the group has members.
func (g *group) selectProtocol() string {
	candidates := map[string]bool{}
	for name, n := range g.supportedProtocols {
		if n == len(g.members) {
			candidates[name] = true
		}
	}
	votes := map[string]int{}
	var order []string
	for _, m := range g.orderedMembers() {
		v := m.vote(candidates)
		if _, seen := votes[v]; !seen {
			order = append(order, v)
		}
		votes[v]++
	}
	best, bestVotes := "", -1
	for _, name := range order {
		if votes[name] > bestVotes {
			best, bestVotes = name, votes[name]
		}
	}
	return best
}

// initNextGeneration starts the next generation: CompletingRebalance with
// a selected protocol, or Empty without members.
func (g *group) initNextGeneration(now time.Time) {
	g.generation++
	if len(g.members) > 0 {
		p := g.selectProtocol()
		g.protocolName = &p
		g.subscribedTopics = g.computeSubscribedTopics()
		g.transitionTo(StateCompletingRebalance, now)
	} else {
		g.protocolName = nil
		g.subscribedTopics = g.computeSubscribedTopics()
		g.transitionTo(StateEmpty, now)
	}
	clear(g.pendingSync)
}

// currentMembers is the member list the leader gets in JoinGroup.
func (g *group) currentMembers() []JoinMember {
	name := ""
	if g.protocolName != nil {
		name = *g.protocolName
	}
	out := make([]JoinMember, 0, len(g.members))
	for _, m := range g.orderedMembers() {
		out = append(out, JoinMember{MemberID: m.id, InstanceID: m.instanceID, Metadata: m.metadata(name)})
	}
	return out
}

// validateMember is Kafka's ClassicGroup.validateMember.
func (g *group) validateMember(memberID string, instanceID *string) error {
	if instanceID != nil {
		existing, ok := g.staticMembers[*instanceID]
		if !ok {
			return ErrUnknownMemberID
		}
		if existing != memberID {
			return ErrFencedInstanceID
		}
	}
	if _, ok := g.members[memberID]; !ok {
		return ErrUnknownMemberID
	}
	return nil
}

// usesConsumerProtocol reports whether the group's protocol type is "consumer".
func (g *group) usesConsumerProtocol() bool {
	return g.protocolType != nil && *g.protocolType == "consumer"
}

// isSubscribedToTopic is Kafka's ClassicGroup.isSubscribedToTopic: when
// the subscriptions are unknown a "consumer" group counts as subscribed.
func (g *group) isSubscribedToTopic(topic string) bool {
	if g.cg != nil {
		return g.cg.isSubscribed(topic)
	}
	if g.subscribedTopics != nil {
		return g.subscribedTopics[topic]
	}
	return g.usesConsumerProtocol()
}

// computeSubscribedTopics parses the members' consumer protocol metadata;
// nil when the group is not a "consumer" group or a member's does not parse.
func (g *group) computeSubscribedTopics() map[string]bool {
	if !g.usesConsumerProtocol() {
		return nil
	}
	out := map[string]bool{}
	if len(g.members) == 0 {
		return out
	}
	if g.protocolName == nil {
		return nil
	}
	for _, m := range g.members {
		topics, ok := subscriptionTopics(m.metadata(*g.protocolName))
		if !ok {
			return nil
		}
		for _, t := range topics {
			out[t] = true
		}
	}
	return out
}

// hasTimers reports whether Tick has anything to check in the group.
func (g *group) hasTimers() bool {
	if g.cg != nil {
		return len(g.cg.members) > 0
	}
	return g.joinTimer.active || g.syncTimer.active || len(g.pending) > 0 || len(g.members) > 0
}

// generateMemberID is Kafka's: the instance ID, or else the client ID,
// followed by "-" and a random UUID.
func generateMemberID(clientID string, instanceID *string) string {
	prefix := clientID
	if instanceID != nil {
		prefix = *instanceID
	}
	var u [16]byte
	_, _ = rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // variant
	h := hex.EncodeToString(u[:])
	return prefix + "-" + h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// javaStringHashCode is Java's String.hashCode over the UTF-16 code units
// of s.
func javaStringHashCode(s string) int32 {
	var h int32
	for _, r := range s {
		if r >= 0x10000 {
			r1, r2 := utf16.EncodeRune(r)
			h = 31*h + int32(r1)
			h = 31*h + int32(r2)
			continue
		}
		h = 31*h + int32(r)
	}
	return h
}

// PartitionFor is the partition of __consumer_offsets that holds group's
// records with n partitions, as Kafka chooses it:
// Utils.abs(group.hashCode()) % n.
func PartitionFor(group string, n int32) int32 {
	h := javaStringHashCode(group)
	if h == math.MinInt32 {
		h = 0
	} else if h < 0 {
		h = -h
	}
	return h % n
}
