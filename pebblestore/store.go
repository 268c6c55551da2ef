// Package pebblestore owns the broker's single Pebble database: the data
// directory (format marker and lock), the key layout (keys.go), and thin
// wrappers over batches and iterators. It is the only package that imports
// Pebble; it knows bytes, keys and bounds, nothing of Kafka.
package pebblestore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rs/zerolog"
)

var (
	// ErrNotFound is returned by Get when a key has no value.
	ErrNotFound = errors.New("pebblestore: not found")
	// ErrCorruption marks stored data that fails its own checks; a store
	// failure (errors.Is(ErrCorruption, ErrStorage)) of class
	// StorageCorruption.
	ErrCorruption = StorageSentinel("pebblestore: corruption")
	// ErrClosed is returned after Close; a store failure of class
	// StorageClosed.
	ErrClosed = StorageSentinel("pebblestore: store is closed")
)

// Options configure a Store. The zero value is usable: durable writes and
// defaults tuned for a log-shaped write load.
type Options struct {
	// Logger receives Pebble's events (flushes, compactions, stalls).
	Logger zerolog.Logger
	// MemTableSize is the size of one memtable. Large memtables let many
	// concurrent synced writers share flushes; 64 MiB by default.
	MemTableSize uint64
	// CacheSize is the block cache size; 256 MiB by default.
	CacheSize int64
	// NoSync makes Commit skip the fsync. Acknowledged writes may then be
	// lost on a machine crash. Only for the explicit relaxed mode.
	NoSync bool
	// NoValueSeparation keeps large values inline in sstables (for
	// comparisons; the default separates them into blob files).
	NoValueSeparation bool
	// FS replaces the real filesystem (tests use vfs.NewCrashableMem). When
	// set, no directory lock is taken and the marker lives on FS.
	FS vfs.FS
	// FreeSpaceMin is the free space of the data directory's filesystem,
	// in bytes, below which Space() refuses new data (SpaceGuard). 0, the
	// default, never refuses.
	FreeSpaceMin int64
	// FreeSpaceProbe measures the filesystem; nil means StatfsProbe, or,
	// when FS is set, no measurement at all (tests inject a probe).
	FreeSpaceProbe SpaceProbe
	// BlobRewriteMinAge is how old a blob file must be before Pebble may
	// rewrite it to drop the values deleted from it; 1 minute by default.
	// Values of topics written in the same memtable flush share blob
	// files, so deleting one topic frees its bytes only when such a file
	// is rewritten (see blobGarbageRatio).
	BlobRewriteMinAge time.Duration
}

// Blob garbage ratios: Pebble rewrites blob files once the share of their
// bytes that no key refers to any more exceeds the ratio. Normally 20%
// (rewriting is write amplification); while the free-space guard refuses
// new data, any garbage, so that deleting one of several topics written
// side by side gives its space back (after BlobRewriteMinAge) instead of
// waiting for a fifth of the store to be garbage.
const (
	blobGarbageRatio    = 0.2
	blobGarbageRatioLow = 0
)

// Store is the broker's Pebble database plus its data directory.
type Store struct {
	db       *pebble.DB
	dir      string
	lockFile *os.File
	writeOpt *pebble.WriteOptions
	// unsynced counts the batches applied (visible to readers) and not yet
	// durable: from before Apply until Wait's sync returned (SyncBarrier).
	unsynced atomic.Int64
	closed   atomic.Bool
	space    *SpaceGuard
	reclaim  *reclaimQueue

	// closeCtx is canceled by Close, so that a running compaction stops
	// waiting; compactMu is held (read) around every db.Compact and the
	// metrics polls of WaitObsoleteFiles, and (write) by Close: Pebble
	// panics on a Compact after Close.
	closeCtx    context.Context
	cancelClose context.CancelFunc
	compactMu   sync.RWMutex
	stalls      *stallCounter // write stalls, for Collector
}

