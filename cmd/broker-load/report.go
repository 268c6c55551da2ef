package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// reportMetric is one row kind of the report table.
type reportMetric struct {
	mode  string
	name  string
	order int
	value func(*Result) *float64
}

func floatPointer(v float64) *float64 { return &v }

var reportMetrics = []reportMetric{
	{"produce", "produce MB/s", 0, func(r *Result) *float64 { return floatPointer(r.MBPerSecond) }},
	{"produce", "produce latency p99 ms", 1, func(r *Result) *float64 { return r.LatencyP99Ms }},
	{"consume", "consume MB/s", 2, func(r *Result) *float64 { return floatPointer(r.MBPerSecond) }},
	{"e2e", "e2e latency p50 ms", 3, func(r *Result) *float64 { return r.LatencyP50Ms }},
	{"e2e", "e2e latency p99 ms", 4, func(r *Result) *float64 { return r.LatencyP99Ms }},
	{"e2e", "e2e latency p99.9 ms", 5, func(r *Result) *float64 { return r.LatencyP999Ms }},
	{"produce", "broker CPU s/GB, produce", 6, func(r *Result) *float64 { return r.BrokerCPUSecondsPerGB }},
	{"consume", "broker CPU s/GB, consume", 7, func(r *Result) *float64 { return r.BrokerCPUSecondsPerGB }},
}

// runReport reads result lines (--json output) from files and prints a
// markdown table of the median of each metric per target, and the ratio of
// the first target to the second. Results that failed their checks (ok
// false) are left out of the medians and counted below the table.
func runReport(w io.Writer, args []string) error {
	fs := flag.NewFlagSet("broker-load report", flag.ContinueOnError)
	targetList := fs.String("targets", "ours,kfake", "targets to compare, in column order; the ratio is first / second")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return errors.New("report needs at least one file of --json result lines")
	}
	targets := strings.Split(*targetList, ",")
	var results []*Result
	for _, path := range fs.Args() {
		read, err := readResults(path)
		if err != nil {
			return err
		}
		results = append(results, read...)
	}
	fmt.Fprint(w, formatReport(results, targets))
	return nil
}

func readResults(path string) ([]*Result, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var results []*Result
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for line := 1; scanner.Scan(); line++ {
		text := strings.TrimSpace(scanner.Text())
		if !strings.HasPrefix(text, "{") {
			continue // not a result line
		}
		r := new(Result)
		if err := json.Unmarshal([]byte(text), r); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		results = append(results, r)
	}
	return results, scanner.Err()
}

// formatReport renders the table; it is separate from runReport for tests.
func formatReport(results []*Result, targets []string) string {
	type rowKey struct {
		partitions int
		metric     int // index into reportMetrics
	}
	values := make(map[rowKey]map[string][]float64)
	failed := make(map[string]int)
	for _, r := range results {
		if !r.OK {
			failed[fmt.Sprintf("%s %s p=%d", r.Target, r.Mode, r.Partitions)]++
			continue
		}
		for i, m := range reportMetrics {
			if m.mode != r.Mode {
				continue
			}
			v := m.value(r)
			if v == nil {
				continue
			}
			key := rowKey{r.Partitions, i}
			if values[key] == nil {
				values[key] = make(map[string][]float64)
			}
			values[key][r.Target] = append(values[key][r.Target], *v)
		}
	}
	keys := make([]rowKey, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b rowKey) int {
		return cmp.Or(cmp.Compare(a.partitions, b.partitions),
			cmp.Compare(reportMetrics[a.metric].order, reportMetrics[b.metric].order))
	})

	var b strings.Builder
	b.WriteString("| metric |")
	for _, t := range targets {
		fmt.Fprintf(&b, " %s (median) |", t)
	}
	if len(targets) >= 2 {
		fmt.Fprintf(&b, " ratio %s/%s |", targets[0], targets[1])
	}
	b.WriteString("\n|---|")
	for range targets {
		b.WriteString("---:|")
	}
	if len(targets) >= 2 {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
	for _, k := range keys {
		partitionWord := "partitions"
		if k.partitions == 1 {
			partitionWord = "partition"
		}
		fmt.Fprintf(&b, "| %s, %d %s |", reportMetrics[k.metric].name, k.partitions, partitionWord)
		medians := make([]*float64, len(targets))
		for i, t := range targets {
			samples := values[k][t]
			if len(samples) == 0 {
				b.WriteString(" pending |")
				continue
			}
			m := median(samples)
			medians[i] = &m
			fmt.Fprintf(&b, " %s (n=%d) |", formatNumber(m), len(samples))
		}
		if len(targets) >= 2 {
			if medians[0] != nil && medians[1] != nil && *medians[1] != 0 {
				fmt.Fprintf(&b, " %.2f |", *medians[0] / *medians[1])
			} else {
				b.WriteString(" – |")
			}
		}
		b.WriteString("\n")
	}
	if len(failed) > 0 {
		names := make([]string, 0, len(failed))
		for name, n := range failed {
			names = append(names, fmt.Sprintf("%s ×%d", name, n))
		}
		slices.Sort(names)
		fmt.Fprintf(&b, "\nFailed runs, left out of the medians: %s\n", strings.Join(names, ", "))
	}
	return b.String()
}

// median of samples; the mean of the middle two for an even count.
func median(samples []float64) float64 {
	sorted := slices.Clone(samples)
	slices.Sort(sorted)
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

func formatNumber(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}
