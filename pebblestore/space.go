package pebblestore

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/rs/zerolog"
)

// ErrStorageFull marks the refusal of new data while the filesystem of the
// data directory is low on free space (SpaceGuard). Nothing was written.
// A store failure (errors.Is(ErrStorageFull, ErrStorage)) of class
// StorageFull.
var ErrStorageFull = StorageSentinel("pebblestore: storage full")

// SpaceReading is one measurement of the filesystem holding the data
// directory.
type SpaceReading struct {
	// Free is the number of bytes the broker may still write (statfs
	// f_bavail: blocks reserved for root do not count).
	Free int64
	// Total is the size of the filesystem in bytes.
	Total int64
}

// SpaceProbe measures the filesystem that holds dir.
type SpaceProbe func(dir string) (SpaceReading, error)

// StatfsProbe measures dir's filesystem with statfs(2). One call costs
// about a microsecond and touches no disk.
func StatfsProbe(dir string) (SpaceReading, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return SpaceReading{}, fmt.Errorf("pebblestore: statfs %s: %w", dir, err)
	}
	bsize := int64(st.Bsize) // int64 on Linux, uint32 on Darwin
	return SpaceReading{Free: int64(st.Bavail) * bsize, Total: int64(st.Blocks) * bsize}, nil
}

// DefaultProbeEveryBytes is how much new data SpaceGuard.Reserve lets
// through between two inline probes.
const DefaultProbeEveryBytes = 16 << 20

// SpaceGuardConfig configures a SpaceGuard.
type SpaceGuardConfig struct {
	// Dir is the data directory; it names the filesystem to measure.
	Dir string
	// Min is the free space, in bytes, below which new data is refused.
	// 0 never refuses (free space is still measured and reported).
	Min int64
	// Probe measures the filesystem; nil measures nothing and never refuses.
	Probe SpaceProbe
	// ProbeEveryBytes: Reserve measures again, inline, once this many bytes
	// were reserved since the last measurement (default
	// DefaultProbeEveryBytes), so a burst of large writes cannot run far
	// past Min between two periodic probes.
	ProbeEveryBytes int64
	// Logger receives the transitions (low, recovered) and probe failures.
	Logger zerolog.Logger
}

// SpaceGuard keeps the data directory's filesystem from filling up. Pebble
// cannot survive a full disk: a failed WAL write panics in its commit path,
// and a failed flush fails every later commit. So the broker refuses new
// data (produce, queue sends, dead-letter and redrive moves, event appends)
// while free space is below Min, and keeps accepting what frees space or is
// small and needed to make progress (deletes, acks, offset commits,
// transaction markers): the space left below Min is the headroom Pebble
// needs for flushes and compactions and those small writes.
//
// State: Low turns true when a probe finds less than Min free, and false
// only when a probe finds at least Resume() = Min + Min/4 free
// (hysteresis: the state does not flap while Pebble's flushes and
// compactions move free space up and down by a memtable or so). Probes
// come from a periodic task (retention.SpaceTask) and inline from Reserve
// after every ProbeEveryBytes of new data.
//
// Every method is safe for concurrent use; the flag and the last reading
// are atomics, read without a lock. mu serializes probes (a leaf lock,
// never held while waiting for anything but statfs).
type SpaceGuard struct {
	cfg    SpaceGuardConfig
	log    zerolog.Logger
	every  int64
	resume int64

	low        atomic.Bool
	measured   atomic.Bool
	free       atomic.Int64
	total      atomic.Int64
	sinceProbe atomic.Int64 // bytes reserved since the last probe
	refused    atomic.Int64

	mu struct {
		sync.Mutex
		failing bool // the last probe failed (logged once until it works again)
	}
}

// NewSpaceGuard returns a guard that has measured nothing yet (not low).
func NewSpaceGuard(cfg SpaceGuardConfig) *SpaceGuard {
	if cfg.ProbeEveryBytes <= 0 {
		cfg.ProbeEveryBytes = DefaultProbeEveryBytes
	}
	if cfg.Min < 0 {
		cfg.Min = 0
	}
	return &SpaceGuard{
		cfg:    cfg,
		log:    cfg.Logger.With().Str("component", "disk").Logger(),
		every:  cfg.ProbeEveryBytes,
		resume: cfg.Min + cfg.Min/4,
	}
}

// enabled reports whether the guard can ever refuse.
func (g *SpaceGuard) enabled() bool { return g != nil && g.cfg.Probe != nil && g.cfg.Min > 0 }

// Probe measures the filesystem now and updates the state. A failed
// measurement keeps the previous state and is logged once until a
// measurement works again.
func (g *SpaceGuard) Probe() error {
	if g == nil || g.cfg.Probe == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.probeLocked()
}

