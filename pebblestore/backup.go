package pebblestore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Storage management: online backup (a Pebble checkpoint plus the format
// marker, so a backup is itself a data directory), offline restore, and the
// marker check both share.

var (
	// ErrTargetNotEmpty is returned when a backup or restore target exists
	// and holds files.
	ErrTargetNotEmpty = errors.New("pebblestore: target directory is not empty")
	// ErrNotBrokerData is returned when a directory has no valid marker.
	ErrNotBrokerData = errors.New("pebblestore: not a broker data directory")
	// ErrInUse is returned when a broker process holds a data directory.
	ErrInUse = errors.New("pebblestore: data directory in use")
)

// BackupInfo describes a finished backup.
type BackupInfo struct {
	Dir   string
	Files int
	Bytes int64
}

// Backup writes a consistent copy of the live database into dir, which must
// not exist or be empty: a Pebble checkpoint (sstables hard-linked when on
// the same filesystem, the WAL flushed) in dir/store, then the FORMAT
// marker. The marker is written last, so an interrupted backup is not a
// data directory and restore refuses it. Only stores on the real
// filesystem can be backed up.
func (s *Store) Backup(dir string) (BackupInfo, error) {
	if s.lockFile == nil {
		return BackupInfo{}, errors.New("pebblestore: backup needs a store on the real filesystem")
	}
	if s.closed.Load() {
		return BackupInfo{}, ErrClosed
	}
	dir = filepath.Clean(dir)
	if err := requireEmptyDir(dir, false); err != nil {
		return BackupInfo{}, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return BackupInfo{}, storageFailure(fmt.Errorf("pebblestore: cannot create backup directory %s: %w", dir, err))
	}
	if err := s.Checkpoint(filepath.Join(dir, storeSubdir)); err != nil {
		return BackupInfo{}, storageFailure(fmt.Errorf("pebblestore: checkpoint into %s: %w", dir, err))
	}
	if err := writeMarker(vfs.Default, dir, filepath.Join(dir, markerFileName)); err != nil {
		return BackupInfo{}, storageFailure(err)
	}
	files, bytes, err := dirSize(dir)
	if err != nil {
		return BackupInfo{}, storageFailure(err)
	}
	return BackupInfo{Dir: dir, Files: files, Bytes: bytes}, nil
}

// CheckDataDir checks that dir is a data directory this binary reads: its
// FORMAT marker names FormatVersion and it has a store. It reads only.
func CheckDataDir(dir string) error {
	path := filepath.Join(dir, markerFileName)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: %s has no %s marker (an interrupted backup, or not broker data)", ErrNotBrokerData, dir, markerFileName)
	}
	if err != nil {
		return fmt.Errorf("pebblestore: cannot read %s: %w", path, err)
	}
	if len(data) > 256 {
		data = data[:256]
	}
	if err := parseMarker(dir, path, string(data)); err != nil {
		return fmt.Errorf("%w: %v", ErrNotBrokerData, err)
	}
	names, err := os.ReadDir(filepath.Join(dir, storeSubdir))
	if err != nil || len(names) == 0 {
		return fmt.Errorf("%w: %s has a marker but no database in %s/", ErrNotBrokerData, dir, storeSubdir)
	}
	return nil
}

// Restore copies the data directory src (a backup) into dst, which must
// not exist or be empty, and must not be held by a running broker. src is
// checked first (CheckDataDir). Files are copied and synced; the marker is
// written last, so an interrupted restore leaves a directory the broker
// refuses to open rather than a partial store. progress, if set, gets the
// bytes copied and the total.
func Restore(src, dst string, progress func(done, total int64)) (BackupInfo, error) {
	src, dst = filepath.Clean(src), filepath.Clean(dst)
	if err := CheckDataDir(src); err != nil {
		return BackupInfo{}, err
	}
	if err := requireEmptyDir(dst, true); err != nil {
		return BackupInfo{}, err
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return BackupInfo{}, fmt.Errorf("pebblestore: cannot create %s: %w", dst, err)
	}
	lock, err := lockDir(dst)
	if err != nil {
		return BackupInfo{}, fmt.Errorf("%w: %v", ErrInUse, err)
	}
	defer lock.Close()
	if err := requireEmptyDir(dst, true); err != nil { // re-check under the lock
		return BackupInfo{}, err
	}

	_, total, err := dirSize(filepath.Join(src, storeSubdir))
	if err != nil {
		return BackupInfo{}, err
	}
	info := BackupInfo{Dir: dst}
	report := func() {
		if progress != nil {
			progress(info.Bytes, total)
		}
	}
	report()
	srcStore, dstStore := filepath.Join(src, storeSubdir), filepath.Join(dst, storeSubdir)
	err = filepath.WalkDir(srcStore, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(srcStore, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dstStore, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("pebblestore: %s is not a regular file; refusing to restore it", path)
		}
		if err := copyFile(path, target, func(n int64) { info.Bytes += n; report() }); err != nil {
			return err
		}
		info.Files++
		return nil
	})
	if err != nil {
		return BackupInfo{}, fmt.Errorf("pebblestore: restoring %s into %s: %w", src, dst, err)
	}
	if err := syncDirs(dstStore); err != nil {
		return BackupInfo{}, err
	}
	if err := writeMarker(vfs.Default, dst, filepath.Join(dst, markerFileName)); err != nil {
		return BackupInfo{}, err
	}
	report()
	return info, nil
}

