package groups

import (
	"errors"
	"fmt"
	"testing"
)

// TestQueueAcks: a queue partition's acknowledgement batches expand to one
// acknowledgement per offset, checked as the window's are.
func TestQueueAcks(t *testing.T) {
	got, err := queueAcks(2, []AckBatch{{First: 3, Last: 5, Types: []int8{AckAccept, AckReject, AckRelease}}, {First: 8, Last: 9, Types: []int8{AckRenew}}})
	if err != nil || fmt.Sprint(got) != "[{2 3 1} {2 4 3} {2 5 2} {2 8 4} {2 9 4}]" {
		t.Fatalf("expanded %v, %v", got, err)
	}
	for name, bad := range map[string][]AckBatch{
		"first after last": {{First: 5, Last: 4, Types: []int8{AckAccept}}},
		"overlapping":      {{First: 1, Last: 4, Types: []int8{AckAccept}}, {First: 4, Last: 6, Types: []int8{AckAccept}}},
		"type count":       {{First: 1, Last: 4, Types: []int8{AckAccept, AckAccept}}},
		"unknown type":     {{First: 1, Last: 1, Types: []int8{9}}},
		"no types":         {{First: 1, Last: 1}},
	} {
		if _, err := queueAcks(0, bad); !errors.Is(err, errInvalidAck) {
			t.Errorf("%s: %v, want errInvalidAck", name, err)
		}
	}
	// A range past what a member can hold is refused before it is expanded.
	if _, err := queueAcks(0, []AckBatch{{First: 0, Last: 1 << 40, Types: []int8{AckAccept}}}); !errors.Is(err, errInvalidRecordState) {
		t.Errorf("a huge range: %v, want errInvalidRecordState", err)
	}
}

// TestAppendAcquired: offsets in ascending order make runs of one delivery
// count, as AcquiredRecords lists them.
func TestAppendAcquired(t *testing.T) {
	var runs []AcquiredRange
	for _, l := range []QueueLease{{0, 1, 1}, {0, 2, 1}, {0, 3, 2}, {0, 5, 2}, {0, 6, 2}} {
		runs = appendAcquired(runs, l.Offset, l.DeliveryCount)
	}
	if fmt.Sprint(runs) != "[{1 2 1} {3 3 2} {5 6 2}]" {
		t.Fatalf("runs %v", runs)
	}
}
