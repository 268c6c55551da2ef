package auth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/rs/zerolog"
)

// JWTConfig says which bearer tokens (JWTs, RFC 7519) the broker accepts:
// the SASL mechanism OAUTHBEARER (KIP-255) and HTTP's Authorization:
// Bearer use the same settings.
type JWTConfig struct {
	// PublicKeyFiles are PEM files of public keys (RSA, ECDSA, Ed25519;
	// "PUBLIC KEY" blocks or certificates) that may sign tokens.
	PublicKeyFiles []string
	// JWKSFile is a JSON Web Key Set file (RFC 7517) of signing keys; keys
	// with a kid are matched to the token's kid.
	JWKSFile string
	// JWKSURL names a JWKS endpoint (Kafka sasl.oauthbearer.jwks.endpoint.url)
	// in logs; JWKSFetch reads its key set (at most JWKSMaxBytes+1 bytes),
	// within the context's deadline. Fetched at start and cached; see
	// jwks.go for when it is fetched again.
	JWKSURL   string
	JWKSFetch func(ctx context.Context) ([]byte, error)
	// JWKSRefresh is how old the fetched keys may get before they are
	// fetched again (default DefaultJWKSRefresh, Kafka's one hour).
	JWKSRefresh time.Duration
	// Logger logs fetches of the JWKS endpoint (zero: nothing).
	Logger zerolog.Logger
	// Now is the clock of the JWKS endpoint's first fetch (default
	// time.Now); later fetches are timed by Validate's now.
	Now func() time.Time
	// Issuer, when set, must equal the token's iss.
	Issuer string
	// Audience, when set, must be one of the token's aud.
	Audience string
	// PrincipalClaim names the claim that becomes the user name (default
	// "sub").
	PrincipalClaim string
	// ClockSkew is allowed on exp, nbf and iat (default 30s).
	ClockSkew time.Duration
}

// Enabled reports whether any signing key is configured.
func (c JWTConfig) Enabled() bool {
	return len(c.PublicKeyFiles) > 0 || c.JWKSFile != "" || c.JWKSURL != "" || c.JWKSFetch != nil
}

// signingAlgorithms are the accepted "alg" values: asymmetric only, so
// that a public key can never be used as an HMAC secret, and never "none".
var signingAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// JWTValidator checks bearer tokens against the configured keys: the
// files' keys, read-only after NewJWTValidator, and a JWKS endpoint's
// cached set. It is safe for concurrent use; Close stops its fetches.
type JWTValidator struct {
	cfg    JWTConfig
	keys   []jwtKey
	remote *jwksEndpoint // nil without JWKSURL
	parser func(now time.Time) *jwt.Parser
}

type jwtKey struct {
	kid string
	key crypto.PublicKey
}

// Token is what a valid token says.
type Token struct {
	// User is the principal claim's value (the user of "User:name").
	User string
	// Expires is the token's exp.
	Expires time.Time
}

// NewJWTValidator loads the keys; an unreadable file, or one without a
// usable key, is an error naming it.
func NewJWTValidator(cfg JWTConfig) (*JWTValidator, error) {
	if cfg.PrincipalClaim == "" {
		cfg.PrincipalClaim = "sub"
	}
	if cfg.ClockSkew <= 0 {
		cfg.ClockSkew = 30 * time.Second
	}
	v := &JWTValidator{cfg: cfg}
	for _, f := range cfg.PublicKeyFiles {
		keys, err := loadPEMKeys(f)
		if err != nil {
			return nil, err
		}
		v.keys = append(v.keys, keys...)
	}
	if cfg.JWKSFile != "" {
		keys, err := loadJWKS(cfg.JWKSFile)
		if err != nil {
			return nil, err
		}
		v.keys = append(v.keys, keys...)
	}
	if cfg.JWKSURL != "" && cfg.JWKSFetch == nil {
		return nil, errors.New("auth: JWKSURL is set without JWKSFetch")
	}
	if cfg.JWKSFetch != nil {
		e := newJWKSEndpoint(cfg)
		// A provider that is down at start does not keep the broker
		// down: the failure is logged, tokens are refused until a fetch
		// succeeds (retried as tokens arrive, see maybeRefresh).
		now := time.Now
		if cfg.Now != nil {
			now = cfg.Now
		}
		_ = e.fetch(now())
		v.remote = e
	}
	if len(v.keys) == 0 && v.remote == nil {
		return nil, errors.New("auth: no JWT signing key is configured; set a PEM public key file, a JWKS file or a JWKS endpoint")
	}
	v.parser = func(now time.Time) *jwt.Parser {
		opts := []jwt.ParserOption{
			jwt.WithValidMethods(signingAlgorithms),
			jwt.WithLeeway(cfg.ClockSkew),
			jwt.WithExpirationRequired(),
			jwt.WithIssuedAt(),
			jwt.WithTimeFunc(func() time.Time { return now }),
		}
		if cfg.Issuer != "" {
			opts = append(opts, jwt.WithIssuer(cfg.Issuer))
		}
		if cfg.Audience != "" {
			opts = append(opts, jwt.WithAudience(cfg.Audience))
		}
		return jwt.NewParser(opts...)
	}
	return v, nil
}

