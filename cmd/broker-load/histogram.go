package main

import (
	"math"
	"math/bits"
	"sync"
	"time"
)

// Histogram is a log-linear histogram of non-negative int64 values (we record
// nanoseconds), in the style of HdrHistogram: values below linearCount land in
// exact buckets of width 1; above that, every power-of-two range [2^k, 2^(k+1))
// is split into halfLinearCount buckets of equal width. A bucket's width is
// therefore at most 1/halfLinearCount = 1/128 of its lower bound, and reporting
// its midpoint is within 0.4% of any value in it.
//
// Histogram is not safe for concurrent use; wrap it in lockedHistogram.
type Histogram struct {
	counts  [histogramBucketCount]uint64
	total   uint64
	minimum int64
	maximum int64
	sum     float64
}

const (
	// linearBits sets the precision: 2^linearBits exact buckets at the bottom,
	// then 2^(linearBits-1) buckets per power of two.
	linearBits      = 8
	linearCount     = 1 << linearBits // 256
	halfLinearCount = linearCount / 2 // 128
	// The largest int64 has bit length 63, so its shift is 63-linearBits and
	// its index is halfLinearCount*shift + mantissa < halfLinearCount*(shift+2).
	histogramBucketCount = halfLinearCount * (63 - linearBits + 2)
)

// NewHistogram returns an empty histogram.
func NewHistogram() *Histogram {
	return &Histogram{minimum: math.MaxInt64, maximum: math.MinInt64}
}

// bucketIndex maps v >= 0 to its bucket.
func bucketIndex(v int64) int {
	if v < linearCount {
		return int(v)
	}
	// v has bit length L > linearBits; shifting right by L-linearBits keeps its
	// top linearBits bits, a mantissa in [halfLinearCount, linearCount).
	shift := bits.Len64(uint64(v)) - linearBits
	mantissa := int(v >> uint(shift))
	return halfLinearCount*shift + mantissa
}

// bucketBounds returns the smallest value of bucket i and the bucket's width:
// bucket i holds [lower, lower+width).
func bucketBounds(i int) (lower, width int64) {
	if i < linearCount {
		return int64(i), 1
	}
	shift := i/halfLinearCount - 1
	mantissa := int64(i%halfLinearCount + halfLinearCount)
	return mantissa << uint(shift), int64(1) << uint(shift)
}

// Record adds one value; negative values count as 0.
func (h *Histogram) Record(v int64) {
	if v < 0 {
		v = 0
	}
	h.counts[bucketIndex(v)]++
	h.total++
	h.sum += float64(v)
	h.minimum = min(h.minimum, v)
	h.maximum = max(h.maximum, v)
}

// RecordDuration adds d in nanoseconds.
func (h *Histogram) RecordDuration(d time.Duration) { h.Record(int64(d)) }

// Merge adds every value of other into h.
func (h *Histogram) Merge(other *Histogram) {
	if other.total == 0 {
		return
	}
	for i, c := range other.counts {
		h.counts[i] += c
	}
	h.total += other.total
	h.sum += other.sum
	h.minimum = min(h.minimum, other.minimum)
	h.maximum = max(h.maximum, other.maximum)
}

// Count returns how many values were recorded.
func (h *Histogram) Count() uint64 { return h.total }

// Min returns the smallest recorded value, or 0 if none.
func (h *Histogram) Min() int64 {
	if h.total == 0 {
		return 0
	}
	return h.minimum
}

// Max returns the largest recorded value, or 0 if none.
func (h *Histogram) Max() int64 {
	if h.total == 0 {
		return 0
	}
	return h.maximum
}

// Mean returns the exact mean of the recorded values, or 0 if none.
func (h *Histogram) Mean() float64 {
	if h.total == 0 {
		return 0
	}
	return h.sum / float64(h.total)
}

// Quantile returns the value at quantile q in [0, 1] using the nearest-rank
// definition: the smallest recorded value v such that at least ceil(q*n)
// values are <= v. It returns the midpoint of v's bucket, clamped to the
// recorded min and max, so it is exact below linearCount and within 1/256 of
// v above. It returns 0 for an empty histogram.
func (h *Histogram) Quantile(q float64) int64 {
	if h.total == 0 {
		return 0
	}
	q = min(max(q, 0), 1)
	rank := uint64(math.Ceil(q * float64(h.total)))
	rank = max(rank, 1)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen < rank {
			continue
		}
		lower, width := bucketBounds(i)
		mid := lower + (width-1)/2
		return min(max(mid, h.minimum), h.maximum)
	}
	return h.maximum // unreachable: seen reaches total >= rank
}

// QuantileDuration is Quantile as a time.Duration.
func (h *Histogram) QuantileDuration(q float64) time.Duration {
	return time.Duration(h.Quantile(q))
}

// lockedHistogram is a Histogram shared between goroutines.
type lockedHistogram struct {
	mu        sync.Mutex
	histogram *Histogram
}

func newLockedHistogram() *lockedHistogram {
	return &lockedHistogram{histogram: NewHistogram()}
}

func (l *lockedHistogram) RecordDuration(d time.Duration) {
	l.mu.Lock()
	l.histogram.RecordDuration(d)
	l.mu.Unlock()
}

// Snapshot returns a copy of the histogram.
func (l *lockedHistogram) Snapshot() *Histogram {
	l.mu.Lock()
	defer l.mu.Unlock()
	snapshot := *l.histogram
	return &snapshot
}
