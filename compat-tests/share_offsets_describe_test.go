package compattests

// DescribeShareGroupOffsets (90, KIP-932) of groups without share state,
// raw kmsg against this broker and Apache Kafka 4.2: absence of state is
// no error. A missing group, a classic group and a consumer group answer
// like a share group that has read nothing: no group error, each named
// partition start offset -1, leader epoch 0, lag -1, error NONE, and no
// topics in the all-topics form. A share group's partitions it has not
// read, an unknown partition and an unknown topic (topic ID zero) answer
// the same; the one it has state for its start offset and lag.

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestShareGroupOffsetsDescribe(t *testing.T) {
	t.Parallel()
	bothBrokers(t, testShareGroupOffsetsDescribe)
}

func testShareGroupOffsetsDescribe(t *testing.T, addr string, _ bool) {
	adm := newAdmin(t, addr)
	ctx := testCtx(t, 3*time.Minute)
	topic := topicName(t, "")
	unread := topicName(t, "unread")
	unknown := "nope-" + topic
	createTopic(t, adm, topic, 2, nil)
	createTopic(t, adm, unread, 1, nil)
	prod := newClient(t, addr, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 5 {
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte{byte('a' + i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	share, classic, consumer := "share."+topic, "classic."+topic, "consumer."+topic
	// The share group has state for partition 0 only: start 2 of 5.
	if err := retryCoordinator(t, func() error {
		r, err := adm.AlterShareGroupOffsets(ctx, share, kadm.Offsets{topic: {0: {Topic: topic, Partition: 0, At: 2}}})
		if err == nil {
			err, _ = r.Lookup(topic, 0)
		}
		return err
	}); err != nil {
		t.Fatalf("AlterShareGroupOffsets: %v", err)
	}
	if err := retryCoordinator(t, func() error {
		r, err := adm.CommitOffsets(ctx, classic, kadm.Offsets{topic: {0: {Topic: topic, Partition: 0, At: 1, LeaderEpoch: -1}}})
		if err == nil {
			err = r.Error()
		}
		return err
	}); err != nil {
		t.Fatalf("CommitOffsets of a classic group: %v", err)
	}
	cl := newClient(t, addr, kgo.RequestTimeoutOverhead(90*time.Second))
	joinConsumerGroup(t, cl, consumer, topic)
	if g := describeConsumerGroup(t, addr, consumer); g.ErrorCode != 0 || len(g.Members) != 1 {
		t.Fatalf("ConsumerGroupDescribe %s: %s, %d members; want a consumer group with its member", consumer, errName(g.ErrorCode), len(g.Members))
	}

	ids := topicIDs(t, adm, topic, unread)
	named := []kmsg.DescribeShareGroupOffsetsRequestGroupTopic{
		{Topic: topic, Partitions: []int32{0, 1}}, {Topic: unread, Partitions: []int32{0}}, {Topic: unknown, Partitions: []int32{0}},
	}
	none := "T/0 -1/0/-1 NONE; T/1 -1/0/-1 NONE; U/0 -1/0/-1 NONE; X/0 -1/0/-1 NONE"
	for _, c := range []struct {
		what, group string
		topics      []kmsg.DescribeShareGroupOffsetsRequestGroupTopic
		want        string
	}{
		{"a missing group, named", "missing." + topic, named, none},
		{"a missing group, all topics", "missing." + topic, nil, ""},
		{"a classic group, named", classic, named, none},
		{"a classic group, all topics", classic, nil, ""},
		{"a consumer group, named", consumer, named, none},
		{"a consumer group, all topics", consumer, nil, ""},
		{"the share group, named", share, named, "T/0 2/0/3 NONE; T/1 -1/0/-1 NONE; U/0 -1/0/-1 NONE; X/0 -1/0/-1 NONE"},
		{"the share group, all topics", share, nil, "T/0 2/0/3 NONE"},
		// Apache Kafka 4.2 answers this one only after about 30 s.
		{"the share group, an unknown partition", share, []kmsg.DescribeShareGroupOffsetsRequestGroupTopic{{Topic: topic, Partitions: []int32{7}}}, "T/7 -1/0/-1 NONE"},
	} {
		req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
		req.Version = 1
		rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
		rg.GroupID, rg.Topics = c.group, c.topics
		req.Groups = append(req.Groups, rg)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		if len(resp.Groups) != 1 || resp.Groups[0].GroupID != c.group {
			t.Fatalf("%s: %d groups %+v, want %s alone", c.what, len(resp.Groups), resp.Groups, c.group)
		}
		if code := resp.Groups[0].ErrorCode; code != 0 {
			t.Errorf("%s: group error %s, want NONE", c.what, errName(code))
			continue
		}
		names := map[string]string{topic: "T", unread: "U", unknown: "X"}
		wantIDs := map[string][16]byte{topic: ids[topic], unread: ids[unread]}
		if got := renderShareOffsets(t, resp.Groups[0].Topics, names, wantIDs); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.what, got, c.want)
		}
	}
}

// renderShareOffsets renders partitions as "T/p start/epoch/lag ERROR",
// sorted, topics named by names; a topic's ID must be wantIDs' (zero for
// an unknown one).
func renderShareOffsets(t *testing.T, topics []kmsg.DescribeShareGroupOffsetsResponseGroupTopic, names map[string]string, wantIDs map[string][16]byte) string {
	t.Helper()
	var out []string
	for _, rt := range topics {
		if rt.TopicID != wantIDs[rt.Topic] {
			t.Errorf("topic %s answered with ID %x, want %x", rt.Topic, rt.TopicID, wantIDs[rt.Topic])
		}
		for _, p := range rt.Partitions {
			code := "NONE"
			if p.ErrorCode != 0 {
				code = kerr.ErrorForCode(p.ErrorCode).(*kerr.Error).Message
			}
			out = append(out, fmt.Sprintf("%s/%d %d/%d/%d %s", names[rt.Topic], p.Partition, p.StartOffset, p.LeaderEpoch, p.Lag, code))
		}
	}
	slices.Sort(out)
	return strings.Join(out, "; ")
}

// joinConsumerGroup makes group a consumer group (KIP-848) with one member
// subscribed to topic.
func joinConsumerGroup(t *testing.T, cl *kgo.Client, group, topic string) {
	t.Helper()
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID, req.RebalanceTimeoutMillis = group, "member-1", 10000
	req.SubscribedTopicNames, req.Topics = []string{topic}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if err := retryCoordinator(t, func() error {
		resp, err := req.RequestWith(testCtx(t, opTimeout), cl)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		return err
	}); err != nil {
		t.Fatalf("ConsumerGroupHeartbeat joining %s: %v", group, err)
	}
}
