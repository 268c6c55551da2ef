package groups

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// Unit tests of the consumer group protocol (KIP-848) with an injected
// clock: time moves only through harness.advance.

func id16(b byte) [16]byte { return [16]byte{b} }

func TestUniformAssignorBalancesAndSticks(t *testing.T) {
	topics := []assignTopic{{id: id16(1), name: "a", partitions: 6}, {id: id16(2), name: "b", partitions: 3}}
	all := map[[16]byte]bool{id16(1): true, id16(2): true}
	members := []assignMember{{id: "m1", subscribed: all}, {id: "m2", subscribed: all}}
	out := assignUniform(members, topics)
	if n1, n2 := out["m1"].count(), out["m2"].count(); n1+n2 != 9 || n1-n2 > 1 || n2-n1 > 1 {
		t.Fatalf("unbalanced: m1 %d m2 %d", n1, n2)
	}
	// A third member takes partitions only from the others; everything
	// m1 and m2 keep, they had before.
	members = []assignMember{{id: "m1", subscribed: all, current: out["m1"]}, {id: "m2", subscribed: all, current: out["m2"]}, {id: "m3", subscribed: all}}
	next := assignUniform(members, topics)
	for _, id := range []string{"m1", "m2", "m3"} {
		if n := next[id].count(); n != 3 {
			t.Fatalf("%s has %d partitions, want 3: %v", id, n, next)
		}
	}
	for _, id := range []string{"m1", "m2"} {
		if !isSubset(next[id], out[id]) {
			t.Fatalf("%s was given partitions it did not own while others lost some: before %v after %v", id, out[id], next[id])
		}
	}
	// Every partition exactly once.
	seen := map[topicIDPartition]string{}
	for id, a := range next {
		for tid, ps := range a {
			for _, p := range ps {
				if o, dup := seen[topicIDPartition{tid, p}]; dup {
					t.Fatalf("partition %x/%d given to %s and %s", tid[0], p, o, id)
				}
				seen[topicIDPartition{tid, p}] = id
			}
		}
	}
	if len(seen) != 9 {
		t.Fatalf("%d partitions assigned, want 9", len(seen))
	}
}

func TestUniformAssignorHeterogeneousSubscriptions(t *testing.T) {
	topics := []assignTopic{{id: id16(1), name: "a", partitions: 4}, {id: id16(2), name: "b", partitions: 4}}
	members := []assignMember{
		{id: "m1", subscribed: map[[16]byte]bool{id16(1): true, id16(2): true}},
		{id: "m2", subscribed: map[[16]byte]bool{id16(2): true}},
	}
	out := assignUniform(members, topics)
	if len(out["m2"][id16(1)]) != 0 {
		t.Fatalf("m2 got a topic it does not subscribe to: %v", out["m2"])
	}
	if out["m1"].count() != 4 || out["m2"].count() != 4 {
		t.Fatalf("want 4 and 4, got %v", out)
	}
}

func TestRangeAssignor(t *testing.T) {
	topics := []assignTopic{{id: id16(1), name: "a", partitions: 5}}
	sub := map[[16]byte]bool{id16(1): true}
	out := assignRange([]assignMember{{id: "a", subscribed: sub}, {id: "b", subscribed: sub}}, topics)
	if got := fmt.Sprint(out["a"][id16(1)], out["b"][id16(1)]); got != "[0 1 2] [3 4]" {
		t.Fatalf("range assignment %s, want [0 1 2] [3 4]", got)
	}
}

