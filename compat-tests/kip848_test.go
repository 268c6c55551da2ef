package compattests

// The consumer group protocol of KIP-848 (issue 10, part 1): franz-go
// members with kgo.ServerSideBalancer() (ConsumerGroupHeartbeat, the
// broker's "uniform" or "range" assignor) share a topic through joins, a
// graceful leave and a member killed without leaving; a regex subscription
// picks up a topic created later; a restart keeps committed offsets and the
// group epoch. Every produced record is consumed exactly once, counted only
// once its commit succeeded (the ledger of groups_test.go).

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kip848Broker starts a broker whose consumer-protocol members expire 6s
// after their last heartbeat (Kafka's default is 45s).
func kip848Broker(t *testing.T, extra ...string) *brokerProc {
	return groupBroker(t, append([]string{"--group-consumer-session-timeout", "6s", "--group-consumer-heartbeat-interval", "500ms"}, extra...)...)
}

// describeConsumerGroup sends ConsumerGroupDescribe for one group.
func describeConsumerGroup(t *testing.T, addr, group string) kmsg.ConsumerGroupDescribeResponseGroup {
	t.Helper()
	cl := newClient(t, addr)
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(testCtx(t, opTimeout), cl)
	if err != nil {
		t.Fatalf("ConsumerGroupDescribe: %v", err)
	}
	if len(resp.Groups) != 1 {
		t.Fatalf("ConsumerGroupDescribe answered %d groups", len(resp.Groups))
	}
	return resp.Groups[0]
}

// waitConsumerStable waits until ConsumerGroupDescribe shows the group
// Stable with n members owning every partition of its topic.
func (s *groupScenario) waitConsumerStable(n int, what string) kmsg.ConsumerGroupDescribeResponseGroup {
	s.t.Helper()
	deadline := time.Now().Add(groupWait)
	var last kmsg.ConsumerGroupDescribeResponseGroup
	for time.Now().Before(deadline) {
		last = describeConsumerGroup(s.t, s.b.Addr(), s.group)
		owned := 0
		for _, m := range last.Members {
			for _, tp := range m.Assignment.TopicPartitions {
				owned += len(tp.Partitions)
			}
		}
		if last.ErrorCode == 0 && last.State == "Stable" && len(last.Members) == n && owned == groupPartitions {
			return last
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.t.Fatalf("%s: consumer group %s is %q (error %d) with %d members, want Stable with %d members owning all %d partitions",
		what, s.group, last.State, last.ErrorCode, len(last.Members), n, groupPartitions)
	return last
}

// TestKIP848FranzGroup: four franz-go members of a consumer-protocol group
// join one by one while records are produced, one leaves, one is killed
// mid-stream (its partitions move once its session expires); then the
// classic views (ListGroups, DescribeGroups) and the CLI show the group as
// Kafka 4 does. Also against Apache Kafka.
func TestKIP848FranzGroup(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		balancer func() kgo.GroupBalancer
		assignor string
	}{
		{"uniform", kgo.CooperativeStickyBalancer, "uniform"},
		{"range", kgo.RangeBalancer, "range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			bothKIP848(t, func(t *testing.T, b *brokerProc, ref bool) {
				s := newGroupScenario(t, b)
				start := func(name string) *franzMember {
					return startFranzMember(t, s, name, tc.balancer(), kgo.ServerSideBalancer())
				}
				start("m1")
				s.produce(100)
				s.waitConsumed("one member")
				if d := s.waitConsumerStable(1, "one member"); d.AssignorName != tc.assignor || d.Members[0].MemberType != 1 {
					t.Errorf("assignor %q member type %d, want %q and 1 (consumer protocol)", d.AssignorName, d.Members[0].MemberType, tc.assignor)
				}

				producing := make(chan struct{})
				go func() {
					defer close(producing)
					for range 30 {
						s.produce(80)
						time.Sleep(100 * time.Millisecond)
					}
				}()
				time.Sleep(300 * time.Millisecond)
				m2 := start("m2")
				time.Sleep(300 * time.Millisecond)
				m3 := start("m3")
				time.Sleep(300 * time.Millisecond)
				start("m4")
				time.Sleep(time.Second)
				m2.leave()
				time.Sleep(500 * time.Millisecond)
				m3.kill()
				<-producing
				s.waitConsumed("after joins, a leave and a kill")
				s.led.check(t, s.produced)
				if n := len(s.led.members()); n != 4 {
					t.Errorf("records consumed by %d members, want all 4: %v", n, s.led.members())
				}
				s.waitConsumerStable(2, "after the killed member expired")

				ctx := testCtx(t, opTimeout)
				listed, err := s.adm.ListGroups(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if l, ok := listed[s.group]; !ok || l.ProtocolType != "consumer" || l.State != "Stable" || l.GroupType != "consumer" {
					t.Errorf("ListGroups: %+v, want protocol type consumer, type consumer, Stable", listed[s.group])
				}
				// DescribeGroups (v0-v5) describes a consumer group as Dead, as
				// Apache Kafka 4 does; ConsumerGroupDescribe describes it.
				described, err := s.adm.DescribeGroups(ctx, s.group)
				if err != nil {
					t.Fatal(err)
				}
				if d := described[s.group]; d.State != "Dead" || len(d.Members) != 0 {
					t.Errorf("DescribeGroups: state %s with %d members (error %v); want Dead and none, as Kafka 4", d.State, len(d.Members), d.Err)
				}

				if ref {
					return
				}
				// The CLI shows the group through the same classic views.
				bs := "--bootstrap-server=" + b.Addr()
				out, errOut, code := runCLI(t, "list", bs, "-o", "json")
				var rows []struct{ Group, State, Type string }
				if code != 0 || json.Unmarshal([]byte(out), &rows) != nil {
					t.Fatalf("broker groups list: exit %d, %s %s", code, out, errOut)
				}
				if !slices.Contains(rows, struct{ Group, State, Type string }{s.group, "Stable", "consumer"}) {
					t.Errorf("broker groups list does not show %s as a Stable consumer group: %s", s.group, out)
				}
				out, _, code = runCLI(t, "describe", bs, s.group)
				if code != 0 || !strings.Contains(out, "Stable") || !strings.Contains(out, "compat-m1") || !strings.Contains(out, s.topic+":") {
					t.Errorf("broker groups describe: exit %d:\n%s", code, out)
				}
				out, _, code = runCLI(t, "lag", bs, s.group)
				if code != 0 || !strings.Contains(out, s.topic) {
					t.Errorf("broker groups lag: exit %d:\n%s", code, out)
				}
			})
		})
	}
}

