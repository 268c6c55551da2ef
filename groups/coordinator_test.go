package groups

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/topics"
)

// harness is a coordinator over a real store with an injected clock: time
// moves only through advance, which runs Tick.
type harness struct {
	t     *testing.T
	dir   string
	store *pebblestore.Store
	tm    *topics.Manager
	c     *Coordinator
	cfg   Config
	now   time.Time
}

var start = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	h := &harness{t: t, dir: t.TempDir(), cfg: cfg, now: start}
	h.open()
	t.Cleanup(func() { h.close() })
	return h
}

func (h *harness) open() {
	h.t.Helper()
	store, err := pebblestore.Open(h.dir, pebblestore.Options{})
	if err != nil {
		h.t.Fatal(err)
	}
	tm, err := topics.Open(store, topics.Config{DefaultPartitions: 1})
	if err != nil {
		h.t.Fatal(err)
	}
	c, err := Open(store, tm, h.cfg, h.now)
	if err != nil {
		h.t.Fatal(err)
	}
	h.store, h.tm, h.c = store, tm, c
}

func (h *harness) close() {
	if h.store != nil {
		_ = h.store.Close()
		h.store = nil
	}
}

// reopen simulates a broker restart on the same data.
func (h *harness) reopen() {
	h.t.Helper()
	h.close()
	h.open()
}

func (h *harness) advance(d time.Duration) {
	h.now = h.now.Add(d)
	h.c.Tick(h.now)
}

func (h *harness) createTopic(name string, partitions int32) {
	h.t.Helper()
	if _, err := h.tm.CreateTopic(name, partitions, nil, false); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) group(name string) *group {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	return h.c.mu.groups[name]
}

func (h *harness) state(name string) State {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	if g := h.c.mu.groups[name]; g != nil {
		return g.state
	}
	return StateDead
}

func (h *harness) generation(name string) int32 {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	return h.c.mu.groups[name].generation
}

// joinReq is a JoinGroup of protocol type "consumer" with one protocol.
func joinReq(group, memberID string, meta string) JoinRequest {
	return JoinRequest{
		Group: group, MemberID: memberID, ClientID: "client", ClientHost: "/127.0.0.1",
		ProtocolType: "consumer", Protocols: []Protocol{{Name: "range", Metadata: []byte(meta)}},
		SessionTimeout: 10 * time.Second, RebalanceTimeout: 20 * time.Second, Version: 9,
	}
}

// result returns a future's result if it is ready, failing otherwise.
func result[T any](t *testing.T, f *Future[T]) T {
	t.Helper()
	select {
	case res := <-f.ch:
		f.ch <- res
		return f.Wait(nil)
	default:
		t.Fatalf("the result is not ready")
		var zero T
		return zero
	}
}

// pending asserts that a future has no result yet.
func pending[T any](t *testing.T, f *Future[T]) {
	t.Helper()
	select {
	case res := <-f.ch:
		t.Fatalf("expected the call to wait; it returned %+v", res)
	default:
	}
}

func wantErr(t *testing.T, what string, got, want error) {
	t.Helper()
	if want == nil && got != nil || want != nil && !errors.Is(got, want) {
		t.Fatalf("%s: error %v, want %v", what, got, want)
	}
}

// newMember joins a dynamic member through MEMBER_ID_REQUIRED and returns
// its ID and its parked (or answered) JoinGroup.
func (h *harness) newMember(group, meta string) (string, *Future[JoinResult]) {
	h.t.Helper()
	r := result(h.t, h.c.Join(joinReq(group, "", meta), h.now))
	wantErr(h.t, "first join", r.Err, ErrMemberIDRequired)
	if r.MemberID == "" {
		h.t.Fatal("MEMBER_ID_REQUIRED without a member id")
	}
	return r.MemberID, h.c.Join(joinReq(group, r.MemberID, meta), h.now)
}

func (h *harness) sync(group, memberID string, gen int32, assign map[string]string) *Future[SyncResult] {
	req := SyncRequest{Group: group, Generation: gen, MemberID: memberID}
	for id, a := range assign {
		req.Assignments = append(req.Assignments, MemberAssignment{MemberID: id, Assignment: []byte(a)})
	}
	return h.c.Sync(req, h.now)
}

// stableGroup brings up a group whose members joined together; the first
// is the leader. It returns the member IDs and the generation.
func (h *harness) stableGroup(group string, n int) ([]string, int32) {
	h.t.Helper()
	ids := make([]string, n)
	futs := make([]*Future[JoinResult], n)
	for i := range n {
		ids[i], futs[i] = h.newMember(group, fmt.Sprintf("meta-%d", i))
	}
	h.advance(h.cfg.InitialRebalanceDelay)
	var gen int32
	syncs := make([]*Future[SyncResult], n)
	assign := map[string]string{}
	for _, id := range ids {
		assign[id] = "assignment-" + id
	}
	for i := range n {
		r := result(h.t, futs[i])
		wantErr(h.t, "join", r.Err, nil)
		gen = r.Generation
		if i == 0 && (r.Leader != ids[0] || len(r.Members) != n) {
			h.t.Fatalf("leader %q with %d members; want %q with %d", r.Leader, len(r.Members), ids[0], n)
		}
		if i > 0 {
			syncs[i] = h.sync(group, ids[i], gen, nil)
		}
	}
	syncs[0] = h.sync(group, ids[0], gen, assign)
	for i, id := range ids {
		r := result(h.t, syncs[i])
		wantErr(h.t, "sync", r.Err, nil)
		if string(r.Assignment) != "assignment-"+id {
			h.t.Fatalf("member %d got assignment %q", i, r.Assignment)
		}
	}
	if s := h.state(group); s != StateStable {
		h.t.Fatalf("state %v, want Stable", s)
	}
	return ids, gen
}

