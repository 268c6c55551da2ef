package auth

import (
	"math"
	"time"
)

// The sampled rate of Kafka's metrics library (SampledStat and Rate, the
// stat behind every client quota sensor, KIP-13): a ring of windowNum
// samples of windowSize each; a sample older than windowNum x windowSize
// counts nothing; the rate is the samples' sum over the time they cover,
// padded to at least windowNum-1 full windows so that a new client is
// measured over the whole window, not over its first millisecond. The
// clock is passed in as Unix milliseconds, like Kafka's timeMs.

type rateSample struct {
	startMs int64
	value   float64
}

// sampledRate is one sensor's rate. The caller serializes access.
type sampledRate struct {
	windowMs int64
	samples  []rateSample // at most windowNum, grown as needed
	current  int
	num      int
}

func newSampledRate(windowNum int, windowSize time.Duration) *sampledRate {
	return &sampledRate{windowMs: max(windowSize.Milliseconds(), 1), num: max(windowNum, 2)}
}

// record adds value to the current sample, opening the next one (aligned to
// the window grid, as Kafka 3.7+) when the current one is complete.
func (r *sampledRate) record(value float64, nowMs int64) {
	if len(r.samples) == 0 {
		r.samples = append(r.samples, rateSample{startMs: nowMs})
		r.current = 0
	}
	s := &r.samples[r.current]
	if nowMs-s.startMs >= r.windowMs {
		prevEnd := s.startMs + r.windowMs
		start := nowMs - (nowMs-prevEnd)%r.windowMs
		r.current = (r.current + 1) % r.num
		if r.current >= len(r.samples) {
			r.samples = append(r.samples, rateSample{})
		}
		s = &r.samples[r.current]
		*s = rateSample{startMs: start}
	}
	s.value += value
}

// purge empties the samples that are older than the whole window.
func (r *sampledRate) purge(nowMs int64) {
	expire := int64(r.num) * r.windowMs
	for i := range r.samples {
		if nowMs-r.samples[i].startMs >= expire {
			r.samples[i] = rateSample{startMs: nowMs}
		}
	}
}

// windowMsAt is the time the rate is measured over (Kafka
// Rate.windowSize): from the oldest sample to now, at least windowNum-1
// full windows, at least 1 ms.
func (r *sampledRate) windowMsAt(nowMs int64) int64 {
	r.purge(nowMs)
	oldest := nowMs
	for _, s := range r.samples {
		oldest = min(oldest, s.startMs)
	}
	elapsed := nowMs - oldest
	if full, minFull := elapsed/r.windowMs, int64(r.num-1); full < minFull {
		elapsed += (minFull - full) * r.windowMs
	}
	return max(elapsed, 1)
}

// total is the sum of the samples still in the window.
func (r *sampledRate) total(nowMs int64) float64 {
	r.purge(nowMs)
	var sum float64
	for _, s := range r.samples {
		sum += s.value
	}
	return sum
}

// perSecond is the rate at nowMs, per second.
func (r *sampledRate) perSecond(nowMs int64) float64 {
	total := r.total(nowMs)
	return total / (float64(r.windowMsAt(nowMs)) / 1000)
}

// throttleMs is how long a client measured at rate must wait for its rate
// to fall to bound (Kafka QuotaUtils.throttleTime): the excess over the
// bound, as a fraction of the bound, times the window the rate covers.
// Zero when the rate is within the bound.
func (r *sampledRate) throttleMs(rate, bound float64, nowMs int64) int64 {
	if rate <= bound || bound <= 0 {
		if bound <= 0 && rate > 0 {
			return r.windowMsAt(nowMs)
		}
		return 0
	}
	t := (rate - bound) / bound * float64(r.windowMsAt(nowMs))
	return int64(math.Round(t))
}
