package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

var jwtNow = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func writePEMKey(t *testing.T, pub crypto.PublicKey) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "key.pem")
	if err := os.WriteFile(f, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func sign(t *testing.T, m jwt.SigningMethod, key crypto.Signer, claims jwt.MapClaims, kid string) string {
	t.Helper()
	tok := jwt.NewWithClaims(m, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func claims(sub string, exp time.Time) jwt.MapClaims {
	return jwt.MapClaims{"sub": sub, "exp": exp.Unix(), "iat": jwtNow.Add(-time.Minute).Unix(), "iss": "https://idp.example", "aud": []string{"broker"}}
}

// TestJWTValidate: RSA, ECDSA and Ed25519 tokens signed by a configured
// key are accepted with their sub and exp; expired, not yet valid, wrongly
// signed, wrong issuer or audience, alg none, and an HMAC token keyed
// with the public key's bytes (algorithm confusion) are refused.
func TestJWTValidate(t *testing.T) {
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	_, edKey, _ := ed25519.GenerateKey(rand.Reader)
	otherRSA, _ := rsa.GenerateKey(rand.Reader, 2048)
	v, err := NewJWTValidator(JWTConfig{
		PublicKeyFiles: []string{writePEMKey(t, rsaKey.Public()), writePEMKey(t, ecKey.Public()), writePEMKey(t, edKey.Public())},
		Issuer:         "https://idp.example", Audience: "broker",
	})
	if err != nil {
		t.Fatal(err)
	}
	exp := jwtNow.Add(time.Hour)
	for name, tok := range map[string]string{
		"RS256": sign(t, jwt.SigningMethodRS256, rsaKey, claims("alice", exp), ""),
		"PS384": sign(t, jwt.SigningMethodPS384, rsaKey, claims("alice", exp), ""),
		"ES256": sign(t, jwt.SigningMethodES256, ecKey, claims("alice", exp), ""),
		"EdDSA": sign(t, jwt.SigningMethodEdDSA, edKey, claims("alice", exp), ""),
	} {
		got, err := v.Validate(tok, jwtNow)
		if err != nil || got.User != "alice" || !got.Expires.Equal(exp.Truncate(time.Second)) {
			t.Errorf("%s: Validate = %+v, %v", name, got, err)
		}
	}
	der, _ := x509.MarshalPKIXPublicKey(rsaKey.Public())
	hs := jwt.NewWithClaims(jwt.SigningMethodHS256, claims("alice", exp))
	confused, _ := hs.SignedString(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	none, _ := jwt.NewWithClaims(jwt.SigningMethodNone, claims("alice", exp)).SignedString(jwt.UnsafeAllowNoneSignatureType)
	noExp := claims("alice", exp)
	delete(noExp, "exp")
	wrongIss := claims("alice", exp)
	wrongIss["iss"] = "https://evil.example"
	wrongAud := claims("alice", exp)
	wrongAud["aud"] = "other"
	notYet := claims("alice", exp)
	notYet["nbf"] = jwtNow.Add(5 * time.Minute).Unix()
	noSub := claims("", exp)
	for name, tok := range map[string]string{
		"expired":         sign(t, jwt.SigningMethodRS256, rsaKey, claims("alice", jwtNow.Add(-time.Minute)), ""),
		"wrong signature": sign(t, jwt.SigningMethodRS256, otherRSA, claims("alice", exp), ""),
		"alg none":        none,
		"HS256 confusion": confused,
		"no exp":          sign(t, jwt.SigningMethodRS256, rsaKey, noExp, ""),
		"wrong issuer":    sign(t, jwt.SigningMethodRS256, rsaKey, wrongIss, ""),
		"wrong audience":  sign(t, jwt.SigningMethodRS256, rsaKey, wrongAud, ""),
		"not yet valid":   sign(t, jwt.SigningMethodRS256, rsaKey, notYet, ""),
		"no sub":          sign(t, jwt.SigningMethodRS256, rsaKey, noSub, ""),
		"garbage":         "a.b.c",
	} {
		if got, err := v.Validate(tok, jwtNow); !errors.Is(err, ErrAuthenticationFailed) {
			t.Errorf("%s: Validate = %+v, %v; want a failure", name, got, err)
		}
	}
	// Within the clock skew (30s) an expired token still passes.
	if _, err := v.Validate(sign(t, jwt.SigningMethodRS256, rsaKey, claims("alice", jwtNow.Add(-10*time.Second)), ""), jwtNow); err != nil {
		t.Errorf("a token 10s past exp was refused within the 30s skew: %v", err)
	}
}

// TestJWKS: keys of a JWKS file are matched by kid; a token whose kid
// names another key fails even when an unnamed key would verify it.
func TestJWKS(t *testing.T) {
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	b := func(x []byte) string { return base64.RawURLEncoding.EncodeToString(x) }
	ecBytes, _ := ecKey.PublicKey.Bytes()
	size := (len(ecBytes) - 1) / 2
	set := map[string]any{"keys": []map[string]string{
		{"kty": "RSA", "kid": "r1", "use": "sig", "n": b(rsaKey.N.Bytes()), "e": b(big.NewInt(int64(rsaKey.E)).Bytes())},
		{"kty": "EC", "kid": "e1", "crv": "P-384", "x": b(ecBytes[1 : 1+size]), "y": b(ecBytes[1+size:])},
		{"kty": "RSA", "kid": "enc", "use": "enc", "n": "AQAB", "e": "AQAB"},
	}}
	raw, _ := json.Marshal(set)
	f := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(f, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	v, err := NewJWTValidator(JWTConfig{JWKSFile: f})
	if err != nil {
		t.Fatal(err)
	}
	exp := jwtNow.Add(time.Hour)
	for name, tok := range map[string]string{
		"RS256 r1": sign(t, jwt.SigningMethodRS256, rsaKey, claims("bob", exp), "r1"),
		"ES384 e1": sign(t, jwt.SigningMethodES384, ecKey, claims("bob", exp), "e1"),
		"no kid":   sign(t, jwt.SigningMethodRS256, rsaKey, claims("bob", exp), ""),
	} {
		if got, err := v.Validate(tok, jwtNow); err != nil || got.User != "bob" {
			t.Errorf("%s: %+v, %v", name, got, err)
		}
	}
	if _, err := v.Validate(sign(t, jwt.SigningMethodRS256, rsaKey, claims("bob", exp), "e1"), jwtNow); err == nil {
		t.Error("a token whose kid names another key was accepted")
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	_ = os.WriteFile(bad, []byte(`{"keys":[{"kty":"EC","crv":"P-256","x":"AAAA","y":"AAAA"}]}`), 0o600)
	if _, err := NewJWTValidator(JWTConfig{JWKSFile: bad}); err == nil || !strings.Contains(err.Error(), "bad.json") {
		t.Errorf("a JWKS with a bad EC point: %v", err)
	}
}

// TestOAuthBearerSession: KIP-255 client messages (franz-go's and Kafka's
// form) authenticate the token's sub, and the session carries the token's
// exp; malformed messages and an authzid that differs fail.
func TestOAuthBearerSession(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	v, err := NewJWTValidator(JWTConfig{PublicKeyFiles: []string{writePEMKey(t, key.Public())}})
	if err != nil {
		t.Fatal(err)
	}
	exp := jwtNow.Add(10 * time.Minute)
	tok := sign(t, jwt.SigningMethodES256, key, claims("carol", exp), "")
	now := func() time.Time { return jwtNow }
	for _, msg := range []string{
		"n,,\x01auth=Bearer " + tok + "\x01\x01",
		"n,a=carol,\x01auth=Bearer " + tok + "\x01\x01",
		"n,,\x01host=x\x01auth=bearer " + tok + "\x01ext=1\x01\x01",
	} {
		s := NewOAuthBearerSession(v, now)
		reply, done, err := s.Step([]byte(msg))
		if err != nil || !done || len(reply) != 0 || s.User() != "carol" || !s.Expires().Equal(exp.Truncate(time.Second)) {
			t.Errorf("%q: done=%v err=%v user=%q expires=%v", msg, done, err, s.User(), s.Expires())
		}
	}
	for _, msg := range []string{
		"", "n,,", "n,,\x01\x01", "n,,\x01auth=Basic abc\x01\x01", "x,,\x01auth=Bearer " + tok + "\x01\x01",
		"n,a=mallory,\x01auth=Bearer " + tok + "\x01\x01", "n,,\x01auth=Bearer notajwt\x01\x01",
	} {
		s := NewOAuthBearerSession(v, now)
		if _, done, err := s.Step([]byte(msg)); done || !errors.Is(err, ErrAuthenticationFailed) {
			t.Errorf("%q: done=%v err=%v; want a failure", msg, done, err)
		}
	}
}

// TestPasswordChecker: a right password passes and is cached; a wrong one
// or an unknown user fails; a changed password misses the cache at once,
// and an entry ends after its TTL.
func TestPasswordChecker(t *testing.T) {
	store := testStore(t, "alice")
	p := NewPasswordChecker(store, time.Minute, 2)
	if !p.Check("alice", "alice-pw", jwtNow) || p.Len() != 1 {
		t.Fatal("the right password failed or was not cached")
	}
	if p.Check("alice", "wrong", jwtNow) || p.Check("nobody", "x", jwtNow) || p.Check("", "", jwtNow) {
		t.Fatal("a wrong password or an unknown user passed")
	}
	stamp := p.Stamp("alice")
	c, _ := NewCredential(ScramSHA512, "new-pw", MinIterations)
	if err := store.Apply([]Change{{User: "alice", Mechanism: ScramSHA512, Credential: c}}); err != nil {
		t.Fatal(err)
	}
	if p.Check("alice", "alice-pw", jwtNow) {
		t.Error("the old password passed from the cache after it was changed")
	}
	if p.StillValid("alice", stamp) {
		t.Error("a session stamp survived the password change")
	}
	if !p.Check("alice", "new-pw", jwtNow) || !p.StillValid("alice", p.Stamp("alice")) {
		t.Error("the new password failed")
	}
	for i := range 3 {
		p.Check("x", "y", jwtNow.Add(time.Duration(i)))
	}
	if p.Len() > 2 {
		t.Errorf("cache holds %d entries, bound 2", p.Len())
	}
}

// BenchmarkPasswordChecker measures one HTTP Basic check: "derive" pays
// the PBKDF2 of the stored iteration count each time, "cached" is a
// request within the TTL.
func BenchmarkPasswordChecker(b *testing.B) {
	store := testStore(b, "alice")
	b.Run("derive", func(b *testing.B) {
		for range b.N {
			if _, ok := verifyPassword(store, "alice", "alice-pw"); !ok {
				b.Fatal("failed")
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		p := NewPasswordChecker(store, time.Hour, 0)
		for range b.N {
			if !p.Check("alice", "alice-pw", jwtNow) {
				b.Fatal("failed")
			}
		}
	})
}