func TestJoinSyncSingleMember(t *testing.T) {
	h := newHarness(t, Config{InitialRebalanceDelay: 3 * time.Second})
	id, f := h.newMember("g", "sub")
	pending(t, f)
	if s := h.state("g"); s != StatePreparingRebalance {
		t.Fatalf("state %v after the first join, want PreparingRebalance", s)
	}
	h.advance(2 * time.Second)
	pending(t, f) // the initial delay holds the join
	h.advance(time.Second)
	r := result(t, f)
	if r.Err != nil || r.Generation != 1 || r.Leader != id || len(r.Members) != 1 || string(r.Members[0].Metadata) != "sub" ||
		*r.ProtocolName != "range" || *r.ProtocolType != "consumer" {
		t.Fatalf("join result %+v", r)
	}
	if s := h.state("g"); s != StateCompletingRebalance {
		t.Fatalf("state %v, want CompletingRebalance", s)
	}
	s := result(t, h.sync("g", id, 1, map[string]string{id: "mine"}))
	if s.Err != nil || string(s.Assignment) != "mine" {
		t.Fatalf("sync %+v", s)
	}
	wantErr(t, "heartbeat", h.c.Heartbeat(HeartbeatRequest{Group: "g", Generation: 1, MemberID: id}, h.now), nil)
}

// TestInitialDelayExtends pins group.initial.rebalance.delay.ms: each new
// member during the delay extends it, so members arriving together get one
// generation.
func TestInitialDelayExtends(t *testing.T) {
	h := newHarness(t, Config{InitialRebalanceDelay: 3 * time.Second})
	_, f1 := h.newMember("g", "a")
	h.advance(2 * time.Second)
	_, f2 := h.newMember("g", "b")
	h.advance(time.Second) // first delay ends; a member was added: extended
	pending(t, f1)
	pending(t, f2)
	h.advance(3 * time.Second)
	r1, r2 := result(t, f1), result(t, f2)
	if r1.Generation != 1 || r2.Generation != 1 || len(r1.Members) != 2 {
		t.Fatalf("results %+v %+v; want both in generation 1, two members for the leader", r1, r2)
	}
}

func TestRebalanceOnJoinKeepsLeader(t *testing.T) {
	h := newHarness(t, Config{})
	ids, gen := h.stableGroup("g", 1)
	a := ids[0]
	b, fb := h.newMember("g", "b")
	pending(t, fb)
	wantErr(t, "heartbeat during rebalance", h.c.Heartbeat(HeartbeatRequest{Group: "g", Generation: gen, MemberID: a}, h.now), ErrRebalanceInProgress)
	fa := h.c.Join(joinReq("g", a, "meta-0"), h.now)
	ra, rb := result(t, fa), result(t, fb)
	if ra.Generation != gen+1 || ra.Leader != a || len(ra.Members) != 2 || rb.Leader != a || len(rb.Members) != 0 {
		t.Fatalf("join results %+v %+v", ra, rb)
	}
	// The follower syncs first and waits for the leader's assignment.
	sb := h.sync("g", b, gen+1, nil)
	pending(t, sb)
	sa := h.sync("g", a, gen+1, map[string]string{a: "A", b: "B"})
	if r := result(t, sb); string(r.Assignment) != "B" {
		t.Fatalf("follower assignment %q", r.Assignment)
	}
	if r := result(t, sa); string(r.Assignment) != "A" {
		t.Fatalf("leader assignment %q", r.Assignment)
	}
}

func TestSessionExpiryRemovesMember(t *testing.T) {
	h := newHarness(t, Config{})
	ids, gen := h.stableGroup("g", 2)
	for range 3 {
		h.advance(3 * time.Second)
		wantErr(t, "heartbeat", h.c.Heartbeat(HeartbeatRequest{Group: "g", Generation: gen, MemberID: ids[0]}, h.now), nil)
	}
	h.advance(3 * time.Second) // ids[1] never heartbeat: 12s > its 10s session
	if s := h.state("g"); s != StatePreparingRebalance {
		t.Fatalf("state %v after a session expired, want PreparingRebalance", s)
	}
	wantErr(t, "heartbeat", h.c.Heartbeat(HeartbeatRequest{Group: "g", Generation: gen, MemberID: ids[0]}, h.now), ErrRebalanceInProgress)
	wantErr(t, "expired member heartbeat", h.c.Heartbeat(HeartbeatRequest{Group: "g", Generation: gen, MemberID: ids[1]}, h.now), ErrUnknownMemberID)
	r := result(t, h.c.Join(joinReq("g", ids[0], "meta-0"), h.now))
	if r.Generation != gen+1 || len(r.Members) != 1 {
		t.Fatalf("rejoin %+v", r)
	}
}

