package main

import (
	"context"
	"fmt"
	"time"

	"github.com/vibemq/broker/cluster"
	"github.com/vibemq/broker/groups"
	"github.com/vibemq/broker/kafkaproto"
	"github.com/vibemq/broker/retention"
	"github.com/vibemq/broker/topics"
)

// Retention and DeleteRecords on replicated partitions (issue 13 part 2;
// DESIGN.md "Cluster", "Log start of replicated partitions"): the leader
// decides and proposes a log-start command to the partition's group;
// every replica applies it at the same log position
// (cluster/partition_logstart.go).

// LogStart implements kafkaproto.ReplicatedLog.
func (l *replicaLog) LogStart() int64 { return l.r.log.LogStart() }

// DeleteRecords implements kafkaproto.ReplicatedLog: on the leader, an
// offset above the log start is proposed and answered once applied.
func (l *replicaLog) DeleteRecords(ctx context.Context, offset int64) (int64, error) {
	if _, err := l.LeaderEpoch(); err != nil {
		return -1, err
	}
	hw, start := l.r.log.HighWatermark(), l.r.log.LogStart()
	if offset == -1 {
		offset = hw
	}
	if offset < 0 || offset > hw {
		return -1, fmt.Errorf("%w: cannot delete records before %d: the high watermark is %d", topics.ErrOffsetOutOfRange, offset, hw)
	}
	if offset <= start {
		return start, nil
	}
	return l.m.proposeLogStart(ctx, l.r, offset)
}

// proposeLogStart proposes moving r's log start to offset, with the
// leader's matched index bounding the log compaction it may cause, and
// returns the log start once applied.
func (m *replicaManager) proposeLogStart(ctx context.Context, r *replica, offset int64) (int64, error) {
	g := r.rp.Group
	_, res, err := m.host.Propose(ctx, g, cluster.LogStartCommand(offset, m.host.Matched(g)))
	return appendResult(res, err)
}

// runRetention applies retention.ms and retention.bytes to the replicated
// partitions this broker leads, every log-retention-check-interval (the
// single-node loop's interval), until ctx ends.
func (m *replicaManager) runRetention(ctx context.Context, done chan struct{}) {
	defer close(done)
	every := m.retentionEvery
	if every <= 0 {
		every = retention.DefaultRetentionCheckInterval
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			m.enforceRetention(ctx, now)
		}
	}
}

// enforceRetention proposes, for each replicated partition led here, a
// compaction command when its topic is compacted and one is due
// (proposeCompaction), then the log start retention allows at now (topics.ReplicatedRetentionStart over
// the log's index, with the topic's configs from the metadata group), or
// the same log start when only a log compaction became possible. The
// partitions of the coordinator topics are compacted only
// (compactCoordinator).
func (m *replicaManager) enforceRetention(ctx context.Context, now time.Time) {
	m.mu.RLock()
	led := make([]*replica, 0, len(m.logs))
	for g, r := range m.logs {
		if m.host.LeaderLease(g) {
			led = append(led, r)
		}
	}
	m.mu.RUnlock()
	for _, r := range led {
		if r.rp.Coordinator {
			if ctx.Err() == nil {
				m.compactCoordinator(ctx, r, now)
			}
			continue
		}
		t, ok := m.topics.Topic(r.rp.Topic)
		if !ok || ctx.Err() != nil {
			continue
		}
		batches, hw, start := retainedBatches(r.log)
		if end, deleteRetentionMs, due := t.ReplicatedCompaction(batches, compactionBounds(r.log), now); due {
			m.proposeCompaction(ctx, r, end, deleteRetentionMs, now)
		}
		target := t.ReplicatedRetentionStart(batches, hw, start, now)
		if target <= start && !r.log.CompactionPending(m.host.Matched(r.rp.Group)) {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, leaderRecordTimeout)
		got, err := m.proposeLogStart(pctx, r, max(target, start))
		cancel()
		if err != nil {
			m.log.Debug().Err(err).Str("topic", r.rp.Topic).Int32("partition", r.rp.Partition).Msg("retention's log start not applied; tried again at the next check")
			continue
		}
		if got > start {
			m.log.Debug().Str("topic", r.rp.Topic).Int32("partition", r.rp.Partition).Int64("log_start_offset", got).Msg("retention moved the log start")
		}
	}
}