// Validate checks the token's signature, exp (required), nbf, iat, iss
// and aud at now, and returns its principal. The error says why, without
// the token.
func (v *JWTValidator) Validate(raw string, now time.Time) (Token, error) {
	claims := jwt.MapClaims{}
	if v.remote != nil {
		v.remote.maybeRefresh(now)
	}
	tok, err := v.parser(now).ParseWithClaims(raw, claims, func(t *jwt.Token) (any, error) { return v.keyFor(t, now) })
	if err != nil || !tok.Valid {
		return Token{}, fmt.Errorf("%w: invalid token: %v", ErrAuthenticationFailed, jwtReason(err))
	}
	user, _ := claims[v.cfg.PrincipalClaim].(string)
	if user == "" {
		return Token{}, fmt.Errorf("%w: the token has no string claim %q (the principal)", ErrAuthenticationFailed, v.cfg.PrincipalClaim)
	}
	if len(user) > MaxUserNameBytes {
		return Token{}, fmt.Errorf("%w: the token's principal is longer than %d bytes", ErrAuthenticationFailed, MaxUserNameBytes)
	}
	exp, err := claims.GetExpirationTime()
	if err != nil || exp == nil {
		return Token{}, fmt.Errorf("%w: the token has no exp", ErrAuthenticationFailed)
	}
	return Token{User: user, Expires: exp.Time}, nil
}

// jwtReason shortens the library's error to its class.
func jwtReason(err error) string {
	for _, e := range []error{jwt.ErrTokenExpired, jwt.ErrTokenNotValidYet, jwt.ErrTokenUsedBeforeIssued,
		jwt.ErrTokenInvalidIssuer, jwt.ErrTokenInvalidAudience, jwt.ErrTokenSignatureInvalid,
		jwt.ErrTokenUnverifiable, jwt.ErrTokenMalformed, jwt.ErrTokenRequiredClaimMissing} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	if err == nil {
		return "not valid"
	}
	return err.Error()
}

// Close stops the JWKS endpoint's fetches (a no-op without one).
func (v *JWTValidator) Close() {
	if v != nil && v.remote != nil {
		v.remote.close()
	}
}

// keyFor returns the keys that may have signed t: the one with its kid,
// else every key of the algorithm's type. A kid that no key has makes the
// JWKS endpoint be fetched again first (rate-limited): the provider has
// rotated its keys.
func (v *JWTValidator) keyFor(t *jwt.Token, now time.Time) (any, error) {
	kid, _ := t.Header["kid"].(string)
	keys := v.keys
	if v.remote != nil {
		remote := v.remote.current()
		if kid != "" && !hasKid(keys, kid) && !hasKid(remote, kid) && v.remote.fetchForKid(now) {
			remote = v.remote.current()
		}
		keys = append(append([]jwtKey(nil), keys...), remote...)
	}
	var set jwt.VerificationKeySet
	for _, k := range keys {
		if kid != "" && k.kid != "" && k.kid != kid {
			continue
		}
		if keyFitsMethod(k.key, t.Method) {
			set.Keys = append(set.Keys, k.key)
		}
	}
	if len(set.Keys) == 0 {
		return nil, fmt.Errorf("no configured key fits alg %s kid %q", t.Method.Alg(), kid)
	}
	return set, nil
}

func keyFitsMethod(key crypto.PublicKey, m jwt.SigningMethod) bool {
	switch key.(type) {
	case *rsa.PublicKey:
		return strings.HasPrefix(m.Alg(), "RS") || strings.HasPrefix(m.Alg(), "PS")
	case *ecdsa.PublicKey:
		return strings.HasPrefix(m.Alg(), "ES")
	case ed25519.PublicKey:
		return m.Alg() == "EdDSA"
	}
	return false
}

