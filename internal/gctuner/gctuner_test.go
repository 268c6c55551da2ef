package gctuner

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func TestPercentFor(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live, headroom uint64
		want           int
	}{
		{live: 40 * mib, headroom: 256 * mib, want: 640},
		{live: 256 * mib, headroom: 256 * mib, want: 100},
		{live: 1024 * mib, headroom: 256 * mib, want: 100}, // never below Go's default
		{live: 1 * mib, headroom: 256 * mib, want: 6400},   // the minimum goal 4 MiB*64 stays within the headroom
		{live: 0, headroom: 256 * mib, want: 6400},
		{live: 50 * mib, headroom: 64 * mib, want: 128},
		{live: 1 * mib, headroom: 64 * mib, want: 1600},
		{live: 1 * mib, headroom: 2 * mib, want: 100},  // a headroom below 4 MiB: Go's default
		{live: 1, headroom: 1 << 62, want: maxPercent}, // no overflow
	} {
		if got := PercentFor(c.live, c.headroom); got != c.want {
			t.Errorf("PercentFor(%d, %d) = %d, want %d", c.live, c.headroom, got, c.want)
		}
	}
}

// TestTunerFollowsCollections: the tuner sets GOGC from the live heap after
// each collection, and nothing after Stop.
func TestTunerFollowsCollections(t *testing.T) {
	set := make(chan int, 100)
	tu := newTuner(1<<40, func(p int) int { set <- p; return 100 })
	tu.arm()
	runtime.GC()
	select {
	case p := <-set:
		if p != maxPercent {
			t.Fatalf("GOGC set to %d with a 1 TiB headroom, want %d", p, maxPercent)
		}
	case <-time.After(time.Minute):
		t.Fatal("no GOGC set within a minute of a collection: the finalizer did not run")
	}
	// Re-armed: the next collection sets it again.
	runtime.GC()
	select {
	case <-set:
	case <-time.After(time.Minute):
		t.Fatal("the second collection set no GOGC: the tuner did not re-arm")
	}
	tu.Stop()
	tu.Stop() // idempotent
	for len(set) > 0 {
		<-set
	}
	tu.tune()
	if len(set) != 0 {
		t.Fatalf("tune after Stop set GOGC %d", <-set)
	}
	var nilTuner *Tuner
	nilTuner.Stop()
}

// TestStartHonoursGOGC: an operator's GOGC wins; a headroom of 0 is off.
func TestStartHonoursGOGC(t *testing.T) {
	t.Setenv("GOGC", "150")
	if tu, ok := Start(256 << 20); ok || tu != nil {
		t.Fatal("Start tuned although GOGC is set")
	}
}

func TestStartSetsGOGC(t *testing.T) {
	t.Setenv("GOGC", "") // empty: unset for Start
	if _, ok := Start(0); ok {
		t.Fatal("Start tuned with a headroom of 0")
	}
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	tu, ok := Start(1 << 40)
	if !ok {
		t.Fatal("Start did not tune")
	}
	defer tu.Stop()
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	deadline := time.Now().Add(time.Minute)
	for {
		runtime.GC() // the tuner sets GOGC after a collection (its finalizer)
		metrics.Read(s)
		if got := s[0].Value.Uint64(); got == maxPercent {
			return
		} else if time.Now().After(deadline) {
			t.Fatalf("GOGC a minute after Start with a 1 TiB headroom = %d, want %d", got, maxPercent)
		}
		time.Sleep(time.Millisecond)
	}
}