func TestReconcileRevokesBeforeAssigning(t *testing.T) {
	owner := map[topicIDPartition]string{{id16(1), 0}: "m1", {id16(1), 1}: "m1"}
	held := func(id string) func([16]byte, int32) bool {
		return func(t [16]byte, p int32) bool { o, ok := owner[topicIDPartition{t, p}]; return ok && o != id }
	}
	// m1 holds 0,1 at epoch 1; the target of epoch 2 gives it 0 only.
	m1 := reconcile(reconcileInput{epoch: 1, state: memberStable, assigned: assignment{id16(1): {0, 1}}, pending: assignment{},
		targetEpoch: 2, target: assignment{id16(1): {0}}, heldByOther: held("m1")})
	if m1.state != memberUnrevokedPartitions || m1.epoch != 1 || !m1.pending.equal(assignment{id16(1): {1}}) {
		t.Fatalf("m1 must revoke partition 1 at epoch 1 first, got %+v", m1)
	}
	// m2's target is partition 1, still held by m1: epoch 2, nothing yet.
	m2 := reconcile(reconcileInput{epoch: 0, state: memberStable, assigned: assignment{}, pending: assignment{},
		targetEpoch: 2, target: assignment{id16(1): {1}}, heldByOther: held("m2")})
	if m2.state != memberUnreleasedPartitions || m2.epoch != 2 || m2.assigned.count() != 0 {
		t.Fatalf("m2 must wait for partition 1, got %+v", m2)
	}
	// m1 heartbeats still owning 1: nothing changes.
	again := reconcile(reconcileInput{epoch: m1.epoch, previousEpoch: m1.previousEpoch, state: m1.state, assigned: m1.assigned, pending: m1.pending,
		targetEpoch: 2, target: assignment{id16(1): {0}}, heldByOther: held("m1"), owned: assignment{id16(1): {0, 1}}})
	if again.state != memberUnrevokedPartitions {
		t.Fatalf("m1 moved on before revoking: %+v", again)
	}
	// m1 reports it revoked: epoch 2, stable.
	done := reconcile(reconcileInput{epoch: m1.epoch, previousEpoch: m1.previousEpoch, state: m1.state, assigned: m1.assigned, pending: m1.pending,
		targetEpoch: 2, target: assignment{id16(1): {0}}, heldByOther: held("m1"), owned: assignment{id16(1): {0}}})
	if done.state != memberStable || done.epoch != 2 || done.previousEpoch != 1 {
		t.Fatalf("m1 after revoking: %+v", done)
	}
	delete(owner, topicIDPartition{id16(1), 1})
	m2 = reconcile(reconcileInput{epoch: m2.epoch, previousEpoch: m2.previousEpoch, state: m2.state, assigned: m2.assigned, pending: m2.pending,
		targetEpoch: 2, target: assignment{id16(1): {1}}, heldByOther: held("m2")})
	if m2.state != memberStable || !m2.assigned.equal(assignment{id16(1): {1}}) {
		t.Fatalf("m2 once partition 1 is free: %+v", m2)
	}
}

// hb sends a heartbeat and returns its result.
func (h *harness) hb(req ConsumerHeartbeatRequest) ConsumerHeartbeatResult {
	h.t.Helper()
	if req.RebalanceTimeoutMillis == 0 {
		req.RebalanceTimeoutMillis = -1
	}
	if req.Version == 0 {
		req.Version = 1
	}
	return h.c.ConsumerHeartbeat(req, h.now).Wait(nil)
}

func (h *harness) join(group, member string, topics ...string) ConsumerHeartbeatResult {
	h.t.Helper()
	res := h.hb(ConsumerHeartbeatRequest{Group: group, MemberID: member, RebalanceTimeoutMillis: 30000,
		SubscribedTopicNames: topics, Owned: []TopicIDPartitions{}})
	if res.Err != nil {
		h.t.Fatalf("join of %s: %v", member, res.Err)
	}
	return res
}

func count(a []TopicIDPartitions) int {
	n := 0
	for _, t := range a {
		n += len(t.Partitions)
	}
	return n
}

func (h *harness) consumerGroup(name string) *consumerGroup {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	if g := h.c.mu.groups[name]; g != nil {
		return g.cg
	}
	return nil
}

