// Package crashfs is a test filesystem for crash tests (STYLE.md rule 13;
// under pebblestore because only pebblestore imports Pebble):
// it calls a hook after every write and every sync of any file, so that a
// test can take a crash image (vfs.MemFS.CrashClone) at each step of a
// Pebble store's I/O and check that every image opens to a state the
// acknowledged operations allow.
package crashfs

import (
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// FS wraps a vfs.FS (usually vfs.NewCrashableMem). The hook runs under
// FS's mutex, once per Write, Sync, SyncData and SyncTo of a file created
// or opened for writing through it; files opened for reading are not
// wrapped.
type FS struct {
	vfs.FS
	mu   sync.Mutex
	hook func()
}

// SetHook sets the function called after every write and sync; nil stops
// the calls.
func (fs *FS) SetHook(h func()) {
	fs.mu.Lock()
	fs.hook = h
	fs.mu.Unlock()
}

func (fs *FS) fire() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.hook != nil {
		fs.hook()
	}
}

func (fs *FS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return f, err
	}
	return &file{File: f, fs: fs}, nil
}

// Create implements vfs.FS.
func (fs *FS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return fs.wrap(fs.FS.Create(name, c))
}

// OpenReadWrite implements vfs.FS.
func (fs *FS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	return fs.wrap(fs.FS.OpenReadWrite(name, c, opts...))
}

// ReuseForWrite implements vfs.FS.
func (fs *FS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return fs.wrap(fs.FS.ReuseForWrite(oldname, newname, c))
}

type file struct {
	vfs.File
	fs *FS
}

func (f *file) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	f.fs.fire()
	return n, err
}

func (f *file) Sync() error {
	err := f.File.Sync()
	f.fs.fire()
	return err
}

func (f *file) SyncData() error {
	err := f.File.SyncData()
	f.fs.fire()
	return err
}

func (f *file) SyncTo(length int64) (bool, error) {
	full, err := f.File.SyncTo(length)
	f.fs.fire()
	return full, err
}
