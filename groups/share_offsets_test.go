package groups

import (
	"errors"
	"reflect"
	"testing"

	"github.com/vibemq/broker/topics"
)

// TestShareOffsetsAlterDelete: an alter creates the group and sets the
// start offset (clamped to the log start), kept across a restart; the next
// acquisition starts there; both APIs refuse a group with a member; a
// delete forgets the topic, and the next fetch starts again by
// share.auto.offset.reset.
func TestShareOffsetsAlterDelete(t *testing.T) {
	h := newHarness(t, Config{ShareAutoOffsetReset: "earliest"})
	h.createTopic("orders", 1)
	h.produce("orders", 6)
	res, err := h.c.AlterShareGroupOffsets("workers", []ShareOffsetTopic{{Topic: "orders", Partitions: map[int32]int64{0: 4, 3: 0}}, {Topic: "nope", Partitions: map[int32]int64{0: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Partitions[0] != nil || !errors.Is(res[0].Partitions[3], topics.ErrUnknownTopic) || !errors.Is(res[1].Partitions[0], topics.ErrUnknownTopic) || res[1].TopicID != [16]byte{} {
		t.Fatalf("alter results %+v", res)
	}
	h.reopen()
	if v, ok := h.c.DescribeShareGroup("workers"); !ok || len(v.Partitions) != 1 || v.Partitions[0].StartOffset != 4 || v.Partitions[0].Lag != 2 {
		t.Fatalf("after alter and restart: %+v", v)
	}
	p := h.shareJoin("workers", "a", "orders")
	if _, err := h.c.AlterShareGroupOffsets("workers", []ShareOffsetTopic{{Topic: "orders", Partitions: map[int32]int64{0: 0}}}); !errors.Is(err, ErrNonEmptyGroup) {
		t.Fatalf("alter with a member: %v", err)
	}
	if _, err := h.c.DeleteShareGroupOffsets("workers", []string{"orders"}); !errors.Is(err, ErrNonEmptyGroup) {
		t.Fatalf("delete with a member: %v", err)
	}
	h.shareSession(ShareSessionRequest{Group: "workers", MemberID: "a", Epoch: 0, Added: []SharePartitionID{p}})
	if got := h.acquire("workers", "a", p, 10); !reflect.DeepEqual(got, []AcquiredRange{{4, 5, 1}}) {
		t.Fatalf("acquired %v, want 4-5", got)
	}
	if _, w, err := h.c.ShareHeartbeat(ShareHeartbeatRequest{Group: "workers", MemberID: "a", MemberEpoch: -1}, h.now); err != nil || w() != nil {
		t.Fatal(err)
	}
	res, err = h.c.DeleteShareGroupOffsets("workers", []string{"orders", "nope"})
	if err != nil || res[0].Err != nil || !errors.Is(res[1].Err, topics.ErrUnknownTopic) {
		t.Fatalf("delete: %v %+v", err, res)
	}
	if v, _ := h.c.DescribeShareGroup("workers"); len(v.Partitions) != 0 {
		t.Fatalf("after delete: %+v", v.Partitions)
	}
	if _, err := h.c.AlterShareGroupOffsets("workers", []ShareOffsetTopic{{Topic: "orders", Partitions: map[int32]int64{0: -7}}}); err != nil {
		t.Fatal(err)
	}
	if v, _ := h.c.DescribeShareGroup("workers"); len(v.Partitions) != 1 || v.Partitions[0].StartOffset != 0 {
		t.Fatalf("a negative start offset is the log start: %+v", v.Partitions)
	}
	if _, err := h.c.DeleteShareGroupOffsets("missing", []string{"orders"}); !errors.Is(err, ErrGroupIDNotFound) {
		t.Fatalf("delete of a missing group: %v", err)
	}
}
