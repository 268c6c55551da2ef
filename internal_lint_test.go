package broker_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/vibemq/broker"

// forbidden lists, per package, imports that break the architecture's
// direction (shared/design/ARCHITECTURE.md): arrows point down only, only
// pebblestore imports Pebble, the native-queue domains know no Kafka, and
// no domain knows HTTP (the native wire format, statuses included, is
// httpapi's).
var forbidden = map[string][]string{
	"topics":      {"/kafkaproto", "/httpapi", "/retention", "/groups", "/txns", "/queues", "/events", "/cmd/", "net/http"},
	"groups":      {"/kafkaproto", "/httpapi", "/retention", "/txns", "/queues", "/events", "/cmd/", "net/http"},
	"queues":      {"/kafkaproto", "/httpapi", "/retention", "/groups", "/cmd/", "github.com/twmb/franz-go", "net/http"},
	"events":      {"/kafkaproto", "/httpapi", "/retention", "/groups", "/queues", "/cmd/", "github.com/twmb/franz-go", "net/http"},
	"txns":        {"/kafkaproto", "/httpapi", "/retention", "/groups", "/queues", "/events", "/cmd/", "net/http"},
	"retention":   {"/kafkaproto", "/httpapi", "/cmd/"},
	"kafkaproto":  {"/httpapi", "/cmd/"},
	"httpapi":     {"/kafkaproto", "/cmd/"},
	"pebblestore": {"/topics", "/groups", "/queues", "/events", "/txns", "/kafkaproto", "/httpapi", "/retention", "/cmd/"},
}

// TestImportRules enforces the package dependency rules with `go list`.
func TestImportRules(t *testing.T) {
	out, err := exec.Command("go", "list", "-json", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	seen := 0
	for {
		var pkg struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&pkg); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		seen++
		rel := strings.TrimPrefix(strings.TrimPrefix(pkg.ImportPath, module), "/")
		top := strings.SplitN(rel, "/", 2)[0]
		for _, imp := range pkg.Imports {
			if strings.HasPrefix(imp, "github.com/cockroachdb/pebble") && top != "pebblestore" {
				t.Errorf("%s imports %s: only pebblestore may import Pebble", pkg.ImportPath, imp)
			}
			for _, bad := range forbidden[top] {
				target := bad
				if strings.HasPrefix(bad, "/") {
					target = module + bad
				}
				if strings.HasPrefix(imp, target) {
					t.Errorf("%s imports %s, against the architecture's import direction", pkg.ImportPath, imp)
				}
			}
		}
	}
	if seen < 5 {
		t.Fatalf("go list found only %d packages; the check is not looking at the module", seen)
	}
}

// maxFunctionLines is the longest a function may be, from its func line to
// its closing brace, outside tests and generated code (issue 15): a longer
// one is split along its steps, or carries a one-line comment right above
// its func line saying why it must stay whole: // long: <reason>.
const maxFunctionLines = 120

// longFunctionsPending are the functions still over maxFunctionLines that
// other work of issue 15 splits, as "dir.Name" (dir relative to the
// module root): removed when issue 15's queue/httpapi/groups splits land.
var longFunctionsPending = map[string]bool{
	"queues.redriveStep":       true,
	"queues.tickQueue":         true,
	"queues.Send":              true,
	"queues.prepare":           true,
	"queues.Nack":              true,
	"queues.AckAndReceive":     true,
	"httpapi.serveSSE":         true,
	"groups.Commit":            true,
	"groups.CommitTransaction": true,
}

// TestFunctionLength fails for a function longer than maxFunctionLines in
// any non-test, non-generated Go file of the repository (the bench/
// modules included), unless the line right above it is a "// long:"
// comment with a reason, or it is in longFunctionsPending; and for an
// entry of longFunctionsPending that is no longer too long.
func TestFunctionLength(t *testing.T) {
	pending := map[string]bool{}
	files := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
		if err != nil {
			return err
		}
		if ast.IsGenerated(f) {
			return nil
		}
		files++
		lines := strings.Split(string(src), "\n")
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			first, last := fset.Position(fn.Pos()).Line, fset.Position(fn.End()).Line
			if n := last - first + 1; n > maxFunctionLines {
				if first >= 2 {
					above := strings.TrimSpace(lines[first-2])
					if reason, ok := strings.CutPrefix(above, "// long:"); ok && strings.TrimSpace(reason) != "" {
						continue
					}
				}
				key := filepath.ToSlash(filepath.Dir(path)) + "." + fn.Name.Name
				if longFunctionsPending[key] {
					pending[key] = true
					continue
				}
				t.Errorf("%s:%d: %s is %d lines, over %d: split it along its steps, or put a one-line comment right above it saying why it must be one (// long: <reason>)",
					path, first, fn.Name.Name, n, maxFunctionLines)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("found only %d Go files; the check is not looking at the repository", files)
	}
	for key := range longFunctionsPending {
		if !pending[key] {
			t.Errorf("%s is no longer over %d lines (or is gone): remove it from longFunctionsPending", key, maxFunctionLines)
		}
	}
}