// Open opens (creating on first boot) the data directory dir. It refuses to
// open a directory that another process holds, a directory whose format
// marker names another format, and a non-empty directory without a marker.
// It never deletes or rewrites existing data.
func Open(dir string, opts Options) (*Store, error) {
	fs, lockFile, err := prepareDataDir(dir, opts.FS)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Store, error) {
		if lockFile != nil {
			_ = lockFile.Close()
		}
		return nil, err
	}
	if err := checkMarker(fs, dir); err != nil {
		return fail(err)
	}

	cacheSize := opts.CacheSize
	if cacheSize == 0 {
		cacheSize = 256 << 20
	}
	cache := pebble.NewCache(cacheSize)
	defer cache.Unref()
	var guard atomic.Pointer[SpaceGuard] // set once the store exists
	po, stalls := pebbleOptions(fs, cache, opts, &guard)
	db, err := pebble.Open(filepath.Join(dir, storeSubdir), po)
	if err != nil {
		return fail(fmt.Errorf("pebblestore: cannot open the database in %s: %w", dir, err))
	}
	if err := syncDir(fs, dir); err != nil {
		_ = db.Close()
		return fail(fmt.Errorf("pebblestore: cannot sync data directory %s: %w", dir, err))
	}
	s := &Store{db: db, dir: dir, lockFile: lockFile, writeOpt: pebble.Sync, reclaim: newReclaimQueue(), stalls: stalls}
	s.closeCtx, s.cancelClose = context.WithCancel(context.Background())
	if opts.NoSync {
		s.writeOpt = pebble.NoSync
	}
	if err := s.checkFormatKey(); err != nil {
		_ = db.Close()
		return fail(err)
	}
	probe := opts.FreeSpaceProbe
	if probe == nil && opts.FS == nil {
		probe = StatfsProbe
	}
	s.space = NewSpaceGuard(SpaceGuardConfig{Dir: dir, Min: opts.FreeSpaceMin, Probe: probe, Logger: opts.Logger})
	guard.Store(s.space)
	// Measured before anything is served: a broker started on a full disk
	// refuses new data from its first request.
	_ = s.space.Probe()
	return s, nil
}

// prepareDataDir creates the data directory dir and makes its entry
// durable. On the real filesystem (fs nil) it first refuses foreign or
// newer data (inspectMarker) and locks the directory; it returns the
// filesystem to use and the lock file (nil on another filesystem).
func prepareDataDir(dir string, fs vfs.FS) (vfs.FS, *os.File, error) {
	var lockFile *os.File
	if fs == nil {
		fs = vfs.Default
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, nil, fmt.Errorf("pebblestore: cannot create data directory %s: %w; check the path and its permissions", dir, err)
		}
		// Refuse foreign or newer data before creating anything in it, the
		// lock file included.
		if err := inspectMarker(fs, dir); err != nil {
			return nil, nil, err
		}
		var err error
		lockFile, err = lockDir(dir)
		if err != nil {
			return nil, nil, err
		}
	} else if err := fs.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("pebblestore: cannot create data directory %s: %w", dir, err)
	}
	// Make the directory entries durable: a data directory created just
	// before a power loss must not vanish with the data acknowledged in it.
	if err := syncDir(fs, filepath.Dir(filepath.Clean(dir))); err != nil {
		if lockFile != nil {
			_ = lockFile.Close()
		}
		return nil, nil, fmt.Errorf("pebblestore: cannot sync the parent of %s: %w", dir, err)
	}
	return fs, lockFile, nil
}

// pebbleOptions are the Pebble options of a store on fs with cache. guard
// is the store's free-space guard once it exists: while it is low, blob
// files are rewritten at a lower garbage ratio. It also returns the
// counter of write stalls its event listener feeds.
func pebbleOptions(fs vfs.FS, cache *pebble.Cache, opts Options, guard *atomic.Pointer[SpaceGuard]) (*pebble.Options, *stallCounter) {
	memtable := opts.MemTableSize
	if memtable == 0 {
		memtable = 64 << 20
	}
	po := &pebble.Options{
		FS:                          fs,
		Cache:                       cache,
		FormatMajorVersion:          pebbleFormat,
		MemTableSize:                memtable,
		MemTableStopWritesThreshold: 4,
		L0CompactionThreshold:       4,
		L0StopWritesThreshold:       24,
		LBaseMaxBytes:               256 << 20,
		MaxOpenFiles:                4096,
		BytesPerSync:                1 << 20,
		WALBytesPerSync:             0,
		Logger:                      pebbleLogger{opts.Logger},
	}
	// Few, large files: a flush of one memtable was cut into two dozen
	// 2 MiB sstables and blob files, and flushing became the bottleneck of
	// sustained produce (write stalls at the memtable limit).
	po.TargetFileSizes[0] = 64 << 20
	po.FlushSplitBytes = 256 << 20
	po.EnsureDefaults()
	el := pebble.MakeLoggingEventListener(pebbleLogger{opts.Logger})
	stalls := &stallCounter{}
	stalls.listen(&el)
	po.EventListener = &el
	for i := range po.Levels {
		po.Levels[i].BlockSize = 32 << 10
		// Record batches are stored as producers sent them: usually
		// compressed already, and Kafka does not recompress either.
		// Compressing sstable blocks cost a third of the broker's CPU.
		po.Levels[i].Compression = func() *sstable.CompressionProfile { return sstable.NoCompression }
	}
	// Large values (record batches) go to blob files that compactions do not
	// rewrite, so a log written once is not copied again at every level.
	// Partitions written side by side interleave in every flush, so one
	// partition's sstable refers to many blob files; a low reference depth
	// made compactions rewrite the values (8 partitions: 5.4 -> 3.6 s of
	// broker CPU per GB produced with 200 instead of 10).
	rewriteAge := opts.BlobRewriteMinAge
	if rewriteAge <= 0 {
		rewriteAge = time.Minute
	}
	po.Experimental.ValueSeparationPolicy = func() pebble.ValueSeparationPolicy {
		ratio := blobGarbageRatio
		if g := guard.Load(); g != nil && g.Low() {
			ratio = blobGarbageRatioLow
		}
		return pebble.ValueSeparationPolicy{
			Enabled:               !opts.NoValueSeparation,
			MinimumSize:           1024,
			MaxBlobReferenceDepth: 200,
			RewriteMinimumAge:     rewriteAge,
			TargetGarbageRatio:    ratio,
		}
	}
	po.CompactionConcurrencyRange = func() (int, int) { return 1, 2 }
	return po, stalls
}

