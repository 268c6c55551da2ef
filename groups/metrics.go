package groups

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	promregister "github.com/vibemq/broker/internal/metrics"
)

// metrics are the coordinator's Prometheus series. Group counts by state
// and consumer lag are computed when scraped (collector below).
type metrics struct {
	rebalances          prometheus.Counter
	completedRebalances prometheus.Counter
	expiredMembers      prometheus.Counter
	offsetCommits       prometheus.Counter
	expiredOffsets      prometheus.Counter
	groupsDeleted       prometheus.Counter
	recordsAppended     prometheus.Counter
}

var (
	groupsDesc = prometheus.NewDesc("broker_groups",
		"Consumer groups by state.", []string{"state"}, nil)
	lagDesc = prometheus.NewDesc("broker_group_lag",
		"Consumer lag: the partition's high watermark minus the group's committed offset.",
		[]string{"group", "topic", "partition"}, nil)
	committedDesc = prometheus.NewDesc("broker_group_committed_offset",
		"The group's committed offset of the partition.",
		[]string{"group", "topic", "partition"}, nil)
)

func newMetrics(c *Coordinator, reg prometheus.Registerer) *metrics {
	m := &metrics{
		rebalances: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "broker_group_rebalances_total", Help: "Rebalances started (groups entering PreparingRebalance)."}),
		completedRebalances: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "broker_group_completed_rebalances_total", Help: "Rebalances completed (groups becoming Stable)."}),
		expiredMembers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "broker_group_expired_members_total", Help: "Members removed because their session timed out."}),
		offsetCommits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "broker_group_offset_commits_total", Help: "Partition offsets committed."}),
		expiredOffsets: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "broker_group_expired_offsets_total", Help: "Committed offsets removed by retention or because their topic was deleted."}),
		groupsDeleted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "broker_groups_deleted_total", Help: "Groups deleted by DeleteGroups or offset retention."}),
		recordsAppended: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "broker_group_records_appended_total", Help: "Records appended to __consumer_offsets."}),
	}
	promregister.Register(reg, m.rebalances, m.completedRebalances, m.expiredMembers, m.offsetCommits,
		m.expiredOffsets, m.groupsDeleted, m.recordsAppended, collector{c})
	return m
}

// collector reports group counts and lag at scrape time.
type collector struct{ c *Coordinator }

func (collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- groupsDesc
	ch <- lagDesc
	ch <- committedDesc
}

func (k collector) Collect(ch chan<- prometheus.Metric) {
	counts := k.c.stateCounts()
	for s := StateEmpty; s <= StateDead; s++ {
		ch <- prometheus.MustNewConstMetric(groupsDesc, prometheus.GaugeValue, float64(counts[s]), s.String())
	}
	for _, g := range k.c.Offsets() {
		for _, o := range g.Offsets {
			t, ok := k.c.tm.Topic(o.Topic)
			if !ok {
				continue
			}
			p, ok := t.Partition(o.Partition)
			if !ok {
				continue
			}
			part := strconv.Itoa(int(o.Partition))
			ch <- prometheus.MustNewConstMetric(committedDesc, prometheus.GaugeValue, float64(o.Offset), g.Group, o.Topic, part)
			lag := max(p.HighWatermark()-o.Offset, 0)
			ch <- prometheus.MustNewConstMetric(lagDesc, prometheus.GaugeValue, float64(lag), g.Group, o.Topic, part)
		}
	}
}
