package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

const (
	bytesPerMB = 1 << 20
	bytesPerGB = 1 << 30
)

// Result is one measured run. Its JSON form is the line --json prints and
// `report` reads; keep field names stable, scripts depend on them.
type Result struct {
	Mode       string `json:"mode"`
	Target     string `json:"target,omitempty"`
	Case       string `json:"case,omitempty"`
	Topic      string `json:"topic"`
	Partitions int    `json:"partitions"`
	RecordSize int    `json:"record_size"`
	Producers  int    `json:"producers,omitempty"`
	Consumers  int    `json:"consumers,omitempty"`
	Acks       string `json:"acks,omitempty"`
	Idempotent bool   `json:"idempotent,omitempty"`
	// TransactionRecords is the records per committed transaction (0: none).
	TransactionRecords int64  `json:"transaction_records,omitempty"`
	Compression        string `json:"compression,omitempty"`
	Rate               int    `json:"rate,omitempty"`

	// Records and Bytes are what was acknowledged (produce) or read (consume,
	// e2e); Seconds is the measured wall time.
	Records          int64   `json:"records"`
	Bytes            int64   `json:"bytes"`
	Seconds          float64 `json:"seconds"`
	RecordsPerSecond float64 `json:"records_per_sec"`
	MBPerSecond      float64 `json:"mb_per_sec"`

	// Latency: produce call to promise in produce mode; intended send time to
	// receipt in e2e mode. Absent in consume mode.
	LatencyP50Ms  *float64 `json:"p50_ms,omitempty"`
	LatencyP99Ms  *float64 `json:"p99_ms,omitempty"`
	LatencyP999Ms *float64 `json:"p999_ms,omitempty"`
	LatencyMaxMs  *float64 `json:"max_ms,omitempty"`
	// AckP99Ms is the produce latency p99 of an e2e run.
	AckP99Ms *float64 `json:"ack_p99_ms,omitempty"`

	// Verification.
	Errors     int64  `json:"errors"`
	FirstError string `json:"first_error,omitempty"`
	Expected   int64  `json:"expected,omitempty"`
	Sent       int64  `json:"sent,omitempty"`
	Acked      int64  `json:"acked,omitempty"`
	Received   int64  `json:"received,omitempty"`
	Duplicates int64  `json:"duplicates"`
	Missing    int64  `json:"missing"`
	BadValues  int64  `json:"bad_values,omitempty"`
	// ScheduleLagMaxMs is how far e2e's paced producer fell behind its
	// schedule at worst; latencies are measured from the schedule, so a lag
	// shows up in them rather than hiding (no coordinated omission).
	ScheduleLagMaxMs *float64 `json:"schedule_lag_max_ms,omitempty"`
	OK               bool     `json:"ok"`

	// BrokerCPUSeconds is utime+stime of --broker-pid over the measured
	// phase; BrokerCPUSecondsPerGB divides it by Bytes in GB (for e2e, by the
	// bytes produced plus consumed).
	BrokerCPUSeconds      *float64 `json:"broker_cpu_sec,omitempty"`
	BrokerCPUSecondsPerGB *float64 `json:"broker_cpu_sec_per_gb,omitempty"`
	// BrokerRSSMB is the broker's resident memory (VmRSS) at the end of the
	// measured phase; BrokerPeakRSSMB its peak (VmHWM) during the phase,
	// reset at its start (absent when the reset was refused).
	BrokerRSSMB     float64 `json:"broker_rss_mb,omitempty"`
	BrokerPeakRSSMB float64 `json:"broker_peak_rss_mb,omitempty"`
	// CreateMs is how long --create-topic took: CreateTopics until every
	// partition has a leader in Metadata.
	CreateMs float64 `json:"create_ms,omitempty"`
}

func newResult(cfg *Config) *Result {
	return &Result{
		Mode:       cfg.Mode,
		Target:     cfg.Target,
		Case:       cfg.Case,
		Topic:      cfg.Topic,
		RecordSize: cfg.RecordSize,
	}
}

