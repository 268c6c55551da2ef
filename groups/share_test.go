package groups

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/vibemq/broker/topics"
)

// produce appends n single-record batches to partition 0 of topic.
func (h *harness) produce(topic string, n int) {
	h.t.Helper()
	t, _ := h.tm.Topic(topic)
	p, _ := t.Partition(0)
	var as []*topics.Append
	for range n {
		b, err := topics.EncodeBatch(topics.BatchHeader{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, BaseTimestamp: h.now.UnixMilli(), MaxTimestamp: h.now.UnixMilli()},
			[]topics.Record{{Value: []byte("v")}})
		if err != nil {
			h.t.Fatal(err)
		}
		as = append(as, &topics.Append{Partition: p, Batch: b})
	}
	if err := h.tm.Append(as, h.now).Wait(); err != nil {
		h.t.Fatal(err)
	}
	for _, a := range as {
		if a.Err != nil {
			h.t.Fatal(a.Err)
		}
	}
}

func (h *harness) shareJoin(group, member, topic string) SharePartitionID {
	h.t.Helper()
	res, wait, err := h.c.ShareHeartbeat(ShareHeartbeatRequest{Group: group, MemberID: member, SubscribedTopicNames: []string{topic}}, h.now)
	if err == nil {
		err = wait()
	}
	if err != nil || len(res.Assignment) != 1 {
		h.t.Fatalf("join %s: %v, assignment %v", member, err, res.Assignment)
	}
	return SharePartitionID{TopicID: res.Assignment[0].TopicID, Partition: 0}
}

func (h *harness) shareSession(req ShareSessionRequest) ShareSessionResult {
	h.t.Helper()
	res, err := h.c.ShareSession(req, h.now)
	if err != nil {
		h.t.Fatalf("share session %+v: %v", req, err)
	}
	if err := res.Wait(); err != nil {
		h.t.Fatal(err)
	}
	return res
}

func (h *harness) acquire(group, member string, p SharePartitionID, max int) []AcquiredRange {
	h.t.Helper()
	got, wait := h.c.ShareAcquire(ShareAcquireRequest{Group: group, MemberID: member, Partitions: []SharePartitionID{p}, MaxRecords: max, MaxBytes: 1 << 20}, h.now)
	if err := wait(); err != nil || got[0].Err != nil {
		h.t.Fatalf("acquire: %v %v", err, got[0].Err)
	}
	return got[0].Acquired
}

// TestShareStateSurvivesRestart: acquisitions, acknowledgements and
// delivery counts written through the coordinator come back after a
// restart on the same Pebble store; the owner may acknowledge what it held,
// the rest is redelivered when the lock expires.
func TestShareStateSurvivesRestart(t *testing.T) {
	h := newHarness(t, Config{ShareAutoOffsetReset: "earliest", ShareRecordLockDuration: 10 * time.Second})
	h.createTopic("orders", 1)
	h.produce("orders", 6)
	p := h.shareJoin("workers", "a", "orders")
	h.shareSession(ShareSessionRequest{Group: "workers", MemberID: "a", Epoch: 0, Added: []SharePartitionID{p}})
	if got := h.acquire("workers", "a", p, 4); !reflect.DeepEqual(got, []AcquiredRange{{0, 3, 1}}) {
		t.Fatalf("acquired %v, want 0-3", got)
	}
	res := h.shareSession(ShareSessionRequest{Group: "workers", MemberID: "a", Epoch: 1,
		Acks: []ShareAcks{{SharePartitionID: p, Batches: []AckBatch{{0, 1, []int8{AckAccept, AckRelease}}}}}})
	if err := res.AckErrors[p]; err != nil {
		t.Fatal(err)
	}

	h.reopen()
	// a rejoins with its member ID (its heartbeat got UNKNOWN_MEMBER_ID)
	// and a new session; it still holds 2-3 until their lock expires.
	p = h.shareJoin("workers", "a", "orders")
	h.shareSession(ShareSessionRequest{Group: "workers", MemberID: "a", Epoch: 0, Added: []SharePartitionID{p}})
	if got := h.acquire("workers", "a", p, 10); !reflect.DeepEqual(got, []AcquiredRange{{1, 1, 2}, {4, 5, 1}}) {
		t.Fatalf("after the restart acquired %v, want the released 1 at count 2 and the new 4-5", got)
	}
	res = h.shareSession(ShareSessionRequest{Group: "workers", MemberID: "a", Epoch: 1,
		Acks: []ShareAcks{{SharePartitionID: p, Batches: []AckBatch{{2, 2, []int8{AckAccept}}}}}})
	if err := res.AckErrors[p]; err != nil {
		t.Fatalf("the owner acknowledging a record it held before the restart: %v", err)
	}
	h.shareJoin("workers", "b", "orders")
	h.shareSession(ShareSessionRequest{Group: "workers", MemberID: "b", Epoch: 0, Added: []SharePartitionID{p}})
	if got := h.acquire("workers", "b", p, 10); len(got) != 0 {
		t.Fatalf("b acquired %v while a holds everything", got)
	}
	h.advance(10 * time.Second)
	if got := h.acquire("workers", "b", p, 1); !reflect.DeepEqual(got, []AcquiredRange{{1, 1, 3}}) {
		t.Fatalf("after the lock expired b acquired %v, want 1 at count 3", got)
	}
	v, _ := h.c.DescribeShareGroup("workers")
	if len(v.Partitions) != 1 || v.Partitions[0].StartOffset != 1 {
		t.Fatalf("partitions %+v, want start offset 1 (0 accepted)", v.Partitions)
	}
}

