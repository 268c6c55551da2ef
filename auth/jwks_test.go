package auth

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// jwksServer is an identity provider's JWKS endpoint over TLS whose keys
// and health the test changes.
type jwksServer struct {
	srv     *httptest.Server
	mu      sync.Mutex
	keys    map[string]ed25519.PrivateKey
	failing bool
	fetches atomic.Int64
}

func newJWKSServer(t *testing.T) *jwksServer {
	s := &jwksServer{keys: map[string]ed25519.PrivateKey{}}
	s.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.fetches.Add(1)
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.failing {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		var set struct {
			Keys []map[string]string `json:"keys"`
		}
		for kid, k := range s.keys {
			set.Keys = append(set.Keys, map[string]string{"kty": "OKP", "crv": "Ed25519", "kid": kid, "use": "sig",
				"x": base64.RawURLEncoding.EncodeToString(k.Public().(ed25519.PublicKey))})
		}
		// A key type the broker does not take is skipped, not fatal.
		set.Keys = append(set.Keys, map[string]string{"kty": "oct", "kid": "hmac", "k": "c2VjcmV0"})
		_ = json.NewEncoder(w).Encode(set)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// fetch is the JWKSFetch of the tests: a GET over TLS (cmd/broker's
// fetcher adds the URL rules and the size bound).
func (s *jwksServer) fetch(ctx context.Context) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", s.srv.URL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.srv.Client().Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("status %s", resp.Status)
	}
	return io.ReadAll(resp.Body)
}

func (s *jwksServer) addKey(t *testing.T, kid string) ed25519.PrivateKey {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.keys[kid] = priv
	s.mu.Unlock()
	return priv
}

func (s *jwksServer) setFailing(f bool) {
	s.mu.Lock()
	s.failing = f
	s.mu.Unlock()
}

// TestJWKSEndpoint: keys come from an HTTPS JWKS endpoint (KIP-768): a
// token signed by a published key is accepted; after the provider rotates
// (a new kid appears) a token with the new kid makes the broker fetch
// again and is accepted; a made-up kid fetches at most once per
// jwksMinFetchInterval; when the keys are older than the refresh interval
// they are fetched again in the background, and a failed fetch keeps the
// last good keys.
func TestJWKSEndpoint(t *testing.T) {
	idp := newJWKSServer(t)
	k1 := idp.addKey(t, "k1")
	now := jwtNow
	v, err := NewJWTValidator(JWTConfig{JWKSURL: idp.srv.URL + "/jwks", JWKSFetch: idp.fetch, JWKSRefresh: time.Hour, Now: func() time.Time { return jwtNow }})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	tokenFor := func(key ed25519.PrivateKey, kid string) string {
		return sign(t, jwt.SigningMethodEdDSA, key, claims("carol", now.Add(time.Hour)), kid)
	}
	if tok, err := v.Validate(tokenFor(k1, "k1"), now); err != nil || tok.User != "carol" {
		t.Fatalf("token signed by k1: %v %v", tok, err)
	}
	if n := idp.fetches.Load(); n != 1 {
		t.Fatalf("%d fetches after start and one token, want 1", n)
	}

	// Rotation: k2 appears; its first token fetches the set again.
	k2 := idp.addKey(t, "k2")
	now = now.Add(time.Minute)
	if _, err := v.Validate(tokenFor(k2, "k2"), now); err != nil {
		t.Fatalf("token with the new kid k2: %v", err)
	}
	if n := idp.fetches.Load(); n != 2 {
		t.Fatalf("%d fetches after a new kid, want 2", n)
	}

	// Made-up kids: one fetch per interval, however many tokens.
	_, rogue, _ := ed25519.GenerateKey(rand.Reader)
	now = now.Add(jwksMinFetchInterval)
	for i := 0; i < 5; i++ {
		if _, err := v.Validate(tokenFor(rogue, "rogue"), now); err == nil {
			t.Fatal("a token signed by an unpublished key was accepted")
		}
	}
	if n := idp.fetches.Load(); n != 3 {
		t.Fatalf("%d fetches after five tokens with an unknown kid, want 3", n)
	}

	// The provider fails; the keys get old: a background fetch fails and
	// the last keys stay.
	idp.setFailing(true)
	now = now.Add(time.Hour + time.Second)
	if _, err := v.Validate(tokenFor(k1, "k1"), now); err != nil {
		t.Fatalf("token signed by k1 while the refresh starts: %v", err)
	}
	for deadline := time.Now().Add(20 * time.Second); idp.fetches.Load() < 4; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no background fetch after the refresh interval")
		}
	}
	v.remote.wg.Wait()
	for kid, key := range map[string]ed25519.PrivateKey{"k1": k1, "k2": k2} {
		if _, err := v.Validate(tokenFor(key, kid), now); err != nil {
			t.Errorf("token signed by %s after a failed fetch: %v", kid, err)
		}
	}
	v.remote.wg.Wait()
	// A failed fetch is retried after jwksMinFetchInterval, not an hour.
	idp.setFailing(false)
	before := idp.fetches.Load()
	now = now.Add(jwksMinFetchInterval)
	if _, err := v.Validate(tokenFor(k1, "k1"), now); err != nil {
		t.Fatal(err)
	}
	v.remote.wg.Wait()
	if n := idp.fetches.Load(); n != before+1 {
		t.Errorf("%d fetches after the retry interval, want %d", n, before+1)
	}
}

// TestJWKSEndpointDownAtStart: a provider that is down at start does not
// stop the validator, which refuses tokens until a fetch succeeds, and
// then accepts them.
func TestJWKSEndpointDownAtStart(t *testing.T) {
	idp := newJWKSServer(t)
	idp.setFailing(true)
	k1 := idp.addKey(t, "k1")
	v, err := NewJWTValidator(JWTConfig{JWKSURL: idp.srv.URL, JWKSFetch: idp.fetch, Now: func() time.Time { return jwtNow }})
	if err != nil {
		t.Fatalf("provider down at start: %v", err)
	}
	defer v.Close()
	tok := sign(t, jwt.SigningMethodEdDSA, k1, claims("x", jwtNow.Add(time.Hour)), "k1")
	if _, err := v.Validate(tok, jwtNow); err == nil {
		t.Error("a token was accepted with no key fetched")
	}
	idp.setFailing(false)
	if _, err := v.Validate(tok, jwtNow.Add(jwksMinFetchInterval)); err != nil {
		t.Errorf("after the provider is back: %v", err)
	}
}
