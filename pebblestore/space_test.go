package pebblestore

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rs/zerolog"
)

// fakeDisk is an injectable SpaceProbe: free space is whatever the test
// sets, and every call is counted.
type fakeDisk struct {
	free  atomic.Int64
	fail  atomic.Bool
	calls atomic.Int64
}

func (d *fakeDisk) probe(string) (SpaceReading, error) {
	d.calls.Add(1)
	if d.fail.Load() {
		return SpaceReading{}, errors.New("statfs: input/output error")
	}
	return SpaceReading{Free: d.free.Load(), Total: 100 << 30}, nil
}

// syncBuffer is a log sink safe for the race detector.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestSpaceGuardHysteresis(t *testing.T) {
	disk := &fakeDisk{}
	disk.free.Store(10 << 30)
	var logs syncBuffer
	g := NewSpaceGuard(SpaceGuardConfig{Dir: "/data", Min: 1 << 30, Probe: disk.probe, Logger: zerolog.New(&logs)})
	if g.Low() || g.Check() != nil {
		t.Fatal("a guard that measured nothing is low")
	}
	steps := []struct {
		free int64
		low  bool
	}{
		{10 << 30, false},
		{1 << 30, false},            // exactly the limit: still fine
		{1<<30 - 1, true},           // below: low
		{1<<30 + 100<<20, true},     // above the limit, below limit + 25%: stays low
		{1<<30 + 256<<20 - 1, true}, // one byte short of the resume level
		{1<<30 + 256<<20, false},    // resume level reached
		{1<<30 + 1, false},          // between limit and resume, coming from above: fine
		{0, true},                   // full
		{2 << 30, false},            // freed
	}
	for i, s := range steps {
		disk.free.Store(s.free)
		if err := g.Probe(); err != nil {
			t.Fatal(err)
		}
		if g.Low() != s.low {
			t.Fatalf("step %d: free %d: low %v, want %v", i, s.free, g.Low(), s.low)
		}
		err := g.Check()
		if (err != nil) != s.low {
			t.Fatalf("step %d: Check = %v with low %v", i, err, s.low)
		}
		if err != nil && !errors.Is(err, ErrStorageFull) {
			t.Fatalf("step %d: %v is not ErrStorageFull", i, err)
		}
	}
	st := g.Stats()
	if !st.Measured || st.Free != 2<<30 || st.Min != 1<<30 || st.Resume != 1<<30+256<<20 || st.Low || st.Refused != 4 {
		t.Fatalf("stats %+v", st)
	}
	// Each transition is logged once: low twice, recovered twice.
	out := logs.String()
	if n := strings.Count(out, "below disk-free-min"); n != 2 {
		t.Fatalf("%d low transitions logged, want 2:\n%s", n, out)
	}
	if n := strings.Count(out, "accepting new data again"); n != 2 {
		t.Fatalf("%d recoveries logged, want 2:\n%s", n, out)
	}
	if !strings.Contains(out, `"level":"warn"`) || !strings.Contains(out, `"free_bytes":1073741823`) {
		t.Fatalf("the low transition is not a warning with the free space:\n%s", out)
	}
}

func TestSpaceErrorText(t *testing.T) {
	err := error(&SpaceError{Dir: "/data", Free: 100 << 20, Min: 512 << 20, Resume: 640 << 20})
	want := "the broker's disk is almost full: 100.0 MiB free, the limit (disk-free-min) is 512.0 MiB; new data is refused until 640.0 MiB are free (delete topics, queues, event stores or records to make room)"
	if err.Error() != want {
		t.Fatalf("got  %s\nwant %s", err, want)
	}
	wrapped := errors.Join(errors.New("queue orders"), err)
	var se *SpaceError
	if !errors.Is(wrapped, ErrStorageFull) || !errors.As(wrapped, &se) || se.Free != 100<<20 {
		t.Fatalf("wrapped error loses its class: %v", wrapped)
	}
	for n, s := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 5 << 30: "5.0 GiB", 3 << 50: "3.0 PiB", 5000 << 50: "5000.0 PiB"} {
		if got := formatBytes(n); got != s {
			t.Errorf("formatBytes(%d) = %q, want %q", n, got, s)
		}
	}
}

