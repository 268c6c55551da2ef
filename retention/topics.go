package retention

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/vibemq/broker/internal/metrics"
	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/topics"
)

// Defaults of the topic loops, Kafka's log.retention.check.interval.ms and
// log.cleaner.backoff.ms.
const (
	DefaultRetentionCheckInterval = 5 * time.Minute
	DefaultCleanerBackoff         = 15 * time.Second
)

// TopicTasksConfig configures the log retention and compaction loops.
type TopicTasksConfig struct {
	// RetentionCheckInterval is how often retention looks for segments to
	// delete; default DefaultRetentionCheckInterval.
	RetentionCheckInterval time.Duration
	// CleanerBackoff is how long compaction waits, once no partition needs
	// cleaning, before it looks again; default DefaultCleanerBackoff.
	CleanerBackoff time.Duration
	// CleanerDisabled turns compaction off (Kafka log.cleaner.enable=false).
	CleanerDisabled bool
	// Registerer receives the metrics; nil means none.
	Registerer prometheus.Registerer
	// Space, when set, pauses compaction while it is low: a pass writes
	// the records it keeps before the space of the old ones comes back
	// (Pebble rewrites blob files later), so it needs room first.
	// Retention, which only deletes, goes on.
	Space *pebblestore.SpaceGuard
}

// AddTopicTasks registers on r the two loops over tm's partition logs:
//
//   - "log-retention" runs topics.Manager.EnforceRetention every
//     RetentionCheckInterval, again at once while the call reports more
//     work, until Stop;
//   - "log-cleaner" runs topics.Manager.Compact every CleanerBackoff and
//     keeps calling it while there is work (a pass continues across
//     calls), so a dirty log is cleaned without waiting between steps;
//     not while cfg.Space is low.
//
// Both loops give each call the runner's clock moved on by the time the
// tick has run, and stop between calls when the runner stops. Metrics:
// per-partition size and offsets (collected at scrape time), bytes
// reclaimed by retention and compaction, compaction passes and durations.
func AddTopicTasks(r *Runner, tm *topics.Manager, cfg TopicTasksConfig) {
	if cfg.RetentionCheckInterval <= 0 {
		cfg.RetentionCheckInterval = DefaultRetentionCheckInterval
	}
	if cfg.CleanerBackoff <= 0 {
		cfg.CleanerBackoff = DefaultCleanerBackoff
	}
	m := newTopicMetrics(tm, cfg.Registerer)
	r.Add(Task{
		Name:     "log-retention",
		Interval: cfg.RetentionCheckInterval,
		Run: func(now time.Time) {
			start := time.Now()
			for {
				res := tm.EnforceRetention(now.Add(time.Since(start)))
				m.observeRetention(&res)
				if !res.Pending || r.stopping() {
					return
				}
			}
		},
	})
	if cfg.CleanerDisabled {
		return
	}
	r.Add(Task{
		Name:     "log-cleaner",
		Interval: cfg.CleanerBackoff,
		Run: func(now time.Time) {
			start := time.Now()
			for {
				if cfg.Space.Low() {
					return
				}
				res := tm.Compact(now.Add(time.Since(start)))
				m.observeCompaction(&res)
				if !res.More || r.stopping() {
					return
				}
			}
		},
	})
}

// stopping reports whether Stop was called.
func (r *Runner) stopping() bool {
	select {
	case <-r.stop:
		return true
	default:
		return false
	}
}

type topicMetrics struct {
	reclaimed          *prometheus.CounterVec
	retentionSegments  prometheus.Counter
	retentionErrors    prometheus.Counter
	compactionRuns     prometheus.Counter
	compactionErrors   prometheus.Counter
	compactionDuration prometheus.Histogram
	compactionRead     prometheus.Counter
	compactionWritten  prometheus.Counter
}

