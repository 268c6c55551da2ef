package main

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// exactQuantile is the nearest-rank quantile of sorted values.
func exactQuantile(sorted []int64, q float64) int64 {
	rank := int(math.Ceil(q * float64(len(sorted))))
	rank = max(rank, 1)
	return sorted[rank-1]
}

func TestBucketBoundsCoverEveryValue(t *testing.T) {
	check := func(v int64) {
		t.Helper()
		i := bucketIndex(v)
		if i < 0 || i >= histogramBucketCount {
			t.Fatalf("bucketIndex(%d) = %d, outside [0, %d)", v, i, histogramBucketCount)
		}
		lower, width := bucketBounds(i)
		if v < lower || v-lower >= width {
			t.Fatalf("value %d in bucket %d = [%d, %d+%d)", v, i, lower, lower, width)
		}
		if v >= linearCount && float64(width)/float64(lower) > 1.0/halfLinearCount {
			t.Fatalf("bucket %d width %d is more than 1/%d of %d", i, width, halfLinearCount, lower)
		}
	}
	for v := int64(0); v < 1<<16; v++ {
		check(v)
	}
	for shift := range 63 {
		base := int64(1) << shift
		check(base)
		check(base - 1)
		check(base + 1)
	}
	check(math.MaxInt64)

	// Buckets are contiguous: each one starts where the previous one ends.
	var next int64
	for i := range histogramBucketCount {
		lower, width := bucketBounds(i)
		if lower != next {
			t.Fatalf("bucket %d starts at %d, want %d", i, lower, next)
		}
		if bucketIndex(lower) != i || bucketIndex(lower+width-1) != i {
			t.Fatalf("bucket %d = [%d, %d) does not map back to itself", i, lower, lower+width)
		}
		next = lower + width
		if next < 0 { // overflowed past MaxInt64: that was the last bucket
			if i != histogramBucketCount-1 {
				t.Fatalf("bucket %d reaches MaxInt64 but is not the last", i)
			}
		}
	}
}

func TestQuantileExactForSmallValues(t *testing.T) {
	h := NewHistogram()
	for v := int64(1); v <= 100; v++ {
		h.Record(v)
	}
	for _, tc := range []struct {
		q    float64
		want int64
	}{
		{0, 1}, {0.01, 1}, {0.5, 50}, {0.9, 90}, {0.99, 99}, {0.999, 100}, {1, 100},
	} {
		if got := h.Quantile(tc.q); got != tc.want {
			t.Errorf("Quantile(%v) = %d, want %d", tc.q, got, tc.want)
		}
	}
	if h.Count() != 100 || h.Min() != 1 || h.Max() != 100 || h.Mean() != 50.5 {
		t.Errorf("count %d min %d max %d mean %v", h.Count(), h.Min(), h.Max(), h.Mean())
	}
}

func TestQuantileWithinOnePercent(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	distributions := map[string]func() int64{
		// Latencies around 2ms with a long tail, in nanoseconds.
		"lognormal": func() int64 { return int64(2e6 * math.Exp(rng.NormFloat64())) },
		"uniform":   func() int64 { return rng.Int64N(int64(10 * time.Second)) },
		"bimodal": func() int64 {
			if rng.IntN(100) == 0 {
				return int64(200*time.Millisecond) + rng.Int64N(1e6)
			}
			return int64(time.Millisecond) + rng.Int64N(1e5)
		},
	}
	for name, draw := range distributions {
		t.Run(name, func(t *testing.T) {
			h := NewHistogram()
			values := make([]int64, 100_000)
			for i := range values {
				values[i] = draw()
				h.Record(values[i])
			}
			slices.Sort(values)
			for _, q := range []float64{0.001, 0.5, 0.9, 0.99, 0.999, 1} {
				want := exactQuantile(values, q)
				got := h.Quantile(q)
				if relative := math.Abs(float64(got-want)) / float64(want); relative > 0.01 {
					t.Errorf("Quantile(%v) = %d, exact %d: off by %.3f%%", q, got, want, 100*relative)
				}
			}
			if h.Min() != values[0] || h.Max() != values[len(values)-1] {
				t.Errorf("min/max %d/%d, want %d/%d", h.Min(), h.Max(), values[0], values[len(values)-1])
			}
		})
	}
}

func TestMergeEqualsRecordingEverything(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	all, a, b := NewHistogram(), NewHistogram(), NewHistogram()
	for i := range 10_000 {
		v := rng.Int64N(1 << 40)
		all.Record(v)
		if i%3 == 0 {
			a.Record(v)
		} else {
			b.Record(v)
		}
	}
	a.Merge(b)
	a.Merge(NewHistogram()) // merging an empty histogram changes nothing
	if *a != *all {
		t.Fatalf("merged histogram differs from one that recorded every value")
	}
}

func TestEmptyAndNegative(t *testing.T) {
	h := NewHistogram()
	if h.Quantile(0.99) != 0 || h.Min() != 0 || h.Max() != 0 || h.Mean() != 0 {
		t.Fatalf("empty histogram reports non-zero values")
	}
	h.Record(-5) // clock went backwards: counts as 0
	if h.Count() != 1 || h.Quantile(0.5) != 0 {
		t.Fatalf("negative value: count %d p50 %d", h.Count(), h.Quantile(0.5))
	}
}

func TestLockedHistogramSnapshot(t *testing.T) {
	l := newLockedHistogram()
	l.RecordDuration(3 * time.Millisecond)
	snapshot := l.Snapshot()
	l.RecordDuration(time.Second)
	if snapshot.Count() != 1 || snapshot.QuantileDuration(1) > 3*time.Millisecond+30*time.Microsecond {
		t.Fatalf("snapshot changed after later records: count %d max %v", snapshot.Count(), snapshot.QuantileDuration(1))
	}
}
