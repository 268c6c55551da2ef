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