func TestConsumerGroupTwoMembersHandOver(t *testing.T) {
	h := newHarness(t, Config{})
	h.createTopic("t", 4)
	r1 := h.join("g", "m1", "t")
	if r1.MemberEpoch != 1 || count(r1.Assignment) != 4 {
		t.Fatalf("first member: epoch %d, %d partitions; want 1 and 4", r1.MemberEpoch, count(r1.Assignment))
	}
	r2 := h.join("g", "m2", "t")
	if r2.MemberEpoch != 2 || count(r2.Assignment) != 0 {
		t.Fatalf("second member: epoch %d, %d partitions; want 2 and none until m1 revokes", r2.MemberEpoch, count(r2.Assignment))
	}
	// m1 learns it must revoke two: it stays at epoch 1 with two partitions.
	r1 = h.hb(ConsumerHeartbeatRequest{Group: "g", MemberID: "m1", MemberEpoch: 1})
	if r1.Err != nil || r1.MemberEpoch != 1 || count(r1.Assignment) != 2 {
		t.Fatalf("m1 revoking: %+v", r1)
	}
	// m2 still waits.
	r2 = h.hb(ConsumerHeartbeatRequest{Group: "g", MemberID: "m2", MemberEpoch: 2})
	if r2.Err != nil || count(r2.Assignment) != 0 {
		t.Fatalf("m2 got partitions m1 still holds: %+v", r2)
	}
	// m1 acknowledges.
	r1 = h.hb(ConsumerHeartbeatRequest{Group: "g", MemberID: "m1", MemberEpoch: 1, Owned: r1.Assignment})
	if r1.Err != nil || r1.MemberEpoch != 2 {
		t.Fatalf("m1 after revoking: %+v", r1)
	}
	r2 = h.hb(ConsumerHeartbeatRequest{Group: "g", MemberID: "m2", MemberEpoch: 2, Owned: []TopicIDPartitions{}})
	if r2.Err != nil || count(r2.Assignment) != 2 {
		t.Fatalf("m2 after m1 revoked: %+v", r2)
	}
	if s := h.consumerGroup("g").state(); s != "Stable" {
		t.Fatalf("state %s, want Stable", s)
	}

	// Epoch checks.
	if r := h.hb(ConsumerHeartbeatRequest{Group: "g", MemberID: "m1", MemberEpoch: 3}); !errors.Is(r.Err, ErrFencedMemberEpoch) {
		t.Fatalf("newer epoch: %v, want FENCED_MEMBER_EPOCH", r.Err)
	}
	if r := h.hb(ConsumerHeartbeatRequest{Group: "g", MemberID: "nobody", MemberEpoch: 1}); !errors.Is(r.Err, ErrUnknownMemberID) {
		t.Fatalf("unknown member: %v, want UNKNOWN_MEMBER_ID", r.Err)
	}
	// The previous epoch is accepted with owned partitions it holds (a
	// lost response), and answered with the current epoch.
	if r := h.hb(ConsumerHeartbeatRequest{Group: "g", MemberID: "m1", MemberEpoch: 1, Owned: r1.Assignment}); r.Err != nil || r.MemberEpoch != 2 {
		t.Fatalf("previous epoch with owned partitions: %+v", r)
	}

	// Offset commits are checked against the member epoch.
	commit := func(member string, epoch int32) error {
		return h.c.Commit(CommitRequest{Group: "g", MemberID: member, Generation: epoch, Version: 9,
			Topics: []CommitTopic{{Topic: "t", Partitions: []CommitPartition{{Partition: 0, Offset: 5, LeaderEpoch: -1}}}}}, h.now).Wait(nil).Topics[0][0]
	}
	if err := commit("m1", 1); !errors.Is(err, ErrStaleMemberEpoch) {
		t.Fatalf("commit at an old epoch: %v, want STALE_MEMBER_EPOCH", err)
	}
	if err := commit("nobody", 2); !errors.Is(err, ErrUnknownMemberID) {
		t.Fatalf("commit of an unknown member: %v, want UNKNOWN_MEMBER_ID", err)
	}
	if err := commit("m1", 2); err != nil {
		t.Fatalf("commit at the current epoch: %v", err)
	}
	fetch := func(member string, epoch int32) error {
		return h.c.FetchOffsets(FetchOffsetsRequest{Group: "g", MemberID: &member, MemberEpoch: epoch,
			Topics: []FetchOffsetsTopic{{Topic: "t", Partitions: []int32{0}}}}).Err
	}
	if err := fetch("m1", 1); !errors.Is(err, ErrStaleMemberEpoch) {
		t.Fatalf("OffsetFetch at an old epoch: %v, want STALE_MEMBER_EPOCH", err)
	}
	if err := fetch("nobody", 2); !errors.Is(err, ErrUnknownMemberID) {
		t.Fatalf("OffsetFetch of an unknown member: %v, want UNKNOWN_MEMBER_ID", err)
	}
	if err := fetch("m1", 2); err != nil {
		t.Fatalf("OffsetFetch at the current epoch: %v", err)
	}

	// m2 leaves: m1 gets everything at the next epoch.
	if r := h.hb(ConsumerHeartbeatRequest{Group: "g", MemberID: "m2", MemberEpoch: -1}); r.Err != nil || r.MemberEpoch != -1 {
		t.Fatalf("leave: %+v", r)
	}
	r1 = h.hb(ConsumerHeartbeatRequest{Group: "g", MemberID: "m1", MemberEpoch: 2})
	if r1.Err != nil || r1.MemberEpoch != 3 || count(r1.Assignment) != 4 {
		t.Fatalf("m1 after m2 left: %+v", r1)
	}
}

