package compattests

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// httpCall sends one request to the broker's HTTP listener; set adds the
// credentials. It returns the status, the JSON error code (if any), the
// response headers and the body.
func httpCall(t *testing.T, method, url string, body string, set func(*http.Request)) (int, string, http.Header, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if set != nil {
		set(req)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var e struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(raw, &e)
	return resp.StatusCode, e.Code, resp.Header, raw
}

func basic(user, password string) func(*http.Request) {
	return func(r *http.Request) { r.SetBasicAuth(user, password) }
}

func bearer(token string) func(*http.Request) {
	return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) }
}

// runBrokerCLI runs the broker binary with args and extra environment.
func runBrokerCLI(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, brokerBin, args...)
	cmd.Env = append(brokerEnv(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return stdout.String(), stderr.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatalf("broker %v: %v", args, err)
	}
	return stdout.String(), stderr.String(), 0
}

// TestSecurityHTTPAuth: http-auth required. /healthz and /readyz answer
// without credentials; the native API and /metrics answer 401
// unauthorized with WWW-Authenticate (Basic, Bearer) and the JSON error
// to no credentials, a wrong password, an unknown user, an expired or
// wrongly signed JWT, another scheme; Basic with a broker user and Bearer
// with a JWT (RSA and ECDSA) are served with their principal; failures
// are counted; the console's login sets an HttpOnly SameSite=Strict
// cookie that works only with the X-Broker-Console header and ends at
// logout; the CLI takes credentials from flags, the environment and a
// token file.
func TestSecurityHTTPAuth(t *testing.T) {
	ti := newTokenIssuer(t)
	b := startSecureBroker(t, append(ti.brokerArgs(), "--http-auth", "required")...)
	base := "http://" + b.HTTPAddr()
	hour := time.Now().Add(time.Hour)

	for _, path := range []string{"/healthz", "/readyz", "/ui/"} {
		if status, _, _, _ := httpCall(t, "GET", base+path, "", nil); status != 200 {
			t.Errorf("GET %s without credentials: %d, want 200", path, status)
		}
	}
	status, code, hdr, _ := httpCall(t, "GET", base+"/v1/queues", "", nil)
	challenges := strings.Join(hdr.Values("WWW-Authenticate"), "; ")
	if status != 401 || code != "unauthorized" || !strings.Contains(challenges, "Basic realm=") || !strings.Contains(challenges, "Bearer realm=") {
		t.Fatalf("GET /v1/queues without credentials: %d %q, WWW-Authenticate %q", status, code, challenges)
	}
	refused := map[string]func(*http.Request){
		"wrong password":  basic(adminUser, "wrong"),
		"unknown user":    basic("nobody", adminPassword),
		"expired JWT":     bearer(ti.token(t, "rsa", "svc", time.Now().Add(-5*time.Minute), nil)),
		"wrong signature": bearer(ti.token(t, "other", "svc", hour, nil)),
		"wrong audience":  bearer(ti.token(t, "ec", "svc", hour, func(c jwt.MapClaims) { c["aud"] = "x" })),
		"not a JWT":       bearer("abc"),
		"other scheme":    func(r *http.Request) { r.Header.Set("Authorization", "Digest x") },
	}
	for name, set := range refused {
		for _, path := range []string{"/v1/queues", "/metrics", "/v1/admin/topics"} {
			if status, code, _, _ := httpCall(t, "GET", base+path, "", set); status != 401 || code != "unauthorized" {
				t.Errorf("%s on %s: %d %q, want 401 unauthorized", name, path, status, code)
			}
		}
	}
	if status, _, _, _ := httpCall(t, "GET", base+"/metrics", "", nil); status != 401 {
		t.Errorf("/metrics without credentials: %d, want 401 (http-auth-metrics required)", status)
	}
	allowed := map[string]func(*http.Request){
		"User:" + adminUser: basic(adminUser, adminPassword),
		"User:svc-rsa":      bearer(ti.token(t, "rsa", "svc-rsa", hour, nil)),
		"User:svc-ec":       bearer(ti.token(t, "ec", "svc-ec", hour, nil)),
	}
	for principal, set := range allowed {
		if status, _, _, raw := httpCall(t, "PUT", base+"/v1/queues/q-"+strings.TrimPrefix(principal, "User:"), `{}`, set); status/100 != 2 {
			t.Errorf("%s: create queue: %d %s", principal, status, raw)
		}
		_, _, _, raw := httpCall(t, "GET", base+"/v1/auth/whoami", "", set)
		var who struct {
			Principal    string `json:"principal"`
			AuthRequired bool   `json:"auth_required"`
		}
		if err := json.Unmarshal(raw, &who); err != nil || who.Principal != principal || !who.AuthRequired {
			t.Errorf("whoami: %s, want %s", raw, principal)
		}
	}
	_, _, _, metrics := httpCall(t, "GET", base+"/metrics", "", basic(adminUser, adminPassword))
	if !bytes.Contains(metrics, []byte(`broker_http_authentication_failures_total{scheme="basic"}`)) ||
		bytes.Contains(metrics, []byte(`broker_http_authentication_failures_total{scheme="basic"} 0`)) {
		t.Error("failed Basic authentications are not counted on /metrics")
	}
	if strings.Contains(b.Log(), adminPassword) {
		t.Error("the broker log holds the admin password")
	}

	t.Run("console session", func(t *testing.T) { checkConsoleSession(t, base) })
	t.Run("cli", func(t *testing.T) { checkCLICredentials(t, b, ti) })
}