// TestShareSessionEpochs: KIP-932 share session rules.
func TestShareSessionEpochs(t *testing.T) {
	h := newHarness(t, Config{})
	h.createTopic("orders", 1)
	p := h.shareJoin("workers", "a", "orders")
	if _, err := h.c.ShareSession(ShareSessionRequest{Group: "workers", MemberID: "a", Epoch: 1}, h.now); !errors.Is(err, ErrShareSessionNotFound) {
		t.Fatalf("epoch 1 without a session: %v", err)
	}
	if _, err := h.c.ShareSession(ShareSessionRequest{Group: "workers", MemberID: "x", Epoch: 0}, h.now); !errors.Is(err, ErrUnknownMemberID) {
		t.Fatalf("a session for an unknown member: %v", err)
	}
	acks := []ShareAcks{{SharePartitionID: p, Batches: []AckBatch{{0, 0, []int8{AckAccept}}}}}
	if _, err := h.c.ShareSession(ShareSessionRequest{Group: "workers", MemberID: "a", Epoch: 0, Acks: acks}, h.now); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("acknowledgements on epoch 0: %v", err)
	}
	h.shareSession(ShareSessionRequest{Group: "workers", MemberID: "a", Epoch: 0, Added: []SharePartitionID{p}})
	if _, err := h.c.ShareSession(ShareSessionRequest{Group: "workers", MemberID: "a", Epoch: 2}, h.now); !errors.Is(err, ErrInvalidShareSessionEpoch) {
		t.Fatalf("epoch 2 where 1 is due: %v", err)
	}
	res := h.shareSession(ShareSessionRequest{Group: "workers", MemberID: "a", Epoch: 1})
	if !reflect.DeepEqual(res.Partitions, []SharePartitionID{p}) {
		t.Fatalf("session partitions %v", res.Partitions)
	}
	h.shareSession(ShareSessionRequest{Group: "workers", MemberID: "a", Epoch: -1})
	if _, err := h.c.ShareSession(ShareSessionRequest{Group: "workers", MemberID: "a", Epoch: 2}, h.now); !errors.Is(err, ErrShareSessionNotFound) {
		t.Fatalf("after closing: %v", err)
	}
}

// TestShareGroupDelete: DeleteGroups refuses a share group with members,
// deletes an empty one with its state, and it stays deleted after a
// restart.
func TestShareGroupDelete(t *testing.T) {
	h := newHarness(t, Config{ShareAutoOffsetReset: "earliest"})
	h.createTopic("orders", 1)
	h.produce("orders", 2)
	p := h.shareJoin("workers", "a", "orders")
	h.shareSession(ShareSessionRequest{Group: "workers", MemberID: "a", Epoch: 0, Added: []SharePartitionID{p}})
	h.acquire("workers", "a", p, 1)
	if res := result(t, h.c.DeleteGroups([]string{"workers"}, h.now)); !errors.Is(res[0], ErrNonEmptyGroup) {
		t.Fatalf("deleting a share group with a member: %v", res[0])
	}
	if _, wait, err := h.c.ShareHeartbeat(ShareHeartbeatRequest{Group: "workers", MemberID: "a", MemberEpoch: -1}, h.now); err != nil || wait() != nil {
		t.Fatalf("leaving: %v", err)
	}
	if res := result(t, h.c.DeleteGroups([]string{"workers"}, h.now)); res[0] != nil {
		t.Fatalf("deleting the empty share group: %v", res[0])
	}
	h.reopen()
	if _, ok := h.c.DescribeShareGroup("workers"); ok {
		t.Fatal("the deleted share group is back after a restart")
	}
	// A new group of that name starts over.
	p = h.shareJoin("workers", "b", "orders")
	h.shareSession(ShareSessionRequest{Group: "workers", MemberID: "b", Epoch: 0, Added: []SharePartitionID{p}})
	if got := h.acquire("workers", "b", p, 10); !reflect.DeepEqual(got, []AcquiredRange{{0, 1, 1}}) {
		t.Fatalf("the new group acquired %v, want 0-1 at count 1", got)
	}
}