func TestConsumerGroupSessionAndRebalanceTimeouts(t *testing.T) {
	h := newHarness(t, Config{ConsumerSessionTimeout: 10 * time.Second, ConsumerHeartbeatInterval: time.Second})
	h.createTopic("t", 2)
	h.join("g", "m1", "t")
	h.join("g", "m2", "t")
	// m1 keeps heartbeating; m2 goes silent past its session.
	for i := 0; i < 3; i++ {
		h.advance(4 * time.Second)
		h.hb(ConsumerHeartbeatRequest{Group: "g", MemberID: "m1", MemberEpoch: h.consumerGroup("g").members["m1"].epoch})
	}
	cg := h.consumerGroup("g")
	if _, ok := cg.members["m2"]; ok {
		t.Fatal("m2 was not fenced after its session timeout")
	}
	// A member that does not revoke within its rebalance timeout is fenced.
	r := h.hb(ConsumerHeartbeatRequest{Group: "g", MemberID: "m3", RebalanceTimeoutMillis: 2000, SubscribedTopicNames: []string{"t"}, Owned: []TopicIDPartitions{}})
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	m1 := h.consumerGroup("g").members["m1"]
	h.hb(ConsumerHeartbeatRequest{Group: "g", MemberID: "m1", MemberEpoch: m1.epoch})
	if m1.state != memberUnrevokedPartitions {
		t.Fatalf("m1 state %v, want UNREVOKED_PARTITIONS", m1.state)
	}
	h.advance(31 * time.Second) // m1's rebalance timeout is 30s
	if _, ok := h.consumerGroup("g").members["m1"]; ok {
		t.Fatal("m1 kept its partitions past the rebalance timeout")
	}
}

func TestConsumerGroupSurvivesRestart(t *testing.T) {
	h := newHarness(t, Config{})
	h.createTopic("t", 3)
	h.join("g", "m1", "t")
	r2 := h.join("g", "m2", "t")
	h.hb(ConsumerHeartbeatRequest{Group: "g", MemberID: "m1", MemberEpoch: 1})
	before := h.consumerGroup("g")
	epoch, m1Assigned, m1Pending := before.groupEpoch, before.members["m1"].assigned.clone(), before.members["m1"].pending.clone()
	h.reopen()
	after := h.consumerGroup("g")
	if after == nil || after.groupEpoch != epoch || after.assignmentEpoch != epoch || len(after.members) != 2 {
		t.Fatalf("after restart: %+v, want group epoch %d and 2 members", after, epoch)
	}
	m1 := after.members["m1"]
	if !m1.assigned.equal(m1Assigned) || !m1.pending.equal(m1Pending) || m1.state != memberUnrevokedPartitions || m1.epoch != 1 {
		t.Fatalf("m1 after restart: %+v", m1)
	}
	if len(after.members["m2"].topicNames) != 1 || after.target["m2"].count() == 0 {
		t.Fatalf("m2 lost its subscription or target: %+v %v", after.members["m2"], after.target)
	}
	// The members carry on without rejoining.
	if r := h.hb(ConsumerHeartbeatRequest{Group: "g", MemberID: "m2", MemberEpoch: r2.MemberEpoch}); r.Err != nil {
		t.Fatalf("m2 after restart: %v", r.Err)
	}
	// Leaving for good removes the member's records: gone after a restart.
	h.hb(ConsumerHeartbeatRequest{Group: "g", MemberID: "m2", MemberEpoch: -1})
	h.reopen()
	if _, ok := h.consumerGroup("g").members["m2"]; ok {
		t.Fatal("a member that left came back after a restart")
	}
}

