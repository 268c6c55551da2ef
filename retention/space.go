package retention

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/vibemq/broker/internal/metrics"
	"github.com/vibemq/broker/pebblestore"
)

// SpaceProbeInterval is how often the free space of the data directory is
// measured: it bounds how late the broker notices that space ran low
// between two inline probes (pebblestore.SpaceGuard.Reserve measures after
// every 16 MiB of new data) and how late it accepts writes again once
// space was freed.
const SpaceProbeInterval = time.Second

// SpaceTask returns the task that measures the data directory's free
// space (pebblestore.SpaceGuard.Probe) every interval, and registers on
// reg (nil: none) the guard's gauges, read at scrape time:
// broker_disk_free_bytes, broker_disk_total_bytes,
// broker_disk_free_min_bytes, broker_disk_resume_bytes, broker_disk_low
// and broker_disk_refused_writes_total.
func SpaceTask(g *pebblestore.SpaceGuard, reg prometheus.Registerer, interval time.Duration) Task {
	if interval <= 0 {
		interval = SpaceProbeInterval
	}
	metrics.Register(reg, &spaceCollector{g: g})
	return Task{
		Name:     "disk-space",
		Interval: interval,
		// A failure is logged by the guard (once until it works again).
		Run: func(time.Time) { _ = g.Probe() },
	}
}

var (
	diskFreeDesc = prometheus.NewDesc("broker_disk_free_bytes",
		"Free space of the data directory's filesystem at the last probe (bytes the broker may write).", nil, nil)
	diskTotalDesc = prometheus.NewDesc("broker_disk_total_bytes",
		"Size of the data directory's filesystem.", nil, nil)
	diskMinDesc = prometheus.NewDesc("broker_disk_free_min_bytes",
		"disk-free-min: below this much free space new data is refused (0: never).", nil, nil)
	diskResumeDesc = prometheus.NewDesc("broker_disk_resume_bytes",
		"Free space at which new data is accepted again after the broker refused it (disk-free-min + 25%).", nil, nil)
	diskLowDesc = prometheus.NewDesc("broker_disk_low",
		"1 while new data (produce, queue sends, event appends, dead-letter and redrive moves) is refused because the disk is almost full.", nil, nil)
	diskRefusedDesc = prometheus.NewDesc("broker_disk_refused_writes_total",
		"Writes of new data refused because the disk was almost full.", nil, nil)
)

// spaceCollector reports the guard's state at scrape time.
type spaceCollector struct{ g *pebblestore.SpaceGuard }

func (c *spaceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{diskFreeDesc, diskTotalDesc, diskMinDesc, diskResumeDesc, diskLowDesc, diskRefusedDesc} {
		ch <- d
	}
}

func (c *spaceCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.g.Stats()
	if st.Measured {
		ch <- prometheus.MustNewConstMetric(diskFreeDesc, prometheus.GaugeValue, float64(st.Free))
		ch <- prometheus.MustNewConstMetric(diskTotalDesc, prometheus.GaugeValue, float64(st.Total))
	}
	low := 0.0
	if st.Low {
		low = 1
	}
	ch <- prometheus.MustNewConstMetric(diskMinDesc, prometheus.GaugeValue, float64(st.Min))
	ch <- prometheus.MustNewConstMetric(diskResumeDesc, prometheus.GaugeValue, float64(st.Resume))
	ch <- prometheus.MustNewConstMetric(diskLowDesc, prometheus.GaugeValue, low)
	ch <- prometheus.MustNewConstMetric(diskRefusedDesc, prometheus.CounterValue, float64(st.Refused))
}