// TestRebalanceTimeoutRemovesSilentMember: a member that heartbeats but
// never rejoins is dropped when the rebalance timeout ends.
func TestRebalanceTimeoutRemovesSilentMember(t *testing.T) {
	h := newHarness(t, Config{})
	ids, gen := h.stableGroup("g", 2)
	fa := h.c.Join(joinReq("g", ids[0], "meta-0"), h.now) // leader rejoin: rebalance
	pending(t, fa)
	for range 6 {
		h.advance(4 * time.Second)
		if len(fa.ch) > 0 {
			break
		}
		wantErr(t, "heartbeat", h.c.Heartbeat(HeartbeatRequest{Group: "g", Generation: gen, MemberID: ids[1]}, h.now), ErrRebalanceInProgress)
	}
	r := result(t, fa)
	if r.Generation != gen+1 || len(r.Members) != 1 || r.Members[0].MemberID != ids[0] {
		t.Fatalf("join after rebalance timeout %+v", r)
	}
	wantErr(t, "removed member", h.c.Heartbeat(HeartbeatRequest{Group: "g", Generation: gen + 1, MemberID: ids[1]}, h.now), ErrUnknownMemberID)
}

func TestPendingSyncExpiry(t *testing.T) {
	h := newHarness(t, Config{})
	ids, gen := h.stableGroup("g", 2)
	fa := h.c.Join(joinReq("g", ids[0], "meta-0"), h.now)
	fb := h.c.Join(joinReq("g", ids[1], "meta-1"), h.now)
	result(t, fa)
	result(t, fb)
	sa := h.sync("g", ids[0], gen+1, map[string]string{ids[0]: "x", ids[1]: "y"})
	result(t, sa)
	// ids[1] never syncs; the group is Stable, and after the rebalance
	// timeout ids[1] is removed.
	for range 3 { // both heartbeat; ids[1] just never syncs
		h.advance(5 * time.Second)
		for _, id := range ids {
			wantErr(t, "heartbeat", h.c.Heartbeat(HeartbeatRequest{Group: "g", Generation: gen + 1, MemberID: id}, h.now), nil)
		}
	}
	h.advance(6 * time.Second) // past the 20s rebalance timeout
	if s := h.state("g"); s != StatePreparingRebalance {
		t.Fatalf("state %v, want PreparingRebalance after the pending sync expired", s)
	}
	if g := h.group("g"); len(g.members) != 1 {
		t.Fatalf("%d members, want 1", len(g.members))
	}
}

func TestLeaveGroup(t *testing.T) {
	h := newHarness(t, Config{})
	ids, gen := h.stableGroup("g", 2)
	res := result(t, h.c.Leave("g", []LeaveMember{{MemberID: ids[1]}, {MemberID: "nobody"}}, h.now))
	wantErr(t, "leave", res.Err, nil)
	wantErr(t, "leave member", res.Members[0], nil)
	wantErr(t, "leave unknown", res.Members[1], ErrUnknownMemberID)
	if s := h.state("g"); s != StatePreparingRebalance {
		t.Fatalf("state %v after a leave, want PreparingRebalance", s)
	}
	r := result(t, h.c.Join(joinReq("g", ids[0], "meta-0"), h.now))
	if r.Generation != gen+1 || len(r.Members) != 1 {
		t.Fatalf("rejoin after leave %+v", r)
	}
	wantErr(t, "leave unknown group", result(t, h.c.Leave("nope", []LeaveMember{{MemberID: "x"}}, h.now)).Err, ErrUnknownMemberID)
	// The last member leaving empties the group.
	result(t, h.sync("g", ids[0], gen+1, nil))
	result(t, h.c.Leave("g", []LeaveMember{{MemberID: ids[0]}}, h.now))
	if s := h.state("g"); s != StateEmpty {
		t.Fatalf("state %v after the last member left, want Empty", s)
	}
}