func TestConsumerGroupRequestErrors(t *testing.T) {
	h := newHarness(t, Config{})
	h.createTopic("t", 1)
	cases := []struct {
		name string
		req  ConsumerHeartbeatRequest
		want error
	}{
		{"empty group", ConsumerHeartbeatRequest{MemberID: "m", RebalanceTimeoutMillis: 1, SubscribedTopicNames: []string{"t"}, Owned: []TopicIDPartitions{}}, ErrInvalidRequest},
		{"no member id in v1", ConsumerHeartbeatRequest{Group: "g", RebalanceTimeoutMillis: 1, SubscribedTopicNames: []string{"t"}, Owned: []TopicIDPartitions{}}, ErrInvalidRequest},
		{"no subscription", ConsumerHeartbeatRequest{Group: "g", MemberID: "m", RebalanceTimeoutMillis: 1, Owned: []TopicIDPartitions{}}, ErrInvalidRequest},
		{"owned on join", ConsumerHeartbeatRequest{Group: "g", MemberID: "m", RebalanceTimeoutMillis: 1, SubscribedTopicNames: []string{"t"}, Owned: []TopicIDPartitions{{TopicID: id16(1), Partitions: []int32{0}}}}, ErrInvalidRequest},
		{"bad regex", ConsumerHeartbeatRequest{Group: "g", MemberID: "m", RebalanceTimeoutMillis: 1, SubscribedTopicRegex: strPtr("t[("), Owned: []TopicIDPartitions{}}, ErrInvalidRegularExpression},
		{"unknown assignor", ConsumerHeartbeatRequest{Group: "g", MemberID: "m", RebalanceTimeoutMillis: 1, SubscribedTopicNames: []string{"t"}, ServerAssignor: strPtr("sticky"), Owned: []TopicIDPartitions{}}, ErrUnsupportedAssignor},
		{"static leave without instance", ConsumerHeartbeatRequest{Group: "g", MemberID: "m", MemberEpoch: -2}, ErrInvalidRequest},
		{"unknown group", ConsumerHeartbeatRequest{Group: "nope", MemberID: "m", MemberEpoch: 3}, ErrGroupIDNotFound},
	}
	for _, tc := range cases {
		if r := h.hb(tc.req); !errors.Is(r.Err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, r.Err, tc.want)
		}
	}
	if len(h.c.ListGroups(nil, nil)) != 0 {
		t.Fatalf("failed requests left groups behind: %+v", h.c.ListGroups(nil, nil))
	}
}

func strPtr(s string) *string { return &s }

func TestConsumerGroupStaticMember(t *testing.T) {
	h := newHarness(t, Config{})
	h.createTopic("t", 2)
	inst := "i1"
	r := h.hb(ConsumerHeartbeatRequest{Group: "g", MemberID: "a", InstanceID: &inst, RebalanceTimeoutMillis: 1000, SubscribedTopicNames: []string{"t"}, Owned: []TopicIDPartitions{}})
	if r.Err != nil || count(r.Assignment) != 2 {
		t.Fatalf("static join: %+v", r)
	}
	// Another process with the same instance while the first is active.
	if r := h.hb(ConsumerHeartbeatRequest{Group: "g", MemberID: "b", InstanceID: &inst, RebalanceTimeoutMillis: 1000, SubscribedTopicNames: []string{"t"}, Owned: []TopicIDPartitions{}}); !errors.Is(r.Err, ErrUnreleasedInstanceID) {
		t.Fatalf("second process with the instance: %v, want UNRELEASED_INSTANCE_ID", r.Err)
	}
	// The first leaves temporarily; the restarted process takes over its
	// assignment at the same epoch, without a new group epoch.
	epoch := h.consumerGroup("g").groupEpoch
	if r := h.hb(ConsumerHeartbeatRequest{Group: "g", MemberID: "a", InstanceID: &inst, MemberEpoch: -2}); r.Err != nil || r.MemberEpoch != -2 {
		t.Fatalf("static leave: %+v", r)
	}
	r = h.hb(ConsumerHeartbeatRequest{Group: "g", MemberID: "b", InstanceID: &inst, RebalanceTimeoutMillis: 1000, SubscribedTopicNames: []string{"t"}, Owned: []TopicIDPartitions{}})
	if r.Err != nil || r.MemberID != "b" || count(r.Assignment) != 2 || r.MemberEpoch != 1 {
		t.Fatalf("static rejoin: %+v", r)
	}
	if e := h.consumerGroup("g").groupEpoch; e != epoch {
		t.Fatalf("group epoch %d after a static rejoin, want %d", e, epoch)
	}
}

