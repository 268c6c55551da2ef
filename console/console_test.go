package console

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestHandlerServesEmbeddedFiles: the page, its modules with a JavaScript
// type (browsers refuse modules served otherwise), index.html for a page
// address, 404 for a missing file, and the CSP on every answer.
func TestHandlerServesEmbeddedFiles(t *testing.T) {
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	for _, c := range []struct {
		path, contentType, contains string
		status                      int
	}{
		{"/ui/", "text/html", `<script type="module" src="/ui/app.js">`, 200},
		{"/ui/topics", "text/html", `<main id="app">`, 200},
		{"/ui/app.js", "text/javascript", "import", 200},
		{"/ui/lib.js", "text/javascript", "export", 200},
		{"/ui/style.css", "text/css", "body", 200},
		{"/ui/missing.js", "", "", 404},
	} {
		resp, err := http.Get(srv.URL + c.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || !strings.HasPrefix(resp.Header.Get("Content-Type"), c.contentType) || !strings.Contains(string(body), c.contains) {
			t.Errorf("%s: %d %s %.100q", c.path, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
		if !strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'self'") {
			t.Errorf("%s: CSP %q", c.path, resp.Header.Get("Content-Security-Policy"))
		}
	}
}