// TestBadInputKeepsState: every bad request gets its Kafka error and the
// group keeps its generation, members and assignments.
func TestBadInputKeepsState(t *testing.T) {
	h := newHarness(t, Config{MaxMemberMetadataBytes: 100})
	ids, gen := h.stableGroup("g", 2)

	j := joinReq("g", "", "x")
	j.ProtocolType = "connect"
	wantErr(t, "protocol type mix", result(t, h.c.Join(j, h.now)).Err, ErrInconsistentGroupProtocol)
	j = joinReq("g", "", "x")
	j.Protocols = []Protocol{{Name: "roundrobin"}}
	wantErr(t, "no common protocol", result(t, h.c.Join(j, h.now)).Err, ErrInconsistentGroupProtocol)
	j = joinReq("g", "", "x")
	j.Protocols[0].Metadata = bytes.Repeat([]byte{1}, 101)
	wantErr(t, "oversized metadata", result(t, h.c.Join(j, h.now)).Err, ErrInvalidRequest)
	j = joinReq("g", "", "x")
	j.SessionTimeout = time.Second
	wantErr(t, "session timeout", result(t, h.c.Join(j, h.now)).Err, ErrInvalidSessionTimeout)
	wantErr(t, "empty group", result(t, h.c.Join(joinReq("", "", "x"), h.now)).Err, ErrInvalidGroupID)
	wantErr(t, "unknown member join", result(t, h.c.Join(joinReq("g", "ghost", "x"), h.now)).Err, ErrUnknownMemberID)
	wantErr(t, "unknown group join", result(t, h.c.Join(joinReq("other", "ghost", "x"), h.now)).Err, ErrUnknownMemberID)
	wantErr(t, "stale heartbeat", h.c.Heartbeat(HeartbeatRequest{Group: "g", Generation: gen - 1, MemberID: ids[0]}, h.now), ErrIllegalGeneration)
	wantErr(t, "unknown heartbeat", h.c.Heartbeat(HeartbeatRequest{Group: "g", Generation: gen, MemberID: "ghost"}, h.now), ErrUnknownMemberID)
	wantErr(t, "stale sync", result(t, h.sync("g", ids[1], gen+5, nil)).Err, ErrIllegalGeneration)
	wantErr(t, "unknown group sync", result(t, h.sync("nope", ids[1], gen, nil)).Err, ErrUnknownMemberID)
	other := "roundrobin"
	sr := SyncRequest{Group: "g", Generation: gen, MemberID: ids[1], ProtocolName: &other}
	wantErr(t, "sync protocol", result(t, h.c.Sync(sr, h.now)).Err, ErrInconsistentGroupProtocol)
	inst := "i"
	wantErr(t, "unknown instance", h.c.Heartbeat(HeartbeatRequest{Group: "g", Generation: gen, MemberID: ids[0], InstanceID: &inst}, h.now), ErrUnknownMemberID)

	if h.state("g") != StateStable || h.generation("g") != gen {
		t.Fatalf("group changed: %v generation %d", h.state("g"), h.generation("g"))
	}
	if _, ok := h.c.mu.groups["other"]; ok {
		t.Fatal("a failed join left a group behind")
	}
	for _, id := range ids {
		r := result(t, h.sync("g", id, gen, nil))
		if r.Err != nil || string(r.Assignment) != "assignment-"+id {
			t.Fatalf("after bad input, sync %+v", r)
		}
	}
}

func TestOversizedAssignmentRefused(t *testing.T) {
	h := newHarness(t, Config{MaxMemberMetadataBytes: 10})
	id, f := h.newMember("g", "m")
	h.advance(0)
	r := result(t, f)
	wantErr(t, "oversized assignment", result(t, h.sync("g", id, r.Generation, map[string]string{id: "01234567890"})).Err, ErrInvalidRequest)
	if s := h.state("g"); s != StateCompletingRebalance {
		t.Fatalf("state %v, want CompletingRebalance", s)
	}
	if r := result(t, h.sync("g", id, r.Generation, map[string]string{id: "ok"})); r.Err != nil || string(r.Assignment) != "ok" {
		t.Fatalf("retried sync %+v", r)
	}
}

// TestStaticMemberRejoinWithoutRebalance pins KIP-345: a static member
// coming back with an unknown member ID takes its old place, generation
// and assignment; the old member ID is fenced.
func TestStaticMemberRejoinWithoutRebalance(t *testing.T) {
	h := newHarness(t, Config{})
	inst := []string{"instance-a", "instance-b"}
	var ids []string
	var futs []*Future[JoinResult]
	for i := range inst {
		j := joinReq("g", "", fmt.Sprintf("meta-%d", i))
		j.InstanceID = &inst[i]
		f := h.c.Join(j, h.now) // static members join directly, no MEMBER_ID_REQUIRED
		futs = append(futs, f)
	}
	h.advance(0)
	var gen int32
	for _, f := range futs {
		r := result(t, f)
		ids = append(ids, r.MemberID)
		gen = r.Generation
	}
	sb := h.sync("g", ids[1], gen, nil)
	result(t, h.sync("g", ids[0], gen, map[string]string{ids[0]: "A", ids[1]: "B"}))
	result(t, sb)

	// instance-b restarts.
	j := joinReq("g", "", "meta-1")
	j.InstanceID = &inst[1]
	r := result(t, h.c.Join(j, h.now))
	if r.Err != nil || r.Generation != gen || r.MemberID == ids[1] || r.SkipAssignment {
		t.Fatalf("static rejoin %+v", r)
	}
	if s := h.state("g"); s != StateStable {
		t.Fatalf("state %v after a static rejoin, want Stable (no rebalance)", s)
	}
	if s := result(t, h.sync("g", r.MemberID, gen, nil)); string(s.Assignment) != "B" {
		t.Fatalf("assignment after static rejoin %q, want B", s.Assignment)
	}
	old := HeartbeatRequest{Group: "g", Generation: gen, MemberID: ids[1], InstanceID: &inst[1]}
	wantErr(t, "old member id", h.c.Heartbeat(old, h.now), ErrFencedInstanceID)

	// The static leader rejoining (v9) skips the assignment.
	j = joinReq("g", "", "meta-0")
	j.InstanceID = &inst[0]
	r = result(t, h.c.Join(j, h.now))
	if !r.SkipAssignment || r.Leader != r.MemberID || len(r.Members) != 2 || h.state("g") != StateStable {
		t.Fatalf("static leader rejoin %+v", r)
	}
}

