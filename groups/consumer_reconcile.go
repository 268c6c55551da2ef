package groups

// Reconciliation of one member of a consumer group (KIP-848), after Apache
// Kafka's CurrentAssignmentBuilder: the member moves from its current
// assignment towards its target one epoch at a time, and a partition goes
// to its new owner only once its previous owner no longer holds it.

import "fmt"

// memberState is a consumer group member's reconciliation state, with
// Kafka's MemberState codes (stored in ConsumerGroupCurrentMemberAssignment
// records).
type memberState int8

const (
	memberUnknown memberState = 0
	// memberStable: the member holds its whole target assignment (or all
	// of it that is free) at the target epoch.
	memberStable memberState = 1
	// memberUnrevokedPartitions: the member must give up partitions
	// before it may move to the target epoch.
	memberUnrevokedPartitions memberState = 2
	// memberUnreleasedPartitions: the member is at the target epoch but
	// waits for partitions that other members still hold.
	memberUnreleasedPartitions memberState = 3
)

func (s memberState) String() string {
	switch s {
	case memberStable:
		return "STABLE"
	case memberUnrevokedPartitions:
		return "UNREVOKED_PARTITIONS"
	case memberUnreleasedPartitions:
		return "UNRELEASED_PARTITIONS"
	case memberUnknown:
		return "UNKNOWN"
	}
	return fmt.Sprintf("MemberState(%d)", int8(s))
}

// reconcileInput is what a member's next state depends on.
type reconcileInput struct {
	epoch, previousEpoch int32
	state                memberState
	assigned, pending    assignment
	targetEpoch          int32
	target               assignment
	// heldByOther reports whether another member holds the partition
	// (assigned or pending revocation).
	heldByOther func(t [16]byte, p int32) bool
	// owned is what the member reported holding in this heartbeat; nil
	// when it did not report (its holdings are unchanged).
	owned assignment
}

// reconcileOutput is the member's next state.
type reconcileOutput struct {
	epoch, previousEpoch int32
	state                memberState
	assigned, pending    assignment
}

// reconcile is Kafka's CurrentAssignmentBuilder.build.
func reconcile(in reconcileInput) reconcileOutput {
	same := reconcileOutput{in.epoch, in.previousEpoch, in.state, in.assigned, in.pending}
	switch in.state {
	case memberStable:
		if in.epoch == in.targetEpoch {
			return same
		}
		return computeNextAssignment(in)
	case memberUnrevokedPartitions:
		if in.owned == nil || ownsAny(in.owned, in.pending) {
			return same // not yet revoked
		}
		in.pending = assignment{}
		return computeNextAssignment(in)
	default: // unreleased partitions, or unknown
		return computeNextAssignment(in)
	}
}

func ownsAny(owned, pending assignment) bool {
	for t, ps := range pending {
		for _, p := range ps {
			if owned.has(t, p) {
				return true
			}
		}
	}
	return false
}

// computeNextAssignment is Kafka's CurrentAssignmentBuilder
// .computeNextAssignment: partitions no longer in the target are revoked
// first, at the current epoch; only then does the member move to the
// target epoch with the target partitions that are free.
func computeNextAssignment(in reconcileInput) reconcileOutput {
	keep := assignment{}
	revoke := assignment{}
	unreleased := false
	for t, ps := range in.assigned {
		for _, p := range ps {
			if in.target.has(t, p) {
				keep.add(t, p)
			} else {
				revoke.add(t, p)
			}
		}
	}
	next := keep.clone()
	for t, ps := range in.target {
		for _, p := range ps {
			if keep.has(t, p) {
				continue
			}
			if in.heldByOther != nil && in.heldByOther(t, p) {
				unreleased = true
				continue
			}
			next.add(t, p)
		}
	}
	switch {
	case len(revoke) > 0:
		return reconcileOutput{in.epoch, in.previousEpoch, memberUnrevokedPartitions, keep, revoke}
	case unreleased:
		return reconcileOutput{in.targetEpoch, in.epoch, memberUnreleasedPartitions, next, assignment{}}
	default:
		return reconcileOutput{in.targetEpoch, in.epoch, memberStable, next, assignment{}}
	}
}
