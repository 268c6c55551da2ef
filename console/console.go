// Package console is the broker's web console: a small single-page
// application in plain HTML, CSS and JavaScript modules, embedded in the
// binary and served by the HTTP listener under /ui/. It has no build step
// and loads nothing from elsewhere, so it works offline. It reads and
// changes the broker through the native JSON API (/v1/...).
package console

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed static
var static embed.FS

// Prefix is the path the console is served under.
const Prefix = "/ui/"

// Handler serves the console's files under Prefix; any other path below
// it (a page's address) gets index.html.
func Handler() http.Handler {
	root, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.FileServer(http.FS(root))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, Prefix)
		h := w.Header()
		// Everything comes from this origin: no inline script, no
		// third-party resource.
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		if name == "" || !strings.Contains(name, ".") {
			r2 := r.Clone(r.Context())
			r2.URL.Path = "/"
			files.ServeHTTP(w, r2)
			return
		}
		if _, err := fs.Stat(root, name); err != nil {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/" + name
		files.ServeHTTP(w, r2)
	})
}