func TestOffsetCommitValidation(t *testing.T) {
	h := newHarness(t, Config{})
	h.createTopic("t", 2)
	commit := func(group string, gen int32, member string, version int16, offset int64) error {
		req := CommitRequest{Group: group, Generation: gen, MemberID: member, Version: version,
			Topics: []CommitTopic{{Topic: "t", Partitions: []CommitPartition{{Partition: 0, Offset: offset, LeaderEpoch: -1}}}}}
		return result(t, h.c.Commit(req, h.now)).Topics[0][0]
	}
	wantErr(t, "simple commit creates a group", commit("simple", -1, "", 8, 5), nil)
	if s := h.state("simple"); s != StateEmpty {
		t.Fatalf("simple group state %v", s)
	}
	wantErr(t, "unknown group v9", commit("nope", 3, "m", 9, 1), ErrGroupIDNotFound)
	wantErr(t, "unknown group v8", commit("nope", 3, "m", 8, 1), ErrIllegalGeneration)

	ids, gen := h.stableGroup("g", 1)
	wantErr(t, "member commit", commit("g", gen, ids[0], 8, 7), nil)
	wantErr(t, "stale generation", commit("g", gen-1, ids[0], 8, 8), ErrIllegalGeneration)
	wantErr(t, "unknown member", commit("g", gen, "ghost", 8, 8), ErrUnknownMemberID)
	wantErr(t, "admin commit to active group", commit("g", -1, "", 8, 8), ErrUnknownMemberID)

	req := CommitRequest{Group: "g", Generation: gen, MemberID: ids[0],
		Topics: []CommitTopic{
			{Topic: "missing", Partitions: []CommitPartition{{Partition: 0}}},
			{Topic: "t", Partitions: []CommitPartition{{Partition: 9}, {Partition: 1, Offset: 3, Metadata: ptr(string(bytes.Repeat([]byte("x"), 5000)))}}},
		}}
	res := result(t, h.c.Commit(req, h.now))
	wantErr(t, "unknown topic", res.Topics[0][0], topics.ErrUnknownTopic)
	wantErr(t, "unknown partition", res.Topics[1][0], topics.ErrUnknownTopic)
	wantErr(t, "metadata too large", res.Topics[1][1], ErrOffsetMetadataTooLarge)

	f := h.c.FetchOffsets(FetchOffsetsRequest{Group: "g", Topics: []FetchOffsetsTopic{{Topic: "t", Partitions: []int32{0, 1}}}})
	if p := f.Topics[0].Partitions; p[0].Offset != 7 || p[1].Offset != -1 || p[1].LeaderEpoch != -1 {
		t.Fatalf("fetched %+v", p)
	}
	f = h.c.FetchOffsets(FetchOffsetsRequest{Group: "unknown", Topics: []FetchOffsetsTopic{{Topic: "t", Partitions: []int32{0}}}})
	if f.Err != nil || f.Topics[0].Partitions[0].Offset != -1 || f.Topics[0].Partitions[0].Err != nil {
		t.Fatalf("unknown group fetch %+v", f)
	}

	// During CompletingRebalance a commit is refused.
	fa := h.c.Join(joinReq("g", ids[0], "meta-0"), h.now)
	result(t, fa)
	wantErr(t, "commit while completing", commit("g", gen+1, ids[0], 8, 9), ErrRebalanceInProgress)
}

func ptr[T any](v T) *T { return &v }

