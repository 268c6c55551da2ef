package auth

import (
	"testing"
	"time"
)

// TestSampledRateMatchesKafka: Kafka's Rate over SampledStat, with an
// injected clock: a new sensor is measured over windowNum-1 windows, the
// throttle time is the excess over the bound times the window, samples
// older than the whole window stop counting.
func TestSampledRateMatchesKafka(t *testing.T) {
	r := newSampledRate(11, time.Second)
	now := int64(1_000_000)
	r.record(5000, now)
	// One sample, 0 ms elapsed: padded to 10 full windows.
	if w := r.windowMsAt(now); w != 10_000 {
		t.Fatalf("window %d, want 10000", w)
	}
	if got := r.perSecond(now); got != 500 {
		t.Fatalf("rate %v, want 500", got)
	}
	// Bound 100/s: excess 400/100 x 10 s = 40 s.
	if got := r.throttleMs(r.perSecond(now), 100, now); got != 40_000 {
		t.Fatalf("throttle %d, want 40000", got)
	}
	if got := r.throttleMs(r.perSecond(now), 500, now); got != 0 {
		t.Fatalf("throttle at the bound %d, want 0", got)
	}
	// 10.5 s later the window is 10.5 s, not padded.
	later := now + 10_500
	r.record(0, later)
	if w := r.windowMsAt(later); w != 10_500 {
		t.Fatalf("window %d, want 10500", w)
	}
	// After 11 windows the first sample no longer counts.
	gone := now + 11_000
	if got := r.total(gone); got != 0 {
		t.Fatalf("total %v after the window passed, want 0", got)
	}
}

// TestQuotaSensorThrottlesToTheLimit: a client that sends whenever it is
// not throttled, for 60 simulated seconds, is held to its limit: over the
// last 40 s within 10 %.
func TestQuotaSensorThrottlesToTheLimit(t *testing.T) {
	const limit = 1 << 20
	s := &QuotaSensor{rate: newSampledRate(11, time.Second), limit: limit}
	start := time.UnixMilli(1_000_000)
	now := start
	var sent float64
	for now.Sub(start) < 60*time.Second {
		thr := s.Record(64<<10, now)
		if now.Sub(start) >= 20*time.Second {
			sent += 64 << 10
		}
		now = now.Add(2*time.Millisecond + thr)
	}
	rate := sent / now.Sub(start.Add(20*time.Second)).Seconds()
	if rate > 1.1*limit || rate < 0.9*limit {
		t.Fatalf("rate %.0f, want within 10%% of %d", rate, limit)
	}
}
