package main

// The checks of the kill phase, pure functions of what the clients were
// told and what the broker holds at the end, so that torture_test.go can
// feed them synthetic input.

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// loggedRecord is one record: acknowledged to a producer, or read back.
type loggedRecord struct {
	Partition int32
	Offset    int64
	Value     string
}

// logCheck is the verdict on a topic's log against its acknowledged records.
type logCheck struct {
	Acked      int
	Read       int
	Lost       int // acknowledged, and missing or another value at its offset
	Duplicates int // a value at two offsets
	Gaps       int // partitions whose offsets are not contiguous from 0
	Disordered int // a producer's sequence going backwards within a partition
	Foreign    int // a value no producer of this run wrote
	Details    []string
}

func (c *logCheck) fail(counter *int, format string, args ...any) {
	*counter++
	if len(c.Details) < 20 {
		c.Details = append(c.Details, fmt.Sprintf(format, args...))
	}
}

func (c *logCheck) ok() bool {
	return c.Lost == 0 && c.Duplicates == 0 && c.Gaps == 0 && c.Disordered == 0 && c.Foreign == 0
}

// tortureValue is what the kill phase's producers write: producer id and
// a sequence number that grows by one per record of that producer.
func tortureValue(producer, seq int) string {
	return fmt.Sprintf("p%d-%09d", producer, seq)
}

func parseTortureValue(v string) (producer, seq int, ok bool) {
	p, s, found := strings.Cut(v, "-")
	if !found || !strings.HasPrefix(p, "p") {
		return 0, 0, false
	}
	producer, err1 := strconv.Atoi(p[1:])
	seq, err2 := strconv.Atoi(s)
	return producer, seq, err1 == nil && err2 == nil
}

// checkLog compares what was acknowledged with what the partitions hold:
//
//   - every acknowledged record is at its acknowledged offset with its value,
//   - offsets of every partition are contiguous from 0 (no gap),
//   - no value is stored twice (the idempotent producer's retries are not
//     appended again),
//   - within a partition, each producer's sequence numbers increase with
//     the offset (order is kept),
//   - every value is one this run's producers wrote.
//
// Records that were never acknowledged may or may not be in the log.
// ends, when not nil, is each partition's end offset as listed: a log that
// stops before it is a gap too.
func checkLog(acked []loggedRecord, log map[int32][]loggedRecord, ends map[int32]int64) *logCheck {
	c := &logCheck{Acked: len(acked)}
	byPos := make(map[int32]map[int64]string)
	seen := make(map[string]string)
	partitions := make([]int32, 0, len(log))
	for p := range log {
		partitions = append(partitions, p)
	}
	sort.Slice(partitions, func(i, j int) bool { return partitions[i] < partitions[j] })
	for _, p := range partitions {
		rs := append([]loggedRecord(nil), log[p]...)
		sort.SliceStable(rs, func(i, j int) bool { return rs[i].Offset < rs[j].Offset })
		c.Read += len(rs)
		m := make(map[int64]string, len(rs))
		byPos[p] = m
		lastSeq := map[int]int{}
		gap := false
		for i, r := range rs {
			if !gap && r.Offset != int64(i) {
				gap = true
				c.fail(&c.Gaps, "partition %d: record #%d is at offset %d: offsets not contiguous from 0", p, i, r.Offset)
			}
			if prev, dup := m[r.Offset]; dup {
				c.fail(&c.Duplicates, "partition %d: offset %d read twice (%s, %s)", p, r.Offset, prev, r.Value)
				continue
			}
			m[r.Offset] = r.Value
			where := fmt.Sprintf("%d@%d", p, r.Offset)
			if prev, dup := seen[r.Value]; dup {
				c.fail(&c.Duplicates, "value %s stored twice: at %s and %s", r.Value, prev, where)
			}
			seen[r.Value] = where
			producer, seq, ok := parseTortureValue(r.Value)
			if !ok {
				c.fail(&c.Foreign, "partition %d offset %d: value %q was not written by this run", p, r.Offset, r.Value)
				continue
			}
			if last, had := lastSeq[producer]; had && seq <= last {
				c.fail(&c.Disordered, "partition %d offset %d: producer %d seq %d after seq %d", p, r.Offset, producer, seq, last)
			}
			lastSeq[producer] = seq
		}
		if end, ok := ends[p]; ok && !gap && int64(len(rs)) != end {
			c.fail(&c.Gaps, "partition %d: %d records read, end offset is %d", p, len(rs), end)
		}
	}
	for _, a := range acked {
		v, ok := byPos[a.Partition][a.Offset]
		switch {
		case !ok:
			c.fail(&c.Lost, "partition %d: acknowledged offset %d (%s) missing", a.Partition, a.Offset, a.Value)
		case v != a.Value:
			c.fail(&c.Lost, "partition %d: offset %d holds %s, but %s was acknowledged there", a.Partition, a.Offset, v, a.Value)
		}
	}
	return c
}

