package pebblestore

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

func TestOpenWritesMarkerAndReopens(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	s, err := Open(dir, Options{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	b := s.NewBatch()
	b.Set([]byte("k"), []byte("v"))
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	marker, err := os.ReadFile(filepath.Join(dir, markerFileName))
	if err != nil || strings.TrimSpace(string(marker)) != "broker-data-format 1" {
		t.Fatalf("marker %q, %v", marker, err)
	}
	s, err = Open(dir, Options{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v, err := s.Get([]byte("k")); err != nil || string(v) != "v" {
		t.Fatalf("after reopen: %q, %v", v, err)
	}
	if _, err := s.Get([]byte("missing")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing key: %v", err)
	}
}

func TestOpenRefusesLockedDirectory(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = Open(dir, Options{Logger: zerolog.Nop()})
	if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second open: %v; want an in-use error naming %s", err, dir)
	}
}

// listing returns every file below dir with its size and content hash.
func listing(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		out[path] = string(data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestOpenRefusesForeignOrNewerData(t *testing.T) {
	cases := map[string]func(dir string){
		"newer format": func(dir string) {
			s, err := Open(dir, Options{Logger: zerolog.Nop()})
			if err != nil {
				t.Fatal(err)
			}
			_ = s.Close()
			_ = os.WriteFile(filepath.Join(dir, markerFileName), []byte("broker-data-format 99\n"), 0o644)
		},
		"garbage marker": func(dir string) {
			_ = os.WriteFile(filepath.Join(dir, markerFileName), []byte("hello"), 0o644)
		},
		"foreign files": func(dir string) {
			_ = os.WriteFile(filepath.Join(dir, "important.txt"), []byte("keep me"), 0o644)
		},
	}
	for name, setup := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			setup(dir)
			before := listing(t, dir)
			_, err := Open(dir, Options{Logger: zerolog.Nop()})
			if err == nil || !strings.Contains(err.Error(), dir) {
				t.Fatalf("open: %v; want a refusal naming %s", err, dir)
			}
			after := listing(t, dir)
			if len(before) != len(after) {
				t.Fatalf("files changed: before %d, after %d", len(before), len(after))
			}
			for k, v := range before {
				if after[k] != v {
					t.Fatalf("%s changed by a refused open", k)
				}
			}
		})
	}
}

func TestPrefixEnd(t *testing.T) {
	cases := []struct{ in, want []byte }{
		{[]byte{1, 2}, []byte{1, 3}},
		{[]byte{1, 0xff}, []byte{2}},
		{[]byte{0xff, 0xff}, nil},
	}
	for _, c := range cases {
		if got := PrefixEnd(c.in); string(got) != string(c.want) {
			t.Errorf("PrefixEnd(%x) = %x, want %x", c.in, got, c.want)
		}
	}
}

// TestUseAfterCloseIsAnError pins that a reader still running after Close
// (an HTTP handler past the shutdown grace) gets ErrClosed, not Pebble's panic.
func TestUseAfterCloseIsAnError(t *testing.T) {
	s, err := Open(t.TempDir(), Options{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get([]byte("k")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get after Close: %v, want ErrClosed", err)
	}
	if _, err := s.NewIter(nil, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("NewIter after Close: %v, want ErrClosed", err)
	}
	if err := s.NewBatch().Commit(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Commit after Close: %v, want ErrClosed", err)
	}
}