// TestSpaceGuardReserveProbesInline pins the inline re-check: a burst of
// large writes between two periodic probes is measured every
// ProbeEveryBytes, and the write that finds the disk low is refused.
func TestSpaceGuardReserveProbesInline(t *testing.T) {
	disk := &fakeDisk{}
	disk.free.Store(10 << 20)
	g := NewSpaceGuard(SpaceGuardConfig{Min: 1 << 20, Probe: disk.probe, ProbeEveryBytes: 1000, Logger: zerolog.Nop()})
	if err := g.Probe(); err != nil {
		t.Fatal(err)
	}
	calls := disk.calls.Load()
	for range 9 {
		if err := g.Reserve(100); err != nil {
			t.Fatal(err)
		}
	}
	if disk.calls.Load() != calls {
		t.Fatalf("probed before ProbeEveryBytes were reserved")
	}
	disk.free.Store(1000) // the disk filled up meanwhile
	if err := g.Reserve(100); !errors.Is(err, ErrStorageFull) {
		t.Fatalf("the write that crossed ProbeEveryBytes was not refused after the inline probe: %v", err)
	}
	if disk.calls.Load() != calls+1 {
		t.Fatalf("%d probes, want one inline probe", disk.calls.Load()-calls)
	}
	// While low, refused writes do not probe on every call.
	for range 100 {
		_ = g.Reserve(100)
	}
	if disk.calls.Load() > calls+1+10 {
		t.Fatalf("%d probes for 10 KB of refused writes", disk.calls.Load()-calls)
	}
	disk.free.Store(10 << 20)
	if err := g.Probe(); err != nil || g.Low() {
		t.Fatalf("after space returned: low %v, %v", g.Low(), err)
	}
	if err := g.Reserve(100); err != nil {
		t.Fatal(err)
	}
}

func TestSpaceGuardProbeFailureKeepsState(t *testing.T) {
	disk := &fakeDisk{}
	var logs syncBuffer
	g := NewSpaceGuard(SpaceGuardConfig{Min: 1 << 20, Probe: disk.probe, Logger: zerolog.New(&logs)})
	disk.free.Store(10)
	_ = g.Probe()
	disk.fail.Store(true)
	for range 3 {
		if err := g.Probe(); err == nil {
			t.Fatal("a failing probe reported no error")
		}
	}
	if !g.Low() {
		t.Fatal("a failing probe cleared the low state")
	}
	if n := strings.Count(logs.String(), "cannot measure"); n != 1 {
		t.Fatalf("probe failure logged %d times, want once", n)
	}
	disk.fail.Store(false)
	disk.free.Store(10 << 20)
	if err := g.Probe(); err != nil || g.Low() {
		t.Fatalf("low %v, %v", g.Low(), err)
	}
	if !strings.Contains(logs.String(), "works again") {
		t.Fatalf("recovery of the probe not logged:\n%s", logs.String())
	}
}

func TestSpaceGuardDisabled(t *testing.T) {
	disk := &fakeDisk{}
	g := NewSpaceGuard(SpaceGuardConfig{Min: 0, Probe: disk.probe, Logger: zerolog.Nop()})
	if err := g.Probe(); err != nil {
		t.Fatal(err)
	}
	if g.Low() || g.Check() != nil || g.Reserve(1<<30) != nil {
		t.Fatal("a guard with Min 0 refused")
	}
	if st := g.Stats(); !st.Measured || st.Free != 0 {
		t.Fatalf("Min 0 still measures: %+v", st)
	}
	var nilGuard *SpaceGuard
	if nilGuard.Low() || nilGuard.Check() != nil || nilGuard.Reserve(1) != nil || nilGuard.Probe() != nil {
		t.Fatal("a nil guard refused")
	}
}

// TestOpenMeasuresFreeSpace: a store opened on a disk below the limit is
// low before its first write, and the injected probe replaces statfs.
func TestOpenMeasuresFreeSpace(t *testing.T) {
	disk := &fakeDisk{}
	disk.free.Store(1 << 20)
	s, err := Open("data", Options{FS: vfs.NewMem(), Logger: zerolog.Nop(), FreeSpaceMin: 64 << 20, FreeSpaceProbe: disk.probe})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.Space().Low() {
		t.Fatal("opened below the limit, not low")
	}
	// Without a probe, an in-memory store measures nothing.
	s2, err := Open("data2", Options{FS: vfs.NewMem(), Logger: zerolog.Nop(), FreeSpaceMin: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if s2.Space().Low() || s2.Space().Stats().Measured {
		t.Fatal("an in-memory store without a probe measured something")
	}
	// On a real directory statfs answers.
	s3, err := Open(t.TempDir(), Options{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
	if st := s3.Space().Stats(); !st.Measured || st.Total <= 0 || st.Free <= 0 || st.Low {
		t.Fatalf("statfs stats %+v", st)
	}
}
