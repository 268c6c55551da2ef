// Package checker judges a produce-then-read-back history in the style of
// Jepsen: producers record every record the broker acknowledged (topic,
// partition, offset and a unique value naming the producer and its send
// order), consumers read every partition back from the start once the
// faults are healed, and Check compares the two.
//
// Verdicts (Report):
//
//   - Lost: an acknowledged value read nowhere. Failure.
//   - Moved: an acknowledged value read, but not at the offset the broker
//     acknowledged (the offset told to the client was not the record's).
//     Failure.
//   - Duplicated: a value read at two or more offsets (each extra copy
//     counts once). Allowed without idempotence (a retried send may be
//     written twice); a failure with it.
//   - Reordered: within one partition, a producer's values read in an
//     order other than the one it sent them in (its sequence numbers must
//     grow with the offset; a duplicate's later copies are not judged).
//     Failure.
//   - Conflicting: one offset read with two different values (the log
//     changed under the readers). Failure.
//   - Unacknowledged: a value read that no acknowledgement names (its send
//     failed or was in flight: unknown outcome, as Jepsen's :info). Counted,
//     allowed.
//   - Foreign: a value read that no producer of the history wrote. Failure.
//
// The checker is a pure function of the history: deterministic, no clock.
// CheckTxn (txn.go) is its transactional mode: outcomes of transactions
// against what a read_committed consumer read.
package checker

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Record is one record as a producer was told (acknowledged) or as a
// consumer read it.
type Record struct {
	Topic     string
	Partition int32
	Offset    int64
	// Value is unique over the history: Value(producer, seq).
	Value string
}

// Value is the record value of producer's seq-th send; seq grows by one
// per send of that producer, in the order the producer sent them.
func Value(producer int, seq int64) string {
	return fmt.Sprintf("p%d-%012d", producer, seq)
}

// ParseValue is Value's inverse; ok is false for a value Value did not make.
func ParseValue(v string) (producer int, seq int64, ok bool) {
	p, s, found := strings.Cut(v, "-")
	if !found || !strings.HasPrefix(p, "p") {
		return 0, 0, false
	}
	producer, err1 := strconv.Atoi(p[1:])
	seq, err2 := strconv.ParseInt(s, 10, 64)
	return producer, seq, err1 == nil && err2 == nil && producer >= 0 && seq >= 0
}

// History is what the clients saw.
type History struct {
	// Idempotent: the producers were idempotent, so a duplicate is a failure.
	Idempotent bool
	// Producers is how many producers wrote (IDs 0 to Producers-1); a
	// value of another producer is foreign. 0: any producer ID.
	Producers int
	// Acked are the acknowledged records with the offset each acknowledgement named.
	Acked []Record
	// Read are the records the consumers read back (in any order; reading
	// the same offset twice with the same value counts once).
	Read []Record
}

// Report is Check's verdict; Details names the first failures.
type Report struct {
	Idempotent     bool
	Acked          int
	Read           int // distinct (topic, partition, offset) read
	Lost           int
	Moved          int
	Duplicated     int
	Reordered      int
	Conflicting    int
	Unacknowledged int
	Foreign        int
	Details        []string
}

// maxDetails bounds Report.Details.
const maxDetails = 20

func (r *Report) fail(counter *int, format string, args ...any) {
	*counter++
	if len(r.Details) < maxDetails {
		r.Details = append(r.Details, fmt.Sprintf(format, args...))
	}
}

// OK reports whether the history shows no failure (unacknowledged reads
// are allowed; duplicates only without idempotence).
func (r *Report) OK() bool {
	dups := r.Duplicated
	if !r.Idempotent {
		dups = 0
	}
	return r.Lost == 0 && r.Moved == 0 && dups == 0 && r.Reordered == 0 && r.Conflicting == 0 && r.Foreign == 0
}

// String is the report in one paragraph plus its details.
func (r *Report) String() string {
	var b strings.Builder
	verdict := "PASS"
	if !r.OK() {
		verdict = "FAIL"
	}
	fmt.Fprintf(&b, "checker %s (idempotent %v): acknowledged %d, read %d; lost %d, moved %d, duplicated %d, reordered %d, conflicting %d, foreign %d; unacknowledged but read (unknown outcome, allowed) %d",
		verdict, r.Idempotent, r.Acked, r.Read, r.Lost, r.Moved, r.Duplicated, r.Reordered, r.Conflicting, r.Foreign, r.Unacknowledged)
	for _, d := range r.Details {
		b.WriteString("\n  - " + d)
	}
	return b.String()
}

