package kafkaproto

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
	promregister "github.com/vibemq/broker/internal/metrics"
)

// metrics are the Kafka front end's Prometheus series.
type metrics struct {
	connections     prometheus.Gauge
	requests        *prometheus.CounterVec
	duration        *prometheus.HistogramVec
	badRequests     prometheus.Counter
	panics          prometheus.Counter
	bytesOut        prometheus.Counter
	producedBytes   prometheus.Counter
	producedBatches prometheus.Counter
	fetchedBytes    prometheus.Counter

	connectionsRefused *prometheus.CounterVec
	timeouts           *prometheus.CounterVec
	authFailures       prometheus.Counter
	throttled          prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, mem *requestMemory) *metrics {
	m := &metrics{
		connections: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "broker_kafka_connections", Help: "Open Kafka client connections."}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "broker_kafka_requests_total", Help: "Kafka requests decoded, by API."}, []string{"api"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "broker_kafka_request_duration_seconds",
			Help:    "Time from a Kafka request decoded to its response ready to write (Produce: durable; Fetch: includes MaxWaitMillis parking), by API.",
			Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
		}, []string{"api"}),
		badRequests: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "broker_kafka_bad_requests_total", Help: "Connections closed for malformed or oversized requests."}),
		panics: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "broker_kafka_handler_panics_total", Help: "Requests whose handler panicked (a bug); the connection was closed."}),
		bytesOut: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "broker_kafka_response_bytes_total", Help: "Bytes of Kafka responses written."}),
		producedBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "broker_produced_bytes_total", Help: "Record batch bytes appended by Produce."}),
		producedBatches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "broker_produced_batches_total", Help: "Record batches appended by Produce."}),
		fetchedBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "broker_fetched_bytes_total", Help: "Record batch bytes returned by Fetch."}),
		connectionsRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "broker_kafka_connections_refused_total", Help: "Kafka connections closed at accept, by reason: max_connections, max_connections_per_ip."}, []string{"reason"}),
		timeouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "broker_kafka_connection_timeouts_total", Help: "Kafka connections closed by a timeout, by reason: idle (connections-max-idle), request_read (request-read-timeout), write (a reply not read for connections-max-idle)."}, []string{"reason"}),
		authFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "broker_kafka_authentication_failures_total", Help: "Failed SASL authentications; each closed its connection."}),
		throttled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "broker_kafka_throttled_responses_total", Help: "Responses with a client quota's throttle time; their connection was muted for it."}),
	}
	memoryInUse := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "broker_kafka_request_memory_bytes", Help: "Bytes of Kafka requests being read or waiting for their replies (reserved at their claimed size), and of fetch responses (broker_kafka_fetch_memory_bytes)."},
		func() float64 { return float64(mem.held()) })
	memoryLimit := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "broker_kafka_request_memory_limit_bytes", Help: "The request memory budget (queued-max-request-bytes)."},
		func() float64 { return float64(mem.capacity) })
	memoryWaits := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "broker_kafka_request_memory_waits_total", Help: "Times a connection stopped reading to wait for request memory."},
		func() float64 { return float64(mem.waits.Load()) })
	fetchMemory := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "broker_kafka_fetch_memory_bytes", Help: "Bytes of the request memory budget held by fetch responses being read or written (part of broker_kafka_request_memory_bytes; may pass the limit by one batch per response, KIP-74)."},
		func() float64 { return float64(mem.fetchInUse.Load()) })
	fetchShrunk := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "broker_kafka_fetch_memory_shrunk_total", Help: "Fetches whose max_bytes was shrunk to the free request memory budget."},
		func() float64 { return float64(mem.fetchShrunk.Load()) })
	promregister.Register(reg, m.connections, m.requests, m.duration, m.badRequests, m.panics, m.bytesOut,
		m.producedBytes, m.producedBatches, m.fetchedBytes,
		m.connectionsRefused, m.timeouts, m.authFailures, m.throttled, memoryInUse, memoryLimit, memoryWaits,
		fetchMemory, fetchShrunk)
	return m
}

func apiName(key int16) string {
	if n := kmsg.NameForKey(key); n != "" {
		return n
	}
	return "Unknown"
}
