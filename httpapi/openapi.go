package httpapi

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"reflect"
	"sort"
	"strings"
	"sync"
)

// The OpenAPI document of the native API is assembled from fragments, one
// per area, in httpapi/openapi/*.json: 00-base.json holds the header, the
// health routes and the shared Error schema and responses; every other
// fragment is {"paths": {...}, "components": {...}} for one area (events.json,
// storage.json, queues.json, ...). An area documents its routes by adding
// its own file; nothing else changes. Fragments are merged in file-name
// order: a path+method or component defined twice differently is a build
// error (TestOpenAPIDocument). The Error schema's code enum is filled from
// the error code tables registered with addOpenAPIErrorCodes.

//go:embed openapi/*.json
var openAPIFragments embed.FS

var openAPIState struct {
	sync.Mutex
	codeTables []func() map[string]int
}

// addOpenAPIErrorCodes adds a table of error codes (code -> HTTP status) to
// the document's Error schema. Areas call it from init.
func addOpenAPIErrorCodes(table func() map[string]int) {
	openAPIState.Lock()
	defer openAPIState.Unlock()
	openAPIState.codeTables = append(openAPIState.codeTables, table)
}

func init() {
	addOpenAPIErrorCodes(func() map[string]int { return nativeCodeStatus })
}

// OpenAPIDocument returns the merged document as JSON.
func OpenAPIDocument() ([]byte, error) {
	doc, err := buildOpenAPI()
	if err != nil {
		return nil, err
	}
	return json.MarshalIndent(doc, "", "  ")
}

func buildOpenAPI() (map[string]any, error) {
	names, err := fs.Glob(openAPIFragments, "openapi/*.json")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var doc map[string]any
	for _, name := range names {
		raw, err := openAPIFragments.ReadFile(name)
		if err != nil {
			return nil, err
		}
		var frag map[string]any
		if err := json.Unmarshal(raw, &frag); err != nil {
			return nil, fmt.Errorf("httpapi: OpenAPI fragment %s: %w", name, err)
		}
		if doc == nil {
			doc = frag
			continue
		}
		if err := mergeOpenAPI(doc, frag, path.Base(name)); err != nil {
			return nil, err
		}
	}
	if doc == nil {
		return nil, fmt.Errorf("httpapi: no OpenAPI fragments")
	}

	codes := map[string]int{}
	openAPIState.Lock()
	for _, table := range openAPIState.codeTables {
		for code, status := range table() {
			if old, ok := codes[code]; ok && old != status {
				openAPIState.Unlock()
				return nil, fmt.Errorf("httpapi: error code %s has status %d in one table and %d in another", code, old, status)
			}
			codes[code] = status
		}
	}
	openAPIState.Unlock()
	enum := make([]string, 0, len(codes))
	for code := range codes {
		enum = append(enum, code)
	}
	sort.Strings(enum)
	schema, _ := lookupMap(doc, "components", "schemas", "Error", "properties", "code")
	if schema == nil {
		return nil, fmt.Errorf("httpapi: 00-base.json lacks components.schemas.Error.properties.code")
	}
	schema["enum"] = enum
	byStatus := map[string][]string{}
	for _, code := range enum {
		s := fmt.Sprint(codes[code])
		byStatus[s] = append(byStatus[s], code)
	}
	schema["x-status-of-codes"] = byStatus
	addOpenAPISecurity(doc)
	return doc, nil
}

// addOpenAPISecurity documents HTTP authentication on every operation
// that is not open: the schemes it accepts (none needed with http-auth
// none: the empty requirement), a 401 answer, and a 403 where an
// Authorizer decides (routeAccess).
func addOpenAPISecurity(doc map[string]any) {
	paths, _ := doc["paths"].(map[string]any)
	anyOf := []any{map[string]any{}, map[string]any{"basic": []any{}}, map[string]any{"bearer": []any{}}, map[string]any{"session": []any{}}}
	for p, item := range paths {
		ops, _ := item.(map[string]any)
		for method, op := range ops {
			opMap, ok := op.(map[string]any)
			if !ok {
				continue
			}
			pattern := strings.ToUpper(method) + " " + p
			if openRoutes[pattern] || openRoutes[pattern+"/"] {
				continue
			}
			opMap["security"] = anyOf
			responses, _ := opMap["responses"].(map[string]any)
			if responses == nil {
				continue
			}
			if _, ok := responses["401"]; !ok {
				responses["401"] = map[string]any{"$ref": "#/components/responses/Unauthorized"}
			}
			if _, ok := routeAccess[pattern]; ok {
				if _, ok := responses["403"]; !ok {
					responses["403"] = map[string]any{"$ref": "#/components/responses/Forbidden"}
				}
			}
		}
	}
}

// mergeOpenAPI adds fragment frag into doc.
func mergeOpenAPI(doc, frag map[string]any, name string) error {
	for key, value := range frag {
		switch key {
		case "paths":
			paths, ok := value.(map[string]any)
			if !ok {
				return fmt.Errorf("httpapi: OpenAPI fragment %s: paths is not an object", name)
			}
			dst := ensureMap(doc, "paths")
			for p, item := range paths {
				itemMap, ok := item.(map[string]any)
				if !ok {
					return fmt.Errorf("httpapi: OpenAPI fragment %s: path %s is not an object", name, p)
				}
				existing := ensureMap(dst, p)
				for method, op := range itemMap {
					if old, ok := existing[method]; ok && !reflect.DeepEqual(old, op) {
						return fmt.Errorf("httpapi: OpenAPI fragment %s redefines %s %s", name, method, p)
					}
					existing[method] = op
				}
			}
		case "components":
			comps, ok := value.(map[string]any)
			if !ok {
				return fmt.Errorf("httpapi: OpenAPI fragment %s: components is not an object", name)
			}
			dst := ensureMap(doc, "components")
			for kind, entries := range comps {
				entryMap, ok := entries.(map[string]any)
				if !ok {
					return fmt.Errorf("httpapi: OpenAPI fragment %s: components.%s is not an object", name, kind)
				}
				existing := ensureMap(dst, kind)
				for n, v := range entryMap {
					if old, ok := existing[n]; ok && !reflect.DeepEqual(old, v) {
						return fmt.Errorf("httpapi: OpenAPI fragment %s redefines components.%s.%s", name, kind, n)
					}
					existing[n] = v
				}
			}
		case "tags":
			tags, _ := value.([]any)
			old, _ := doc["tags"].([]any)
			doc["tags"] = append(old, tags...)
		default:
			return fmt.Errorf("httpapi: OpenAPI fragment %s: unexpected top-level key %q (only paths, components, tags)", name, key)
		}
	}
	return nil
}

func ensureMap(m map[string]any, key string) map[string]any {
	if v, ok := m[key].(map[string]any); ok {
		return v
	}
	v := map[string]any{}
	m[key] = v
	return v
}

func lookupMap(m map[string]any, keys ...string) (map[string]any, bool) {
	cur := m
	for _, k := range keys {
		next, ok := cur[k].(map[string]any)
		if !ok {
			return nil, false
		}
		cur = next
	}
	return cur, true
}

// RegisterOpenAPI serves the document at GET /openapi.json. The document is
// built once, at registration; a broken fragment panics here (at start)
// rather than at the first request.
func (s *Server) RegisterOpenAPI() {
	body, err := OpenAPIDocument()
	if err != nil {
		panic(err)
	}
	s.Handle("GET /openapi.json", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-cache")
		_, _ = w.Write(body)
	}))
}