func checkConsoleSession(t *testing.T, base string) {
	if status, _, _, _ := httpCall(t, "POST", base+"/v1/auth/login", `{"user":"admin","password":"nope"}`, nil); status != 401 {
		t.Fatalf("login with a wrong password: %d", status)
	}
	status, _, hdr, raw := httpCall(t, "POST", base+"/v1/auth/login", `{"user":"admin","password":"`+adminPassword+`"}`, nil)
	setCookie := hdr.Get("Set-Cookie")
	if status != 200 || !strings.Contains(setCookie, "HttpOnly") || !strings.Contains(setCookie, "SameSite=Strict") {
		t.Fatalf("login: %d %s, Set-Cookie %q", status, raw, setCookie)
	}
	cookie := strings.SplitN(setCookie, ";", 2)[0]
	withCookie := func(header bool) func(*http.Request) {
		return func(r *http.Request) {
			r.Header.Set("Cookie", cookie)
			if header {
				r.Header.Set("X-Broker-Console", "1")
			}
		}
	}
	if status, _, _, _ := httpCall(t, "GET", base+"/v1/queues", "", withCookie(false)); status != 401 {
		t.Errorf("the session cookie without X-Broker-Console: %d, want 401", status)
	}
	if status, _, _, _ := httpCall(t, "GET", base+"/v1/queues", "", withCookie(true)); status != 200 {
		t.Errorf("the session cookie with X-Broker-Console: %d, want 200", status)
	}
	if status, _, _, _ := httpCall(t, "POST", base+"/v1/auth/logout", "", withCookie(true)); status != 204 {
		t.Errorf("logout: %d", status)
	}
	status, _, hdr, _ = httpCall(t, "GET", base+"/v1/queues", "", withCookie(true))
	if status != 401 || strings.Contains(strings.Join(hdr.Values("WWW-Authenticate"), ";"), "Basic") {
		t.Errorf("after logout: %d, WWW-Authenticate %q (want 401 without a Basic challenge for the console)", status, hdr.Values("WWW-Authenticate"))
	}
}

func checkCLICredentials(t *testing.T, b *secureBroker, ti *tokenIssuer) {
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "pw")
	tokFile := filepath.Join(dir, "token")
	if err := os.WriteFile(pwFile, []byte(adminPassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tokFile, []byte(ti.token(t, "rsa", "cli", time.Now().Add(time.Hour), nil)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	server := []string{"queue", "list", "--server", b.HTTPAddr(), "-o", "json"}
	if _, errOut, code := runBrokerCLI(t, nil, server...); code != 1 || !strings.Contains(errOut, "unauthorized") || !strings.Contains(errOut, "--user") {
		t.Errorf("no credentials: exit %d, stderr %q", code, errOut)
	}
	if _, errOut, code := runBrokerCLI(t, nil, append(server, "--user", adminUser, "--password-file", tokFile)...); code != 1 || !strings.Contains(errOut, "unauthorized") {
		t.Errorf("wrong password: exit %d, stderr %q", code, errOut)
	}
	for name, run := range map[string]func() (string, string, int){
		"flags": func() (string, string, int) {
			return runBrokerCLI(t, nil, append(server, "--user", adminUser, "--password-file", pwFile)...)
		},
		"env": func() (string, string, int) {
			return runBrokerCLI(t, []string{"BROKER_CLIENT_SASL_USER=" + adminUser, "BROKER_CLIENT_SASL_PASSWORD=" + adminPassword}, server...)
		},
		"token file": func() (string, string, int) { return runBrokerCLI(t, nil, append(server, "--token-file", tokFile)...) },
		"token env": func() (string, string, int) {
			return runBrokerCLI(t, []string{"BROKER_CLIENT_TOKEN_FILE=" + tokFile}, server...)
		},
	} {
		out, errOut, code := run()
		if code != 0 || !strings.Contains(out, "q-admin") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", name, code, out, errOut)
		}
	}
}

// TestSecurityHTTPAuthMetricsOpen: with http-auth-metrics open, /metrics
// and /debug/pprof/ answer without credentials while the native API still
// needs them; with http-auth none (the default) everything is open.
func TestSecurityHTTPAuthMetricsOpen(t *testing.T) {
	b := startBroker(t, withArgs("--http-auth", "required", "--http-auth-metrics", "open"))
	base := "http://" + b.HTTPAddr()
	for path, want := range map[string]int{"/metrics": 200, "/debug/pprof/": 200, "/v1/queues": 401, "/v1/admin/overview": 401} {
		if status, _, _, _ := httpCall(t, "GET", base+path, "", nil); status != want {
			t.Errorf("GET %s: %d, want %d", path, status, want)
		}
	}
	open := startBroker(t)
	for _, path := range []string{"/metrics", "/v1/queues", "/v1/admin/overview"} {
		if status, _, _, _ := httpCall(t, "GET", "http://"+open.HTTPAddr()+path, "", nil); status != 200 {
			t.Errorf("http-auth none: GET %s: %d, want 200", path, status)
		}
	}
	_, _, _, raw := httpCall(t, "GET", "http://"+open.HTTPAddr()+"/v1/auth/whoami", "", nil)
	if !strings.Contains(string(raw), `"principal":"User:ANONYMOUS"`) || !strings.Contains(string(raw), `"auth_required":false`) {
		t.Errorf("whoami with http-auth none: %s", raw)
	}
}
