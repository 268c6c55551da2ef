package topics

import (
	"fmt"
	"time"
)

// Retention of replicated partitions (issue 13): their log is a Raft
// group's (package cluster), not a topics.Partition, and its leader alone
// decides where the log starts, then proposes it to every replica. The
// decision is this file's: the rules of retentionPrefix, each batch of
// the replicated log counting as one segment.

// RetainedBatch is one batch of a replicated partition's log as retention
// sees it: base offset, size in bytes, max timestamp.
type RetainedBatch struct {
	Base, Size, MaxTimestamp int64
}

// ReplicatedRetentionStart is the log start retention allows at now for
// a replicated partition of t whose log holds batches (oldest first, the
// first one possibly straddling logStart) below the high watermark hwm:
// the base of the first batch kept (hwm when none is), never below
// logStart. Rules (Kafka's UnifiedLog.deleteOldSegments, cleanup.policy
// delete only): a batch whose max timestamp is more than retention.ms
// before now goes, and batches go from the oldest while the rest still
// holds retention.bytes.
func (t *Topic) ReplicatedRetentionStart(batches []RetainedBatch, hwm, logStart int64, now time.Time) int64 {
	segs := make([]segment, len(batches))
	for i, b := range batches {
		segs[i] = segment{Base: b.Base, Size: b.Size, MaxTimestamp: b.MaxTimestamp}
	}
	n := retentionPrefix(segs, logBounds{leo: hwm, hwm: hwm, logStart: logStart}, now.UnixMilli(), t.currentSettings())
	switch {
	case n == 0:
		return logStart
	case n < len(segs):
		return max(segs[n].Base, logStart)
	}
	return max(hwm, logStart)
}

// CheckDeleteRecords refuses DeleteRecords on t: a topic owned by a queue
// or an event store, or whose cleanup.policy does not include delete
// (ErrPolicyViolation).
func (t *Topic) CheckDeleteRecords() error {
	if err := t.CheckClientChange(ChangeDeleteRecords); err != nil {
		return err
	}
	if !t.currentSettings().delete {
		return fmt.Errorf("%w: records can be deleted only from topics whose cleanup.policy includes delete", ErrPolicyViolation)
	}
	return nil
}
