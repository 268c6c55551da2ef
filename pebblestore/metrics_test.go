package pebblestore

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"
)

// TestFsyncHistogramRebucketed: Pebble's nanosecond fsync histogram is
// reported in seconds, each bound the largest Pebble bound at or below the
// wanted one, with exact cumulative counts, sum and count.
func TestFsyncHistogramRebucketed(t *testing.T) {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "x", Buckets: pebble.FsyncLatencyBuckets})
	for _, d := range []time.Duration{150 * time.Microsecond, 3 * time.Millisecond, 70 * time.Millisecond, 20 * time.Second} {
		h.Observe(float64(d))
	}
	var m dto.Metric
	if err := fsyncHistogram(h).Write(&m); err != nil {
		t.Fatal(err)
	}
	hist := m.GetHistogram()
	if hist.GetSampleCount() != 4 {
		t.Fatalf("count %d, want 4", hist.GetSampleCount())
	}
	if sum := hist.GetSampleSum(); sum < 20.07 || sum > 20.08 {
		t.Fatalf("sum %v s, want 20.07315", sum)
	}
	got := map[string]uint64{}
	var bounds []float64
	for _, b := range hist.GetBucket() {
		got[fmt.Sprintf("%.4g", b.GetUpperBound())] = b.GetCumulativeCount()
		bounds = append(bounds, b.GetUpperBound())
	}
	if len(bounds) != len(fsyncBucketsSeconds) {
		t.Fatalf("%d buckets %v, want %d", len(bounds), bounds, len(fsyncBucketsSeconds))
	}
	for i, b := range bounds {
		if want := fsyncBucketsSeconds[i]; b > want || b < want*0.8 {
			t.Errorf("bucket %d: bound %v for wanted %v", i, b, want)
		}
	}
	for le, want := range map[string]uint64{"0.0001": 0, "0.0005": 1, "0.001": 1, "0.0025": 1, "0.005": 2, "10": 3} {
		if got[le] != want {
			t.Errorf("le=%s: %d, want %d (all: %v)", le, got[le], want, got)
		}
	}
}

// TestStoreCollector: a store's collector reports Pebble's state and the
// fsyncs of synced writes; a write stall is counted with its duration.
func TestStoreCollector(t *testing.T) {
	s, err := Open(t.TempDir(), Options{Logger: zerolog.Nop(), MemTableSize: 1 << 20, CacheSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 5 {
		b := s.NewBatch()
		b.Set([]byte(fmt.Sprintf("k%d", i)), []byte("v"))
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	s.stalls.begin()
	time.Sleep(10 * time.Millisecond)
	s.stalls.end()

	reg := prometheus.NewRegistry()
	reg.MustRegister(s.Collector())
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %+v", err, problems)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]*dto.Metric{}
	for _, f := range families {
		values[f.GetName()] = f.GetMetric()[0]
	}
	if n := values["broker_pebble_wal_fsync_duration_seconds"].GetHistogram().GetSampleCount(); n < 5 {
		t.Errorf("fsyncs %d, want at least the 5 synced commits", n)
	}
	if n := values["broker_pebble_flushes_total"].GetCounter().GetValue(); n < 1 {
		t.Errorf("flushes %v, want at least 1", n)
	}
	if n := values["broker_pebble_write_stalls_total"].GetCounter().GetValue(); n != 1 {
		t.Errorf("write stalls %v, want 1", n)
	}
	if d := values["broker_pebble_write_stall_duration_seconds_total"].GetCounter().GetValue(); d < 0.01 || d > 5 {
		t.Errorf("stall duration %v s, want about 0.01", d)
	}
	if n := values["broker_pebble_disk_usage_bytes"].GetGauge().GetValue(); n <= 0 {
		t.Errorf("disk usage %v, want > 0", n)
	}
	var names []string
	for name := range values {
		names = append(names, name)
	}
	if len(names) != 13 {
		t.Errorf("%d families, want 13: %s", len(names), strings.Join(names, " "))
	}
}
