package pebblestore

import (
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Pebble's health on /metrics, read from pebble.Metrics at scrape time.
// Every series is a single one (no labels): the store adds a fixed number
// of series whatever the number of topics.
var (
	pebbleFsyncDesc = prometheus.NewDesc("broker_pebble_wal_fsync_duration_seconds",
		"Duration of the write-ahead log's fsyncs (0 observations with fsync: never).", nil, nil)
	pebbleDebtDesc = prometheus.NewDesc("broker_pebble_compaction_debt_bytes",
		"Pebble's estimate of the bytes compactions must rewrite to bring the LSM back into shape; growing debt means compactions fall behind the writes.", nil, nil)
	pebbleCompactingDesc = prometheus.NewDesc("broker_pebble_compactions_in_progress",
		"Pebble compactions running now.", nil, nil)
	pebbleCompactionsDesc = prometheus.NewDesc("broker_pebble_compactions_total",
		"Pebble compactions completed.", nil, nil)
	pebbleFlushesDesc = prometheus.NewDesc("broker_pebble_flushes_total",
		"Pebble memtable flushes completed.", nil, nil)
	pebbleL0FilesDesc = prometheus.NewDesc("broker_pebble_l0_files",
		"Sstables in level 0; writes stall at 24 sublevels.", nil, nil)
	pebbleL0SublevelsDesc = prometheus.NewDesc("broker_pebble_l0_sublevels",
		"Sublevels of level 0 (writes stall at 24, compactions start at 4).", nil, nil)
	pebbleReadAmpDesc = prometheus.NewDesc("broker_pebble_read_amplification",
		"Sstables a point read may have to consult (L0 sublevels plus non-empty levels).", nil, nil)
	pebbleDiskDesc = prometheus.NewDesc("broker_pebble_disk_usage_bytes",
		"Bytes the database uses on disk (sstables, blob files, WAL, manifest, obsolete files not yet deleted).", nil, nil)
	pebbleMemtableDesc = prometheus.NewDesc("broker_pebble_memtable_bytes",
		"Bytes allocated by memtables (including those waiting to be flushed).", nil, nil)
	pebbleWALDesc = prometheus.NewDesc("broker_pebble_wal_bytes",
		"Live bytes in write-ahead log files.", nil, nil)
	pebbleStallsDesc = prometheus.NewDesc("broker_pebble_write_stalls_total",
		"Times Pebble stopped writes because flushes or L0 compactions fell behind.", nil, nil)
	pebbleStallSecondsDesc = prometheus.NewDesc("broker_pebble_write_stall_duration_seconds_total",
		"Seconds writes were stopped by write stalls (ended stalls).", nil, nil)
)

// fsyncBucketsSeconds are the upper bounds /metrics reports for WAL fsyncs.
// Pebble records fsyncs in 100 nanosecond buckets; each bound here is
// reported as the largest of Pebble's bounds at or below it, so the counts
// are exact for the bound printed.
var fsyncBucketsSeconds = []float64{0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// stallCounter counts Pebble's write stalls (fed by the event listener).
type stallCounter struct {
	count        atomic.Int64
	nanos        atomic.Int64
	startedNanos atomic.Int64 // UnixNano of the running stall, 0 when none
}

func (c *stallCounter) begin() {
	c.count.Add(1)
	c.startedNanos.Store(time.Now().UnixNano())
}

func (c *stallCounter) end() {
	if start := c.startedNanos.Swap(0); start != 0 {
		c.nanos.Add(time.Now().UnixNano() - start)
	}
}

// listen makes el count write stalls into c, keeping el's own callbacks.
func (c *stallCounter) listen(el *pebble.EventListener) {
	begin, end := el.WriteStallBegin, el.WriteStallEnd
	el.WriteStallBegin = func(info pebble.WriteStallBeginInfo) {
		c.begin()
		if begin != nil {
			begin(info)
		}
	}
	el.WriteStallEnd = func() {
		c.end()
		if end != nil {
			end()
		}
	}
}

// Collector returns a Prometheus collector of the store's Pebble metrics
// (broker_pebble_*), read when scraped.
func (s *Store) Collector() prometheus.Collector { return storeCollector{s} }

type storeCollector struct{ s *Store }

func (storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{pebbleFsyncDesc, pebbleDebtDesc, pebbleCompactingDesc, pebbleCompactionsDesc,
		pebbleFlushesDesc, pebbleL0FilesDesc, pebbleL0SublevelsDesc, pebbleReadAmpDesc, pebbleDiskDesc,
		pebbleMemtableDesc, pebbleWALDesc, pebbleStallsDesc, pebbleStallSecondsDesc} {
		ch <- d
	}
}

func (c storeCollector) Collect(ch chan<- prometheus.Metric) {
	if c.s.closed.Load() {
		return
	}
	m := c.s.db.Metrics()
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	gauge(pebbleDebtDesc, float64(m.Compact.EstimatedDebt))
	gauge(pebbleCompactingDesc, float64(m.Compact.NumInProgress))
	counter(pebbleCompactionsDesc, float64(m.Compact.Count))
	counter(pebbleFlushesDesc, float64(m.Flush.Count))
	gauge(pebbleL0FilesDesc, float64(m.Levels[0].TablesCount))
	gauge(pebbleL0SublevelsDesc, float64(m.Levels[0].Sublevels))
	gauge(pebbleReadAmpDesc, float64(m.ReadAmp()))
	gauge(pebbleDiskDesc, float64(m.DiskSpaceUsage()))
	gauge(pebbleMemtableDesc, float64(m.MemTable.Size))
	gauge(pebbleWALDesc, float64(m.WAL.Size))
	counter(pebbleStallsDesc, float64(c.s.stalls.count.Load()))
	counter(pebbleStallSecondsDesc, time.Duration(c.s.stalls.nanos.Load()).Seconds())
	ch <- fsyncHistogram(m.LogWriter.FsyncLatency)
}

// fsyncHistogram converts Pebble's fsync histogram (nanoseconds, 100
// buckets) to seconds and the bounds of fsyncBucketsSeconds.
func fsyncHistogram(h prometheus.Histogram) prometheus.Metric {
	var pb dto.Metric
	if h != nil {
		_ = h.Write(&pb)
	}
	src := pb.GetHistogram()
	buckets := make(map[float64]uint64, len(fsyncBucketsSeconds))
	for _, bound := range fsyncBucketsSeconds {
		le, count := 0.0, uint64(0)
		for _, b := range src.GetBucket() {
			upper := b.GetUpperBound() / float64(time.Second)
			if upper > bound*(1+1e-9) {
				break
			}
			le, count = upper, b.GetCumulativeCount()
		}
		if le > 0 {
			buckets[le] = count
		}
	}
	return prometheus.MustNewConstHistogram(pebbleFsyncDesc, src.GetSampleCount(),
		src.GetSampleSum()/float64(time.Second), buckets)
}
