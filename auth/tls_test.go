package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// selfSigned writes a self-signed certificate and its key, valid from
// notBefore to notAfter, and returns their paths.
func selfSigned(t *testing.T, dir, name string, notBefore, notAfter time.Time) (string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: notBefore, NotAfter: notAfter, DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalPKCS8PrivateKey(key)
	certFile, keyFile := filepath.Join(dir, name+".pem"), filepath.Join(dir, name+".key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// TestTLSStartupErrors: unreadable, mismatched, expired and not-yet-valid
// files are refused at start with a sentence naming the problem.
func TestTLSStartupErrors(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	goodCert, goodKey := selfSigned(t, dir, "good", now.Add(-time.Hour), now.Add(time.Hour))
	_, otherKey := selfSigned(t, dir, "other", now.Add(-time.Hour), now.Add(time.Hour))
	oldCert, oldKey := selfSigned(t, dir, "old", now.Add(-48*time.Hour), now.Add(-24*time.Hour))
	newCert, newKey := selfSigned(t, dir, "new", now.Add(24*time.Hour), now.Add(48*time.Hour))
	for name, tc := range map[string]struct {
		files TLSFiles
		want  string
	}{
		"missing cert":   {TLSFiles{CertFile: filepath.Join(dir, "nope.pem"), KeyFile: goodKey}, "cannot read the TLS certificate file"},
		"missing key":    {TLSFiles{CertFile: goodCert, KeyFile: filepath.Join(dir, "nope.key")}, "cannot read the TLS key file"},
		"mismatched":     {TLSFiles{CertFile: goodCert, KeyFile: otherKey}, "do not form a pair"},
		"expired":        {TLSFiles{CertFile: oldCert, KeyFile: oldKey}, "expired on"},
		"not yet valid":  {TLSFiles{CertFile: newCert, KeyFile: newKey}, "is not valid before"},
		"CA missing":     {TLSFiles{CertFile: goodCert, KeyFile: goodKey, ClientCAFile: filepath.Join(dir, "ca.pem"), ClientAuth: "required"}, "cannot read the client CA file"},
		"CA not a cert":  {TLSFiles{CertFile: goodCert, KeyFile: goodKey, ClientCAFile: goodKey, ClientAuth: "required"}, "holds no PEM certificate"},
		"auth but no CA": {TLSFiles{CertFile: goodCert, KeyFile: goodKey, ClientAuth: "required"}, "set ssl-client-ca-file"},
	} {
		_, err := NewTLSSource(tc.files, zerolog.Nop(), clock)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", name, err, tc.want)
		}
	}
	if _, err := NewTLSSource(TLSFiles{CertFile: goodCert, KeyFile: goodKey, ClientCAFile: goodCert, ClientAuth: "required"}, zerolog.Nop(), clock); err != nil {
		t.Errorf("good files refused: %v", err)
	}
}

// TestTLSReload: a handshake after the files changed serves the new
// certificate; a broken replacement keeps the old one. The clock is
// injected: files are checked at most once a second.
func TestTLSReload(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	clock := func() time.Time { return now }
	certFile, keyFile := selfSigned(t, dir, "first", now.Add(-time.Hour), now.Add(time.Hour))
	src, err := NewTLSSource(TLSFiles{CertFile: certFile, KeyFile: keyFile}, zerolog.Nop(), clock)
	if err != nil {
		t.Fatal(err)
	}
	served := func() string {
		cfg, err := src.Config().GetConfigForClient(&tls.ClientHelloInfo{})
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := x509.ParseCertificate(cfg.Certificates[0].Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return leaf.Subject.CommonName
	}
	if got := served(); got != "first" {
		t.Fatalf("serves %q", got)
	}
	secondCert, secondKey := selfSigned(t, dir, "second", now.Add(-time.Hour), now.Add(time.Hour))
	replace := func(from, to string) {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, b, 0o600); err != nil {
			t.Fatal(err)
		}
		// Modification times may be coarse: make the change visible.
		future := now.Add(time.Duration(len(b)) * time.Millisecond)
		_ = os.Chtimes(to, future, future)
	}
	replace(secondCert, certFile)
	replace(secondKey, keyFile)
	if got := served(); got != "first" {
		t.Fatalf("reloaded within the same second: %q", got)
	}
	now = now.Add(2 * time.Second)
	if got := served(); got != "second" {
		t.Fatalf("after the change serves %q, want second", got)
	}
	// A broken replacement (key of another certificate) keeps "second".
	_, thirdKey := selfSigned(t, dir, "third", now.Add(-time.Hour), now.Add(time.Hour))
	replace(thirdKey, keyFile)
	now = now.Add(2 * time.Second)
	if got := served(); got != "second" {
		t.Fatalf("after a broken change serves %q, want second", got)
	}
}
