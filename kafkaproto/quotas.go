package kafkaproto

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
)

// Client quota enforcement (KIP-13 byte rates, KIP-124 request
// percentage, KIP-219 muting). The decisions are auth.Quotas'; this file
// records what a request cost, puts the throttle time in the response and
// mutes the connection:
//
//   - Produce records the request's size against producer_byte_rate
//     (KafkaApis.handleProduceRequest: request.sizeInBytes), after the
//     append, whatever its outcome.
//   - Fetch records the record bytes it returns against consumer_byte_rate
//     on the writer, when the response is built (fetchQuota in
//     01_fetch.go); a fetch over the quota returns no records, its bytes
//     unrecorded, as Kafka's getThrottledResponse. A fetch never asks for
//     more than the quota allows in its window (getMaxValueInQuotaWindow).
//   - Every request except ApiVersions and the SASL ones, and Produce with
//     acks=0 (as Kafka), records the time its handler ran on the reader
//     against request_percentage (cheap stand-in for Kafka's request
//     thread time: waiting for the fsync or a long poll is not counted).
//   - The larger throttle goes in throttle_time_ms; the reader then reads
//     nothing from the connection for that long (the reply is written
//     first, KIP-219). For versions whose clients do not throttle
//     themselves (kmsg's Throttle reports it: Produce before v6, Fetch
//     before v8, ...) the reply is also held back that long, as Kafka did
//     before KIP-219.
//
// Without any quota the whole path is one atomic load (Quotas.Any).

// connQuota caches the connection's sensors for the current quotas,
// principal and client ID. Only the reader goroutine uses it.
type connQuota struct {
	generation uint64
	principal  string
	clientID   string
	resolved   [3]bool
	sensors    [3]*auth.QuotaSensor
}

// quotaSensor is the sensor of the kind for the request's client, nil
// when no quota applies. REQUIRES: the reader goroutine.
func (c *conn) quotaSensor(kind auth.QuotaKind, clientID string) *auth.QuotaSensor {
	q := c.s.cfg.Quotas
	cq := &c.quota
	if gen := q.Generation(); cq.generation != gen || cq.principal != c.principal || cq.clientID != clientID {
		*cq = connQuota{generation: gen, principal: c.principal, clientID: clientID}
	}
	if !cq.resolved[kind] {
		cq.sensors[kind] = q.Sensor(kind, c.principal, clientID, c.s.now())
		cq.resolved[kind] = true
	}
	return cq.sensors[kind]
}

// throttleExempt: requests no quota applies to: ApiVersions and SASL,
// which a client must be able to send to connect at all.
func throttleExempt(key int16) bool {
	switch kmsg.Key(key) {
	case kmsg.ApiVersions, kmsg.SASLHandshake, kmsg.SASLAuthenticate:
		return true
	}
	return false
}

// applyQuotas records the request's cost, and when the client is over a
// quota sets the throttle time in the reply and returns it (the reader
// mutes the connection for it). bodyBytes is the request's size.
// REQUIRES: the reader goroutine, quotas set.
func (c *conn) applyQuotas(r *request, rep *reply, bodyBytes int, handlerTime time.Duration) time.Duration {
	q := c.s.cfg.Quotas
	if throttleExempt(r.key) {
		return 0
	}
	now := c.s.now()
	var throttle time.Duration
	acksZero := false
	if r.key == int16(kmsg.Produce) {
		acksZero = r.kreq.(*kmsg.ProduceRequest).Acks == 0
		if q.Enabled(auth.QuotaKindProduce) {
			throttle = c.quotaSensor(auth.QuotaKindProduce, r.clientID).Record(float64(bodyBytes), now)
		}
	}
	if !acksZero && q.Enabled(auth.QuotaKindRequest) {
		throttle = max(throttle, c.quotaSensor(auth.QuotaKindRequest, r.clientID).Record(auth.RequestPercentage(handlerTime), now))
	}
	if throttle <= 0 {
		return 0
	}
	c.throttleReply(rep, throttle)
	return throttle
}

// throttleReply puts the throttle time in the reply; a client of a version
// that does not throttle itself gets its reply that much later.
func (c *conn) throttleReply(rep *reply, throttle time.Duration) {
	c.s.metrics.throttled.Inc()
	if rep.resp == nil {
		return
	}
	clientThrottles := true
	if t, ok := rep.resp.(kmsg.ThrottleResponse); ok {
		_, clientThrottles = t.Throttle()
	}
	if st, ok := rep.resp.(kmsg.SetThrottleResponse); ok {
		ms := int32(min(throttle.Milliseconds(), 1<<31-1))
		if t, ok := rep.resp.(kmsg.ThrottleResponse); ok {
			cur, _ := t.Throttle()
			ms = max(ms, cur)
		}
		st.SetThrottle(ms)
	}
	if clientThrottles || rep.none {
		return
	}
	inner := rep.finish
	rep.finish = func() {
		if inner != nil {
			inner()
		}
		c.holdReply(throttle)
	}
}

// holdReply waits d on the writer (a reply delayed for a client that does
// not throttle itself), cut short when the connection or server ends.
func (c *conn) holdReply(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-c.readDone:
	case <-c.s.closing:
	}
}

// muteFor makes the reader read nothing more until d from now (it may be
// called from the writer, for Fetch).
func (c *conn) muteFor(d time.Duration) {
	until := time.Now().Add(d).UnixNano()
	for {
		cur := c.mutedUntil.Load()
		if cur >= until || c.mutedUntil.CompareAndSwap(cur, until) {
			return
		}
	}
}

// waitMuted waits while the connection is muted. It returns false when
// the reader must stop.
func (c *conn) waitMuted() bool {
	until := c.mutedUntil.Load()
	if until == 0 {
		return true
	}
	d := time.Until(time.Unix(0, until))
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-c.stop:
		return false
	}
}
