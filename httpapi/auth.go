package httpapi

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/vibemq/broker/auth"
	"github.com/vibemq/broker/internal/metrics"
)

// AuthConfig is HTTP authentication (issue 12 part 5): the native API
// under the same principals as the Kafka listeners.
type AuthConfig struct {
	// Required makes every route but the open ones (/healthz, /readyz,
	// the console's files, the login route; /metrics and /debug/pprof/
	// with MetricsOpen) answer 401 unauthorized without valid credentials.
	Required bool
	// Passwords checks HTTP Basic credentials (and console logins) against
	// the SCRAM users; nil refuses Basic.
	Passwords *auth.PasswordChecker
	// JWT checks "Authorization: Bearer <JWT>" with the OAUTHBEARER
	// settings; nil refuses Bearer.
	JWT *auth.JWTValidator
	// MetricsOpen serves /metrics and /debug/pprof/ without credentials.
	MetricsOpen bool
	// FailureDelay is the delay of a failed authentication from an
	// address; repeated failures within a minute wait n times as long, at
	// most 5s (as the Kafka listeners: connection-failed-authentication-delay).
	FailureDelay time.Duration
	// Authorizer, when set, decides every route of routeAccess
	// (access.go) with the request's principal and address.
	Authorizer Authorizer
	// Now is the clock of token expiry and sessions (default time.Now).
	Now func() time.Time
}

// Authorizer decides whether a principal ("User:alice") connected from
// host (the client's IP address, as netip writes it) may do op on a
// resource of the ACL model (auth's resource types: Kafka's, and the
// native Queue and Store). *auth.Authorizer is one: the same ACLs and
// decision as the Kafka listeners. Without one every authenticated
// principal may do everything (as Kafka without an authorizer).
type Authorizer interface {
	Authorize(principal, host string, op auth.Operation, rt auth.ResourceType, name string) bool
}

// Authorize asks the configured Authorizer about r's principal and
// address; the error (403 forbidden) is the route's answer. Nil without
// an Authorizer.
func (s *Server) Authorize(r *http.Request, rt auth.ResourceType, name string, op auth.Operation) error {
	if s.cfg.Auth.Authorizer == nil {
		return nil
	}
	p := Principal(r.Context())
	if s.cfg.Auth.Authorizer.Authorize(p, clientIP(r).String(), op, rt, name) {
		return nil
	}
	return newNativeError("forbidden", "%s may not %s %s %q: ask an administrator for an ACL (broker acls add --principal %s --operation %s ...)", p, op, rt, name, p, op)
}

type principalKey struct{}

// Principal is the authenticated principal of a request ("User:alice"),
// or User:ANONYMOUS when HTTP authentication is off or the route is open.
func Principal(ctx context.Context) string {
	if p, ok := ctx.Value(principalKey{}).(string); ok {
		return p
	}
	return auth.Anonymous
}

// Session cookies of the console's login (POST /v1/auth/login).
const (
	// SessionCookie holds the session token: HttpOnly, SameSite=Strict,
	// Secure on HTTPS.
	SessionCookie = "broker_session"
	// ConsoleHeader must accompany every request authenticated by the
	// session cookie: a custom header needs a CORS preflight, which this
	// listener never answers, so another origin of the same site (another
	// port on the same host, where SameSite does not help) cannot send
	// the cookie with a request that acts.
	ConsoleHeader = "X-Broker-Console"
	// SessionLifetime is how long a login lasts.
	SessionLifetime = 8 * time.Hour
	// maxSessions bounds the session table; when full, expired sessions
	// and then the oldest go.
	maxSessions = 10000
)

// ConsolePrefix is where cmd/broker mounts the console (console.Prefix).
const ConsolePrefix = "/ui/"

// openRoutes are served without credentials, by mux pattern.
var openRoutes = map[string]bool{
	"GET /healthz":         true,
	"GET /readyz":          true,
	"GET " + ConsolePrefix: true, // the console's files: its login form
	"POST /v1/auth/login":  true,
	"GET /v1/auth/whoami":  true, // answers 401 itself without credentials
}

func isMetricsRoute(pattern string) bool {
	return pattern == "GET /metrics" || strings.HasPrefix(pattern, "GET /debug/pprof/")
}

// authState is the server's authentication state.
type authState struct {
	failures *auth.FailureDelay
	failed   *prometheus.CounterVec
	sessions sessionTable
}

func newAuthState(cfg *AuthConfig, reg prometheus.Registerer) *authState {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	step := cfg.FailureDelay
	if step <= 0 {
		step = 100 * time.Millisecond
	}
	a := &authState{
		failures: &auth.FailureDelay{Step: step, Max: max(5*time.Second, step), Window: time.Minute, MaxAddresses: 10000},
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "broker_http_authentication_failures_total",
			Help: "HTTP requests refused 401 with credentials that were wrong, by scheme: basic, bearer, session, login."}, []string{"scheme"}),
	}
	for _, s := range []string{"basic", "bearer", "session", "login"} {
		a.failed.WithLabelValues(s)
	}
	if reg != nil {
		a.failed = metrics.RegisterOrExisting(reg, a.failed)
	}
	a.sessions.byHash = map[[32]byte]session{}
	return a
}

