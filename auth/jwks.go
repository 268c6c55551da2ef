package auth

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// A JWKS endpoint (Kafka sasl.oauthbearer.jwks.endpoint.url, KIP-768):
// the identity provider's key set, fetched at start by JWTConfig.JWKSFetch
// (cmd/broker's HTTPS client: auth knows no HTTP), cached,
// refreshed when it is older than the refresh interval (in the
// background, when a token is checked: no ticker of ours) and at once
// when a token names a kid the cache lacks (at most once per
// jwksMinFetchInterval, so a flood of tokens with made-up kids costs one
// fetch per interval). A failed fetch keeps the last good key set.
const (
	// JWKSMaxBytes bounds a key set (the fetch function reads at most one
	// byte more).
	JWKSMaxBytes = 1 << 20
	// jwksFetchTimeout bounds one fetch.
	jwksFetchTimeout = 10 * time.Second
	// jwksMinFetchInterval is the least time between two fetches asked by
	// an unknown kid, and between retries after a failed fetch.
	jwksMinFetchInterval = 10 * time.Second
	// DefaultJWKSRefresh is Kafka's sasl.oauthbearer.jwks.endpoint.refresh.ms.
	DefaultJWKSRefresh = time.Hour
)

// jwksEndpoint fetches and caches a remote key set. keys is swapped
// atomically; mu guards the fetch schedule and is never held across a
// fetch; fetchMu serializes fetches (a leaf).
type jwksEndpoint struct {
	display   string // url without its query, for logs and errors
	fetchKeys func(context.Context) ([]byte, error)
	refresh   time.Duration
	log       zerolog.Logger
	keys      atomic.Pointer[[]jwtKey]
	fetchMu   sync.Mutex
	mu        struct {
		sync.Mutex
		lastAttempt  time.Time // of any fetch (validator's clock)
		lastOnDemand time.Time
		failed       bool // the last fetch failed
		background   bool // a background fetch is running
	}
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newJWKSEndpoint(cfg JWTConfig) *jwksEndpoint {
	e := &jwksEndpoint{display: describeJWKS(cfg.JWKSURL), fetchKeys: cfg.JWKSFetch, refresh: cfg.JWKSRefresh, log: cfg.Logger}
	if e.refresh <= 0 {
		e.refresh = DefaultJWKSRefresh
	}
	e.keys.Store(&[]jwtKey{})
	e.ctx, e.cancel = context.WithCancel(context.Background())
	return e
}

// current returns the cached keys.
func (e *jwksEndpoint) current() []jwtKey { return *e.keys.Load() }

// fetch reads the key set and, when it parses with at least one usable
// key, makes it current. On failure the last good set stays.
func (e *jwksEndpoint) fetch(now time.Time) error {
	e.fetchMu.Lock()
	defer e.fetchMu.Unlock()
	err := e.fetchLocked()
	e.mu.Lock()
	e.mu.lastAttempt, e.mu.failed = now, err != nil
	e.mu.Unlock()
	if err != nil {
		e.log.Warn().Str("url", e.display).Err(err).Int("keys_kept", len(e.current())).
			Msg("fetching the JWKS failed; the last key set stays in use")
		return err
	}
	e.log.Info().Str("url", e.display).Int("keys", len(e.current())).Msg("JWKS fetched")
	return nil
}

func (e *jwksEndpoint) fetchLocked() error {
	ctx, cancel := context.WithTimeout(e.ctx, jwksFetchTimeout)
	defer cancel()
	data, err := e.fetchKeys(ctx)
	if err != nil {
		return err
	}
	if len(data) > JWKSMaxBytes {
		return fmt.Errorf("the key set is larger than %d bytes", JWKSMaxBytes)
	}
	keys, skipped, err := parseJWKS(data, "JWKS endpoint "+e.display, true)
	for _, s := range skipped {
		e.log.Warn().Str("url", e.display).Str("key", s).Msg("a JWKS key cannot be used and is skipped")
	}
	if err != nil {
		return err
	}
	e.keys.Store(&keys)
	return nil
}

// maybeRefresh starts a background fetch when the keys are older than the
// refresh interval (or the last fetch failed more than
// jwksMinFetchInterval ago). The token being checked uses the current
// keys.
func (e *jwksEndpoint) maybeRefresh(now time.Time) {
	e.mu.Lock()
	due := e.refresh
	if e.mu.failed {
		due = min(due, jwksMinFetchInterval)
	}
	if e.mu.background || now.Sub(e.mu.lastAttempt) < due || e.ctx.Err() != nil {
		e.mu.Unlock()
		return
	}
	e.mu.background, e.mu.lastAttempt = true, now
	e.wg.Add(1)
	e.mu.Unlock()
	go func() {
		defer e.wg.Done()
		_ = e.fetch(now)
		e.mu.Lock()
		e.mu.background = false
		e.mu.Unlock()
	}()
}

// fetchForKid fetches at once for a token whose kid the cache lacks,
// unless such a fetch ran less than jwksMinFetchInterval ago; it reports
// whether it fetched a new set.
func (e *jwksEndpoint) fetchForKid(now time.Time) bool {
	e.mu.Lock()
	if !e.mu.lastOnDemand.IsZero() && now.Sub(e.mu.lastOnDemand) < jwksMinFetchInterval {
		e.mu.Unlock()
		return false
	}
	e.mu.lastOnDemand = now
	e.mu.Unlock()
	return e.fetch(now) == nil
}

// close stops a background fetch and waits for it.
func (e *jwksEndpoint) close() {
	e.cancel()
	e.wg.Wait()
}

// hasKid reports whether keys hold one with kid.
func hasKid(keys []jwtKey, kid string) bool {
	for _, k := range keys {
		if k.kid == kid {
			return true
		}
	}
	return false
}

// describeJWKS names the endpoint for errors.
func describeJWKS(u string) string {
	if i := strings.IndexByte(u, '?'); i >= 0 {
		u = u[:i] // a query may carry a secret
	}
	return u
}