// queueLedger is what the queue clients of the kill phase were told.
type queueLedger struct {
	// SentAcked are bodies whose send was acknowledged (HTTP 200, item
	// without error); SentUnknown those whose send request failed without
	// an answer (the broker may or may not have stored them).
	SentAcked   map[string]bool
	SentUnknown map[string]bool
	// Acked counts "acked" ack results per body; AckUnknown are bodies
	// whose ack request got no answer (the ack may have been stored).
	Acked      map[string]int
	AckUnknown map[string]bool
}

func newQueueLedger() *queueLedger {
	return &queueLedger{SentAcked: map[string]bool{}, SentUnknown: map[string]bool{}, Acked: map[string]int{}, AckUnknown: map[string]bool{}}
}

// queueCheck is the verdict on the queue.
type queueCheck struct {
	SentAcked    int
	Acked        int
	Remaining    int // still in the queue or its DLQ at the end
	Lost         int // acknowledged send neither acked nor remaining
	AckedTwice   int
	Foreign      int // delivered or remaining, but never sent
	AckedAndLeft int // acked, yet still in the queue at the end
	Details      []string
}

func (c *queueCheck) fail(counter *int, format string, args ...any) {
	*counter++
	if len(c.Details) < 20 {
		c.Details = append(c.Details, fmt.Sprintf(format, args...))
	}
}

func (c *queueCheck) ok() bool {
	return c.Lost == 0 && c.AckedTwice == 0 && c.Foreign == 0 && c.AckedAndLeft == 0
}

// checkQueue checks the ledger against remaining, the bodies in the queue
// and its DLQ at the end (each with its count):
//
//   - every acknowledged send was acked by a receiver (or its ack went
//     unanswered) or is still in the queue or the DLQ,
//   - no message was acked twice,
//   - nothing acked is still in the queue,
//   - nothing is delivered or stored that was never sent.
func checkQueue(l *queueLedger, remaining map[string]int) *queueCheck {
	c := &queueCheck{SentAcked: len(l.SentAcked)}
	for _, body := range sortedKeys(l.Acked) {
		n := l.Acked[body]
		c.Acked++
		if n > 1 {
			c.fail(&c.AckedTwice, "message %s acked %d times", body, n)
		}
		if !l.SentAcked[body] && !l.SentUnknown[body] {
			c.fail(&c.Foreign, "message %s acked, but it was never sent", body)
		}
		if remaining[body] > 0 {
			c.fail(&c.AckedAndLeft, "message %s acked, but still in the queue at the end", body)
		}
	}
	for _, body := range sortedKeys(remaining) {
		c.Remaining += remaining[body]
		if remaining[body] > 1 {
			c.fail(&c.AckedTwice, "message %s is in the queue %d times", body, remaining[body])
		}
		if !l.SentAcked[body] && !l.SentUnknown[body] {
			c.fail(&c.Foreign, "message %s is in the queue, but it was never sent", body)
		}
	}
	for _, body := range sortedKeys(l.SentAcked) {
		if l.Acked[body] == 0 && !l.AckUnknown[body] && remaining[body] == 0 {
			c.fail(&c.Lost, "acknowledged send %s was never acked and is not in the queue or its DLQ", body)
		}
	}
	return c
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