// credentials is what a request presented.
type credentials struct {
	scheme    string // "basic", "bearer", "session", or "" for none
	principal string
	ok        bool
	reason    string
}

// crossOrigin refuses unsafe cross-origin browser requests (Go's
// CrossOriginProtection: Sec-Fetch-Site, else Origin against Host), on
// every route whether authentication is on or not: a page of another
// site (or another port of this host) can make a browser send a POST
// without a JSON Content-Type and without a preflight, with cached Basic
// credentials attached. Clients that are not browsers send neither header.
var crossOrigin = http.NewCrossOriginProtection()

// authenticate checks r's credentials when the route needs them. It
// returns the request carrying its principal, or false after answering
// 401.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request, pattern string) (*http.Request, bool) {
	if err := crossOrigin.Check(r); err != nil {
		writeError(w, newNativeError("forbidden", "a cross-origin request from a browser is refused (%v): use the console served by this broker, or a client that is not a browser", err))
		return nil, false
	}
	cfg := &s.cfg.Auth
	if !cfg.Required {
		// http-auth none: credentials are not looked at (a scraper sending
		// a stale password is neither slowed nor refused); every request
		// is User:ANONYMOUS.
		return r, true
	}
	open := openRoutes[pattern] || (cfg.MetricsOpen && isMetricsRoute(pattern))
	c := s.credentials(r)
	if c.ok {
		s.auth.failures.Succeeded(clientIP(r))
		return r.WithContext(context.WithValue(r.Context(), principalKey{}, c.principal)), true
	}
	if c.scheme != "" && c.scheme != "session" {
		// Slowed on open routes too, or /healthz would let anyone try
		// passwords at full speed.
		s.failedAuthentication(r, c.scheme, c.principal, c.reason)
	}
	switch {
	case open:
		return r, true // served as User:ANONYMOUS
	case c.scheme == "":
		s.unauthorized(w, r, "this request needs credentials: send Authorization: Basic with a broker user (broker users create), or Bearer with a JWT, or log in to the console")
	default:
		s.unauthorized(w, r, "authentication failed: "+c.reason)
	}
	return nil, false
}

// credentials reads and checks r's Authorization header, else its session
// cookie.
func (s *Server) credentials(r *http.Request) credentials {
	cfg := &s.cfg.Auth
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, value, _ := strings.Cut(h, " ")
		value = strings.TrimSpace(value)
		switch {
		case strings.EqualFold(scheme, "Basic"):
			user, password, ok := r.BasicAuth()
			c := credentials{scheme: "basic", principal: auth.UserPrincipal(user)}
			switch {
			case !ok:
				c.reason = "the Basic credentials are not base64 of user:password"
			case cfg.Passwords == nil:
				c.reason = "Basic authentication is not enabled"
			case !cfg.Passwords.Check(user, password, cfg.Now()):
				c.reason = "invalid user name or password"
			default:
				c.ok = true
			}
			return c
		case strings.EqualFold(scheme, "Bearer"):
			c := credentials{scheme: "bearer"}
			if cfg.JWT == nil {
				c.reason = "Bearer tokens are not enabled (configure sasl-oauthbearer-jwks-file or sasl-oauthbearer-public-key-files)"
				return c
			}
			t, err := cfg.JWT.Validate(value, cfg.Now())
			if err != nil {
				c.reason = strings.TrimPrefix(err.Error(), auth.ErrAuthenticationFailed.Error()+": ")
				return c
			}
			c.principal, c.ok = auth.UserPrincipal(t.User), true
			return c
		}
		return credentials{scheme: "other", reason: "the Authorization scheme is not Basic or Bearer"}
	}
	if ck, err := r.Cookie(SessionCookie); err == nil && ck.Value != "" {
		c := credentials{scheme: "session"}
		sess, ok := s.auth.sessions.lookup(ck.Value, cfg.Now())
		switch {
		case !ok:
			c.reason = "the console session has expired; log in again"
		case cfg.Passwords == nil || !cfg.Passwords.StillValid(sess.user, sess.stamp):
			s.auth.sessions.remove(ck.Value)
			c.reason = "the user's password changed or the user was deleted; log in again"
		case r.Header.Get(ConsoleHeader) == "":
			c.reason = "a request with the console's session cookie must carry the " + ConsoleHeader + " header"
		default:
			c.principal, c.ok = auth.UserPrincipal(sess.user), true
		}
		return c
	}
	return credentials{}
}

// failedAuthentication logs (rate-limited), counts and slows a failure.
func (s *Server) failedAuthentication(r *http.Request, scheme, principal, reason string) {
	ip := clientIP(r)
	delay := s.auth.failures.Failed(ip, s.cfg.Auth.Now())
	if scheme == "other" {
		scheme = "basic"
	}
	s.auth.failed.WithLabelValues(scheme).Inc()
	s.warnLimited("http_auth_failed", func(e *zerolog.Event) {
		e.Str("remote_addr", r.RemoteAddr).Str("scheme", scheme).Str("principal", principal).Str("reason", reason).
			Dur("delay", delay).Msg("HTTP authentication failed")
	})
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
	case <-s.stopping:
	}
}