type position struct {
	topic     string
	partition int32
	offset    int64
}

func (p position) String() string { return fmt.Sprintf("%s/%d@%d", p.topic, p.partition, p.offset) }

type partitionKey struct {
	topic     string
	partition int32
}

// Check judges h; see the package comment for each verdict.
func Check(h History) *Report {
	r := &Report{Idempotent: h.Idempotent, Acked: len(h.Acked)}
	logs, at := collapseReads(h.Read, func(pos position, prev, v string) {
		r.fail(&r.Conflicting, "conflicting: %s read as %s and as %s", pos, prev, v)
	})
	for _, log := range logs {
		r.Read += len(log)
	}
	keys := sortedKeys(logs)
	acked := make(map[string]position, len(h.Acked))
	for _, a := range h.Acked {
		acked[a.Value] = position{a.Topic, a.Partition, a.Offset}
	}
	for _, k := range keys {
		checkPartition(r, k, logs[k], at)
	}
	for _, a := range h.Acked {
		want := position{a.Topic, a.Partition, a.Offset}
		got := at[a.Value]
		switch {
		case len(got) == 0:
			r.fail(&r.Lost, "lost: %s acknowledged at %s, read nowhere", a.Value, want)
		case !slices.Contains(got, want):
			r.fail(&r.Moved, "moved: %s acknowledged at %s, read at %v", a.Value, want, got)
		}
	}
	for v, pos := range at {
		if _, ok := acked[v]; ok {
			continue
		}
		if p, _, ok := ParseValue(v); ok && (h.Producers == 0 || p < h.Producers) {
			r.Unacknowledged++
		} else {
			r.fail(&r.Foreign, "foreign: %q at %v was written by no producer of this history", v, pos)
		}
	}
	return r
}

// collapseReads collapses repeated reads, calls conflict for an offset
// read with a second, different value, and returns each partition's log
// sorted by offset and where each value was read (positions sorted).
func collapseReads(read []Record, conflict func(pos position, prev, v string)) (map[partitionKey][]Record, map[string][]position) {
	byPos := make(map[position]string, len(read))
	logs := map[partitionKey][]Record{}
	for _, rec := range read {
		pos := position{rec.Topic, rec.Partition, rec.Offset}
		if prev, ok := byPos[pos]; ok {
			if prev != rec.Value {
				conflict(pos, prev, rec.Value)
			}
			continue
		}
		byPos[pos] = rec.Value
		k := partitionKey{rec.Topic, rec.Partition}
		logs[k] = append(logs[k], rec)
	}
	at := map[string][]position{}
	for k, log := range logs {
		slices.SortFunc(log, func(a, b Record) int { return cmp.Compare(a.Offset, b.Offset) })
		for _, rec := range log {
			at[rec.Value] = append(at[rec.Value], position{k.topic, k.partition, rec.Offset})
		}
	}
	for v := range at {
		slices.SortFunc(at[v], func(a, b position) int {
			return cmp.Or(strings.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition), cmp.Compare(a.offset, b.offset))
		})
	}
	return logs, at
}

// checkPartition counts duplicates (every copy of a value after its first
// position over the whole history) and reorders (a producer's sequence
// going backwards in offset order, first copies only) of one partition.
func checkPartition(r *Report, k partitionKey, log []Record, at map[string][]position) {
	lastSeq := map[int]int64{}
	lastAt := map[int]int64{}
	for _, rec := range log {
		pos := position{k.topic, k.partition, rec.Offset}
		first := at[rec.Value][0]
		if first != pos {
			r.fail(&r.Duplicated, "duplicated: %s read at %s and again at %s", rec.Value, first, pos)
			continue
		}
		producer, seq, ok := ParseValue(rec.Value)
		if !ok {
			continue // Check counts it as foreign
		}
		if last, had := lastSeq[producer]; had && seq < last {
			r.fail(&r.Reordered, "reordered: %s at %s after producer %d's seq %d at offset %d", rec.Value, pos, producer, last, lastAt[producer])
			continue
		}
		lastSeq[producer], lastAt[producer] = seq, rec.Offset
	}
}