func TestConsumerGroupRegexMatchesTopicCreatedLater(t *testing.T) {
	h := newHarness(t, Config{})
	h.createTopic("orders-a", 1)
	h.createTopic("other", 1)
	re := "orders-.*"
	r := h.hb(ConsumerHeartbeatRequest{Group: "g", MemberID: "m", RebalanceTimeoutMillis: 1000, SubscribedTopicRegex: &re, Owned: []TopicIDPartitions{}})
	if r.Err != nil || count(r.Assignment) != 1 {
		t.Fatalf("regex join: %+v", r)
	}
	h.createTopic("orders-b", 2)
	r = h.hb(ConsumerHeartbeatRequest{Group: "g", MemberID: "m", MemberEpoch: r.MemberEpoch})
	if r.Err != nil || count(r.Assignment) != 3 || r.MemberEpoch != 2 {
		t.Fatalf("after orders-b was created: %+v, want epoch 2 and 3 partitions", r)
	}
}

// TestConsumerGroupEmptyRegexIsNoRegex pins a bug librdkafka's KIP-848
// consumer found: it sends SubscribedTopicRegex "" beside its topic names,
// which was answered INVALID_REGULAR_EXPRESSION (a fatal error for it);
// Kafka subscribes by regex only when the regex is not empty.
func TestConsumerGroupEmptyRegexIsNoRegex(t *testing.T) {
	h := newHarness(t, Config{})
	h.createTopic("t", 2)
	h.createTopic("u", 1)
	empty := ""
	r := h.hb(ConsumerHeartbeatRequest{Group: "g", MemberID: "m", RebalanceTimeoutMillis: 1000, SubscribedTopicNames: []string{"t"}, SubscribedTopicRegex: &empty, Owned: []TopicIDPartitions{}})
	if r.Err != nil || count(r.Assignment) != 2 {
		t.Fatalf("join with topic names and an empty regex: %+v, want the 2 partitions of t", r)
	}
}