// TestRestartRestoresGroups: offsets and the last stored group metadata
// (generation, members, assignments) come back after a restart.
func TestRestartRestoresGroups(t *testing.T) {
	h := newHarness(t, Config{})
	h.createTopic("t", 3)
	ids, gen := h.stableGroup("g", 2)
	req := CommitRequest{Group: "g", Generation: gen, MemberID: ids[0],
		Topics: []CommitTopic{{Topic: "t", Partitions: []CommitPartition{{Partition: 0, Offset: 10, LeaderEpoch: 0, Metadata: ptr("m0")}, {Partition: 2, Offset: 30, LeaderEpoch: -1}}}}}
	if err := result(t, h.c.Commit(req, h.now)).Topics[0][0]; err != nil {
		t.Fatal(err)
	}
	simple := CommitRequest{Group: "simple", Generation: -1, Topics: []CommitTopic{{Topic: "t", Partitions: []CommitPartition{{Partition: 1, Offset: 4}}}}}
	result(t, h.c.Commit(simple, h.now))

	h.reopen()
	f := h.c.FetchOffsets(FetchOffsetsRequest{Group: "g"})
	if len(f.Topics) != 1 || len(f.Topics[0].Partitions) != 2 || f.Topics[0].Partitions[0].Offset != 10 ||
		*f.Topics[0].Partitions[0].Metadata != "m0" || f.Topics[0].Partitions[1].Offset != 30 {
		t.Fatalf("offsets after restart %+v", f)
	}
	if h.state("g") != StateStable || h.generation("g") != gen {
		t.Fatalf("group after restart %v generation %d; want Stable %d", h.state("g"), h.generation("g"), gen)
	}
	// Members continue without a rebalance.
	for _, id := range ids {
		wantErr(t, "heartbeat after restart", h.c.Heartbeat(HeartbeatRequest{Group: "g", Generation: gen, MemberID: id}, h.now), nil)
		if r := result(t, h.sync("g", id, gen, nil)); string(r.Assignment) != "assignment-"+id {
			t.Fatalf("assignment after restart %q", r.Assignment)
		}
	}
	if f := h.c.FetchOffsets(FetchOffsetsRequest{Group: "simple"}); len(f.Topics) != 1 || f.Topics[0].Partitions[0].Offset != 4 {
		t.Fatalf("simple group offsets after restart %+v", f)
	}
	// Restored members that stay silent expire.
	h.advance(11 * time.Second)
	if s := h.state("g"); s != StateEmpty {
		t.Fatalf("state %v after restored members went silent", s)
	}
}

func TestDeleteGroups(t *testing.T) {
	h := newHarness(t, Config{})
	h.createTopic("t", 1)
	h.stableGroup("busy", 1)
	result(t, h.c.Commit(CommitRequest{Group: "idle", Generation: -1, Topics: []CommitTopic{{Topic: "t", Partitions: []CommitPartition{{Offset: 1}}}}}, h.now))
	errs := result(t, h.c.DeleteGroups([]string{"busy", "idle", "missing"}, h.now))
	wantErr(t, "busy", errs[0], ErrNonEmptyGroup)
	wantErr(t, "idle", errs[1], nil)
	wantErr(t, "missing", errs[2], ErrGroupIDNotFound)
	h.reopen()
	if h.state("idle") != StateDead {
		t.Fatal("a deleted group came back after restart")
	}
	if h.state("busy") != StateStable {
		t.Fatal("the busy group was lost")
	}
}

func consumerMetadata(topics ...string) string {
	m := kmsg.NewConsumerMemberMetadata()
	m.Version = 3
	m.Topics = topics
	return string(m.AppendTo(nil))
}

func TestOffsetDelete(t *testing.T) {
	h := newHarness(t, Config{})
	h.createTopic("t", 1)
	h.createTopic("u", 1)
	id, f := h.newMember("g", consumerMetadata("t"))
	h.advance(0)
	r := result(t, f)
	result(t, h.sync("g", id, r.Generation, map[string]string{id: "x"}))
	req := CommitRequest{Group: "g", Generation: r.Generation, MemberID: id, Topics: []CommitTopic{
		{Topic: "t", Partitions: []CommitPartition{{Offset: 1}}}, {Topic: "u", Partitions: []CommitPartition{{Offset: 2}}}}}
	result(t, h.c.Commit(req, h.now))
	res := result(t, h.c.DeleteOffsets("g", []OffsetDeleteTopic{{Topic: "t", Partitions: []int32{0}}, {Topic: "u", Partitions: []int32{0}}}, h.now))
	wantErr(t, "group", res.Err, nil)
	wantErr(t, "subscribed", res.Topics[0][0], ErrGroupSubscribedToTopic)
	wantErr(t, "unsubscribed", res.Topics[1][0], nil)
	got := h.c.FetchOffsets(FetchOffsetsRequest{Group: "g"})
	if len(got.Topics) != 1 || got.Topics[0].Topic != "t" {
		t.Fatalf("offsets after delete %+v", got)
	}
	wantErr(t, "unknown group", result(t, h.c.DeleteOffsets("nope", nil, h.now)).Err, ErrGroupIDNotFound)
}

func TestOffsetRetention(t *testing.T) {
	h := newHarness(t, Config{OffsetsRetention: time.Hour, OffsetsRetentionCheckInterval: time.Minute})
	h.createTopic("t", 1)
	j := joinReq("g", "", "m")
	j.SessionTimeout = 20 * time.Minute
	r := result(t, h.c.Join(j, h.now))
	j.MemberID = r.MemberID
	f := h.c.Join(j, h.now)
	h.advance(0)
	r = result(t, f)
	ids, gen := []string{r.MemberID}, r.Generation
	result(t, h.sync("g", ids[0], gen, nil))
	result(t, h.c.Commit(CommitRequest{Group: "g", Generation: gen, MemberID: ids[0], Topics: []CommitTopic{{Topic: "t", Partitions: []CommitPartition{{Offset: 1}}}}}, h.now))
	for range 10 { // an active group keeps its offsets
		h.advance(9 * time.Minute)
		wantErr(t, "heartbeat", h.c.Heartbeat(HeartbeatRequest{Group: "g", Generation: gen, MemberID: ids[0]}, h.now), nil)
	}
	result(t, h.c.Leave("g", []LeaveMember{{MemberID: ids[0]}}, h.now))
	h.advance(59 * time.Minute)
	if h.state("g") != StateEmpty {
		t.Fatal("the group expired early")
	}
	h.advance(2 * time.Minute)
	if h.state("g") != StateDead {
		t.Fatalf("state %v: an Empty group past retention should be gone", h.state("g"))
	}
	h.reopen()
	if h.state("g") != StateDead {
		t.Fatal("the expired group came back after restart")
	}
}

