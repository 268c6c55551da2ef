package checker

import (
	"strings"
	"testing"
)

func rec(partition int32, offset int64, producer int, seq int64) Record {
	return Record{Topic: "t", Partition: partition, Offset: offset, Value: Value(producer, seq)}
}

// clean: two producers interleaved over two partitions, everything
// acknowledged and read back in order (reads repeated and shuffled).
func clean() History {
	acked := []Record{
		rec(0, 0, 0, 1), rec(0, 1, 1, 1), rec(0, 2, 0, 2), rec(1, 0, 1, 2), rec(1, 1, 0, 3), rec(1, 2, 1, 3),
	}
	read := []Record{acked[5], acked[3], acked[4], acked[0], acked[2], acked[1], acked[0]}
	return History{Idempotent: true, Producers: 2, Acked: acked, Read: read}
}

func TestCheckClean(t *testing.T) {
	r := Check(clean())
	if !r.OK() || r.Acked != 6 || r.Read != 6 || r.Unacknowledged != 0 || len(r.Details) != 0 {
		t.Fatalf("a clean history: %s", r)
	}
	if !strings.HasPrefix(r.String(), "checker PASS") {
		t.Fatalf("String: %s", r)
	}
}

// TestCheckDetectsEachFailure: each hand-made history has exactly one
// defect, and only its counter moves.
func TestCheckDetectsEachFailure(t *testing.T) {
	type counts struct{ lost, moved, dup, reordered, conflicting, unacked, foreign int }
	cases := []struct {
		name   string
		change func(h *History)
		want   counts
		ok     bool
	}{
		{"lost: an acknowledged record missing", func(h *History) {
			h.Read = h.Read[1:] // drops acked[5] (1@2); the rest stays
		}, counts{lost: 1}, false},
		{"moved: an acknowledged record at another offset", func(h *History) {
			h.Acked[5].Offset = 7
		}, counts{moved: 1}, false},
		{"duplicated under idempotence", func(h *History) {
			h.Read = append(h.Read, rec(1, 3, 1, 3))
		}, counts{dup: 1}, false},
		{"reordered: a producer's later send before its earlier one", func(h *History) {
			// partition 0 holds p0 seq 2 at offset 0 and seq 1 at offset 2
			h.Acked[0].Value, h.Acked[2].Value = h.Acked[2].Value, h.Acked[0].Value
			h.Read = append([]Record(nil), h.Acked...)
		}, counts{reordered: 1}, false},
		{"conflicting: one offset read with two values", func(h *History) {
			h.Read = append(h.Read, Record{Topic: "t", Partition: 0, Offset: 0, Value: Value(1, 9)})
		}, counts{conflicting: 1}, false},
		{"unacknowledged read: allowed", func(h *History) {
			h.Read = append(h.Read, rec(0, 3, 0, 4))
		}, counts{unacked: 1}, true},
		{"foreign: a value no producer wrote", func(h *History) {
			h.Read = append(h.Read, Record{Topic: "t", Partition: 0, Offset: 3, Value: "hello"})
		}, counts{foreign: 1}, false},
		{"foreign: a producer of another run", func(h *History) {
			h.Read = append(h.Read, rec(0, 3, 7, 1))
		}, counts{foreign: 1}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := clean()
			tc.change(&h)
			r := Check(h)
			got := counts{r.Lost, r.Moved, r.Duplicated, r.Reordered, r.Conflicting, r.Unacknowledged, r.Foreign}
			if got != tc.want || r.OK() != tc.ok {
				t.Fatalf("got %+v ok %v, want %+v ok %v\n%s", got, r.OK(), tc.want, tc.ok, r)
			}
			if !tc.ok && (!strings.HasPrefix(r.String(), "checker FAIL") || len(r.Details) == 0) {
				t.Fatalf("a failure without its detail: %s", r)
			}
		})
	}
}

// TestCheckDuplicatesWithoutIdempotence: a retried send written twice is
// counted but allowed without idempotence, and its second copy (later in
// the log, after the producer's next sends) is not a reorder.
func TestCheckDuplicatesWithoutIdempotence(t *testing.T) {
	h := clean()
	h.Idempotent = false
	h.Read = append(h.Read, rec(0, 3, 0, 1))
	r := Check(h)
	if !r.OK() || r.Duplicated != 1 || r.Reordered != 0 {
		t.Fatalf("%s", r)
	}
	h.Idempotent = true
	if r := Check(h); r.OK() || r.Duplicated != 1 {
		t.Fatalf("the same history under idempotence: %s", r)
	}
}

func TestValueRoundTrip(t *testing.T) {
	p, s, ok := ParseValue(Value(12, 3456))
	if !ok || p != 12 || s != 3456 {
		t.Fatalf("ParseValue(Value(12, 3456)) = %d %d %v", p, s, ok)
	}
	for _, bad := range []string{"", "p", "p1", "x1-2", "p-1", "p1-", "p1-x", "p-1-2"} {
		if _, _, ok := ParseValue(bad); ok {
			t.Errorf("ParseValue(%q) ok", bad)
		}
	}
}