func TestConsumerGroupConversion(t *testing.T) {
	h := newHarness(t, Config{})
	h.createTopic("t", 1)
	// A group that only holds offsets (an empty classic group) converts,
	// keeping them.
	if err := h.c.Commit(CommitRequest{Group: "g", Generation: -1, Version: 9,
		Topics: []CommitTopic{{Topic: "t", Partitions: []CommitPartition{{Partition: 0, Offset: 7, LeaderEpoch: -1}}}}}, h.now).Wait(nil).Topics[0][0]; err != nil {
		t.Fatal(err)
	}
	h.join("g", "m", "t")
	if off := h.c.FetchOffsets(FetchOffsetsRequest{Group: "g", Topics: []FetchOffsetsTopic{{Topic: "t", Partitions: []int32{0}}}}).Topics[0].Partitions[0].Offset; off != 7 {
		t.Fatalf("offset after conversion %d, want 7", off)
	}
	if l := h.c.ListGroups(nil, []string{"consumer"}); len(l) != 1 || l[0].Type != "consumer" || l[0].State != "Stable" {
		t.Fatalf("ListGroups consumer: %+v", l)
	}
	if l := h.c.ListGroups(nil, []string{"classic"}); len(l) != 0 {
		t.Fatalf("ListGroups classic lists the consumer group: %+v", l)
	}
	// A classic member whose metadata is no consumer subscription cannot
	// join it (consumer_classic.go serves those that are).
	res := h.c.Join(JoinRequest{Group: "g", ProtocolType: "consumer", Protocols: []Protocol{{Name: "range"}}, SessionTimeout: 10 * time.Second, Version: 9}, h.now).Wait(nil)
	if !errors.Is(res.Err, ErrInconsistentGroupProtocol) {
		t.Fatalf("classic join of a consumer group: %v, want INCONSISTENT_GROUP_PROTOCOL", res.Err)
	}
	// A classic group whose members' metadata is no consumer subscription
	// cannot be upgraded (TestConsumerGroupOnlineUpgrade upgrades one).
	h.stableGroup("classic", 1)
	if r := h.hb(ConsumerHeartbeatRequest{Group: "classic", MemberID: "x", RebalanceTimeoutMillis: 1, SubscribedTopicNames: []string{"t"}, Owned: []TopicIDPartitions{}}); !errors.Is(r.Err, ErrGroupIDNotFound) {
		t.Fatalf("consumer join of a classic group with members: %v, want GROUP_ID_NOT_FOUND", r.Err)
	}
	// Empty again, the consumer group may become classic.
	h.hb(ConsumerHeartbeatRequest{Group: "g", MemberID: "m", MemberEpoch: -1})
	res = h.c.Join(JoinRequest{Group: "g", ProtocolType: "consumer", Protocols: []Protocol{{Name: "range"}}, SessionTimeout: 10 * time.Second, Version: 9}, h.now).Wait(nil)
	if !errors.Is(res.Err, ErrMemberIDRequired) {
		t.Fatalf("classic join of an empty consumer group: %v, want MEMBER_ID_REQUIRED (joining as classic)", res.Err)
	}
	h.reopen()
	if h.consumerGroup("g") != nil {
		t.Fatal("the group is a consumer group again after a restart")
	}
}

func TestConsumerGroupAdminLeaveAndTxnCommit(t *testing.T) {
	h := newHarness(t, Config{})
	h.createTopic("t", 2)
	inst := "i1"
	r := h.hb(ConsumerHeartbeatRequest{Group: "g", MemberID: "a", InstanceID: &inst, RebalanceTimeoutMillis: 1000, SubscribedTopicNames: []string{"t"}, Owned: []TopicIDPartitions{}})
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	h.join("g", "b", "t")
	// TxnOffsetCommit is held to the member epoch too.
	if err := h.c.ValidateCommit(CommitRequest{Group: "g", MemberID: "a", Generation: r.MemberEpoch + 5}); !errors.Is(err, ErrStaleMemberEpoch) {
		t.Fatalf("transactional commit at a wrong epoch: %v, want STALE_MEMBER_EPOCH", err)
	}
	if err := h.c.ValidateCommit(CommitRequest{Group: "g", MemberID: "a", Generation: r.MemberEpoch}); err != nil {
		t.Fatalf("transactional commit at the member epoch: %v", err)
	}
	// Admin removal by instance ID (Admin.removeMembersFromConsumerGroup).
	res := h.c.Leave("g", []LeaveMember{{InstanceID: &inst}, {MemberID: "nobody"}}, h.now).Wait(nil)
	if res.Err != nil || res.Members[0] != nil || !errors.Is(res.Members[1], ErrUnknownMemberID) {
		t.Fatalf("LeaveGroup: %+v", res)
	}
	cg := h.consumerGroup("g")
	if _, ok := cg.members["a"]; ok || len(cg.staticMembers) != 0 {
		t.Fatalf("the static member is still there: %+v", cg.members)
	}
	// The group cannot be deleted while b is in it.
	if errs := h.c.DeleteGroups([]string{"g"}, h.now).Wait(nil); !errors.Is(errs[0], ErrNonEmptyGroup) {
		t.Fatalf("DeleteGroups of a consumer group with a member: %v, want NON_EMPTY_GROUP", errs[0])
	}
	h.hb(ConsumerHeartbeatRequest{Group: "g", MemberID: "b", MemberEpoch: -1})
	if errs := h.c.DeleteGroups([]string{"g"}, h.now).Wait(nil); errs[0] != nil {
		t.Fatalf("DeleteGroups of an empty consumer group: %v", errs[0])
	}
	h.reopen()
	if h.consumerGroup("g") != nil {
		t.Fatal("a deleted consumer group came back after a restart")
	}
}

