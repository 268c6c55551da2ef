package topics

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

func TestLogStats(t *testing.T) {
	store, m := openTestManager(t, vfs.NewMem(), "data")
	defer store.Close()
	a, err := m.CreateTopic("a", 2, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.CreateTopic("b", 1, nil, false); err != nil {
		t.Fatal(err)
	}
	p0, _ := a.Partition(0)
	p1, _ := a.Partition(1)
	appendOne(t, m, p0, testBatch(t, "x", 3, -1, -1, -1, 1000))
	appendOne(t, m, p1, testBatch(t, "y", 2, -1, -1, -1, 1000))
	if got, want := m.LogStats(), (LogStats{Topics: 2, Partitions: 3, Messages: 5}); got != want {
		t.Fatalf("LogStats() = %+v, want %+v", got, want)
	}
}
