package pebblestore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// FormatVersion is the version of the broker's on-disk format: the key
// layout in keys.go and the encodings of every value. A data directory of
// another version is refused at boot. Bump it with any incompatible change
// and describe the migration in DESIGN.md.
const FormatVersion = 1

// pebbleFormat pins Pebble's own format major version so an upgrade of the
// library never ratchets the files silently.
const pebbleFormat = pebble.FormatValueSeparation

const (
	markerFileName = "FORMAT"
	lockFileName   = "LOCK"
	storeSubdir    = "store"
	markerPrefix   = "broker-data-format "
)

// inspectMarker checks dir's FORMAT file without writing anything: nil for
// a matching marker or an empty directory, an error otherwise.
func inspectMarker(fs vfs.FS, dir string) error {
	return checkMarkerMaybeWrite(fs, dir, false)
}

// checkMarker validates the FORMAT file of dir, writing it on first boot.
func checkMarker(fs vfs.FS, dir string) error {
	return checkMarkerMaybeWrite(fs, dir, true)
}

func checkMarkerMaybeWrite(fs vfs.FS, dir string, write bool) error {
	path := filepath.Join(dir, markerFileName)
	f, err := fs.Open(path)
	if err == nil {
		data, readErr := io.ReadAll(io.LimitReader(f, 256))
		_ = f.Close()
		if readErr != nil {
			return fmt.Errorf("pebblestore: cannot read format marker %s: %w", path, readErr)
		}
		return parseMarker(dir, path, string(data))
	}
	if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("pebblestore: cannot open format marker %s: %w", path, err)
	}
	// No marker: only an empty directory (or one holding just our lock) may
	// become a data directory.
	names, err := fs.List(dir)
	if err != nil {
		return fmt.Errorf("pebblestore: cannot list data directory %s: %w", dir, err)
	}
	for _, n := range names {
		if n != lockFileName {
			return fmt.Errorf("pebblestore: data directory %s is not empty and has no %s marker, so it is not broker data (found %q); choose an empty or new directory", dir, markerFileName, n)
		}
	}
	if !write {
		return nil
	}
	return writeMarker(fs, dir, path)
}

func parseMarker(dir, path, content string) error {
	content = strings.TrimSpace(content)
	if !strings.HasPrefix(content, markerPrefix) {
		return fmt.Errorf("pebblestore: %s does not look like a broker format marker (content %q); data directory %s was written by another program, refusing to use it", path, content, dir)
	}
	v, err := strconv.Atoi(strings.TrimPrefix(content, markerPrefix))
	if err != nil {
		return fmt.Errorf("pebblestore: %s holds an unreadable format version %q; refusing to use data directory %s", path, content, dir)
	}
	if v != FormatVersion {
		return fmt.Errorf("pebblestore: data directory %s has format version %d but this broker reads version %d; run a broker release that matches the data, or point --data-dir at another directory (nothing was changed)", dir, v, FormatVersion)
	}
	return nil
}

func writeMarker(fs vfs.FS, dir, path string) error {
	tmp := path + ".tmp"
	f, err := fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("pebblestore: cannot write format marker in %s: %w", dir, err)
	}
	if _, err := fmt.Fprintf(f, "%s%d\n", markerPrefix, FormatVersion); err != nil {
		_ = f.Close()
		return fmt.Errorf("pebblestore: cannot write format marker %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("pebblestore: cannot sync format marker %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := fs.Rename(tmp, path); err != nil {
		return fmt.Errorf("pebblestore: cannot install format marker %s: %w", path, err)
	}
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// checkFormatKey keeps a copy of the format version inside the database, so
// that a store directory moved without its marker is still recognised.
func (s *Store) checkFormatKey() error {
	v, err := s.Get(FormatKey())
	if errors.Is(err, ErrNotFound) {
		var buf [8]byte
		binary.BigEndian.PutUint64(buf[:], FormatVersion)
		return s.db.Set(FormatKey(), buf[:], pebble.Sync)
	}
	if err != nil {
		return err
	}
	if len(v) != 8 || binary.BigEndian.Uint64(v) != FormatVersion {
		return fmt.Errorf("pebblestore: the database in %s records format %x, this broker reads version %d; refusing to start (nothing was changed)", s.dir, v, FormatVersion)
	}
	return nil
}