// unauthorized answers 401 with its challenges (RFC 9110 section 11.6.1).
// The console's own requests get no Basic challenge, which would make the
// browser open its password dialog instead of the console's form.
func (s *Server) unauthorized(w http.ResponseWriter, r *http.Request, msg string) {
	h := w.Header()
	if r.Header.Get(ConsoleHeader) == "" {
		h.Add("WWW-Authenticate", `Basic realm="broker", charset="UTF-8"`)
	}
	if s.cfg.Auth.JWT != nil || r.Header.Get(ConsoleHeader) != "" {
		h.Add("WWW-Authenticate", `Bearer realm="broker"`)
	}
	writeError(w, newNativeError("unauthorized", "%s", msg))
}

// clientIP is the peer address failures are counted by.
func clientIP(r *http.Request) netip.Addr {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, _ := netip.ParseAddr(host)
	return a.Unmap()
}

// session is one console login.
type session struct {
	user    string
	stamp   []byte // the StoredKey the password matched: a change ends the session
	expires time.Time
}

// sessionTable holds the console's logins by the SHA-256 of their token
// (the token itself is not kept). At most maxSessions.
type sessionTable struct {
	mu     sync.Mutex
	byHash map[[32]byte]session
}

func (t *sessionTable) create(sess session, now time.Time) string {
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	token := base64.RawURLEncoding.EncodeToString(raw)
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.byHash) >= maxSessions {
		var oldest [32]byte
		var oldestAt time.Time
		for h, s := range t.byHash {
			if !now.Before(s.expires) {
				delete(t.byHash, h)
			} else if oldestAt.IsZero() || s.expires.Before(oldestAt) {
				oldest, oldestAt = h, s.expires
			}
		}
		if len(t.byHash) >= maxSessions {
			delete(t.byHash, oldest)
		}
	}
	t.byHash[sha256.Sum256([]byte(token))] = sess
	return token
}

func (t *sessionTable) lookup(token string, now time.Time) (session, bool) {
	h := sha256.Sum256([]byte(token))
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.byHash[h]
	if ok && !now.Before(s.expires) {
		delete(t.byHash, h)
		return session{}, false
	}
	return s, ok
}

func (t *sessionTable) remove(token string) {
	t.mu.Lock()
	delete(t.byHash, sha256.Sum256([]byte(token)))
	t.mu.Unlock()
}

// registerAuthRoutes adds the console's login, logout and whoami.
func (s *Server) registerAuthRoutes() {
	s.mux.HandleFunc("POST /v1/auth/login", s.handleLogin)
	s.mux.HandleFunc("POST /v1/auth/logout", s.handleLogout)
	s.mux.HandleFunc("GET /v1/auth/whoami", s.handleWhoami)
}

type loginJSON struct {
	User     string `json:"user"`
	Password string `json:"password"`
}

type whoamiJSON struct {
	Principal    string `json:"principal"`
	AuthRequired bool   `json:"auth_required"`
	Expires      string `json:"expires,omitempty"`
}

// handleLogin checks a user and password and sets the session cookie.
func (s *Server) handleLogin(w http.ResponseWriter, r *http.Request) {
	var body loginJSON
	if e := decodeBody(w, r, bodyRule{limit: smallBodyLimit, required: true}, &body); e != nil {
		writeError(w, e)
		return
	}
	cfg := &s.cfg.Auth
	now := cfg.Now()
	if cfg.Passwords == nil || !cfg.Passwords.Check(body.User, body.Password, now) {
		s.failedAuthentication(r, "login", auth.UserPrincipal(body.User), "invalid user name or password")
		s.unauthorized(w, r, "invalid user name or password")
		return
	}
	s.auth.failures.Succeeded(clientIP(r))
	expires := now.Add(SessionLifetime)
	token := s.auth.sessions.create(session{user: body.User, stamp: cfg.Passwords.Stamp(body.User), expires: expires}, now)
	http.SetCookie(w, &http.Cookie{
		Name: SessionCookie, Value: token, Path: "/", Expires: expires, MaxAge: int(SessionLifetime / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	writeJSON(w, http.StatusOK, whoamiJSON{Principal: auth.UserPrincipal(body.User), AuthRequired: cfg.Required, Expires: formatTime(expires)})
}

// handleLogout ends the session of the request's cookie.
func (s *Server) handleLogout(w http.ResponseWriter, r *http.Request) {
	if ck, err := r.Cookie(SessionCookie); err == nil {
		s.auth.sessions.remove(ck.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	w.WriteHeader(http.StatusNoContent)
}

// handleWhoami answers the request's principal; 401 when authentication
// is required and the request has no valid credentials (the console shows
// its login form then).
func (s *Server) handleWhoami(w http.ResponseWriter, r *http.Request) {
	p := Principal(r.Context())
	if s.cfg.Auth.Required && p == auth.Anonymous {
		s.unauthorized(w, r, "not logged in")
		return
	}
	writeJSON(w, http.StatusOK, whoamiJSON{Principal: p, AuthRequired: s.cfg.Auth.Required})
}