// TestConsumerOffsetsRecords: the log holds Kafka's own records, in the
// partition Kafka would choose.
func TestConsumerOffsetsRecords(t *testing.T) {
	h := newHarness(t, Config{})
	h.createTopic("t", 1)
	ids, gen := h.stableGroup("grp", 1)
	result(t, h.c.Commit(CommitRequest{Group: "grp", Generation: gen, MemberID: ids[0], Topics: []CommitTopic{{Topic: "t", Partitions: []CommitPartition{{Offset: 42, LeaderEpoch: 3, Metadata: ptr("md")}}}}}, h.now))
	ot, _ := h.tm.Topic(OffsetsTopic)
	if ot.NumPartitions() != 50 || ot.Config("cleanup.policy") != "compact" {
		t.Fatalf("__consumer_offsets has %d partitions, cleanup.policy %s", ot.NumPartitions(), ot.Config("cleanup.policy"))
	}
	p, _ := ot.Partition(PartitionFor("grp", 50))
	raw, _, err := p.Read(0, 1<<20, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	var sawCommit, sawMetadata bool
	for len(raw) > 0 {
		hd, recs, err := topics.DecodeRecords(raw[:mustSize(t, raw)])
		if err != nil {
			t.Fatal(err)
		}
		raw = raw[hd.Size():]
		for _, r := range recs {
			switch v := int16(r.Key[0])<<8 | int16(r.Key[1]); v {
			case 0, 1:
				var k kmsg.OffsetCommitKey
				var val kmsg.OffsetCommitValue
				if err := k.ReadFrom(r.Key); err != nil {
					t.Fatal(err)
				}
				if err := val.ReadFrom(r.Value); err != nil {
					t.Fatal(err)
				}
				if k.Group != "grp" || k.Topic != "t" || val.Offset != 42 || val.LeaderEpoch != 3 || val.Metadata != "md" || val.Version != 3 {
					t.Fatalf("commit record %+v %+v", k, val)
				}
				sawCommit = true
			case 2:
				var k kmsg.GroupMetadataKey
				var val kmsg.GroupMetadataValue
				if err := k.ReadFrom(r.Key); err != nil {
					t.Fatal(err)
				}
				if err := val.ReadFrom(r.Value); err != nil {
					t.Fatal(err)
				}
				if k.Group != "grp" || val.ProtocolType != "consumer" || val.Generation != gen || len(val.Members) != 1 ||
					string(val.Members[0].Assignment) != "assignment-"+ids[0] {
					t.Fatalf("group metadata record %+v %+v", k, val)
				}
				sawMetadata = true
			default:
				t.Fatalf("unexpected key version %d", v)
			}
		}
	}
	if !sawCommit || !sawMetadata {
		t.Fatalf("commit record %v, metadata record %v", sawCommit, sawMetadata)
	}
}

func mustSize(t *testing.T, raw []byte) int {
	h, err := topics.ParseBatchHeader(raw)
	if err != nil {
		t.Fatal(err)
	}
	return h.Size()
}

// TestPartitionFor pins Kafka's partition choice: Utils.abs(hashCode) % n.
func TestPartitionFor(t *testing.T) {
	for _, c := range []struct {
		s    string
		hash int32
	}{
		{"", 0}, {"hello", 99162322}, {"Aa", 2112}, {"BB", 2112},
		{"polygenelubricants", -2147483648}, {"console-consumer-1", 35782224}, {"😀", 1772899}, {"g1", 3242},
	} {
		if got := javaStringHashCode(c.s); got != c.hash {
			t.Errorf("hashCode(%q) = %d, want %d", c.s, got, c.hash)
		}
	}
	if p := PartitionFor("polygenelubricants", 50); p != 0 {
		t.Errorf("MIN_VALUE hash maps to %d, want 0", p)
	}
	if p := PartitionFor("console-consumer-1", 50); p != 24 {
		t.Errorf("partition %d, want 35782224 %% 50 = 24", p)
	}
}

// TestConcurrentJoins runs members through rebalances from several
// goroutines while the clock runs (with -race): every join gets an answer
// and the group ends Stable or rebalancing, never stuck.
func TestConcurrentJoins(t *testing.T) {
	h := newHarness(t, Config{})
	var clock sync.Mutex
	now := func() time.Time {
		clock.Lock()
		defer clock.Unlock()
		return h.now
	}
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := h.c.Join(joinReq("g", "", "m"), now()).Wait(nil)
			for range 3 {
				r = h.c.Join(joinReq("g", r.MemberID, "m"), now()).Wait(nil)
				if r.Err != nil {
					errs <- r.Err
					return
				}
				s := h.c.Sync(SyncRequest{Group: "g", Generation: r.Generation, MemberID: r.MemberID}, now()).Wait(nil)
				if s.Err != nil && !errors.Is(s.Err, ErrRebalanceInProgress) && !errors.Is(s.Err, ErrIllegalGeneration) && !errors.Is(s.Err, ErrUnknownMemberID) {
					errs <- s.Err
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for stop := false; !stop; {
		select {
		case <-done:
			stop = true
		case <-time.After(time.Millisecond):
			clock.Lock()
			h.now = h.now.Add(time.Second)
			clock.Unlock()
			h.c.Tick(now())
		}
	}
	close(errs)
	for err := range errs {
		if !errors.Is(err, ErrUnknownMemberID) {
			t.Errorf("join: %v", err)
		}
	}
	if s := h.state("g"); s == StateDead {
		t.Fatalf("state %v", s)
	}
}

// TestCommitTransaction pins the commit of a transaction's staged offsets:
// with the markers and the coordinator's row in one atomic write, in as
// many record batches as needed (a transaction may stage more offsets than
// one batch of __consumer_offsets can hold: a commit that was decided must
// not fail on size), visible and indexed afterwards; a group that does not
// exist is created, offsets of a topic deleted since are dropped; and a
// write that fails leaves nothing: no offsets, no group, no row.
func TestCommitTransaction(t *testing.T) {
	h := newHarness(t, Config{OffsetsTopicPartitions: 3})
	h.createTopic("t", 300)
	h.createTopic("gone", 1)
	md := strings.Repeat("m", 4000) // 300 of them are more than max.message.bytes
	tc := TxnCommit{Group: "g", Topics: []CommitTopic{{Topic: "t"}, {Topic: "gone", Partitions: []CommitPartition{{Partition: 0, Offset: 1}}}}}
	for p := int32(0); p < 300; p++ {
		tc.Topics[0].Partitions = append(tc.Topics[0].Partitions, CommitPartition{Partition: p, Offset: int64(p) + 10, LeaderEpoch: -1, Metadata: &md})
	}
	if err := h.tm.DeleteTopic("gone"); err != nil {
		t.Fatal(err)
	}
	rowKey := pebblestore.TxnKey("tx")
	row := func(b *pebblestore.Batch) { b.Set(rowKey, []byte("complete")) }
	check := func(when string) {
		t.Helper()
		f := h.c.FetchOffsets(FetchOffsetsRequest{Group: "g", RequireStable: true})
		if len(f.Topics) != 1 || len(f.Topics[0].Partitions) != 300 {
			t.Fatalf("%s: offsets %d topics", when, len(f.Topics))
		}
		for i, p := range f.Topics[0].Partitions {
			if p.Err != nil || p.Offset != int64(i)+10 || *p.Metadata != md {
				t.Fatalf("%s: t/%d = %d %v", when, p.Partition, p.Offset, p.Err)
			}
		}
		if _, err := h.store.Get(rowKey); err != nil {
			t.Fatalf("%s: row: %v", when, err)
		}
	}
	if err := h.c.CommitTransaction([]TxnCommit{tc}, nil, row, h.now); err != nil {
		t.Fatal(err)
	}
	check("after the commit")
	ot, _ := h.tm.Topic(OffsetsTopic)
	p, _ := ot.Partition(h.c.PartitionFor("g"))
	raw, _, err := p.Read(0, 1<<30, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	batches := 0
	for len(raw) > 0 {
		raw = raw[mustSize(t, raw):]
		batches++
	}
	if batches < 5 {
		t.Fatalf("%d batches of records for 1.2 MB of offsets", batches)
	}
	h.reopen()
	check("after a restart")

	// A failing part (here a batch that does not validate) leaves nothing.
	h.createTopic("other", 1)
	op, _ := h.tm.Topic("other")
	part, _ := op.Partition(0)
	bad := &topics.Append{Partition: part, Batch: []byte("not a batch")}
	failing := TxnCommit{Group: "fresh", Topics: []CommitTopic{{Topic: "t", Partitions: []CommitPartition{{Partition: 0, Offset: 99}}}}}
	failRow := pebblestore.TxnKey("failed")
	err = h.c.CommitTransaction([]TxnCommit{failing}, []*topics.Append{bad}, func(b *pebblestore.Batch) { b.Set(failRow, nil) }, h.now)
	if err == nil {
		t.Fatal("a commit with an invalid batch succeeded")
	}
	if h.group("fresh") != nil {
		t.Fatal("the failed commit left its new group behind")
	}
	if _, err := h.store.Get(failRow); !errors.Is(err, pebblestore.ErrNotFound) {
		t.Fatalf("the failed commit wrote its row: %v", err)
	}
	h.reopen()
	if f := h.c.FetchOffsets(FetchOffsetsRequest{Group: "fresh"}); len(f.Topics) != 0 {
		t.Fatalf("offsets of the failed commit after a restart: %+v", f.Topics)
	}
}
