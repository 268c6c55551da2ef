package retention

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/vibemq/broker/internal/metrics"
	"github.com/vibemq/broker/pebblestore"
)

// ReclaimInterval is how often the reclaim task looks at the store's queue
// of deleted ranges when no wake-up came (a wake-up is sent by every
// committed range deletion, so this is a safety net).
const ReclaimInterval = 5 * time.Second

// ReclaimMinGap separates two reclaim passes that had work: the deletions
// of a burst (many consumer groups or queues deleted one after another)
// are coalesced into one pass, and the memtable flush every compaction of
// a freshly deleted range starts with happens at most about once a gap.
const ReclaimMinGap = time.Second

// AddReclaimTask registers on r the "space-reclaim" task that gives back the disk space of deleted
// key ranges: woken by pebblestore.Store.ReclaimWake (a topic, queue,
// DLQ or event store deleted, DeleteRecords, retention, a purge), it calls
// Store.Reclaim until the queue is empty, which compacts the coalesced
// ranges one at a time (one task: at most one reclaim compaction at once,
// besides Pebble's own), waits until Pebble deleted the obsolete files,
// and probes the free-space guard, so writes refused for want of space
// resume within seconds of the deletion. Passes that had work are at
// least ReclaimMinGap apart. Domains only write the range deletions; none
// of their locks is held here.
//
// Registers on reg (nil: none), read at scrape time:
// broker_reclaim_ranges_scheduled_total, broker_reclaim_ranges_pending,
// broker_reclaim_compactions_total, broker_reclaim_compaction_errors_total,
// broker_reclaim_bytes_total and broker_reclaim_last_duration_seconds.
func AddReclaimTask(r *Runner, s *pebblestore.Store, reg prometheus.Registerer, interval time.Duration) {
	if interval <= 0 {
		interval = ReclaimInterval
	}
	metrics.Register(reg, &reclaimCollector{s: s})
	log := r.log.With().Str("task", "space-reclaim").Logger()
	var last time.Time // end of the last pass that had work; one goroutine
	r.Add(Task{
		Name:     "space-reclaim",
		Interval: interval,
		Wake:     s.ReclaimWake(),
		Run: func(time.Time) {
			for {
				if wait := ReclaimMinGap - time.Since(last); wait > 0 {
					select {
					case <-r.stop:
						return
					case <-time.After(wait):
					}
				}
				res := s.Reclaim(r.ctx)
				logReclaim(log, &res)
				if res.Ranges > 0 || res.Failed > 0 {
					last = time.Now()
				}
				if !res.More || r.stopping() {
					break
				}
			}
			// While new data is refused, make Pebble look for blob files
			// whose deleted values it may now rewrite away (shared with a
			// topic that stays, they outlive the range compaction).
			if err := s.NudgeCompactions(); err != nil && !errors.Is(err, pebblestore.ErrClosed) {
				log.Warn().Err(err).Msg("nudging compactions while the disk is low")
			}
		},
	})
}

func logReclaim(log zerolog.Logger, res *pebblestore.ReclaimResult) {
	if errors.Is(res.Err, pebblestore.ErrClosed) || errors.Is(res.Err, context.Canceled) {
		return // shutting down
	}
	if res.Ranges == 0 && res.Err == nil {
		return
	}
	// Info when it mattered (a megabyte or more given back, or slow);
	// small deletions (offset ranges, purges of empty queues) stay quiet.
	ev := log.Debug()
	if res.DiskUsageBefore >= res.DiskUsageAfter+1<<20 || res.Duration > time.Second {
		ev = log.Info()
	}
	if res.Err != nil {
		ev = log.Warn().Err(res.Err)
	}
	ev.Int("ranges", res.Ranges).Int("failed", res.Failed).
		Uint64("disk_usage_before", res.DiskUsageBefore).Uint64("disk_usage_after", res.DiskUsageAfter).
		Dur("duration", res.Duration).Msg("compacted deleted key ranges")
}

var (
	reclaimScheduledDesc = prometheus.NewDesc("broker_reclaim_ranges_scheduled_total",
		"Deleted key ranges queued for compaction (topic, queue and store deletions, DeleteRecords, retention, purges).", nil, nil)
	reclaimPendingDesc = prometheus.NewDesc("broker_reclaim_ranges_pending",
		"Deleted key ranges still waiting for their compaction.", nil, nil)
	reclaimCompactedDesc = prometheus.NewDesc("broker_reclaim_compactions_total",
		"Compactions of (coalesced) deleted key ranges.", nil, nil)
	reclaimFailedDesc = prometheus.NewDesc("broker_reclaim_compaction_errors_total",
		"Compactions of deleted key ranges that failed (the range is left to Pebble's own compactions).", nil, nil)
	reclaimBytesDesc = prometheus.NewDesc("broker_reclaim_bytes_total",
		"Decrease of the database's disk usage measured around the compactions of deleted ranges.", nil, nil)
	reclaimLastDesc = prometheus.NewDesc("broker_reclaim_last_duration_seconds",
		"Duration of the last reclaim (compactions and the deletion of the obsolete files).", nil, nil)
)

type reclaimCollector struct{ s *pebblestore.Store }

func (c *reclaimCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{reclaimScheduledDesc, reclaimPendingDesc, reclaimCompactedDesc, reclaimFailedDesc, reclaimBytesDesc, reclaimLastDesc} {
		ch <- d
	}
}

func (c *reclaimCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.ReclaimStats()
	ch <- prometheus.MustNewConstMetric(reclaimScheduledDesc, prometheus.CounterValue, float64(st.Scheduled))
	ch <- prometheus.MustNewConstMetric(reclaimPendingDesc, prometheus.GaugeValue, float64(st.Pending))
	ch <- prometheus.MustNewConstMetric(reclaimCompactedDesc, prometheus.CounterValue, float64(st.Compacted))
	ch <- prometheus.MustNewConstMetric(reclaimFailedDesc, prometheus.CounterValue, float64(st.Failed))
	ch <- prometheus.MustNewConstMetric(reclaimBytesDesc, prometheus.CounterValue, float64(st.ReclaimedBytes))
	ch <- prometheus.MustNewConstMetric(reclaimLastDesc, prometheus.GaugeValue, st.Last.Seconds())
}