// requireEmptyDir fails when dir exists with entries (a LOCK file alone
// counts as empty when allowLock). A missing dir is fine.
func requireEmptyDir(dir string, allowLock bool) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pebblestore: cannot read %s: %w", dir, err)
	}
	for _, e := range entries {
		if allowLock && e.Name() == lockFileName {
			continue
		}
		return fmt.Errorf("%w: %s holds %q; choose a new or empty directory (nothing was changed)", ErrTargetNotEmpty, dir, e.Name())
	}
	return nil
}

func copyFile(src, dst string, added func(int64)) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for {
		m, rerr := in.Read(buf)
		if m > 0 {
			if _, werr := out.Write(buf[:m]); werr != nil {
				_ = out.Close()
				return werr
			}
			added(int64(m))
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			_ = out.Close()
			return rerr
		}
	}
	if err := out.Sync(); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

// syncDirs fsyncs dir and every directory below it, so new entries are durable.
func syncDirs(dir string) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		return f.Sync()
	})
}

func dirSize(dir string) (files int, bytes int64, err error) {
	err = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		files++
		bytes += info.Size()
		return nil
	})
	return files, bytes, err
}

// CompactRanges splits the keyspace into the ranges CompactAll compacts one
// by one: one per table prefix in use, and one per topic in the record
// batch table, which holds most of the data.
func (s *Store) CompactRanges() ([][2][]byte, error) {
	it, err := s.NewIter(nil, nil)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var ranges [][2][]byte
	for ok := it.First(); ok; {
		key := it.Key()
		var p []byte
		if key[0] == PrefixBatch && len(key) >= 17 {
			p = append([]byte(nil), key[:17]...)
		} else {
			p = []byte{key[0]}
		}
		ranges = append(ranges, [2][]byte{p, nil})
		end := PrefixEnd(p)
		if end == nil {
			break
		}
		ok = it.SeekGE(end)
	}
	if err := it.Close(); err != nil {
		return nil, err
	}
	// Cover the whole keyspace, so that space held by deleted keys between
	// live ones is reclaimed too.
	if len(ranges) == 0 {
		return [][2][]byte{{{0x00}, keyspaceEnd}}, nil
	}
	ranges[0][0] = []byte{0x00}
	for i := 0; i+1 < len(ranges); i++ {
		ranges[i][1] = ranges[i+1][0]
	}
	ranges[len(ranges)-1][1] = keyspaceEnd
	return ranges, nil
}

// keyspaceEnd is above every key of the layout (prefixes stop below 0xff).
var keyspaceEnd = []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// CompactAll compacts the whole keyspace range by range (CompactRanges),
// reclaiming the space of deleted and overwritten keys. progress, if set,
// gets the ranges done and their total.
func (s *Store) CompactAll(progress func(done, total int)) error {
	ranges, err := s.CompactRanges()
	if err != nil {
		return err
	}
	if progress != nil {
		progress(0, len(ranges))
	}
	for i, r := range ranges {
		if s.closed.Load() {
			return ErrClosed
		}
		if err := s.Compact(r[0], r[1]); err != nil {
			return fmt.Errorf("pebblestore: compacting [%x, %x): %w", r[0], r[1], err)
		}
		if progress != nil {
			progress(i+1, len(ranges))
		}
	}
	// Pebble deletes the files the compactions made obsolete in the
	// background: disk usage measured before that still counts them (the
	// compact answer's bytes_after was the size before).
	if err := s.WaitObsoleteFiles(context.Background(), ObsoleteFilesWait); err != nil && !errors.Is(err, ErrObsoleteFilesPending) {
		return storageFailure(err)
	}
	_ = s.space.Probe()
	return nil
}

// Summary is a stable digest of Pebble's metrics for `storage stats`.
type Summary struct {
	DiskUsageBytes  uint64
	MemtableBytes   uint64
	WALBytes        uint64
	Tables          int64
	TablesBytes     int64
	BlobFiles       uint64
	BlobFilesBytes  uint64
	L0Sublevels     int32
	Compactions     int64
	CompactionDebt  uint64
	Flushes         int64
	BlockCacheBytes int64
	BlockCacheHits  int64
	BlockCacheMiss  int64
}

// Summary returns the digest of the store's metrics.
func (s *Store) Summary() Summary {
	m := s.db.Metrics()
	out := Summary{
		DiskUsageBytes:  m.DiskSpaceUsage(),
		MemtableBytes:   m.MemTable.Size,
		WALBytes:        max(m.WAL.Size, m.WAL.PhysicalSize),
		BlobFiles:       m.BlobFiles.LiveCount,
		BlobFilesBytes:  m.BlobFiles.LiveSize,
		L0Sublevels:     m.Levels[0].Sublevels,
		Compactions:     m.Compact.Count,
		CompactionDebt:  m.Compact.EstimatedDebt,
		Flushes:         m.Flush.Count,
		BlockCacheBytes: m.BlockCache.Size,
		BlockCacheHits:  m.BlockCache.Hits,
		BlockCacheMiss:  m.BlockCache.Misses,
	}
	for i := range m.Levels {
		out.Tables += m.Levels[i].TablesCount
		out.TablesBytes += m.Levels[i].TablesSize
	}
	return out
}
