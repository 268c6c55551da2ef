package main

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TestParseTopicPartitions pins the --topic syntax of `broker groups
// reset-offsets`: a topic alone means all its partitions (nil), topic:p,q
// names partitions, and a bad value is a usage error.
func TestParseTopicPartitions(t *testing.T) {
	got, err := parseTopicPartitions([]string{"a", "b:0, 2", "b:5"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]int32{"a": nil, "b": {0, 2, 5}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for _, bad := range []string{":1", "a:x", "a:-1"} {
		if _, err := parseTopicPartitions([]string{bad}); err == nil {
			t.Errorf("--topic %q accepted", bad)
		}
	}
}

// TestPlanReset pins how reset-offsets picks each partition's new offset
// from its start and end offsets: --to-offset is clamped into the log,
// --to-datetime past the last record goes to the end, a missing partition
// or a topic without partitions fails the whole plan.
func TestPlanReset(t *testing.T) {
	listed := func(offsets map[int32]int64) map[int32]kadm.ListedOffset {
		out := map[int32]kadm.ListedOffset{}
		for p, o := range offsets {
			out[p] = kadm.ListedOffset{Topic: "t", Partition: p, Offset: o}
		}
		return out
	}
	o := resetOffsets{
		topics:  []string{"t"},
		wanted:  map[string][]int32{"t": nil},
		current: kadm.OffsetResponses{"t": {0: {Offset: kadm.Offset{Topic: "t", Partition: 0, At: 7}}}},
		starts:  kadm.ListedOffsets{"t": listed(map[int32]int64{0: 5, 1: 0})},
		ends:    kadm.ListedOffsets{"t": listed(map[int32]int64{0: 20, 1: 3})},
		byTime:  kadm.ListedOffsets{"t": listed(map[int32]int64{0: 9, 1: -1})},
	}
	news := func(rows []resetRow) []int64 {
		var out []int64
		for _, r := range rows {
			out = append(out, r.New)
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		target resetTarget
		want   []int64
	}{
		{"earliest", resetTarget{earliest: true}, []int64{5, 0}},
		{"latest", resetTarget{latest: true}, []int64{20, 3}},
		{"offset clamped", resetTarget{toOffset: true, offset: 1}, []int64{5, 1}},
		{"offset past the end", resetTarget{toOffset: true, offset: 100}, []int64{20, 3}},
		{"time", resetTarget{}, []int64{9, 3}},
	} {
		rows, commit, err := planReset(o, tc.target)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := news(rows); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: new offsets %v, want %v", tc.name, got, tc.want)
		}
		if rows[0].Current != 7 || rows[1].Current != -1 {
			t.Errorf("%s: current offsets %d, %d; want 7, -1", tc.name, rows[0].Current, rows[1].Current)
		}
		if c, ok := commit.Lookup("t", 1); !ok || c.At != tc.want[1] {
			t.Errorf("%s: commit of t/1 is %+v, want at %d", tc.name, c, tc.want[1])
		}
	}

	missing := o
	missing.wanted = map[string][]int32{"t": {0, 4}}
	if _, _, err := planReset(missing, resetTarget{latest: true}); err == nil || !strings.Contains(err.Error(), "t/4: no such partition; nothing was reset") {
		t.Errorf("a missing partition: %v", err)
	}
	unknown := o
	unknown.topics, unknown.wanted = []string{"nope"}, map[string][]int32{"nope": nil}
	var exit *exitError
	if _, _, err := planReset(unknown, resetTarget{latest: true}); !errors.As(err, &exit) || exit.code != exitNotFound {
		t.Errorf("an unknown topic: %v, want exit code %d", err, exitNotFound)
	}
}
