package retention

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/vibemq/broker/internal/metrics"
	"github.com/vibemq/broker/queues"
)

// QueueTickInterval is how often queue maintenance runs: it bounds how
// late an expired lease returns to its queue and how late a long poll
// wakes for a message that became due.
const QueueTickInterval = 100 * time.Millisecond

// QueueTask returns the task that runs queues.Engine.Tick: lease expiry,
// max-deliveries and TTL dead-lettering, retention and dedup cleanup, and
// redrive steps. What each tick did is counted in reg (nil: no metrics).
func QueueTask(e *queues.Engine, reg prometheus.Registerer, interval time.Duration) Task {
	if interval <= 0 {
		interval = QueueTickInterval
	}
	m := newQueueMetrics(reg)
	metrics.Register(reg, queueCollector{e})
	return Task{
		Name:     "queues",
		Interval: interval,
		Run: func(now time.Time) {
			rep := e.Tick(now)
			m.observe(&rep)
		},
	}
}

type queueMetrics struct {
	reaped, expired, redriven, errors prometheus.Counter
	deadLetterDeferred                prometheus.Counter
	deadLettered                      *prometheus.CounterVec
}

func newQueueMetrics(reg prometheus.Registerer) *queueMetrics {
	m := &queueMetrics{
		reaped: prometheus.NewCounter(prometheus.CounterOpts{Name: "broker_queue_reaped_total",
			Help: "Leases that ran out and were taken back by queue maintenance."}),
		expired: prometheus.NewCounter(prometheus.CounterOpts{Name: "broker_queue_expired_total",
			Help: "Queue messages dropped past their TTL or the queue's retention."}),
		redriven: prometheus.NewCounter(prometheus.CounterOpts{Name: "broker_queue_redrive_moved_total",
			Help: "Messages moved out of dead-letter queues by redrive tasks."}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{Name: "broker_queue_maintenance_errors_total",
			Help: "Queue maintenance steps that failed and were retried."}),
		deadLetterDeferred: prometheus.NewCounter(prometheus.CounterOpts{Name: "broker_queue_dead_letter_deferred_total",
			Help: "Dead-letter moves put off because the disk was almost full (the message stays in flight and is tried again)."}),
		deadLettered: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "broker_queue_dead_lettered_total",
			Help: "Messages moved to a dead-letter queue by maintenance, by reason."}, []string{"reason"}),
	}
	// The reasons maintenance dead-letters for exist from the start (at 0),
	// so rate() and increase() see the first move.
	for _, reason := range []string{queues.ReasonExpired, queues.ReasonMaxExpiries, queues.ReasonMaxReceives, queues.ReasonUnclaimed} {
		m.deadLettered.WithLabelValues(reason)
	}
	metrics.Register(reg, m.reaped, m.expired, m.redriven, m.errors, m.deadLetterDeferred, m.deadLettered)
	return m
}

func (m *queueMetrics) observe(rep *queues.TickReport) {
	m.reaped.Add(float64(rep.Reaped))
	m.expired.Add(float64(rep.Expired))
	m.redriven.Add(float64(rep.RedriveMoved))
	m.errors.Add(float64(rep.Errors))
	m.deadLetterDeferred.Add(float64(rep.DeadLetterDeferred))
	for reason, n := range rep.DeadLettered {
		m.deadLettered.WithLabelValues(reason).Add(float64(n))
	}
}

// queueDepthDesc is the depth of every queue, read at scrape time: two
// series per queue (dead-letter queues included), so the number of series
// grows with the number of queues, not with traffic.
var queueDepthDesc = prometheus.NewDesc("broker_queue_messages",
	"Messages in the queue by state: available (ready or delayed) and inflight (leased). dead_letter_for names the queue a dead-letter queue serves (empty for other queues).",
	[]string{"queue", "state", "dead_letter_for"}, nil)

// queueCollector reports the depth of every queue.
type queueCollector struct{ e *queues.Engine }

func (queueCollector) Describe(ch chan<- *prometheus.Desc) { ch <- queueDepthDesc }

func (c queueCollector) Collect(ch chan<- prometheus.Metric) {
	after := ""
	for {
		page, next, err := c.e.ListQueues("", after, 1000)
		if err != nil {
			return
		}
		for _, q := range page {
			ch <- prometheus.MustNewConstMetric(queueDepthDesc, prometheus.GaugeValue, float64(q.Available), q.Name, "available", q.DeadLetterFor)
			ch <- prometheus.MustNewConstMetric(queueDepthDesc, prometheus.GaugeValue, float64(q.Inflight), q.Name, "inflight", q.DeadLetterFor)
		}
		if next == "" {
			return
		}
		after = next
	}
}
