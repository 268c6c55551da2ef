package httpapi

import (
	"encoding/json"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/vibemq/broker/queues"
)

// routePattern finds the route patterns registered in this package's
// source ("GET /v1/stores/{store}").
var routePattern = regexp.MustCompile(`"(GET|PUT|POST|PATCH|DELETE|HEAD) (/[^" ]*)"`)

// TestOpenAPIDocument: the fragments merge into one valid document, every
// $ref resolves, every route registered in httpapi is documented and
// every documented path is served.
func TestOpenAPIDocument(t *testing.T) {
	raw, err := OpenAPIDocument()
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if doc["openapi"] != "3.1.0" {
		t.Fatalf("openapi version %v", doc["openapi"])
	}
	paths := doc["paths"].(map[string]any)

	// Every $ref points at something.
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				cur := any(doc)
				for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
					m, _ := cur.(map[string]any)
					if cur = m[part]; cur == nil {
						t.Errorf("unresolved $ref %s", ref)
						return
					}
				}
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(doc)

	// Every operation has responses; path parameters are declared.
	for p, item := range paths {
		for method, op := range item.(map[string]any) {
			if method == "parameters" {
				continue
			}
			if _, ok := op.(map[string]any)["responses"]; !ok {
				t.Errorf("%s %s has no responses", method, p)
			}
		}
	}

	// Routes in the source are documented.
	files, _ := filepath.Glob("*.go")
	var routes []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range routePattern.FindAllStringSubmatch(string(src), -1) {
			routes = append(routes, m[1]+" "+m[2])
		}
	}
	sort.Strings(routes)
	if len(routes) < 10 {
		t.Fatalf("found only %d routes in the source: %v", len(routes), routes)
	}
	for _, r := range routes {
		method, p, _ := strings.Cut(r, " ")
		if strings.HasPrefix(p, "/debug/") {
			continue
		}
		p = strings.TrimSuffix(p, "/")
		item, ok := paths[p].(map[string]any)
		if !ok {
			t.Errorf("route %s is not documented: add it to httpapi/openapi/<area>.json", r)
			continue
		}
		if _, ok := item[strings.ToLower(method)]; !ok {
			t.Errorf("route %s: path documented but not the method", r)
		}
	}

	// The Error schema lists every code of every table.
	code := doc["components"].(map[string]any)["schemas"].(map[string]any)["Error"].(map[string]any)["properties"].(map[string]any)["code"].(map[string]any)
	enum := map[string]bool{}
	for _, c := range code["enum"].([]any) {
		enum[c.(string)] = true
	}
	for c := range nativeCodeStatus {
		if !enum[c] {
			t.Errorf("code %s missing from the Error enum", c)
		}
	}
}

// TestQueueCodesHaveStatus: every code the queue API can return has its
// HTTP status in the one table (a code missing there would answer 500).
func TestQueueCodesHaveStatus(t *testing.T) {
	for _, code := range queues.Codes() {
		if _, ok := nativeCodeStatus[code]; !ok {
			t.Errorf("queue code %s has no HTTP status in nativeCodeStatus", code)
		}
	}
}

// TestOpenAPIServed: GET /openapi.json serves the document.
func TestOpenAPIServed(t *testing.T) {
	env := newEventsEnv(t)
	got := env.call(http.MethodGet, "/openapi.json", "", nil)
	if got.status != 200 || got.header.Get("Content-Type") != "application/json" {
		t.Fatalf("openapi.json: %d %s", got.status, got.header.Get("Content-Type"))
	}
	var doc map[string]any
	got.decode(t, &doc)
	if _, ok := doc["paths"].(map[string]any)["/v1/stores/{store}/events"]; !ok {
		t.Fatal("the served document lacks the event routes")
	}
}

// updateOpenAPI rewrites testdata/openapi.json, the document as published:
// go test ./httpapi -run TestOpenAPIOnlyGrows -update-openapi.
var updateOpenAPI = flag.Bool("update-openapi", false, "rewrite testdata/openapi.json from the current document")

// TestOpenAPIOnlyGrows: /openapi.json is a published contract. The
// document as last published (testdata/openapi.json) must still be in it:
// every member with the same value, every array element (enum codes,
// required fields) still listed. Additions are allowed; a removal or a
// changed value fails until the change is deliberate and the file is
// rewritten with -update-openapi.
func TestOpenAPIOnlyGrows(t *testing.T) {
	raw, err := OpenAPIDocument()
	if err != nil {
		t.Fatal(err)
	}
	const golden = "testdata/openapi.json"
	if *updateOpenAPI {
		if err := os.WriteFile(golden, append(raw, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var published, current any
	old, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(old, &published); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &current); err != nil {
		t.Fatal(err)
	}
	var contains func(path string, old, cur any)
	contains = func(path string, old, cur any) {
		switch o := old.(type) {
		case map[string]any:
			c, ok := cur.(map[string]any)
			if !ok {
				t.Errorf("%s: was an object, now %T", path, cur)
				return
			}
			for k, v := range o {
				cv, ok := c[k]
				if !ok {
					t.Errorf("%s.%s: removed", path, k)
					continue
				}
				contains(path+"."+k, v, cv)
			}
		case []any:
			c, ok := cur.([]any)
			if !ok {
				t.Errorf("%s: was an array, now %T", path, cur)
				return
			}
			for _, v := range o {
				found := false
				for _, cv := range c {
					if reflect.DeepEqual(v, cv) {
						found = true
						break
					}
				}
				if !found {
					t.Errorf("%s: element %v removed or changed", path, v)
				}
			}
		default:
			if !reflect.DeepEqual(old, cur) {
				t.Errorf("%s: was %v, now %v", path, old, cur)
			}
		}
	}
	contains("$", published, current)
}
