package main

import (
	"context"
	"fmt"
	"time"

	"github.com/vibemq/broker/cluster"
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
// (compactReplica), then the log start retention allows at now (topics.ReplicatedRetentionStart over
// the log's index, with the topic's configs from the metadata group), or
// the same log start when only a log compaction became possible.
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
			// A replicated __consumer_offsets keeps its log start whatever
			// its cleanup.policy: Load reads the groups from the log, and a
			// pending transactional offset's record must stay until its
			// marker's tombstone (groups/txn_offsets_log.go).
			continue
		}
		t, ok := m.topics.Topic(r.rp.Topic)
		if !ok || ctx.Err() != nil {
			continue
		}
		view, hw, start := r.log.RetentionView()
		batches := make([]topics.RetainedBatch, len(view))
		for i, b := range view {
			batches[i] = topics.RetainedBatch(b) // the same fields: cluster does not import topics
		}
		m.compactReplica(ctx, r, t, batches, now)
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

// compactReplica proposes a compaction command for r, led here, when its
// topic t is compacted and topics.ReplicatedCompaction finds one due at
// now over r's batches (cluster/partition_compact.go applies it on every
// replica).
func (m *replicaManager) compactReplica(ctx context.Context, r *replica, t *topics.Topic, batches []topics.RetainedBatch, now time.Time) {
	b := topics.ReplicatedCompactionBounds{HighWatermark: r.log.HighWatermark(), LastStable: r.log.LastStableOffset(),
		LogStart: r.log.LogStart(), CleanEnd: r.log.CleanEnd(), TombstoneHorizon: r.log.TombstoneHorizon()}
	end, deleteRetentionMs, due := t.ReplicatedCompaction(batches, b, now)
	if !due {
		return
	}
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
