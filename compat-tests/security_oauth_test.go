package compattests

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
)

// tokenIssuer signs the JWTs of the OAUTHBEARER and HTTP Bearer tests: an
// RSA key given to the broker as a PEM file and an ECDSA key in a JWKS
// file (kid "ec1"), and a third key the broker does not know.
type tokenIssuer struct {
	rsa, other *rsa.PrivateKey
	ec         *ecdsa.PrivateKey
	pemFile    string
	jwksFile   string
}

const (
	tokenIssuerName = "https://idp.example"
	tokenAudience   = "broker"
)

func newTokenIssuer(t testing.TB) *tokenIssuer {
	t.Helper()
	ti := &tokenIssuer{}
	var err error
	if ti.rsa, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		t.Fatal(err)
	}
	if ti.other, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		t.Fatal(err)
	}
	if ti.ec, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	der, _ := x509.MarshalPKIXPublicKey(ti.rsa.Public())
	ti.pemFile = filepath.Join(dir, "idp-rsa.pem")
	if err := os.WriteFile(ti.pemFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	point, _ := ti.ec.PublicKey.Bytes() // 0x04 | X | Y
	b64 := base64.RawURLEncoding.EncodeToString
	jwks, _ := json.Marshal(map[string]any{"keys": []map[string]string{
		{"kty": "EC", "kid": "ec1", "use": "sig", "crv": "P-256", "x": b64(point[1:33]), "y": b64(point[33:])},
	}})
	ti.jwksFile = filepath.Join(dir, "idp-jwks.json")
	if err := os.WriteFile(ti.jwksFile, jwks, 0o600); err != nil {
		t.Fatal(err)
	}
	return ti
}

// brokerArgs configures the broker for the issuer's tokens.
func (ti *tokenIssuer) brokerArgs() []string {
	return []string{
		"--sasl-enabled-mechanisms", "PLAIN,SCRAM-SHA-512,OAUTHBEARER",
		"--sasl-oauthbearer-public-key-files", ti.pemFile, "--sasl-oauthbearer-jwks-file", ti.jwksFile,
		"--sasl-oauthbearer-expected-issuer", tokenIssuerName, "--sasl-oauthbearer-expected-audience", tokenAudience,
	}
}

// token signs a token for sub with the named key ("rsa", "ec", "other")
// expiring at exp; edit may change the claims.
func (ti *tokenIssuer) token(t testing.TB, key, sub string, exp time.Time, edit func(jwt.MapClaims)) string {
	t.Helper()
	claims := jwt.MapClaims{"sub": sub, "iss": tokenIssuerName, "aud": tokenAudience, "iat": time.Now().Add(-time.Minute).Unix(), "exp": exp.Unix()}
	if edit != nil {
		edit(claims)
	}
	var method jwt.SigningMethod = jwt.SigningMethodRS256
	var signer crypto.Signer = ti.rsa
	tok := jwt.NewWithClaims(method, claims)
	switch key {
	case "ec":
		tok = jwt.NewWithClaims(jwt.SigningMethodES256, claims)
		tok.Header["kid"] = "ec1"
		signer = ti.ec
	case "other":
		signer = ti.other
	}
	s, err := tok.SignedString(signer)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func oauthMech(token string) sasl.Mechanism { return oauth.Auth{Token: token}.AsMechanism() }

// TestSecurityOAuthBearer: franz-go pkg/sasl/oauth (KIP-255) with tokens
// signed in the test, RSA (PEM key file) and ECDSA (JWKS file), over
// SASL_PLAINTEXT and SASL_SSL: produce, consume in a group, admin calls.
// An expired token, one signed by an unknown key, one for another audience
// or issuer, and one without exp get SASL_AUTHENTICATION_FAILED; the log
// names the principal and never the token.
func TestSecurityOAuthBearer(t *testing.T) {
	ti := newTokenIssuer(t)
	b := startSecureBroker(t, ti.brokerArgs()...)
	hour := time.Now().Add(time.Hour)
	for _, useTLS := range []bool{false, true} {
		for _, key := range []string{"rsa", "ec"} {
			name := key + "/tls=" + strconv.FormatBool(useTLS)
			t.Run(name, func(t *testing.T) {
				addr := b.saslPlaintext()
				if useTLS {
					addr = b.saslSSL()
				}
				produceConsumeGroup(t, addr, b.saslOpts(t, useTLS, oauthMech(ti.token(t, key, "svc-"+key, hour, nil)))...)
			})
		}
	}
	bad := map[string]string{
		"expired":         ti.token(t, "rsa", "svc", time.Now().Add(-5*time.Minute), nil),
		"wrong signature": ti.token(t, "other", "svc", hour, nil),
		"wrong audience":  ti.token(t, "rsa", "svc", hour, func(c jwt.MapClaims) { c["aud"] = "another-service" }),
		"wrong issuer":    ti.token(t, "ec", "svc", hour, func(c jwt.MapClaims) { c["iss"] = "https://evil.example" }),
		"no exp":          ti.token(t, "rsa", "svc", hour, func(c jwt.MapClaims) { delete(c, "exp") }),
	}
	for name, tok := range bad {
		t.Run(name, func(t *testing.T) {
			expectAuthFailure(t, b.saslPlaintext(), b.saslOpts(t, false, oauthMech(tok))...)
		})
	}
	log := b.Log()
	for name, tok := range bad {
		if strings.Contains(log, tok[strings.LastIndexByte(tok, '.')+1:]) {
			t.Errorf("the broker log holds the signature of the %s token", name)
		}
	}
	if !strings.Contains(log, "SASL authentication failed") || !strings.Contains(log, "token is expired") {
		t.Error("the failures are not logged with their reason")
	}
}

// TestSecurityOAuthBearerReauth: the session lasts as long as the token
// (KIP-368): with tokens valid for 3 s and no connections-max-reauth, the
// broker answers session_lifetime_ms from exp, franz-go fetches a new
// token and re-authenticates on its connections while producing for 7 s,
// and no session expires.
func TestSecurityOAuthBearerReauth(t *testing.T) {
	ti := newTokenIssuer(t)
	b := startSecureBroker(t, append(ti.brokerArgs(), "--log-level", "debug")...)
	var minted atomic.Int32
	mech := oauth.Oauth(func(context.Context) (oauth.Auth, error) {
		minted.Add(1)
		return oauth.Auth{Token: ti.token(t, "ec", "svc", time.Now().Add(3*time.Second), nil)}, nil
	})
	opts := b.saslOpts(t, true, mech)
	topic := topicName(t, "")
	createTopic(t, kadm.NewClient(newClient(t, b.saslSSL(), opts...)), topic, 1, nil)
	cl := newClient(t, b.saslSSL(), opts...)
	ctx := testCtx(t, opTimeout)
	deadline := time.Now().Add(7 * time.Second)
	for n := 0; time.Now().Before(deadline); n++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(strconv.Itoa(n))}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", n, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	log := b.Log()
	if !strings.Contains(log, `"reauthentication":true`) {
		t.Fatalf("no re-authentication in the broker log (%d tokens minted)", minted.Load())
	}
	if strings.Contains(log, "SASL session expired") {
		t.Fatal("a session expired: the client was not told the token's lifetime")
	}
}
