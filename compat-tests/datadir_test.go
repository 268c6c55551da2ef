package compattests

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// TestDataDirLocked: a second broker on a data directory that a running
// broker holds exits non-zero with a message naming the directory, and the
// first broker keeps serving.
func TestDataDirLocked(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	adm := newAdmin(t, b.Addr())
	topic := topicName(t, "")
	createTopic(t, adm, topic, 1, nil)

	code, out := runBrokerExpectExit(t, b.DataDir())
	if code == 0 {
		t.Errorf("second broker on %s exited 0; want a non-zero exit. Output:\n%s", b.DataDir(), out)
	}
	if !strings.Contains(out, b.DataDir()) {
		t.Errorf("second broker's output does not name the data directory %s:\n%s", b.DataDir(), out)
	}
	b.Alive()
	// The first broker still serves.
	if _, ok := endOffsets(t, adm, topic)[0]; !ok {
		t.Errorf("first broker lost partition 0 of %s", topic)
	}
}

// TestDataDirFormatMismatch: a data directory whose FORMAT marker names
// another format version is refused with a non-zero exit, a message naming
// the directory, and nothing in the directory changed.
func TestDataDirFormatMismatch(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := startBroker(t, withDataDir(dir))
	adm := newAdmin(t, b.Addr())
	createTopic(t, adm, topicName(t, ""), 1, nil)
	b.Stop()

	marker := filepath.Join(dir, "FORMAT")
	data, err := os.ReadFile(marker)
	if err != nil {
		t.Fatalf("after first boot the data directory has no FORMAT marker: %v", err)
	}
	digits := regexp.MustCompile(`[0-9]+`)
	if !digits.Match(data) {
		t.Fatalf("FORMAT marker %q holds no version number", data)
	}
	other := digits.ReplaceAll(data, []byte("999"))
	if err := os.WriteFile(marker, other, 0o644); err != nil {
		t.Fatal(err)
	}

	before := treeDigest(t, dir)
	code, out := runBrokerExpectExit(t, dir)
	if code == 0 {
		t.Errorf("broker on a FORMAT %q directory exited 0; want a non-zero exit. Output:\n%s", other, out)
	}
	if !strings.Contains(out, dir) {
		t.Errorf("refusal does not name the data directory %s:\n%s", dir, out)
	}
	after := treeDigest(t, dir)
	if diff := diffDigests(before, after); diff != "" {
		t.Errorf("the refused data directory changed:\n%s", diff)
	}

	// Putting the marker back makes the directory usable again.
	if err := os.WriteFile(marker, data, 0o644); err != nil {
		t.Fatal(err)
	}
	b.Start()
	b.Stop()
}

// treeDigest maps every path under dir to its mode, size and content hash.
func treeDigest(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := make(map[string]string)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		info, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			out[rel] = "dir " + info.Mode().String()
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		out[rel] = fmt.Sprintf("%s %d %s", info.Mode(), len(data), hex.EncodeToString(sum[:8]))
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", dir, err)
	}
	return out
}

func diffDigests(a, b map[string]string) string {
	var lines []string
	for p, v := range a {
		if w, ok := b[p]; !ok {
			lines = append(lines, "removed "+p)
		} else if v != w {
			lines = append(lines, fmt.Sprintf("changed %s: %s -> %s", p, v, w))
		}
	}
	for p := range b {
		if _, ok := a[p]; !ok {
			lines = append(lines, "added "+p)
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// TestDataDirNotBrokerData: a non-empty directory without a FORMAT marker,
// and one whose FORMAT marker is not ours, are refused untouched.
func TestDataDirNotBrokerData(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		files map[string]string
	}{
		{"foreign files", map[string]string{"notes.txt": "my thesis", "sub/data.bin": "\x00\x01"}},
		{"garbage FORMAT", map[string]string{"FORMAT": "hello world\n"}},
		{"FORMAT without a number", map[string]string{"FORMAT": "broker-data-format x\n"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range c.files {
				path := filepath.Join(dir, name)
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			before := treeDigest(t, dir)
			code, out := runBrokerExpectExit(t, dir)
			if code == 0 {
				t.Errorf("broker on %s exited 0; want a refusal. Output:\n%s", c.name, out)
			}
			if !strings.Contains(out, dir) {
				t.Errorf("refusal does not name the directory %s:\n%s", dir, out)
			}
			if diff := diffDigests(before, treeDigest(t, dir)); diff != "" {
				t.Errorf("the refused directory changed:\n%s", diff)
			}
		})
	}
}
