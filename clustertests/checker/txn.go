package checker

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The transactional mode: transactional producers record the outcome of
// each transaction they ran, and a read_committed consumer reads every
// partition back once the faults are healed. CheckTxn compares the two.
//
// Verdicts (TxnReport):
//
//   - Lost: a record of a transaction whose commit was acknowledged
//     (EndTxn commit answered without error) read nowhere. Failure.
//   - AbortedVisible: a record of an aborted transaction (one whose
//     commit was never sent: the producer aborted it, or gave up before
//     EndTxn) read. Failure.
//   - Partial: a transaction of unknown outcome (EndTxn commit sent, no
//     answer or an error) of which some records are read and others not:
//     a transaction is all or nothing (KIP-98). Failure; each transaction
//     counts once. Unknown ones read whole or not at all are counted
//     (UnknownVisible, UnknownInvisible), allowed.
//   - Duplicated: a record read at two or more offsets (each extra copy
//     counts). Failure: transactional producers are idempotent.
//   - Moved: a record read in another partition than the one its
//     transaction sent it to. Failure.
//   - Reordered: within one partition, a producer's records read in an
//     order other than the one it sent them in (transaction number, then
//     index within it, must grow with the offset; first copies only).
//     Failure.
//   - Conflicting: one offset read with two different values. Failure.
//   - Foreign: a value no transaction of the history wrote. Failure.
//
// Like Check, CheckTxn is a pure function of the history.

// Outcome is what a transactional producer knows of one transaction.
type Outcome int

const (
	// Committed: EndTxn with commit answered without error.
	Committed Outcome = iota
	// Aborted: no EndTxn commit was ever sent for it (the producer aborted
	// it, or gave up before committing); it must never be visible.
	Aborted
	// Unknown: EndTxn commit was sent and failed or got no answer; the
	// transaction may have committed (all its records visible) or not
	// (none visible).
	Unknown
)

func (o Outcome) String() string {
	switch o {
	case Committed:
		return "committed"
	case Aborted:
		return "aborted"
	case Unknown:
		return "unknown"
	}
	return "Outcome(" + strconv.Itoa(int(o)) + ")"
}

// Txn is one transaction of one producer: its Seq grows by one per
// transaction of that producer, in the order the producer ran them; its
// record i went to partition Partitions[i] with value TxnValue(Producer,
// Seq, i), records of one partition in index order.
type Txn struct {
	Producer   int
	Seq        int64
	Topic      string
	Partitions []int32
	Outcome    Outcome
}

// TxnValue is the value of record index of transaction seq of producer.
func TxnValue(producer int, seq int64, index int) string {
	return fmt.Sprintf("t%d-%09d-%d", producer, seq, index)
}

// ParseTxnValue is TxnValue's inverse; ok is false for a value TxnValue
// did not make.
func ParseTxnValue(v string) (producer int, seq int64, index int, ok bool) {
	f := strings.Split(v, "-")
	if len(f) != 3 || !strings.HasPrefix(f[0], "t") {
		return 0, 0, 0, false
	}
	producer, err1 := strconv.Atoi(f[0][1:])
	seq, err2 := strconv.ParseInt(f[1], 10, 64)
	index, err3 := strconv.Atoi(f[2])
	ok = err1 == nil && err2 == nil && err3 == nil && producer >= 0 && seq >= 0 && index >= 0
	return producer, seq, index, ok
}

// TxnHistory is what the transactional producers and the read_committed
// consumers saw.
type TxnHistory struct {
	Txns []Txn
	// Read are the records read back with read_committed (in any order;
	// reading the same offset twice with the same value counts once).
	Read []Record
}

// TxnReport is CheckTxn's verdict; Details names the first failures.
type TxnReport struct {
	Committed, Aborted, Unknown      int // transactions by outcome
	UnknownVisible, UnknownInvisible int // unknown ones read whole, not at all
	Read                             int // distinct (topic, partition, offset) read
	Lost, AbortedVisible, Partial    int
	Duplicated, Moved, Reordered     int
	Conflicting, Foreign             int
	Details                          []string
}

func (r *TxnReport) fail(counter *int, format string, args ...any) {
	*counter++
	if len(r.Details) < maxDetails {
		r.Details = append(r.Details, fmt.Sprintf(format, args...))
	}
}

// OK reports whether the history shows no failure.
func (r *TxnReport) OK() bool {
	return r.Lost == 0 && r.AbortedVisible == 0 && r.Partial == 0 && r.Duplicated == 0 &&
		r.Moved == 0 && r.Reordered == 0 && r.Conflicting == 0 && r.Foreign == 0
}

