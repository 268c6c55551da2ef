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
	"reflect"
	"strconv"
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
	"topics":     {"/kafkaproto", "/httpapi", "/retention", "/groups", "/txns", "/queues", "/events", "/cmd/", "net/http"},
	"groups":     {"/kafkaproto", "/httpapi", "/retention", "/txns", "/queues", "/events", "/cmd/", "net/http"},
	"queues":     {"/kafkaproto", "/httpapi", "/retention", "/groups", "/cmd/", "github.com/twmb/franz-go", "net/http"},
	"events":     {"/kafkaproto", "/httpapi", "/retention", "/groups", "/queues", "/cmd/", "github.com/twmb/franz-go", "net/http"},
	"txns":       {"/kafkaproto", "/httpapi", "/retention", "/groups", "/queues", "/events", "/cmd/", "net/http"},
	"retention":  {"/kafkaproto", "/httpapi", "/cmd/"},
	"kafkaproto": {"/httpapi", "/cmd/"},
	"httpapi":    {"/kafkaproto", "/cmd/"},
	// auth (credentials, principals, TLS files) serves both edges: it knows
	// neither wire format nor any domain.
	"auth": {"/topics", "/groups", "/queues", "/events", "/txns", "/kafkaproto", "/httpapi", "/retention", "/cmd/", "github.com/twmb/franz-go", "net/http"},
	// cluster (Raft groups, the inter-broker transport, the metadata
	// state machine) sits beside the domains: it knows none of them and
	// no client wire format; cmd/broker wires it.
	"cluster":     {"/topics", "/groups", "/queues", "/events", "/txns", "/kafkaproto", "/httpapi", "/retention", "/cmd/", "/auth", "github.com/twmb/franz-go", "net/http"},
	"pebblestore": {"/topics", "/groups", "/queues", "/events", "/txns", "/kafkaproto", "/httpapi", "/retention", "/cmd/", "/auth"},
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

// domainPackages are the packages that know no wire format
// (shared/design/ARCHITECTURE.md): they return plain Go types and typed
// or sentinel errors; kafkaproto and httpapi own the wire formats.
var domainPackages = []string{"queues", "events", "topics", "groups", "txns", "retention", "pebblestore"}

// storedRowCodecs are the files of a domain package that may import a
// text codec (encoding/json, encoding/base64) and why: each is a format
// of the store or of the domain's own tokens, never of a transport.
var storedRowCodecs = map[string]string{
	"queues/engine.go encoding/json":      "the queue catalog row (queueRecord) is JSON, part of the file format",
	"queues/redrive.go encoding/json":     "the redrive task row (taskRow) is JSON, part of the file format",
	"queues/receipt.go encoding/base64":   "receipts are the engine's own opaque tokens (HMAC-signed, fuzzed), the same on every transport",
	"events/service.go encoding/json":     "the event store catalog row (storeRecord) is JSON, part of the file format",
	"events/append.go encoding/json":      "json.Valid: an appended event of content type JSON, and its metadata, must hold one JSON value (the store's data rule)",
	"events/event.go encoding/json":       "json.Valid: a record read back as JSON whose data is not (a Kafka client wrote it) is served as binary",
	"topics/manager.go encoding/json":     "the topic catalog row (topicRecord) is JSON, part of the file format",
	"topics/topic_admin.go encoding/json": "writes the topic catalog row (topicRecord)",
	"topics/verify.go encoding/json":      "reads the topic catalog row (topicRecord) to name damaged topics",
	"topics/manager.go encoding/base64":   "the cluster id minted at first boot is 16 random bytes in URL-safe base64 (Kafka's form)",
	"txns/store.go encoding/json":         "the transaction row (txn) is JSON, part of the file format",
}

// storedRowTypes are the struct types of domain packages whose fields may
// carry json tags, and why: stored rows, whose member names are part of
// the file format and must not follow the API's.
var storedRowTypes = map[string]string{
	"queues.queueRecord":   "queue catalog row",
	"queues.Attributes":    "embedded in the queue catalog row (httpapi has its own attributesJSON)",
	"queues.Backoff":       "embedded in the queue catalog row (httpapi has its own backoffJSON)",
	"queues.taskRow":       "redrive task row",
	"queues.taskFilterRow": "redrive task row",
	"events.storeRecord":   "event store catalog row",
	"topics.topicRecord":   "topic catalog row",
	"txns.txn":             "transaction row",
}

// TestDomainsHaveNoWireFormat: no domain package encodes JSON or base64
// for a transport, nor has json tags on its types (checked with go/ast),
// except the stored-row codecs listed above with their reason. The wire
// formats are kafkaproto's and httpapi's (issue 15).
func TestDomainsHaveNoWireFormat(t *testing.T) {
	fset := token.NewFileSet()
	usedCodecs, usedRows := map[string]bool{}, map[string]bool{}
	for _, pkg := range domainPackages {
		err := filepath.WalkDir(pkg, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			rel := filepath.ToSlash(path)
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				if p != "encoding/json" && p != "encoding/base64" {
					continue
				}
				key := rel + " " + p
				if _, ok := storedRowCodecs[key]; !ok {
					t.Errorf("%s imports %s: a domain package knows no wire format; encode in httpapi or kafkaproto (or list a stored-row codec in storedRowCodecs with its reason)", rel, p)
				}
				usedCodecs[key] = true
			}
			ast.Inspect(f, func(n ast.Node) bool {
				spec, ok := n.(*ast.TypeSpec)
				if !ok {
					return true
				}
				st, ok := spec.Type.(*ast.StructType)
				if !ok {
					return true
				}
				name := filepath.Base(filepath.Dir(rel)) + "." + spec.Name.Name
				for _, field := range st.Fields.List {
					if field.Tag == nil {
						continue
					}
					tag, _ := strconv.Unquote(field.Tag.Value)
					if _, has := reflect.StructTag(tag).Lookup("json"); !has {
						continue
					}
					if _, ok := storedRowTypes[name]; !ok {
						t.Errorf("%s: type %s has json tags: the wire types live in httpapi (or list a stored row in storedRowTypes with its reason)", fset.Position(field.Pos()), name)
					}
					usedRows[name] = true
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// The allowances stay true: a codec or row that went away leaves the list.
	for key := range storedRowCodecs {
		if !usedCodecs[key] {
			t.Errorf("storedRowCodecs lists %s, which no longer imports it: remove the entry", key)
		}
	}
	for name := range storedRowTypes {
		if !usedRows[name] {
			t.Errorf("storedRowTypes lists %s, which has no json tags any more: remove the entry", name)
		}
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
var longFunctionsPending = map[string]bool{}

// maxParams is the most parameters a function takes (receiver not
// counted); more become a struct.
const maxParams = 5

// paramCount is the number of parameters of fn, each name counted.
func paramCount(fn *ast.FuncDecl) int {
	n := 0
	for _, f := range fn.Type.Params.List {
		n += max(len(f.Names), 1)
	}
	return n
}

// TestFunctionLength fails for a function with more than maxParams
// parameters, and for a function longer than maxFunctionLines in
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
			if n := paramCount(fn); n > maxParams {
				t.Errorf("%s:%d: %s takes %d parameters, over %d: pass the ones that belong together as a struct (issue 15)",
					path, first, fn.Name.Name, n, maxParams)
			}
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