// bothKIP848 runs body against our broker (consumer-protocol sessions of
// 6s) and against Apache Kafka (reference/run-kafka.sh sets the same).
func bothKIP848(t *testing.T, body func(t *testing.T, b *brokerProc, ref bool)) {
	t.Run("broker", func(t *testing.T) { body(t, kip848Broker(t), false) })
	t.Run("apache-kafka", func(t *testing.T) { body(t, &brokerProc{t: t, kafkaAddr: referenceKafka(t)}, true) })
}

// TestKIP848RegexNewTopic: a member subscribed by regular expression
// (ConsumerGroupHeartbeat v1 subscribed_topic_regex) gets the partitions of
// a matching topic created after it joined, and consumes its records.
func TestKIP848RegexNewTopic(t *testing.T) {
	t.Parallel()
	bothKIP848(t, testKIP848RegexNewTopic)
}

func testKIP848RegexNewTopic(t *testing.T, b *brokerProc, _ bool) {
	adm := newAdmin(t, b.Addr())
	prefix := topicName(t, "")
	first, later := prefix+"-a", prefix+"-b"
	createTopic(t, adm, first, 2, nil)
	led := newLedger()
	cl := newClient(t, b.Addr(),
		kgo.ConsumerGroup("group."+prefix),
		kgo.ConsumeRegex(),
		kgo.ConsumeTopics(prefix+"-.*"),
		kgo.ServerSideBalancer(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.MetadataMinAge(250*time.Millisecond),
		kgo.MetadataMaxAge(time.Second),
	)
	prod := newClient(t, b.Addr())
	produce := func(topic string, n int) {
		for i := range n {
			r := &kgo.Record{Topic: topic, Value: []byte(topic + "/" + groupValue(i))}
			deadline := time.Now().Add(groupWait)
			for {
				// Apache Kafka may not know a new topic's leader yet.
				err := prod.ProduceSync(testCtx(t, opTimeout), r).FirstErr()
				if err == nil {
					break
				}
				if !errors.Is(err, kerr.UnknownTopicOrPartition) || time.Now().After(deadline) {
					t.Fatal(err)
				}
				time.Sleep(200 * time.Millisecond)
			}
		}
	}
	produce(first, 10)
	createTopic(t, adm, later, 3, nil)
	produce(later, 10)
	deadline := time.Now().Add(groupWait)
	for led.count() < 20 && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		var vals []string
		fs.EachRecord(func(r *kgo.Record) { vals = append(vals, string(r.Value)) })
		led.add("m", vals...)
	}
	if led.count() != 20 {
		t.Fatalf("consumed %d of 20 records of %s and %s (created after the member joined)", led.count(), first, later)
	}
	d := describeConsumerGroup(t, b.Addr(), "group."+prefix)
	if len(d.Members) != 1 || d.Members[0].SubscribedTopicRegex == nil {
		t.Fatalf("ConsumerGroupDescribe: %+v, want one member with a regex", d)
	}
	topics := map[string]bool{}
	for _, tp := range d.Members[0].Assignment.TopicPartitions {
		topics[tp.Topic] = true
	}
	if !topics[first] || !topics[later] {
		t.Errorf("assignment %+v, want both %s and %s", d.Members[0].Assignment, first, later)
	}
}

