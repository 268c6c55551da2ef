package compattests

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestAllowlistComplete keeps tests.allow honest: every Test function of
// this package is listed exactly once (as allowed, or as "#-" not passing
// yet), and every listed name exists. It needs no broker.
func TestAllowlistComplete(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("tests.allow")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]int{}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "#-"):
			line = strings.TrimSpace(strings.TrimPrefix(line, "#-"))
		case line == "" || strings.HasPrefix(line, "#"):
			continue
		}
		if f := strings.Fields(line); len(f) > 0 {
			listed[f[0]]++
		}
	}
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	var defined []string
	fset := token.NewFileSet()
	for _, f := range files {
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if ok && fd.Recv == nil && strings.HasPrefix(fd.Name.Name, "Test") && fd.Name.Name != "TestMain" && fd.Name.Name != "TestAllowlistComplete" {
				defined = append(defined, fd.Name.Name)
			}
		}
	}
	for _, name := range defined {
		if listed[name] != 1 {
			t.Errorf("%s is listed %d times in tests.allow, want once", name, listed[name])
		}
	}
	for name := range listed {
		if !slices.Contains(defined, name) {
			t.Errorf("tests.allow lists %s, which does not exist", name)
		}
	}
}

// TestBrokerSourcesTracked opens every Go source file and module file of
// the broker outside this directory. The binary under test is built by
// TestMain with `go build`, whose reads the test cache cannot see; files a
// test opens are part of its cache key, so this makes `go test ./...`
// rerun this package whenever the broker's code changes instead of
// answering "(cached)" for a broker it never ran.
func TestBrokerSourcesTracked(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "compat-tests" || name == "testdata" || name == "bench" || name == "data") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") && name != "go.mod" && name != "go.sum" {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		n += len(data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no broker sources found above compat-tests/")
	}
}