// FuzzConsumerRecord feeds restart's decoder of the KIP-848 records
// arbitrary keys and values: it must never panic, and a record it encoded
// must decode to what was encoded.
func FuzzConsumerRecord(f *testing.F) {
	inst := "i"
	m := &consumerMember{id: "m", instanceID: &inst, clientID: "c", clientHost: "/h", topicNames: []string{"a", "b"},
		rebalanceTimeout: time.Second, epoch: 3, previousEpoch: 2, state: memberUnrevokedPartitions,
		assigned: assignment{id16(1): {0, 2}}, pending: assignment{id16(2): {1}}}
	id := "m"
	f.Add(consumerRecordKey(recConsumerMemberMetadata, "g", &id), encodeConsumerMemberMetadata(m))
	f.Add(consumerRecordKey(recConsumerCurrentAssignment, "g", &id), encodeConsumerCurrentAssignment(m))
	f.Add(consumerRecordKey(recConsumerTargetMember, "g", &id), encodeConsumerTargetMember(m.assigned))
	f.Add(consumerRecordKey(recConsumerGroupMetadata, "g", nil), encodeConsumerEpochValue(7))
	f.Add(consumerRecordKey(recConsumerTargetMetadata, "g", nil), encodeConsumerEpochValue(7))
	f.Fuzz(func(t *testing.T, key, value []byte) {
		cg := newConsumerGroup()
		if err := restoreConsumerRecord(cg, key, value); err != nil {
			return
		}
		// What decoded re-encodes to a value that decodes the same.
		for _, mm := range cg.members {
			again := newConsumerGroup()
			k := consumerRecordKey(recConsumerCurrentAssignment, "g", &mm.id)
			if err := restoreConsumerRecord(again, k, encodeConsumerCurrentAssignment(mm)); err != nil {
				t.Fatalf("re-encoded current assignment does not decode: %v", err)
			}
			if got := again.members[mm.id]; got.epoch != mm.epoch || !got.assigned.equal(mm.assigned) || !got.pending.equal(mm.pending) {
				t.Fatalf("round trip: %+v != %+v", got, mm)
			}
		}
	})
}

func TestConsumerGroupOffsetRetention(t *testing.T) {
	h := newHarness(t, Config{OffsetsRetention: time.Hour, OffsetsRetentionCheckInterval: time.Minute,
		ConsumerSessionTimeout: 10 * time.Hour, ConsumerHeartbeatInterval: time.Second})
	h.createTopic("t", 1)
	h.createTopic("u", 1)
	r := h.join("g", "m", "t")
	for _, topic := range []string{"t", "u"} {
		if err := h.c.Commit(CommitRequest{Group: "g", MemberID: "m", Generation: r.MemberEpoch, Version: 9,
			Topics: []CommitTopic{{Topic: topic, Partitions: []CommitPartition{{Partition: 0, Offset: 1, LeaderEpoch: -1}}}}}, h.now).Wait(nil).Topics[0][0]; err != nil {
			t.Fatal(err)
		}
	}
	h.advance(2 * time.Hour)
	got := h.c.FetchOffsets(FetchOffsetsRequest{Group: "g", Topics: []FetchOffsetsTopic{{Topic: "t", Partitions: []int32{0}}, {Topic: "u", Partitions: []int32{0}}}})
	if tOff, uOff := got.Topics[0].Partitions[0].Offset, got.Topics[1].Partitions[0].Offset; tOff != 1 || uOff != -1 {
		t.Fatalf("after the retention: subscribed t at %d (want 1, kept), unsubscribed u at %d (want -1, expired)", tOff, uOff)
	}
}