// loadPEMKeys reads the public keys and certificates of a PEM file.
func loadPEMKeys(file string) ([]jwtKey, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("cannot read the JWT public key file: %w", err)
	}
	var out []jwtKey
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		var key any
		switch block.Type {
		case "PUBLIC KEY":
			key, err = x509.ParsePKIXPublicKey(block.Bytes)
		case "RSA PUBLIC KEY":
			key, err = x509.ParsePKCS1PublicKey(block.Bytes)
		case "CERTIFICATE":
			var cert *x509.Certificate
			if cert, err = x509.ParseCertificate(block.Bytes); err == nil {
				key = cert.PublicKey
			}
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("JWT public key file %s: a %s block cannot be read: %v", file, block.Type, err)
		}
		switch key.(type) {
		case *rsa.PublicKey, *ecdsa.PublicKey, ed25519.PublicKey:
			out = append(out, jwtKey{key: key})
		default:
			return nil, fmt.Errorf("JWT public key file %s holds a %T key; use RSA, ECDSA or Ed25519", file, key)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("JWT public key file %s holds no PEM public key or certificate", file)
	}
	return out, nil
}

// jwk is one key of a JWKS (RFC 7517, RFC 7518 section 6).
type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	N   string `json:"n"`
	E   string `json:"e"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
}

// loadJWKS reads the signing keys of a JWKS file: RSA, EC (P-256, P-384,
// P-521) and OKP (Ed25519); keys for encryption are skipped.
func loadJWKS(file string) ([]jwtKey, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("cannot read the JWKS file: %w", err)
	}
	keys, _, err := parseJWKS(data, "JWKS file "+file, false)
	return keys, err
}

// parseJWKS reads the signing keys of a key set from source. A key that
// cannot be used is an error, or with lenient (a provider's endpoint,
// which may publish key types this broker does not take) skipped and
// described in skipped; no usable key at all is an error.
func parseJWKS(data []byte, source string, lenient bool) (keys []jwtKey, skipped []string, err error) {
	var set struct {
		Keys []jwk `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, nil, fmt.Errorf("%s is not a JSON Web Key Set: %v", source, err)
	}
	for i, k := range set.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		key, err := k.publicKey()
		if err != nil {
			if lenient {
				skipped = append(skipped, fmt.Sprintf("key %d (kid %q): %v", i, k.Kid, err))
				continue
			}
			return nil, nil, fmt.Errorf("%s: key %d (kid %q): %v", source, i, k.Kid, err)
		}
		keys = append(keys, jwtKey{kid: k.Kid, key: key})
	}
	if len(keys) == 0 {
		return nil, skipped, fmt.Errorf("%s holds no signing key", source)
	}
	return keys, skipped, nil
}

func b64(field, s string) ([]byte, error) {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
	if err != nil || len(b) == 0 {
		return nil, fmt.Errorf("member %q is not base64url", field)
	}
	return b, nil
}

func (k jwk) publicKey() (crypto.PublicKey, error) {
	switch k.Kty {
	case "RSA":
		n, err := b64("n", k.N)
		if err != nil {
			return nil, err
		}
		e, err := b64("e", k.E)
		if err != nil {
			return nil, err
		}
		if len(e) > 4 {
			return nil, errors.New("the RSA exponent is too large")
		}
		key := &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
		if key.N.BitLen() < 2048 {
			return nil, fmt.Errorf("the RSA key has %d bits; use at least 2048", key.N.BitLen())
		}
		return key, nil
	case "EC":
		curves := map[string]elliptic.Curve{"P-256": elliptic.P256(), "P-384": elliptic.P384(), "P-521": elliptic.P521()}
		curve, ok := curves[k.Crv]
		if !ok {
			return nil, fmt.Errorf("curve %q is not P-256, P-384 or P-521", k.Crv)
		}
		x, err := b64("x", k.X)
		if err != nil {
			return nil, err
		}
		y, err := b64("y", k.Y)
		if err != nil {
			return nil, err
		}
		size := (curve.Params().BitSize + 7) / 8
		if len(x) != size || len(y) != size {
			return nil, fmt.Errorf("x and y must be %d bytes for %s", size, k.Crv)
		}
		// The standard library checks that the point is on the curve.
		key, err := ecdsa.ParseUncompressedPublicKey(curve, append(append([]byte{4}, x...), y...))
		if err != nil {
			return nil, fmt.Errorf("the EC point is not valid: %v", err)
		}
		return key, nil
	case "OKP":
		if k.Crv != "Ed25519" {
			return nil, fmt.Errorf("OKP curve %q is not Ed25519", k.Crv)
		}
		x, err := b64("x", k.X)
		if err != nil {
			return nil, err
		}
		if len(x) != ed25519.PublicKeySize {
			return nil, errors.New("an Ed25519 key is 32 bytes")
		}
		return ed25519.PublicKey(x), nil
	}
	return nil, fmt.Errorf("key type %q is not RSA, EC or OKP", k.Kty)
}