func newTopicMetrics(tm *topics.Manager, reg prometheus.Registerer) *topicMetrics {
	m := &topicMetrics{
		reclaimed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "broker_log_reclaimed_bytes_total",
			Help: "Record batch bytes removed from partition logs, by retention (deleted segments) and compaction (removed records)."}, []string{"reason"}),
		retentionSegments: prometheus.NewCounter(prometheus.CounterOpts{Name: "broker_log_retention_deleted_segments_total",
			Help: "Segments deleted by retention (time, size, or below the log start)."}),
		retentionErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "broker_log_retention_errors_total",
			Help: "Retention calls that failed on some partition."}),
		compactionRuns: prometheus.NewCounter(prometheus.CounterOpts{Name: "broker_log_compaction_runs_total",
			Help: "Compaction passes completed (one pass cleans one partition)."}),
		compactionErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "broker_log_compaction_errors_total",
			Help: "Compaction passes abandoned on an error."}),
		compactionDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "broker_log_compaction_duration_seconds",
			Help: "Duration of completed compaction passes.", Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}),
		compactionRead: prometheus.NewCounter(prometheus.CounterOpts{Name: "broker_log_compaction_read_bytes_total",
			Help: "Record batch bytes read by compaction."}),
		compactionWritten: prometheus.NewCounter(prometheus.CounterOpts{Name: "broker_log_compaction_written_bytes_total",
			Help: "Record batch bytes written by compaction (rewritten batches)."}),
	}
	// Both reasons exist from the start (at 0), so rate() sees the first bytes.
	m.reclaimed.WithLabelValues("retention")
	m.reclaimed.WithLabelValues("compaction")
	metrics.Register(reg, m.reclaimed, m.retentionSegments, m.retentionErrors, m.compactionRuns,
		m.compactionErrors, m.compactionDuration, m.compactionRead, m.compactionWritten, &partitionCollector{tm: tm})
	return m
}

func (m *topicMetrics) observeRetention(res *topics.RetentionResult) {
	m.reclaimed.WithLabelValues("retention").Add(float64(res.Bytes))
	m.retentionSegments.Add(float64(res.Segments))
	if res.Err != nil {
		m.retentionErrors.Inc()
	}
}

func (m *topicMetrics) observeCompaction(res *topics.CompactionResult) {
	m.compactionRead.Add(float64(res.BytesRead))
	m.compactionWritten.Add(float64(res.BytesWritten))
	if res.Err != nil {
		m.compactionErrors.Inc()
	}
	if res.Done {
		m.compactionRuns.Inc()
		m.compactionDuration.Observe(res.Duration.Seconds())
		m.reclaimed.WithLabelValues("compaction").Add(float64(res.BytesRemoved))
	}
}

// partitionCollector reports every partition's size and offsets at scrape
// time.
type partitionCollector struct{ tm *topics.Manager }

var (
	partitionBytesDesc = prometheus.NewDesc("broker_partition_bytes",
		"Record batch bytes stored in the partition.", []string{"topic", "partition"}, nil)
	partitionRecordsDesc = prometheus.NewDesc("broker_partition_records",
		"Records stored in the partition.", []string{"topic", "partition"}, nil)
	partitionStartDesc = prometheus.NewDesc("broker_partition_log_start_offset",
		"First offset a consumer may fetch.", []string{"topic", "partition"}, nil)
	partitionEndDesc = prometheus.NewDesc("broker_partition_log_end_offset",
		"Offset the next record gets once durable (the high watermark).", []string{"topic", "partition"}, nil)
)

func (c *partitionCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- partitionBytesDesc
	ch <- partitionRecordsDesc
	ch <- partitionStartDesc
	ch <- partitionEndDesc
}

func (c *partitionCollector) Collect(ch chan<- prometheus.Metric) {
	for _, t := range c.tm.Topics() {
		for _, p := range t.Partitions() {
			st := p.Stats()
			part := strconv.Itoa(int(st.Partition))
			ch <- prometheus.MustNewConstMetric(partitionBytesDesc, prometheus.GaugeValue, float64(st.Bytes), st.Topic, part)
			ch <- prometheus.MustNewConstMetric(partitionRecordsDesc, prometheus.GaugeValue, float64(st.Records), st.Topic, part)
			ch <- prometheus.MustNewConstMetric(partitionStartDesc, prometheus.GaugeValue, float64(st.LogStartOffset), st.Topic, part)
			ch <- prometheus.MustNewConstMetric(partitionEndDesc, prometheus.GaugeValue, float64(st.HighWatermark), st.Topic, part)
		}
	}
}
