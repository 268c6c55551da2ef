package groups

import (
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// classicMeta is a consumer protocol subscription to topics.
func classicMeta(topics ...string) string {
	m := kmsg.NewConsumerMemberMetadata()
	m.Topics = topics
	return string(m.AppendTo(nil))
}

// classicAssigned reads the partitions of topic in a SyncGroup assignment.
func classicAssigned(t *testing.T, b []byte, topic string) []int32 {
	t.Helper()
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(b); err != nil {
		t.Fatalf("assignment %q: %v", b, err)
	}
	var out []int32
	for _, tp := range a.Topics {
		if tp.Topic == topic {
			out = append(out, tp.Partitions...)
		}
	}
	return out
}

// TestConsumerGroupOnlineUpgrade: a classic group with a member becomes a
// consumer group when a member of the new protocol joins (KIP-848 online
// migration, policy bidirectional); the classic member keeps its
// partitions until a heartbeat tells it to rejoin, then gets its share
// through JoinGroup/SyncGroup, commits at its epoch, and its leave gives
// the other member everything. Before, the join was refused with
// GROUP_ID_NOT_FOUND.
func TestConsumerGroupOnlineUpgrade(t *testing.T) {
	h := newHarness(t, Config{})
	h.createTopic("t", 4)
	id, fut := h.newMember("g", classicMeta("t"))
	h.advance(h.cfg.InitialRebalanceDelay)
	jr := result(t, fut)
	wantErr(t, "classic join", jr.Err, nil)
	all := kmsg.NewConsumerMemberAssignment()
	all.Topics = []kmsg.ConsumerMemberAssignmentTopic{{Topic: "t", Partitions: []int32{0, 1, 2, 3}}}
	sr := result(t, h.sync("g", id, jr.Generation, map[string]string{id: string(all.AppendTo(nil))}))
	wantErr(t, "classic sync", sr.Err, nil)
	gen := jr.Generation

	r := h.join("g", "new", "t")
	if h.consumerGroup("g") == nil {
		t.Fatal("the classic group was not upgraded")
	}
	if r.MemberEpoch != gen+1 || count(r.Assignment) != 0 {
		t.Fatalf("new member: epoch %d with %d partitions; want %d and none while the classic member holds all", r.MemberEpoch, count(r.Assignment), gen+1)
	}
	// The classic member is told to rejoin; it keeps what it has meanwhile.
	err := h.c.Heartbeat(HeartbeatRequest{Group: "g", Generation: gen, MemberID: id}, h.now)
	wantErr(t, "classic heartbeat after the upgrade", err, ErrRebalanceInProgress)
	err = h.c.Heartbeat(HeartbeatRequest{Group: "g", Generation: gen - 1, MemberID: id}, h.now)
	wantErr(t, "classic heartbeat at an old generation", err, ErrIllegalGeneration)

	// It rejoins: first it is told what it keeps, at its epoch (the
	// revocation, as Kafka's reconciliation does it)...
	rj := result(t, h.c.Join(joinReq("g", id, classicMeta("t")), h.now))
	wantErr(t, "classic rejoin", rj.Err, nil)
	if rj.Generation != gen || rj.ProtocolName == nil || *rj.ProtocolName != "range" || rj.Leader == id {
		t.Fatalf("classic rejoin: %+v, want generation %d, protocol range, not the leader", rj, gen)
	}
	rs := result(t, h.sync("g", id, rj.Generation, nil))
	if rs.Err != nil || len(classicAssigned(t, rs.Assignment, "t")) != 2 {
		t.Fatalf("classic sync while revoking: %+v, want the 2 partitions it keeps", rs)
	}
	// ... a commit at that generation still works, its heartbeat says
	// rejoin, and the rejoin (eager: owning nothing) moves it on.
	res := h.c.Commit(CommitRequest{Group: "g", Generation: gen, MemberID: id, Version: 9,
		Topics: []CommitTopic{{Topic: "t", Partitions: []CommitPartition{{Partition: 0, Offset: 3, LeaderEpoch: -1}}}}}, h.now).Wait(nil)
	if err := res.Topics[0][0]; err != nil {
		t.Fatalf("commit while revoking: %v", err)
	}
	wantErr(t, "classic heartbeat while revoking", h.c.Heartbeat(HeartbeatRequest{Group: "g", Generation: gen, MemberID: id}, h.now), ErrRebalanceInProgress)
	rj = result(t, h.c.Join(joinReq("g", id, classicMeta("t")), h.now))
	if rj.Err != nil || rj.Generation != gen+1 {
		t.Fatalf("classic rejoin after revoking: %+v, want generation %d", rj, gen+1)
	}
	rs = result(t, h.sync("g", id, rj.Generation, nil))
	wantErr(t, "classic sync after the rejoin", rs.Err, nil)
	mine := classicAssigned(t, rs.Assignment, "t")
	if len(mine) != 2 {
		t.Fatalf("classic member got %v, want 2 partitions", mine)
	}
	wantErr(t, "classic heartbeat once reconciled", h.c.Heartbeat(HeartbeatRequest{Group: "g", Generation: rj.Generation, MemberID: id}, h.now), nil)
	r = h.hb(ConsumerHeartbeatRequest{Group: "g", MemberID: "new", MemberEpoch: r.MemberEpoch})
	if r.Err != nil || count(r.Assignment) != 2 {
		t.Fatalf("new member after the classic one released: %+v, want 2 partitions", r)
	}
	// The classic member commits at its epoch as its generation.
	res = h.c.Commit(CommitRequest{Group: "g", Generation: rj.Generation, MemberID: id, Version: 9,
		Topics: []CommitTopic{{Topic: "t", Partitions: []CommitPartition{{Partition: mine[0], Offset: 5, LeaderEpoch: -1}}}}}, h.now).Wait(nil)
	if err := res.Topics[0][0]; err != nil {
		t.Fatalf("classic member's commit: %v", err)
	}
	// A restart keeps it a classic member.
	h.reopen()
	if m := h.consumerGroup("g").members[id]; m == nil || m.classic == nil || m.classic.protocolName() != "range" {
		t.Fatalf("after a restart the classic member is %+v", m)
	}
	// Its leave hands everything to the other member.
	lr := h.c.Leave("g", []LeaveMember{{MemberID: id}}, h.now).Wait(nil)
	if lr.Err != nil || lr.Members[0] != nil {
		t.Fatalf("classic leave: %+v", lr)
	}
	r = h.hb(ConsumerHeartbeatRequest{Group: "g", MemberID: "new", MemberEpoch: r.MemberEpoch})
	if r.Err != nil || count(r.Assignment) != 4 {
		t.Fatalf("after the classic member left: %+v, want all 4 partitions", r)
	}
}

// TestConsumerGroupClassicMemberJoinsAndExpires: a new classic member joins
// a consumer group through MEMBER_ID_REQUIRED, waits for the partitions a
// member of the new protocol still holds, and is fenced after its own
// session timeout.
func TestConsumerGroupClassicMemberJoinsAndExpires(t *testing.T) {
	h := newHarness(t, Config{})
	h.createTopic("t", 2)
	r := h.join("g", "new", "t")
	first := result(t, h.c.Join(joinReq("g", "", classicMeta("t")), h.now))
	wantErr(t, "first classic join", first.Err, ErrMemberIDRequired)
	jr := result(t, h.c.Join(joinReq("g", first.MemberID, classicMeta("t")), h.now))
	wantErr(t, "classic join", jr.Err, nil)
	sr := result(t, h.sync("g", jr.MemberID, jr.Generation, nil))
	if sr.Err != nil || len(classicAssigned(t, sr.Assignment, "t")) != 0 {
		t.Fatalf("classic sync while the other member holds everything: %+v", sr)
	}
	// The member of the new protocol revokes one partition.
	r = h.hb(ConsumerHeartbeatRequest{Group: "g", MemberID: "new", MemberEpoch: r.MemberEpoch})
	r = h.hb(ConsumerHeartbeatRequest{Group: "g", MemberID: "new", MemberEpoch: r.MemberEpoch, Owned: r.Assignment})
	if count(r.Assignment) != 1 {
		t.Fatalf("the new-protocol member kept %d partitions, want 1", count(r.Assignment))
	}
	err := h.c.Heartbeat(HeartbeatRequest{Group: "g", Generation: jr.Generation, MemberID: jr.MemberID}, h.now)
	if !errors.Is(err, ErrRebalanceInProgress) && err != nil {
		t.Fatalf("classic heartbeat: %v", err)
	}
	rj := result(t, h.c.Join(joinReq("g", jr.MemberID, classicMeta("t")), h.now))
	rs := result(t, h.sync("g", jr.MemberID, rj.Generation, nil))
	if rs.Err != nil || len(classicAssigned(t, rs.Assignment, "t")) != 1 {
		t.Fatalf("classic member once the partition is free: %+v", rs)
	}
	// Its session (10s, from its JoinGroup) ends; the group keeps going.
	h.advance(11 * time.Second)
	if m := h.consumerGroup("g").members[jr.MemberID]; m != nil {
		t.Fatal("the silent classic member was not fenced after its session timeout")
	}
}

// TestConsumerGroupDowngrade: when the last member of the new protocol
// leaves a consumer group whose other members are classic, the group
// becomes a classic group again (Kafka's migration policy bidirectional)
// at the group epoch as its generation and rebalances; the classic member
// rejoins and gets its assignment from a leader of its own. Before, the
// group stayed a consumer group.
func TestConsumerGroupDowngrade(t *testing.T) {
	h := newHarness(t, Config{})
	h.createTopic("t", 2)
	r := h.join("g", "new", "t")
	first := result(t, h.c.Join(joinReq("g", "", classicMeta("t")), h.now))
	jr := result(t, h.c.Join(joinReq("g", first.MemberID, classicMeta("t")), h.now))
	wantErr(t, "classic join", jr.Err, nil)
	h.hb(ConsumerHeartbeatRequest{Group: "g", MemberID: "new", MemberEpoch: r.MemberEpoch})
	if res := h.hb(ConsumerHeartbeatRequest{Group: "g", MemberID: "new", MemberEpoch: -1}); res.Err != nil {
		t.Fatalf("leave: %v", res.Err)
	}
	if h.consumerGroup("g") != nil {
		t.Fatal("a group of classic members only stayed a consumer group")
	}
	if s := h.state("g"); s != StatePreparingRebalance {
		t.Fatalf("state %v after the downgrade, want PreparingRebalance", s)
	}
	gen := h.generation("g")
	wantErr(t, "classic heartbeat after the downgrade", h.c.Heartbeat(HeartbeatRequest{Group: "g", Generation: gen, MemberID: jr.MemberID}, h.now), ErrRebalanceInProgress)
	rj := result(t, h.c.Join(joinReq("g", jr.MemberID, classicMeta("t")), h.now))
	if rj.Err != nil || rj.Leader != jr.MemberID || rj.Generation != gen+1 {
		t.Fatalf("classic rejoin after the downgrade: %+v, want the leader at generation %d", rj, gen+1)
	}
	rs := result(t, h.sync("g", jr.MemberID, rj.Generation, map[string]string{jr.MemberID: "mine"}))
	if rs.Err != nil || string(rs.Assignment) != "mine" || h.state("g") != StateStable {
		t.Fatalf("classic sync after the downgrade: %+v, state %v", rs, h.state("g"))
	}
}

// TestClassicMemberMetadataRecord: a classic member's protocols and
// session timeout are written as the ClassicMemberMetadata tagged field of
// its ConsumerGroupMemberMetadataValue, byte for byte as Kafka 4.2's
// generated writer does (checked with its class), and read back.
func TestClassicMemberMetadataRecord(t *testing.T) {
	m := &consumerMember{clientID: "c", clientHost: "h", topicNames: []string{"t"}, rebalanceTimeout: 5 * time.Millisecond,
		classic: &classicInfo{sessionTimeout: 7 * time.Millisecond, protocols: []Protocol{{Name: "r", Metadata: []byte{9, 8}}}}}
	got := hex.EncodeToString(encodeConsumerMemberMetadata(m))
	want := "0000" + "00" + "00" + "0263" + "0268" + "020274" + "00" + "00000005" + "00" + "01000d01000000070202720309080000"
	if got != want {
		t.Fatalf("ConsumerGroupMemberMetadataValue\n got %s\nwant %s", got, want)
	}
	cg := newConsumerGroup()
	id := "m"
	if err := restoreConsumerRecord(cg, consumerRecordKey(recConsumerMemberMetadata, "g", &id), encodeConsumerMemberMetadata(m)); err != nil {
		t.Fatal(err)
	}
	c := cg.members["m"].classic
	if c == nil || c.sessionTimeout != 7*time.Millisecond || len(c.protocols) != 1 || c.protocols[0].Name != "r" || string(c.protocols[0].Metadata) != "\x09\x08" {
		t.Fatalf("restored classic metadata %+v", c)
	}
	m.classic = nil
	if err := restoreConsumerRecord(cg, consumerRecordKey(recConsumerMemberMetadata, "g", &id), encodeConsumerMemberMetadata(m)); err != nil || cg.members["m"].classic != nil {
		t.Fatalf("a member of the new protocol restored as classic: %v %+v", err, cg.members["m"].classic)
	}
}

// TestConsumerGroupMigrationPolicy: with group-consumer-migration-policy
// "downgrade" a classic group with members refuses a member of the new
// protocol (GROUP_ID_NOT_FOUND, as Kafka), and with "upgrade" a consumer
// group whose last new-protocol member left stays a consumer group served
// to its classic members.
func TestConsumerGroupMigrationPolicy(t *testing.T) {
	h := newHarness(t, Config{ConsumerMigrationPolicy: MigrationDowngrade})
	h.createTopic("t", 2)
	_, fut := h.newMember("g", classicMeta("t"))
	h.advance(h.cfg.InitialRebalanceDelay)
	wantErr(t, "classic join", result(t, fut).Err, nil)
	r := h.hb(ConsumerHeartbeatRequest{Group: "g", MemberID: "new", RebalanceTimeoutMillis: 1000, SubscribedTopicNames: []string{"t"}, Owned: []TopicIDPartitions{}})
	if !errors.Is(r.Err, ErrGroupIDNotFound) || h.consumerGroup("g") != nil {
		t.Fatalf("upgrade under policy downgrade: %v, want GROUP_ID_NOT_FOUND and a classic group", r.Err)
	}

	h = newHarness(t, Config{ConsumerMigrationPolicy: MigrationUpgrade})
	h.createTopic("t", 2)
	r = h.join("g", "new", "t")
	first := result(t, h.c.Join(joinReq("g", "", classicMeta("t")), h.now))
	jr := result(t, h.c.Join(joinReq("g", first.MemberID, classicMeta("t")), h.now))
	wantErr(t, "classic join", jr.Err, nil)
	if res := h.hb(ConsumerHeartbeatRequest{Group: "g", MemberID: "new", MemberEpoch: -1}); res.Err != nil {
		t.Fatalf("leave: %v", res.Err)
	}
	if cg := h.consumerGroup("g"); cg == nil || len(cg.members) != 1 {
		t.Fatal("under policy upgrade the group was downgraded")
	}
}