// Dir is the data directory.
func (s *Store) Dir() string { return s.dir }

// NudgeCompactions makes Pebble pick compactions again (by flushing the
// memtable), while the free-space guard refuses new data. Pebble picks
// only after a flush or a compaction, and a broker refusing writes may do
// neither for a long time: a blob file holding deleted values that became
// old enough to rewrite (BlobRewriteMinAge) would wait. A no-op while the
// guard accepts writes. retention's space-reclaim task calls it each tick.
func (s *Store) NudgeCompactions() error {
	if !s.space.Low() {
		return nil
	}
	s.compactMu.RLock()
	defer s.compactMu.RUnlock()
	if s.closed.Load() {
		return ErrClosed
	}
	return s.db.Flush()
}

// Space is the free-space guard of the data directory: writers of new
// data call Reserve (or Check) before they add it to a batch.
func (s *Store) Space() *SpaceGuard { return s.space }

// Close flushes nothing extra (every acknowledged write is already in the
// WAL), closes Pebble and releases the directory lock.
func (s *Store) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	s.cancelClose()
	s.compactMu.Lock()
	defer s.compactMu.Unlock()
	err := s.db.Close()
	if s.lockFile != nil {
		_ = s.lockFile.Close()
	}
	return err
}

// Get returns a copy of the value stored at key, or ErrNotFound.
func (s *Store) Get(key []byte) ([]byte, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	v, closer, err := s.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, storageFailure(fmt.Errorf("pebblestore: get %x: %w", key, err))
	}
	out := append([]byte(nil), v...)
	_ = closer.Close()
	return out, nil
}

// Flush flushes memtables to sstables (used by storage admin and tests).
func (s *Store) Flush() error { return storageFailure(s.db.Flush()) }

// Compact compacts the key range [start, end) to reclaim space. It returns
// ErrClosed after (or when interrupted by) Close.
func (s *Store) Compact(start, end []byte) error {
	return s.compact(context.Background(), start, end)
}

// compact is Compact, stopped early when ctx is done.
func (s *Store) compact(ctx context.Context, start, end []byte) error {
	s.compactMu.RLock()
	defer s.compactMu.RUnlock()
	if s.closed.Load() {
		return ErrClosed
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.closeCtx, cancel)
	defer stop()
	err := s.db.Compact(ctx, start, end, true)
	if err != nil && s.closed.Load() {
		return ErrClosed
	}
	return storageFailure(err)
}

// Checkpoint writes a consistent, openable copy of the database to destDir.
func (s *Store) Checkpoint(destDir string) error {
	return storageFailure(s.db.Checkpoint(destDir, pebble.WithFlushedWAL()))
}

// Metrics returns Pebble's metrics (for /metrics and `storage stats`).
func (s *Store) Metrics() *pebble.Metrics { return s.db.Metrics() }

// DiskUsage returns the bytes of disk the database uses, obsolete files
// not yet deleted included (see WaitObsoleteFiles).
func (s *Store) DiskUsage() uint64 { return s.db.Metrics().DiskSpaceUsage() }

func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("pebblestore: cannot create lock file %s: %w; check the permissions of the data directory", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("pebblestore: data directory %s is in use by another broker process (lock %s is held); stop that broker or choose another data directory", dir, path)
	}
	return f, nil
}

// pebbleLogger routes Pebble's log lines into zerolog.
type pebbleLogger struct{ log zerolog.Logger }

func (l pebbleLogger) Infof(format string, args ...any) {
	l.log.Debug().Str("component", "pebble").Msgf(format, args...)
}
func (l pebbleLogger) Errorf(format string, args ...any) {
	l.log.Error().Str("component", "pebble").Msgf(format, args...)
}
func (l pebbleLogger) Fatalf(format string, args ...any) {
	l.log.Error().Str("component", "pebble").Msgf(format, args...)
	panic(fmt.Sprintf("pebble: "+format, args...))
}
