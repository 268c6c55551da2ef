package auth

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzSaslSession feeds two arbitrary tokens to each mechanism: the
// exchange never panics, and it only succeeds for the stored user.
func FuzzSaslSession(f *testing.F) {
	f.Add(uint8(0), []byte("\x00alice\x00alice-pw"), []byte(""))
	f.Add(uint8(1), []byte("n,,n=alice,r=abc"), []byte("c=biws,r=abc,p=AAAA"))
	f.Add(uint8(2), []byte("n,a=alice,n=alice,r=x,ext=1"), []byte("c=,r=,p="))
	f.Add(uint8(1), []byte("c=biws,r=abc,p=dGVzdA=="), []byte("n,,n=a=2Cb,r=x"))
	store := testStore(f, "alice")
	mechs := []string{MechanismPlain, "SCRAM-SHA-256", "SCRAM-SHA-512"}
	f.Fuzz(func(t *testing.T, mech uint8, a, b []byte) {
		sess, ok := StartSession(store, mechs[int(mech)%len(mechs)])
		if !ok {
			t.Fatal("mechanism unknown")
		}
		for _, tok := range [][]byte{a, b} {
			_, done, err := sess.Step(tok)
			if done && sess.User() != "alice" {
				t.Fatalf("authenticated as %q", sess.User())
			}
			if err != nil || done {
				return
			}
		}
	})
}

// FuzzPrincipalRules: parsing arbitrary rules and mapping arbitrary DNs
// never panics.
func FuzzPrincipalRules(f *testing.F) {
	f.Add("RULE:^CN=(.*?),OU=(.*?)$/$1@$2/L,DEFAULT", "CN=a,OU=b")
	f.Add("RULE:a/b/U", "a")
	f.Add("DEFAULT", "")
	f.Fuzz(func(t *testing.T, rules, dn string) {
		pm, err := ParsePrincipalRules(rules)
		if err != nil {
			return
		}
		_, _ = pm.Map(dn)
	})
}

// FuzzOAuthBearer feeds arbitrary OAUTHBEARER messages, and tokens in a
// well-formed message, to the session: it never panics and never
// authenticates without a token signed by the configured key.
func FuzzOAuthBearer(f *testing.F) {
	f.Add([]byte("n,,\x01auth=Bearer a.b.c\x01\x01"))
	f.Add([]byte("n,a=x,\x01auth=Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.\x01\x01"))
	f.Add([]byte("y,,\x01host=h\x01auth=bearer \x01\x01"))
	f.Add([]byte("eyJhbGciOiJSUzI1NiJ9.e30.AAAA"))
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		f.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(key.Public())
	file := filepath.Join(f.TempDir(), "key.pem")
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600); err != nil {
		f.Fatal(err)
	}
	v, err := NewJWTValidator(JWTConfig{PublicKeyFiles: []string{file}})
	if err != nil {
		f.Fatal(err)
	}
	now := func() time.Time { return jwtNow }
	f.Fuzz(func(t *testing.T, msg []byte) {
		for _, m := range [][]byte{msg, append(append([]byte("n,,\x01auth=Bearer "), msg...), 1, 1)} {
			s := NewOAuthBearerSession(v, now)
			if _, done, err := s.Step(m); done || err == nil {
				t.Fatalf("%q authenticated as %q", m, s.User())
			}
		}
	})
}
