package main

import (
	"strings"
	"testing"
	"time"
)

func TestParseProcStatCPU(t *testing.T) {
	// A comm with spaces and a ')' must not shift the fields.
	stat := "4242 (my (weird) proc) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 75 0 0 20 0 12 0 100 0 0\n"
	got, err := parseProcStatCPU([]byte(stat))
	if err != nil {
		t.Fatal(err)
	}
	if want := 3.25; got != want { // (250 + 75) ticks / 100
		t.Fatalf("cpu seconds = %v, want %v", got, want)
	}
	if _, err := parseProcStatCPU([]byte("4242 (short) S 1 2")); err == nil {
		t.Fatal("a truncated stat line parsed")
	}
}

func TestParseProcStatusRSS(t *testing.T) {
	status := "Name:\tbroker\nVmPeak:\t 1811616 kB\nVmHWM:\t  420260 kB\nVmRSS:\t  355024 kB\nThreads:\t8\n"
	rss, peak, err := parseProcStatusRSS([]byte(status))
	if err != nil {
		t.Fatal(err)
	}
	if rss != 355024<<10 || peak != 420260<<10 {
		t.Fatalf("rss, peak = %d, %d; want %d, %d", rss, peak, 355024<<10, 420260<<10)
	}
	for _, bad := range []string{"Name:\tbroker\n", "VmRSS:\t12 MB\nVmHWM:\t12 kB\n", "VmRSS:\tx kB\nVmHWM:\t1 kB\n"} {
		if _, _, err := parseProcStatusRSS([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5},
	} {
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestFormatReportMediansRatiosAndPending(t *testing.T) {
	p99 := func(v float64) *float64 { return &v }
	results := []*Result{
		{Mode: "produce", Target: "ours", Partitions: 1, MBPerSecond: 90, OK: true},
		{Mode: "produce", Target: "ours", Partitions: 1, MBPerSecond: 110, OK: true},
		{Mode: "produce", Target: "ours", Partitions: 1, MBPerSecond: 100, OK: true},
		{Mode: "produce", Target: "kfake", Partitions: 1, MBPerSecond: 50, OK: true},
		{Mode: "produce", Target: "kfake", Partitions: 1, MBPerSecond: 1, OK: false}, // failed: left out
		{Mode: "e2e", Target: "kfake", Partitions: 8, LatencyP99Ms: p99(12.5), OK: true},
	}
	table := formatReport(results, []string{"ours", "kfake"})
	for _, want := range []string{
		"| produce MB/s, 1 partition | 100 (n=3) | 50.0 (n=1) | 2.00 |",
		"| e2e latency p99 ms, 8 partitions | pending | 12.5 (n=1) | – |",
		"Failed runs, left out of the medians: kfake produce p=1 ×1",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	if strings.Index(table, "1 partition |") > strings.Index(table, "8 partitions |") {
		t.Errorf("rows not ordered by partitions:\n%s", table)
	}
}

func TestPayloadPoolValues(t *testing.T) {
	pool := newPayloadPool(1024)
	cursor := 0
	first := pool.value(&cursor, 1024)
	second := pool.value(&cursor, 1024)
	if len(first) != 1024 || cap(first) != 1024 {
		t.Fatalf("value len %d cap %d, want 1024 and 1024 (appending must not reach the pool)", len(first), cap(first))
	}
	if string(first) == string(second) {
		t.Fatal("consecutive values are identical")
	}
	for range 10_000 { // wraps the pool several times without going out of range
		if v := pool.value(&cursor, 1024); len(v) != 1024 {
			t.Fatalf("value length %d", len(v))
		}
	}
}

func TestValidateRejectsBadConfigs(t *testing.T) {
	valid := func() *Config {
		return &Config{Mode: "produce", Brokers: []string{"127.0.0.1:9092"}, Topic: "t", Partitions: 1,
			Duration: time.Second, RecordSize: 1024, Producers: 1, Consumers: 1, InFlight: 1, Acks: "all",
			Idempotent: true, Compression: "none", BatchMaxBytes: 1 << 20, MaxBufferedRecords: 100,
			Rate: 10, IdleTimeout: time.Second, Timeout: time.Minute}
	}
	if err := valid().Validate(); err != nil {
		t.Fatalf("valid config rejected: %v", err)
	}
	for name, mutate := range map[string]func(*Config){
		"unknown mode":             func(c *Config) { c.Mode = "fetch" },
		"no brokers":               func(c *Config) { c.Brokers = nil },
		"idempotent without acks":  func(c *Config) { c.Acks = "leader" },
		"unknown compression":      func(c *Config) { c.Compression = "brotli" },
		"endless produce":          func(c *Config) { c.Duration, c.Records = 0, 0 },
		"e2e record without room":  func(c *Config) { c.Mode, c.RecordSize = "e2e", 8 },
		"zero partitions":          func(c *Config) { c.Partitions = 0 },
		"non-positive idle":        func(c *Config) { c.IdleTimeout = 0 },
		"e2e without a rate":       func(c *Config) { c.Mode, c.Rate = "e2e", 0 },
		"negative broker pid":      func(c *Config) { c.BrokerPID = -1 },
		"batch smaller than 1 KiB": func(c *Config) { c.BatchMaxBytes = 10 },
	} {
		c := valid()
		mutate(c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestShareGroupFlag: --share-group selects the share consume and is
// refused outside consume mode.
func TestShareGroupFlag(t *testing.T) {
	cfg, err := parseFlags("consume", []string{"--share-group", "g", "--topic", "t"})
	if err != nil || cfg.ShareGroup != "g" {
		t.Fatalf("consume --share-group g: %+v, %v", cfg, err)
	}
	if _, err := parseFlags("produce", []string{"--share-group", "g", "--records", "1"}); err == nil || !strings.Contains(err.Error(), "consume mode") {
		t.Fatalf("produce --share-group: %v", err)
	}
}
