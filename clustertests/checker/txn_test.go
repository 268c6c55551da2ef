package checker

import (
	"strings"
	"testing"
)

// txnLog lays the given transactions' records out as a broker would:
// per partition in the order given, offsets from 0 (markers skipped, as
// a read_committed consumer never returns them).
func txnLog(txns ...Txn) []Record {
	next := map[int32]int64{}
	var read []Record
	for _, t := range txns {
		for i, p := range t.Partitions {
			read = append(read, Record{Topic: t.Topic, Partition: p, Offset: next[p], Value: TxnValue(t.Producer, t.Seq, i)})
			next[p]++
		}
	}
	return read
}

// cleanTxns: two producers; producer 0 commits 1, aborts 2, commits 3,
// producer 1 commits 1 and has 2 of unknown outcome that committed; the
// read shows exactly the committed ones (and the unknown one, whole),
// each read twice.
func cleanTxns() (TxnHistory, []Txn) {
	txns := []Txn{
		{Producer: 0, Seq: 1, Topic: "t", Partitions: []int32{0, 1, 0}, Outcome: Committed},
		{Producer: 1, Seq: 1, Topic: "t", Partitions: []int32{1, 2}, Outcome: Committed},
		{Producer: 0, Seq: 2, Topic: "t", Partitions: []int32{1, 2}, Outcome: Aborted},
		{Producer: 0, Seq: 3, Topic: "t", Partitions: []int32{2, 0}, Outcome: Committed},
		{Producer: 1, Seq: 2, Topic: "t", Partitions: []int32{0, 1, 2}, Outcome: Unknown},
	}
	visible := []Txn{txns[0], txns[1], txns[3], txns[4]}
	read := txnLog(visible...)
	read = append(read, read...)
	return TxnHistory{Txns: txns, Read: read}, visible
}

func TestCheckTxnClean(t *testing.T) {
	h, _ := cleanTxns()
	r := CheckTxn(h)
	if !r.OK() || r.Committed != 3 || r.Aborted != 1 || r.Unknown != 1 || r.UnknownVisible != 1 || r.Read != 10 || len(r.Details) != 0 {
		t.Fatalf("a clean history: %s", r)
	}
	if !strings.HasPrefix(r.String(), "txn checker PASS") {
		t.Fatalf("String: %s", r)
	}
	// The unknown transaction not read at all is as good.
	h.Read = txnLog(h.Txns[0], h.Txns[1], h.Txns[3])
	if r := CheckTxn(h); !r.OK() || r.UnknownInvisible != 1 || r.UnknownVisible != 0 {
		t.Fatalf("the unknown transaction invisible: %s", r)
	}
}

// TestCheckTxnDetectsEachFailure: each hand-made history has exactly one
// defect, and only its counter moves.
func TestCheckTxnDetectsEachFailure(t *testing.T) {
	type counts struct{ lost, abortedVisible, partial, dup, moved, reordered, conflicting, foreign int }
	cases := []struct {
		name   string
		change func(h *TxnHistory, visible []Txn)
		want   counts
	}{
		{"lost: a record of a committed transaction missing", func(h *TxnHistory, _ []Txn) {
			h.Read = dropValue(h.Read, TxnValue(0, 3, 1))
		}, counts{lost: 1}},
		{"aborted visible: the records of an aborted transaction read", func(h *TxnHistory, _ []Txn) {
			h.Read = txnLog(h.Txns...) // in the order sent, the aborted one included
		}, counts{abortedVisible: 2}},
		{"partial: an unknown transaction read in part", func(h *TxnHistory, _ []Txn) {
			h.Read = dropValue(h.Read, TxnValue(1, 2, 2))
		}, counts{partial: 1}},
		{"duplicated: a committed record twice", func(h *TxnHistory, _ []Txn) {
			h.Read = append(h.Read, Record{Topic: "t", Partition: 0, Offset: 9, Value: TxnValue(0, 3, 1)})
		}, counts{dup: 1}},
		{"moved: a record in another partition", func(h *TxnHistory, _ []Txn) {
			h.Txns[1].Partitions = []int32{1, 0} // its record 1 was read in partition 2
		}, counts{moved: 1}},
		{"reordered: a later transaction before an earlier one", func(h *TxnHistory, visible []Txn) {
			visible[0], visible[2] = visible[2], visible[0] // producer 0's 3 before its 1
			h.Read = txnLog(visible...)
		}, counts{reordered: 2}},
		{"reordered: records of one transaction swapped in their partition", func(h *TxnHistory, _ []Txn) {
			for i := range h.Read { // producer 0's transaction 1 sent records 0 and 2 to partition 0
				switch h.Read[i].Value {
				case TxnValue(0, 1, 0):
					h.Read[i].Value = TxnValue(0, 1, 2)
				case TxnValue(0, 1, 2):
					h.Read[i].Value = TxnValue(0, 1, 0)
				}
			}
		}, counts{reordered: 1}},
		{"conflicting: one offset, two values", func(h *TxnHistory, _ []Txn) {
			h.Read = append(h.Read, Record{Topic: "t", Partition: 0, Offset: 0, Value: TxnValue(1, 9, 0)})
		}, counts{conflicting: 1}},
		{"foreign: a value of no transaction", func(h *TxnHistory, _ []Txn) {
			h.Read = append(h.Read, Record{Topic: "t", Partition: 1, Offset: 9, Value: TxnValue(2, 1, 0)})
		}, counts{foreign: 1}},
		{"foreign: an index past the transaction's records", func(h *TxnHistory, _ []Txn) {
			h.Read = append(h.Read, Record{Topic: "t", Partition: 1, Offset: 9, Value: TxnValue(0, 1, 3)})
		}, counts{foreign: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, visible := cleanTxns()
			tc.change(&h, visible)
			r := CheckTxn(h)
			got := counts{r.Lost, r.AbortedVisible, r.Partial, r.Duplicated, r.Moved, r.Reordered, r.Conflicting, r.Foreign}
			if got != tc.want || r.OK() {
				t.Fatalf("got %+v ok %v, want %+v and a failure\n%s", got, r.OK(), tc.want, r)
			}
			if !strings.HasPrefix(r.String(), "txn checker FAIL") || len(r.Details) == 0 {
				t.Fatalf("a failure without its detail: %s", r)
			}
		})
	}
}

func dropValue(read []Record, v string) []Record {
	var out []Record
	for _, r := range read {
		if r.Value != v {
			out = append(out, r)
		}
	}
	return out
}

func TestTxnValueRoundTrip(t *testing.T) {
	p, s, i, ok := ParseTxnValue(TxnValue(3, 123456, 7))
	if !ok || p != 3 || s != 123456 || i != 7 {
		t.Fatalf("ParseTxnValue(TxnValue(3, 123456, 7)) = %d %d %d %v", p, s, i, ok)
	}
	for _, bad := range []string{"", "t", "t1-2", "p1-2-3", "t-1-2", "t1--2", "t1-2-x", "t1-2-3-4", Value(1, 2)} {
		if _, _, _, ok := ParseTxnValue(bad); ok {
			t.Errorf("ParseTxnValue(%q) ok", bad)
		}
	}
}
