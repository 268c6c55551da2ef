package httpapi

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/vibemq/broker/auth"
	"github.com/vibemq/broker/pebblestore"
)

// testClock is a settable clock for the auth tests.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *testClock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// authServer serves http-auth required with user alice (password
// alice-pw) and a route answering the request's principal.
func authServer(t *testing.T) (*auth.Store, *testClock, string) {
	t.Helper()
	ps, err := pebblestore.Open(t.TempDir(), pebblestore.Options{Logger: zerolog.Nop(), MemTableSize: 4 << 20, CacheSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ps.Close() })
	creds, err := auth.Open(ps)
	if err != nil {
		t.Fatal(err)
	}
	setPassword(t, creds, "alice-pw")
	clock := &testClock{now: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	_, base := startServer(t, Config{Auth: AuthConfig{
		Required: true, Passwords: auth.NewPasswordChecker(creds, time.Minute, 0), FailureDelay: time.Millisecond, Now: clock.Now,
	}}, func(s *Server) {
		s.Handle("GET /test/principal", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte(Principal(r.Context())))
		}))
	})
	return creds, clock, base
}

func setPassword(t *testing.T, creds *auth.Store, password string) {
	t.Helper()
	c, err := auth.NewCredential(auth.ScramSHA512, password, auth.MinIterations)
	if err != nil {
		t.Fatal(err)
	}
	if err := creds.Apply([]auth.Change{{User: "alice", Mechanism: auth.ScramSHA512, Credential: c}}); err != nil {
		t.Fatal(err)
	}
}

func send(t *testing.T, method, url, body string, header http.Header) response {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = header
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: string(raw)}
}

// TestAuthRequired: probes open, everything else 401 unauthorized with a
// Basic challenge; Basic credentials reach the handler as the principal;
// wrong ones are refused, on open routes too they are slowed but served.
func TestAuthRequired(t *testing.T) {
	_, _, base := authServer(t)
	if r := do(t, "GET", base+"/healthz"); r.status != 200 {
		t.Errorf("/healthz: %d", r.status)
	}
	r := do(t, "GET", base+"/test/principal")
	decodeError(t, r, "unauthorized")
	if r.status != 401 || !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Basic realm=") {
		t.Errorf("no credentials: %d, WWW-Authenticate %q", r.status, r.header.Values("WWW-Authenticate"))
	}
	alice := http.Header{"Authorization": {"Basic " + basicToken("alice", "alice-pw")}}
	if r := send(t, "GET", base+"/test/principal", "", alice); r.status != 200 || r.body != "User:alice" {
		t.Errorf("Basic alice: %d %q", r.status, r.body)
	}
	for _, h := range []string{"Basic " + basicToken("alice", "nope"), "Basic " + basicToken("bob", "alice-pw"), "Basic !!", "Bearer x.y.z", "Negotiate abc"} {
		r := send(t, "GET", base+"/test/principal", "", http.Header{"Authorization": {h}})
		if r.status != 401 {
			t.Errorf("%q: %d, want 401", h, r.status)
		}
		if r := send(t, "GET", base+"/readyz", "", http.Header{"Authorization": {h}}); r.status != 200 {
			t.Errorf("/readyz with %q: %d, want 200 (open)", h, r.status)
		}
	}
}

func basicToken(user, password string) string {
	req, _ := http.NewRequest("GET", "/", nil)
	req.SetBasicAuth(user, password)
	return strings.TrimPrefix(req.Header.Get("Authorization"), "Basic ")
}

// TestSessionLifetime: a console login's cookie authenticates with the
// X-Broker-Console header only, until SessionLifetime has passed (injected
// clock) or the user's password changes; whoami reports the principal.
func TestSessionLifetime(t *testing.T) {
	creds, clock, base := authServer(t)
	login := func() string {
		r := send(t, "POST", base+"/v1/auth/login", `{"user":"alice","password":"alice-pw"}`, http.Header{})
		if r.status != 200 {
			t.Fatalf("login: %d %s", r.status, r.body)
		}
		var who whoamiJSON
		if err := json.Unmarshal([]byte(r.body), &who); err != nil || who.Principal != "User:alice" || !who.AuthRequired {
			t.Fatalf("login answer %s", r.body)
		}
		return strings.SplitN(r.header.Get("Set-Cookie"), ";", 2)[0]
	}
	console := func(cookie string) http.Header {
		return http.Header{"Cookie": {cookie}, ConsoleHeader: {"1"}}
	}
	cookie := login()
	if r := send(t, "GET", base+"/test/principal", "", http.Header{"Cookie": {cookie}}); r.status != 401 {
		t.Errorf("cookie without %s: %d", ConsoleHeader, r.status)
	}
	if r := send(t, "GET", base+"/test/principal", "", console(cookie)); r.status != 200 || r.body != "User:alice" {
		t.Errorf("cookie: %d %q", r.status, r.body)
	}
	clock.add(SessionLifetime - time.Second)
	if r := send(t, "GET", base+"/v1/auth/whoami", "", console(cookie)); r.status != 200 {
		t.Errorf("a second before the end: %d", r.status)
	}
	clock.add(time.Second)
	if r := send(t, "GET", base+"/test/principal", "", console(cookie)); r.status != 401 || strings.Contains(r.header.Get("WWW-Authenticate"), "Basic") {
		t.Errorf("after SessionLifetime: %d, WWW-Authenticate %q (the console gets no Basic challenge)", r.status, r.header.Values("WWW-Authenticate"))
	}
	cookie = login()
	setPassword(t, creds, "new-pw")
	if r := send(t, "GET", base+"/test/principal", "", console(cookie)); r.status != 401 {
		t.Errorf("after a password change: %d", r.status)
	}
}

