package compattests

// AlterShareGroupOffsets (91) and DeleteShareGroupOffsets (92) of KIP-932,
// with kadm, against this broker and Apache Kafka 4.2: only while the group
// is empty (NON_EMPTY_GROUP), per-partition and per-topic errors, the new
// start offsets seen by DescribeShareGroupOffsets and by a share consumer,
// a deletion that forgets the topic, an alter that creates the group. This
// broker only: a native queue's topic is INVALID_REQUEST for both.

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestShareGroupOffsetsAlterDelete(t *testing.T) {
	t.Parallel()
	t.Run("broker", func(t *testing.T) { testShareGroupOffsets(t, shareBroker(t), false) })
	t.Run("apache-kafka", func(t *testing.T) { testShareGroupOffsets(t, &brokerProc{t: t, kafkaAddr: referenceKafka(t)}, true) })
}

// retryCoordinator repeats call while Apache Kafka is still loading the
// group's coordinator (first use of its __consumer_offsets partition).
func retryCoordinator(t *testing.T, call func() error) error {
	t.Helper()
	for try := 0; ; try++ {
		err := call()
		if try == 40 || !(errors.Is(err, kerr.NotCoordinator) || errors.Is(err, kerr.CoordinatorNotAvailable) || errors.Is(err, kerr.CoordinatorLoadInProgress)) {
			return err
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func testShareGroupOffsets(t *testing.T, b *brokerProc, ref bool) {
	adm := newAdmin(t, b.Addr())
	ctx := testCtx(t, groupWait)
	topic := topicName(t, "")
	other := topicName(t, "other")
	group := "share." + topic
	createTopic(t, adm, topic, 2, nil)
	createTopic(t, adm, other, 1, nil)
	createTopic(t, adm, "never-read-"+topic, 1, nil)
	prod := newClient(t, b.Addr(), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	values := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"} // p0: a c e g i, p1: b d f h j
	for i, v := range values {
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(v), Partition: int32(i % 2)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := retryCoordinator(t, func() error { _, err := adm.DeleteShareGroupOffsets(ctx, "missing."+topic, topic); return err }); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Errorf("DeleteShareGroupOffsets of a missing group: %v, want GROUP_ID_NOT_FOUND", err)
	}

	// With a member: NON_EMPTY_GROUP, nothing changes. (It reads another
	// topic: Apache Kafka 4.2 keeps a share-partition it has loaded in its
	// cache, and a fetch after the alter would still start where that one
	// was.)
	m := newRawShareMember(t, b.Addr(), group, other, "offsets-member-0000001")
	m.fetch([]int32{0}, nil, 1)
	if _, err := adm.AlterShareGroupOffsets(ctx, group, kadm.Offsets{topic: {0: {Topic: topic, Partition: 0, At: 3}}}); !errors.Is(err, kerr.NonEmptyGroup) {
		t.Errorf("AlterShareGroupOffsets with a member: %v, want NON_EMPTY_GROUP", err)
	}
	if _, err := adm.DeleteShareGroupOffsets(ctx, group, topic); !errors.Is(err, kerr.NonEmptyGroup) {
		t.Errorf("DeleteShareGroupOffsets with a member: %v, want NON_EMPTY_GROUP", err)
	}
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.Version, hb.GroupID, hb.MemberID, hb.MemberEpoch = 1, group, m.id, -1
	if r := m.c.roundTrip(hb).(*kmsg.ShareGroupHeartbeatResponse); r.ErrorCode != 0 {
		t.Fatalf("leaving: %s", errName(r.ErrorCode))
	}

	// Empty: applied per partition; unknown topics and partitions refused.
	req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
	req.GroupID = group
	for _, tp := range []struct {
		topic string
		parts map[int32]int64
	}{{topic, map[int32]int64{0: 3, 1: 1, 7: 0}}, {"nope-" + topic, map[int32]int64{0: 1}}} {
		rt := kmsg.NewAlterShareGroupOffsetsRequestTopic()
		rt.Topic = tp.topic
		for p, o := range tp.parts {
			rp := kmsg.NewAlterShareGroupOffsetsRequestTopicPartition()
			rp.Partition, rp.StartOffset = p, o
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, newClient(t, b.Addr()))
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("AlterShareGroupOffsets: %v %+v", err, resp)
	}
	ids := topicIDs(t, adm, topic)
	got := map[string]int16{}
	for _, rt := range resp.Topics {
		if want := ids[rt.Topic]; rt.TopicID != want {
			t.Errorf("topic %s answered with ID %x, want %x", rt.Topic, rt.TopicID, want)
		}
		for _, p := range rt.Partitions {
			got[rt.Topic[:4]+"/"+string(rune('0'+p.Partition))] = p.ErrorCode
		}
	}
	want := map[string]int16{topic[:4] + "/0": 0, topic[:4] + "/1": 0, topic[:4] + "/7": kerr.UnknownTopicOrPartition.Code, "nope/0": kerr.UnknownTopicOrPartition.Code}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("AlterShareGroupOffsets %s: %s, want %s", k, errName(got[k]), errName(w))
		}
	}
	if got := shareGroupOffsets(t, b.Addr(), group, topic); got != "0:3/2 1:1/4" {
		t.Errorf("DescribeShareGroupOffsets after the alter: %s, want 0:3/2 1:1/4", got)
	}

	// A share consumer delivers from the new start offsets.
	cctx, cancel := context.WithCancel(ctx)
	cl := newClient(t, b.Addr(), kgo.ShareGroup(group), kgo.ConsumeTopics(topic), kgo.FetchMaxWait(500*time.Millisecond))
	var mu sync.Mutex
	var seen []string
	go func() {
		for cctx.Err() == nil {
			cl.PollFetches(cctx).EachRecord(func(r *kgo.Record) {
				mu.Lock()
				seen = append(seen, string(r.Value))
				mu.Unlock()
				r.Ack(kgo.AckAccept)
			})
			_ = cl.FlushAcks(cctx)
		}
	}()
	for deadline := time.Now().Add(groupWait); ; time.Sleep(100 * time.Millisecond) {
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		if n >= 6 || time.Now().After(deadline) {
			break
		}
	}
	time.Sleep(time.Second)
	cancel()
	cl.Close()
	mu.Lock()
	slices.Sort(seen)
	if got := slices.Compact(seen); !slices.Equal(got, []string{"d", "f", "g", "h", "i", "j"}) {
		t.Errorf("delivered after the alter: %v, want d f g h i j (p0 from 3, p1 from 1)", got)
	}
	mu.Unlock()

	// Delete: the topic's state goes; a topic the group never read and an
	// unknown one are UNKNOWN_TOPIC_OR_PARTITION.
	var dres kadm.DeleteShareGroupOffsetsResponses
	for deadline := time.Now().Add(groupWait); ; time.Sleep(250 * time.Millisecond) {
		dres, err = adm.DeleteShareGroupOffsets(testCtx(t, opTimeout), group, topic, "never-read-"+topic, "nope-"+topic)
		if !errors.Is(err, kerr.NonEmptyGroup) || time.Now().After(deadline) {
			break // the consumer's leave can take a heartbeat
		}
	}
	if err != nil {
		t.Fatalf("DeleteShareGroupOffsets: %v", err)
	}
	if e, _ := dres.Lookup(topic); e != nil {
		t.Errorf("deleting %s: %v", topic, e)
	}
	for _, name := range []string{"never-read-" + topic, "nope-" + topic} {
		if e, _ := dres.Lookup(name); !errors.Is(e, kerr.UnknownTopicOrPartition) {
			t.Errorf("deleting %s: %v, want UNKNOWN_TOPIC_OR_PARTITION", name, e)
		}
	}
	if got := shareGroupOffsets(t, b.Addr(), group, topic); got != "" {
		t.Errorf("DescribeShareGroupOffsets after the delete: %q, want no partitions", got)
	}

	// Alter creates a group that does not exist.
	fresh := "fresh." + topic
	if err := retryCoordinator(t, func() error {
		r, err := adm.AlterShareGroupOffsets(ctx, fresh, kadm.Offsets{topic: {0: {Topic: topic, Partition: 0, At: 2}}})
		if err == nil {
			err, _ = r.Lookup(topic, 0)
		}
		return err
	}); err != nil {
		t.Fatalf("AlterShareGroupOffsets of a new group: %v", err)
	}
	if got := shareGroupOffsets(t, b.Addr(), fresh, topic); got != "0:2/3" {
		t.Errorf("DescribeShareGroupOffsets of the new group: %s, want 0:2/3", got)
	}
	if !ref {
		shareOffsetsOnQueue(t, b, adm, fresh)
	}
}

// shareOffsetsOnQueue: a native queue's topic has no start offset to
// change (INVALID_REQUEST).
func shareOffsetsOnQueue(t *testing.T, b *brokerProc, adm *kadm.Client, group string) {
	queue := topicName(t, "queue")
	qMust(t, b, "PUT", "/v1/queues/"+queue, map[string]any{}, 201)
	ctx := testCtx(t, opTimeout)
	r, err := adm.AlterShareGroupOffsets(ctx, group, kadm.Offsets{queue: {0: {Topic: queue, Partition: 0, At: 0}}})
	if e, _ := r.Lookup(queue, 0); err != nil || !errors.Is(e, kerr.InvalidRequest) {
		t.Errorf("AlterShareGroupOffsets on a queue: %v %v, want INVALID_REQUEST", err, e)
	}
	d, err := adm.DeleteShareGroupOffsets(ctx, group, queue)
	if e, _ := d.Lookup(queue); err != nil || !errors.Is(e, kerr.InvalidRequest) {
		t.Errorf("DeleteShareGroupOffsets on a queue: %v %v, want INVALID_REQUEST", err, e)
	}
}

// topicIDs maps the named topics to their IDs (Metadata); unknown ones
// are absent (the zero ID).
func topicIDs(t *testing.T, adm *kadm.Client, names ...string) map[string][16]byte {
	t.Helper()
	td, err := adm.ListTopics(testCtx(t, opTimeout), names...)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][16]byte{}
	for _, d := range td {
		if d.Err == nil {
			out[d.Topic] = d.ID
		}
	}
	return out
}
