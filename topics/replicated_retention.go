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

// ReplicatedCompactionBounds is what the leader of a replicated
// partition knows of its log for the compaction decision: the high
// watermark, the last stable offset, the log start, the clean range end
// of the last compaction (0: none since the start) and the earliest
// delete horizon of a kept tombstone (-1: none).
type ReplicatedCompactionBounds struct {
	HighWatermark, LastStable, LogStart, CleanEnd, TombstoneHorizon int64
}

// ReplicatedCompaction decides whether the leader of a replicated
// partition of t compacts its log at now, and the clean range end and
// delete.retention.ms of the compaction command (package cluster applies
// it on every replica). The rules of a local partition's cleanableRange,
// each batch counting as one segment, the last one as the active
// segment: the range ends at the last batch, at the first batch past the
// last stable offset or within min.compaction.lag.ms of now; it
// is compacted when its dirty bytes (after the last clean end) are more
// than min.cleanable.dirty.ratio of its bytes, when its first dirty batch
// is older than max.compaction.lag.ms, or when a kept tombstone's delete
// horizon has passed. ok is false when the topic is not compacted or
// nothing is due.
func (t *Topic) ReplicatedCompaction(batches []RetainedBatch, b ReplicatedCompactionBounds, now time.Time) (end, deleteRetentionMs int64, ok bool) {
	return replicatedCompaction(t.currentSettings(), batches, b, now)
}

// CoordinatorCompaction is ReplicatedCompaction for a replicated
// partition of the internal coordinator topic name (__consumer_offsets,
// __transaction_state): with the configs of its catalog row when this
// broker has one (groups.Open creates __consumer_offsets with
// cleanup.policy=compact), else with the configs Kafka creates the topic
// with (TransactionStateManager.transactionTopicConfigs: cleanup.policy
// compact) over the broker's defaults, so the cleaner settings are the
// log.cleaner.* defaults (min.cleanable.dirty.ratio 0.5,
// delete.retention.ms 86400000, min.compaction.lag.ms 0,
// max.compaction.lag.ms unbounded) unless the operator changed them.
func (m *Manager) CoordinatorCompaction(name string, batches []RetainedBatch, b ReplicatedCompactionBounds, now time.Time) (end, deleteRetentionMs int64, ok bool) {
	if t, found := m.Topic(name); found {
		return t.ReplicatedCompaction(batches, b, now)
	}
	s, _ := parseSettings(map[string]string{"cleanup.policy": "compact"}, m.cfg.BrokerDefaults)
	return replicatedCompaction(s, batches, b, now)
}

// replicatedCompaction is ReplicatedCompaction with the settings s.
func replicatedCompaction(s *topicSettings, batches []RetainedBatch, b ReplicatedCompactionBounds, now time.Time) (end, deleteRetentionMs int64, ok bool) {
	if !s.compact {
		return 0, 0, false
	}
	nowMs := now.UnixMilli()
	var clean, dirty int64
	firstDirtyTs := int64(-1)
	end = b.LogStart
	for i, bt := range batches {
		if i+1 == len(batches) {
			break // the last batch is never compacted (the active segment)
		}
		upper := batches[i+1].Base
		if upper > b.LastStable || (s.minCompactionLagMs > 0 && bt.MaxTimestamp > nowMs-s.minCompactionLagMs) {
			break
		}
		end = upper
		if upper <= b.CleanEnd {
			clean += bt.Size
			continue
		}
		if firstDirtyTs < 0 {
			firstDirtyTs = bt.MaxTimestamp
		}
		dirty += bt.Size
	}
	due := dirty > 0 && (float64(dirty)/float64(clean+dirty) > s.minCleanableRatio || nowMs-s.maxCompactionLagMs > firstDirtyTs)
	if b.TombstoneHorizon >= 0 && b.TombstoneHorizon <= nowMs && end > b.LogStart {
		due = true
	}
	return end, s.deleteRetentionMs, due
}