// TestCrossOriginRefused: an unsafe request a browser marks cross-site is
// refused 403 forbidden, with valid credentials and without
// authentication alike; same-origin requests and non-browser clients pass.
func TestCrossOriginRefused(t *testing.T) {
	_, _, base := authServer(t)
	alice := "Basic " + basicToken("alice", "alice-pw")
	r := send(t, "POST", base+"/v1/auth/logout", "", http.Header{"Authorization": {alice}, "Sec-Fetch-Site": {"cross-site"}})
	decodeError(t, r, "forbidden")
	if r.status != 403 {
		t.Errorf("cross-site POST: %d", r.status)
	}
	if r := send(t, "POST", base+"/v1/auth/logout", "", http.Header{"Authorization": {alice}, "Sec-Fetch-Site": {"same-origin"}}); r.status != 204 {
		t.Errorf("same-origin POST: %d", r.status)
	}
	_, open := startServer(t, Config{}, nil)
	if r := send(t, "POST", open+"/v1/auth/logout", "", http.Header{"Origin": {"http://evil.example"}}); r.status != 403 {
		t.Errorf("cross-origin POST without auth: %d", r.status)
	}
	if r := send(t, "POST", open+"/v1/auth/logout", "", http.Header{}); r.status != 204 {
		t.Errorf("POST without browser headers: %d", r.status)
	}
}

// TestEveryRouteHasAccess: every route registered in this package and in
// cmd/broker is in routeAccess (its resource and operation for an
// Authorizer), open (openRoutes), or needs no authorization; each path
// parameter named in routeAccess is one of its pattern's.
func TestEveryRouteHasAccess(t *testing.T) {
	noAuthorization := map[string]bool{"GET /openapi.json": true, "POST /v1/auth/logout": true, "GET " + ConsolePrefix: true}
	files, _ := filepath.Glob("*.go")
	files = append(files, "../cmd/broker/run.go")
	seen := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || f == "access.go" {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range routePattern.FindAllStringSubmatch(string(src), -1) {
			pattern := m[1] + " " + m[2]
			seen++
			if _, ok := routeAccess[pattern]; !ok && !openRoutes[pattern] && !noAuthorization[pattern] {
				t.Errorf("%s: route %s is not in routeAccess (httpapi/access.go): say which resource and operation it needs", f, pattern)
			}
		}
	}
	if seen < 40 {
		t.Fatalf("found only %d routes", seen)
	}
	for pattern, a := range routeAccess {
		if a.param != "" && !strings.Contains(pattern, "{"+a.param+"}") {
			t.Errorf("routeAccess %s names parameter %q, which the pattern lacks", pattern, a.param)
		}
	}
	for pattern := range listRoutes {
		if a, ok := routeAccess[pattern]; !ok || a.param != "" {
			t.Errorf("listRoutes has %s, which is not a route of routeAccess without a path parameter", pattern)
		}
	}
}

// decisionLog is an Authorizer for tests: it records each question and
// denies the resources named in deny.
type decisionLog struct {
	mu   sync.Mutex
	asks []string
	deny map[string]bool
}

func (d *decisionLog) Authorize(principal, host string, op auth.Operation, rt auth.ResourceType, name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.asks = append(d.asks, principal+" "+host+" "+rt.String()+" "+name+" "+op.String())
	return !d.deny[name]
}

// TestAuthorizerDecides: with an Authorizer plugged in, a route asks it
// with the principal, the route's resource type, the name from the path
// and the operation; a refusal is 403 forbidden and the handler does not
// run.
func TestAuthorizerDecides(t *testing.T) {
	ps, err := pebblestore.Open(t.TempDir(), pebblestore.Options{Logger: zerolog.Nop(), MemTableSize: 4 << 20, CacheSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ps.Close() })
	creds, err := auth.Open(ps)
	if err != nil {
		t.Fatal(err)
	}
	setPassword(t, creds, "alice-pw")
	decisions := &decisionLog{deny: map[string]bool{"secret": true}}
	var ran int
	_, base := startServer(t, Config{Auth: AuthConfig{Required: true, Passwords: auth.NewPasswordChecker(creds, 0, 0), Authorizer: decisions}},
		func(s *Server) {
			s.Handle("PUT /v1/queues/{queue}", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { ran++; w.WriteHeader(201) }))
		})
	alice := http.Header{"Authorization": {"Basic " + basicToken("alice", "alice-pw")}}
	if r := send(t, "PUT", base+"/v1/queues/orders", "", alice); r.status != 201 {
		t.Errorf("allowed: %d %s", r.status, r.body)
	}
	r := send(t, "PUT", base+"/v1/queues/secret", "", alice)
	decodeError(t, r, "forbidden")
	if r.status != 403 || ran != 1 {
		t.Errorf("denied: %d, handler ran %d times", r.status, ran)
	}
	want := []string{"User:alice 127.0.0.1 QUEUE orders CREATE", "User:alice 127.0.0.1 QUEUE secret CREATE"}
	if strings.Join(decisions.asks, "|") != strings.Join(want, "|") {
		t.Errorf("the authorizer was asked %q, want %q", decisions.asks, want)
	}
}

// TestAuthNoneIgnoresCredentials: with http-auth none, credentials are
// not checked: a wrong password is served as User:ANONYMOUS, not slowed
// nor refused.
func TestAuthNoneIgnoresCredentials(t *testing.T) {
	_, base := startServer(t, Config{}, func(s *Server) {
		s.Handle("GET /test/principal", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte(Principal(r.Context())))
		}))
	})
	r := send(t, "GET", base+"/test/principal", "", http.Header{"Authorization": {"Basic " + basicToken("x", "y")}})
	if r.status != 200 || r.body != auth.Anonymous {
		t.Errorf("http-auth none with Basic: %d %q", r.status, r.body)
	}
}