// setThroughput fills the rate fields from Records, Bytes and elapsed.
func (r *Result) setThroughput(elapsed time.Duration) {
	r.Seconds = round(elapsed.Seconds(), 3)
	if elapsed > 0 {
		r.RecordsPerSecond = round(float64(r.Records)/elapsed.Seconds(), 1)
		r.MBPerSecond = round(float64(r.Bytes)/bytesPerMB/elapsed.Seconds(), 2)
	}
}

// setLatency fills the latency fields from h (nanoseconds).
func (r *Result) setLatency(h *Histogram) {
	if h.Count() == 0 {
		return
	}
	r.LatencyP50Ms = milliseconds(h.Quantile(0.50))
	r.LatencyP99Ms = milliseconds(h.Quantile(0.99))
	r.LatencyP999Ms = milliseconds(h.Quantile(0.999))
	r.LatencyMaxMs = milliseconds(h.Max())
}

func (r *Result) setFirstError(err error) {
	if err != nil && r.FirstError == "" {
		r.FirstError = err.Error()
	}
}

func milliseconds(nanoseconds int64) *float64 {
	ms := round(float64(nanoseconds)/1e6, 3)
	return &ms
}

func round(v float64, digits int) float64 {
	f, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'f', digits, 64), 64)
	return f
}

// printResult writes r as one line: JSON with --json, else human readable.
func printResult(w io.Writer, cfg *Config, r *Result) {
	if cfg.JSON {
		line, err := json.Marshal(r)
		if err != nil {
			fmt.Fprintf(os.Stderr, "broker-load: encode result: %v\n", err)
			return
		}
		fmt.Fprintf(w, "%s\n", line)
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s p=%d size=%d: %d records, %.1f MB in %.2fs = %.0f records/s, %.2f MB/s",
		r.Mode, r.Topic, r.Partitions, r.RecordSize, r.Records, float64(r.Bytes)/bytesPerMB,
		r.Seconds, r.RecordsPerSecond, r.MBPerSecond)
	if r.LatencyP50Ms != nil {
		fmt.Fprintf(&b, "; latency ms p50 %.2f p99 %.2f p99.9 %.2f max %.2f",
			*r.LatencyP50Ms, *r.LatencyP99Ms, *r.LatencyP999Ms, *r.LatencyMaxMs)
	}
	if r.AckP99Ms != nil {
		fmt.Fprintf(&b, "; ack p99 %.2f ms", *r.AckP99Ms)
	}
	if r.Mode == "e2e" {
		fmt.Fprintf(&b, "; sent %d acked %d received %d", r.Sent, r.Acked, r.Received)
	}
	if r.Expected > 0 {
		fmt.Fprintf(&b, "; expected %d", r.Expected)
	}
	fmt.Fprintf(&b, "; errors %d duplicates %d missing %d", r.Errors, r.Duplicates, r.Missing)
	if r.BadValues > 0 {
		fmt.Fprintf(&b, " bad values %d", r.BadValues)
	}
	if r.BrokerCPUSeconds != nil {
		fmt.Fprintf(&b, "; broker CPU %.2fs", *r.BrokerCPUSeconds)
		if r.BrokerCPUSecondsPerGB != nil {
			fmt.Fprintf(&b, " = %.2f s/GB", *r.BrokerCPUSecondsPerGB)
		}
	}
	if r.BrokerRSSMB > 0 {
		fmt.Fprintf(&b, "; broker RSS %.0f MB (peak %.0f MB)", r.BrokerRSSMB, r.BrokerPeakRSSMB)
	}
	if r.CreateMs > 0 {
		fmt.Fprintf(&b, "; topic created in %.0f ms", r.CreateMs)
	}
	if r.OK {
		b.WriteString("; OK")
	} else {
		b.WriteString("; FAILED")
	}
	if r.FirstError != "" {
		fmt.Fprintf(&b, " (first error: %s)", r.FirstError)
	}
	fmt.Fprintln(w, b.String())
}
