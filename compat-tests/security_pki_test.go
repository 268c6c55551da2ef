package compattests

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// testPKI is a CA, a server certificate for 127.0.0.1/localhost and client
// certificates, written as PEM files into a temp directory (generated per
// test with crypto/x509; nothing is fetched).
type testPKI struct {
	dir                   string
	caFile                string
	serverCert, serverKey string
	// alice: CN=alice,OU=eng,O=Example, signed by the CA.
	aliceCert, aliceKey string
	// mallory: a client certificate from another CA.
	malloryCert, malloryKey string
	caPool                  *x509.CertPool
}

func newTestPKI(t testing.TB) *testPKI {
	t.Helper()
	dir := t.TempDir()
	p := &testPKI{dir: dir}
	ca, caKey := makeCA(t, "compat-tests CA")
	p.caPool = x509.NewCertPool()
	p.caPool.AddCert(ca)
	p.caFile = writePEM(t, dir, "ca.pem", "CERTIFICATE", ca.Raw)
	p.serverCert, p.serverKey = makeLeaf(t, dir, "server", ca, caKey, pkix.Name{CommonName: "localhost"}, true)
	p.aliceCert, p.aliceKey = makeLeaf(t, dir, "alice", ca, caKey, pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"eng"}, Organization: []string{"Example"}}, false)
	other, otherKey := makeCA(t, "some other CA")
	p.malloryCert, p.malloryKey = makeLeaf(t, dir, "mallory", other, otherKey, pkix.Name{CommonName: "mallory"}, false)
	return p
}

// clientTLS trusts the CA and, when name is "alice" or "mallory",
// presents that client certificate.
func (p *testPKI) clientTLS(t testing.TB, name string) *tls.Config {
	t.Helper()
	cfg := &tls.Config{RootCAs: p.caPool, MinVersion: tls.VersionTLS12, ServerName: "localhost"}
	var certFile, keyFile string
	switch name {
	case "alice":
		certFile, keyFile = p.aliceCert, p.aliceKey
	case "mallory":
		certFile, keyFile = p.malloryCert, p.malloryKey
	}
	if certFile != "" {
		c, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	return cfg
}

func makeCA(t testing.TB, name string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

var serial int64 = 100

func makeLeaf(t testing.TB, dir, name string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, subject pkix.Name, server bool) (string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      subject,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.DNSNames = []string{"localhost"}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return writePEM(t, dir, name+".pem", "CERTIFICATE", der), writePEM(t, dir, name+".key", "PRIVATE KEY", keyDER)
}

func writePEM(t testing.TB, dir, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