// probeLocked is Probe. REQUIRES: g.mu held.
func (g *SpaceGuard) probeLocked() error {
	r, err := g.cfg.Probe(g.cfg.Dir)
	g.sinceProbe.Store(0)
	if err != nil {
		if !g.mu.failing {
			g.mu.failing = true
			g.log.Warn().Err(err).Str("dir", g.cfg.Dir).Msg("cannot measure the free disk space of the data directory; keeping the last state")
		}
		return err
	}
	if g.mu.failing {
		g.mu.failing = false
		g.log.Info().Str("dir", g.cfg.Dir).Msg("measuring the free disk space of the data directory works again")
	}
	g.free.Store(r.Free)
	g.total.Store(r.Total)
	g.measured.Store(true)
	if g.cfg.Min <= 0 {
		return nil
	}
	switch low := g.low.Load(); {
	case !low && r.Free < g.cfg.Min:
		g.low.Store(true)
		g.log.Warn().Str("dir", g.cfg.Dir).Int64("free_bytes", r.Free).Int64("min_bytes", g.cfg.Min).Int64("resume_bytes", g.resume).
			Msg("free disk space of the data directory is below disk-free-min: refusing new data (produce, queue sends, event appends, dead-letter and redrive moves) until it is back above resume_bytes; reads, acks, offset commits and deletions go on")
	case low && r.Free >= g.resume:
		g.low.Store(false)
		g.log.Info().Str("dir", g.cfg.Dir).Int64("free_bytes", r.Free).Int64("min_bytes", g.cfg.Min).Int64("resume_bytes", g.resume).
			Msg("free disk space of the data directory is back above the resume level: accepting new data again")
	}
	return nil
}

// Low reports whether new data is refused.
func (g *SpaceGuard) Low() bool { return g.enabled() && g.low.Load() }

// Check returns nil, or a *SpaceError (errors.Is ErrStorageFull) while the
// guard is low. It counts a refusal.
func (g *SpaceGuard) Check() error {
	if !g.Low() {
		return nil
	}
	g.refused.Add(1)
	return g.spaceError()
}

// Reserve is Check for a write of n bytes of new data: it adds n to the
// bytes seen since the last probe and, past ProbeEveryBytes, measures
// again before deciding (unless another caller is measuring right now).
func (g *SpaceGuard) Reserve(n int) error {
	if !g.enabled() {
		return nil
	}
	if g.sinceProbe.Add(int64(n)) >= g.every && g.mu.TryLock() {
		_ = g.probeLocked()
		g.mu.Unlock()
	}
	return g.Check()
}

func (g *SpaceGuard) spaceError() *SpaceError {
	return &SpaceError{Dir: g.cfg.Dir, Free: g.free.Load(), Min: g.cfg.Min, Resume: g.resume}
}

// SpaceStats is a snapshot of the guard, for metrics and stats.
type SpaceStats struct {
	// Measured is false until a probe succeeded; Free and Total are then 0.
	Measured    bool
	Free, Total int64
	// Min is the configured limit (0: never refuses); Resume the free
	// space at which a low guard accepts new data again.
	Min, Resume int64
	Low         bool
	// Refused counts the writes refused since start.
	Refused int64
}

// Stats returns the guard's state. A nil guard reports nothing measured.
func (g *SpaceGuard) Stats() SpaceStats {
	if g == nil {
		return SpaceStats{}
	}
	return SpaceStats{
		Measured: g.measured.Load(),
		Free:     g.free.Load(),
		Total:    g.total.Load(),
		Min:      g.cfg.Min,
		Resume:   g.resume,
		Low:      g.Low(),
		Refused:  g.refused.Load(),
	}
}

// SpaceError is the refusal of a write of new data while the disk is low.
// errors.Is(err, ErrStorageFull) holds. Its text is meant for clients
// (Kafka error messages, the native API's storage_full).
type SpaceError struct {
	Dir string
	// Free is the free space at the last probe; Min the limit; Resume the
	// free space at which writes are accepted again.
	Free, Min, Resume int64
}

func (e *SpaceError) Error() string {
	return fmt.Sprintf("the broker's disk is almost full: %s free, the limit (disk-free-min) is %s; new data is refused until %s are free (delete topics, queues, event stores or records to make room)",
		formatBytes(e.Free), formatBytes(e.Min), formatBytes(e.Resume))
}

// Is makes errors.Is(err, ErrStorageFull) and errors.Is(err, ErrStorage)
// true.
func (e *SpaceError) Is(target error) bool { return target == ErrStorageFull || target == ErrStorage }

// formatBytes writes n for people: "512 B", "3.5 MiB", "1.0 GiB".
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit && n > -unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	value, exp := float64(n)/unit, 0
	for value >= unit || value <= -unit {
		if exp == 4 {
			break
		}
		value /= unit
		exp++
	}
	return strconv.FormatFloat(value, 'f', 1, 64) + " " + "KMGTP"[exp:exp+1] + "iB"
}