// retainedBatches is log's index as topics' retention and compaction
// decisions take it, with its high watermark and log start.
func retainedBatches(log *cluster.PartitionLog) ([]topics.RetainedBatch, int64, int64) {
	view, hw, start := log.RetentionView()
	batches := make([]topics.RetainedBatch, len(view))
	for i, b := range view {
		batches[i] = topics.RetainedBatch(b) // the same fields: cluster does not import topics
	}
	return batches, hw, start
}

// compactionBounds is what the compaction decision needs of log.
func compactionBounds(log *cluster.PartitionLog) topics.ReplicatedCompactionBounds {
	return topics.ReplicatedCompactionBounds{HighWatermark: log.HighWatermark(), LastStable: log.LastStableOffset(),
		LogStart: log.LogStart(), CleanEnd: log.CleanEnd(), TombstoneHorizon: log.TombstoneHorizon()}
}

// proposeCompaction proposes the compaction command of r, led here, for
// the clean range ending at end at now (cluster/partition_compact.go
// applies it on every replica) and waits until it is applied here.
func (m *replicaManager) proposeCompaction(ctx context.Context, r *replica, end, deleteRetentionMs int64, now time.Time) {
	pctx, cancel := context.WithTimeout(ctx, leaderRecordTimeout)
	defer cancel()
	_, res, err := m.host.Propose(pctx, r.rp.Group, cluster.CompactionCommand(end, now.UnixMilli(), deleteRetentionMs))
	got, err := appendResult(res, err)
	if err != nil {
		m.log.Debug().Err(err).Str("topic", r.rp.Topic).Int32("partition", r.rp.Partition).Msg("compaction not applied; tried again at the next check")
		return
	}
	m.log.Debug().Str("topic", r.rp.Topic).Int32("partition", r.rp.Partition).Int64("clean_end", got).Msg("compacted the replicated log")
}

// compactCoordinator compacts partition r of a replicated coordinator
// topic (__consumer_offsets, __transaction_state), led here, as Kafka
// compacts both (cleanup.policy=compact): the same compaction command as
// a compacted topic's, decided by topics.Manager.CoordinatorCompaction.
// Then, when compaction emptied every batch between the log start and
// the first indexed batch, it moves the log start there (which lets the
// Raft log drop those entries, "Log start of replicated partitions"):
// no record is below it, so a load from the new log start reads the same
// records. Nothing is proposed while this broker's coordinator has not
// loaded the partition (a load reads the log; after it, the log is not
// read here again until the next leadership). Retention never moves the
// log start of these partitions: a live record (an offset, a pending
// transactional offset, a transaction's row) stays until a later record
// of its key replaces it.
func (m *replicaManager) compactCoordinator(ctx context.Context, r *replica, now time.Time) {
	if !m.coordinatorLoaded(r) {
		return
	}
	batches, _, start := retainedBatches(r.log)
	if end, deleteRetentionMs, due := m.topics.CoordinatorCompaction(r.rp.Topic, batches, compactionBounds(r.log), now); due {
		m.proposeCompaction(ctx, r, end, deleteRetentionMs, now)
		batches, _, start = retainedBatches(r.log)
	}
	if len(batches) == 0 || ctx.Err() != nil {
		return
	}
	// The first indexed batch: every offset below it is in a batch
	// compaction emptied (emptied batches leave the index) or below the
	// log start already.
	target := max(batches[0].Base, start)
	if target <= start && !r.log.CompactionPending(m.host.Matched(r.rp.Group)) {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, leaderRecordTimeout)
	got, err := m.proposeLogStart(pctx, r, target)
	cancel()
	if err != nil {
		m.log.Debug().Err(err).Str("topic", r.rp.Topic).Int32("partition", r.rp.Partition).Msg("the log start past the compacted prefix not applied; tried again at the next check")
		return
	}
	if got > start {
		m.log.Debug().Str("topic", r.rp.Topic).Int32("partition", r.rp.Partition).Int64("log_start_offset", got).Msg("the log start moved past the compacted prefix")
	}
}

// coordinatorLoaded reports whether this broker's coordinator of r's
// topic has loaded partition r in the Raft term this broker leads it in
// now (true without such a coordinator: nothing loads the partition here
// then).
func (m *replicaManager) coordinatorLoaded(r *replica) bool {
	st, ok := m.host.Status(r.rp.Group)
	if !ok || !st.Leading {
		return false
	}
	switch {
	case r.rp.Topic == groups.OffsetsTopic && m.groups != nil:
		return m.groups.PartitionLoaded(r.rp.Partition, st.Term)
	case r.rp.Topic == kafkaproto.TransactionStateTopic && m.txns != nil:
		return m.txns.PartitionLoaded(r.rp.Partition, st.Term)
	}
	return true
}