// String is the report in one paragraph plus its details.
func (r *TxnReport) String() string {
	var b strings.Builder
	verdict := "PASS"
	if !r.OK() {
		verdict = "FAIL"
	}
	fmt.Fprintf(&b, "txn checker %s: transactions committed %d, aborted %d, unknown %d (read whole %d, not at all %d); records read %d; lost %d, aborted visible %d, partial %d, duplicated %d, moved %d, reordered %d, conflicting %d, foreign %d",
		verdict, r.Committed, r.Aborted, r.Unknown, r.UnknownVisible, r.UnknownInvisible, r.Read,
		r.Lost, r.AbortedVisible, r.Partial, r.Duplicated, r.Moved, r.Reordered, r.Conflicting, r.Foreign)
	for _, d := range r.Details {
		b.WriteString("\n  - " + d)
	}
	return b.String()
}

type txnKey struct {
	producer int
	seq      int64
}

// CheckTxn judges h; see "The transactional mode" above for each verdict.
func CheckTxn(h TxnHistory) *TxnReport {
	r := &TxnReport{}
	byKey := make(map[txnKey]*Txn, len(h.Txns))
	for i := range h.Txns {
		t := &h.Txns[i]
		byKey[txnKey{t.Producer, t.Seq}] = t
		switch t.Outcome {
		case Committed:
			r.Committed++
		case Aborted:
			r.Aborted++
		default:
			r.Unknown++
		}
	}
	logs, at := collapseReads(h.Read, func(pos position, prev, v string) {
		r.fail(&r.Conflicting, "conflicting: %s read as %s and as %s", pos, prev, v)
	})
	for _, log := range logs {
		r.Read += len(log)
	}
	for _, k := range sortedKeys(logs) {
		checkTxnPartition(r, k, logs[k], at, byKey)
	}
	for _, t := range h.Txns {
		checkTxnRecords(r, t, at)
	}
	return r
}

// checkTxnPartition judges one partition's log (sorted by offset): each
// value once over the history, written by a transaction of the history
// to this partition, and each producer's (seq, index) growing with the
// offset.
func checkTxnPartition(r *TxnReport, k partitionKey, log []Record, at map[string][]position, byKey map[txnKey]*Txn) {
	type order struct {
		seq    int64
		index  int
		offset int64
	}
	last := map[int]order{}
	for _, rec := range log {
		pos := position{k.topic, k.partition, rec.Offset}
		if first := at[rec.Value][0]; first != pos {
			r.fail(&r.Duplicated, "duplicated: %s read at %s and again at %s", rec.Value, first, pos)
			continue
		}
		producer, seq, index, ok := ParseTxnValue(rec.Value)
		t := byKey[txnKey{producer, seq}]
		if !ok || t == nil || index >= len(t.Partitions) {
			r.fail(&r.Foreign, "foreign: %q at %s was written by no transaction of this history", rec.Value, pos)
			continue
		}
		if t.Topic != k.topic || t.Partitions[index] != k.partition {
			r.fail(&r.Moved, "moved: %s sent to %s/%d, read at %s", rec.Value, t.Topic, t.Partitions[index], pos)
		}
		if prev, had := last[producer]; had && (seq < prev.seq || seq == prev.seq && index < prev.index) {
			r.fail(&r.Reordered, "reordered: %s at %s after producer %d's transaction %d record %d at offset %d",
				rec.Value, pos, producer, prev.seq, prev.index, prev.offset)
			continue
		}
		last[producer] = order{seq, index, rec.Offset}
	}
}

// checkTxnRecords judges one transaction's visibility against its outcome.
func checkTxnRecords(r *TxnReport, t Txn, at map[string][]position) {
	var seen, missing []int
	for i := range t.Partitions {
		if len(at[TxnValue(t.Producer, t.Seq, i)]) > 0 {
			seen = append(seen, i)
		} else {
			missing = append(missing, i)
		}
	}
	name := fmt.Sprintf("transaction %d of producer %d", t.Seq, t.Producer)
	switch {
	case t.Outcome == Committed:
		for _, i := range missing {
			r.fail(&r.Lost, "lost: record %d (%s) of committed %s read nowhere", i, TxnValue(t.Producer, t.Seq, i), name)
		}
	case t.Outcome == Aborted:
		for _, i := range seen {
			r.fail(&r.AbortedVisible, "aborted visible: record %d (%s) of aborted %s read at %v", i, TxnValue(t.Producer, t.Seq, i), name, at[TxnValue(t.Producer, t.Seq, i)])
		}
	case len(missing) == 0:
		r.UnknownVisible++
	case len(seen) == 0:
		r.UnknownInvisible++
	default:
		r.fail(&r.Partial, "partial: %s of unknown outcome: records %v read, records %v not", name, seen, missing)
	}
}

// sortedKeys are the partitions of logs in topic, partition order.
func sortedKeys(logs map[partitionKey][]Record) []partitionKey {
	keys := make([]partitionKey, 0, len(logs))
	for k := range logs {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b partitionKey) int {
		return cmp.Or(strings.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
	})
	return keys
}