// TestKIP848RestartKeepsGroup: a clean restart and a kill -9 keep the
// consumer group's epoch, its member and its committed offsets; the member
// carries on without loss or duplicate.
func TestKIP848RestartKeepsGroup(t *testing.T) {
	t.Parallel()
	b := kip848Broker(t)
	s := newGroupScenario(t, b)
	startFranzMember(t, s, "m1", kgo.CooperativeStickyBalancer(), kgo.ServerSideBalancer())
	s.produce(300)
	s.waitConsumed("before the restart")
	before := s.waitConsumerStable(1, "before the restart")

	b.Restart()
	after := s.waitConsumerStable(1, "after a clean restart")
	if after.Epoch != before.Epoch || after.Members[0].MemberID != before.Members[0].MemberID {
		t.Errorf("after the restart: epoch %d member %s, was %d and %s", after.Epoch, after.Members[0].MemberID, before.Epoch, before.Members[0].MemberID)
	}
	s.produce(300)
	s.waitConsumed("after a clean restart")

	b.Kill()
	b.Start()
	s.waitConsumerStable(1, "after kill -9")
	s.produce(300)
	s.waitConsumed("after kill -9")
	s.led.check(t, s.produced)

	offsets, err := s.adm.FetchOffsets(testCtx(t, opTimeout), s.group)
	if err != nil {
		t.Fatal(err)
	}
	for p, end := range endOffsets(t, s.adm, s.topic) {
		if o, ok := offsets.Lookup(s.topic, p); !ok || o.At != end {
			t.Errorf("partition %d committed %+v, want the end offset %d", p, o, end)
		}
	}
}

// TestKIP848Errors: a bad regex is INVALID_REGULAR_EXPRESSION, an unknown
// assignor UNSUPPORTED_ASSIGNOR, a heartbeat of an unknown member
// UNKNOWN_MEMBER_ID, a commit at a stale epoch STALE_MEMBER_EPOCH, and
// ConsumerGroupDescribe of a missing group is GROUP_ID_NOT_FOUND.
func TestKIP848Errors(t *testing.T) {
	t.Parallel()
	bothKIP848(t, testKIP848Errors)
}

func testKIP848Errors(t *testing.T, b *brokerProc, _ bool) {
	adm := newAdmin(t, b.Addr())
	topic := topicName(t, "")
	createTopic(t, adm, topic, 1, nil)
	cl := newClient(t, b.Addr())
	hb := func(mutate func(r *kmsg.ConsumerGroupHeartbeatRequest)) *kmsg.ConsumerGroupHeartbeatResponse {
		t.Helper()
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version = 1
		req.Group = "group." + topic
		req.MemberID = "member-1"
		req.RebalanceTimeoutMillis = 10000
		req.SubscribedTopicNames = []string{topic}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		mutate(req)
		deadline := time.Now().Add(groupWait)
		for {
			resp, err := req.RequestWith(testCtx(t, opTimeout), cl)
			if err != nil {
				if errors.Is(err, kerr.CoordinatorNotAvailable) && time.Now().Before(deadline) {
					time.Sleep(200 * time.Millisecond)
					continue
				}
				t.Fatal(err)
			}
			// Apache Kafka creates __consumer_offsets on first use.
			if (resp.ErrorCode != kerr.CoordinatorNotAvailable.Code && resp.ErrorCode != kerr.NotCoordinator.Code && resp.ErrorCode != kerr.CoordinatorLoadInProgress.Code) || time.Now().After(deadline) {
				return resp
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	bad := "a[("
	if r := hb(func(r *kmsg.ConsumerGroupHeartbeatRequest) {
		r.SubscribedTopicNames, r.SubscribedTopicRegex = nil, &bad
	}); r.ErrorCode != kerr.InvalidRegularExpression.Code {
		t.Errorf("bad regex: error %d, want INVALID_REGULAR_EXPRESSION", r.ErrorCode)
	}
	sticky := "sticky"
	if r := hb(func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.ServerAssignor = &sticky }); r.ErrorCode != kerr.UnsupportedAssignor.Code {
		t.Errorf("unknown assignor: error %d, want UNSUPPORTED_ASSIGNOR", r.ErrorCode)
	}
	if r := hb(func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = 5 }); r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Errorf("heartbeat to a missing group: error %d, want GROUP_ID_NOT_FOUND", r.ErrorCode)
	}
	joined := hb(func(*kmsg.ConsumerGroupHeartbeatRequest) {})
	if joined.ErrorCode != 0 || joined.MemberEpoch != 1 || joined.Assignment == nil {
		t.Fatalf("join: %+v", joined)
	}
	if r := hb(func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = 7; r.Topics = nil }); r.ErrorCode != kerr.FencedMemberEpoch.Code {
		t.Errorf("epoch from the future: error %d, want FENCED_MEMBER_EPOCH", r.ErrorCode)
	}
	if r := hb(func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberID, r.MemberEpoch, r.Topics = "nobody", 1, nil }); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Errorf("unknown member: error %d, want UNKNOWN_MEMBER_ID", r.ErrorCode)
	}
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Version = 9
	commit.Group, commit.MemberID, commit.Generation = "group."+topic, "member-1", 0
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = topic
	ct.TopicID = topicID(t, adm, topic) // v10 (Apache Kafka 4.1+) names topics by ID
	cp := kmsg.NewOffsetCommitRequestTopicPartition()
	cp.Offset = 1
	ct.Partitions = append(ct.Partitions, cp)
	commit.Topics = append(commit.Topics, ct)
	var code int16
	for deadline := time.Now().Add(groupWait); ; time.Sleep(200 * time.Millisecond) {
		cresp, err := commit.RequestWith(testCtx(t, opTimeout), cl)
		if err != nil {
			t.Fatal(err)
		}
		// Apache Kafka's coordinator may not know a topic created a moment ago.
		if code = cresp.Topics[0].Partitions[0].ErrorCode; code != kerr.UnknownTopicID.Code || time.Now().After(deadline) {
			break
		}
	}
	if code != kerr.StaleMemberEpoch.Code {
		t.Errorf("commit at a stale epoch: error %d, want STALE_MEMBER_EPOCH", code)
	}
	if d := describeConsumerGroup(t, b.Addr(), "no-such-group"); d.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Errorf("ConsumerGroupDescribe of a missing group: error %d, want GROUP_ID_NOT_FOUND", d.ErrorCode)
	}
}

// topicID is the ID of topic.
func topicID(t *testing.T, adm *kadm.Client, topic string) [16]byte {
	t.Helper()
	td, err := adm.ListTopics(testCtx(t, opTimeout), topic)
	if err != nil {
		t.Fatal(err)
	}
	return td[topic].ID
}

// TestKIP848OnlineUpgrade: a classic group with a franz-go member
// (cooperative-sticky, JoinGroup/SyncGroup) becomes a consumer group when
// a member of the new protocol joins it (KIP-848 online migration,
// Kafka's default policy bidirectional): the classic member keeps
// consuming through JoinGroup, SyncGroup and Heartbeat answered from the
// consumer group, the two split the partitions, and when the new member
// leaves the group becomes a classic group again (the downgrade) and the
// classic member takes everything back. Every record is committed exactly
// once. Also against Apache Kafka 4.2.
func TestKIP848OnlineUpgrade(t *testing.T) {
	t.Parallel()
	bothKIP848(t, func(t *testing.T, b *brokerProc, _ bool) {
		s := newGroupScenario(t, b)
		classic := startFranzMember(t, s, "classic", kgo.CooperativeStickyBalancer())
		s.waitStable(1, "the classic member")
		s.produce(160)
		s.waitConsumed("the classic member alone")

		modern := startFranzMember(t, s, "modern", kgo.CooperativeStickyBalancer(), kgo.ServerSideBalancer())
		d := s.waitConsumerStable(2, "a classic and a new-protocol member")
		types := map[int8]int{}
		for _, m := range d.Members {
			types[m.MemberType]++
			if n := len(m.Assignment.TopicPartitions); n != 1 || len(m.Assignment.TopicPartitions[0].Partitions) != groupPartitions/2 {
				t.Errorf("member %s (type %d) owns %+v, want %d partitions", m.MemberID, m.MemberType, m.Assignment.TopicPartitions, groupPartitions/2)
			}
		}
		if types[0] != 1 || types[1] != 1 {
			t.Errorf("member types %v, want one classic (0) and one consumer (1)", types)
		}
		s.produce(160)
		s.waitConsumed("both members")
		if got := s.led.members(); got["modern"] == 0 {
			t.Errorf("the new-protocol member consumed nothing: %v", got)
		}

		// The downgrade bumps the generation: a commit the classic member
		// sends before it rejoins fails (ILLEGAL_GENERATION, as in Kafka),
		// so records flow again only once it rejoined.
		modern.leave()
		s.waitStable(1, "a classic group again after the downgrade")
		s.produce(160)
		s.waitConsumed("the classic member after the new one left")
		classic.leave()
		s.led.check(t, s.produced)
	})
}
