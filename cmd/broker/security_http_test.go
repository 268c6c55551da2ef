package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"
)

// writeTestCert writes a self-signed certificate for 127.0.0.1 and its key.
func writeTestCert(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalPKCS8PrivateKey(key)
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	_ = os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	_ = os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600)
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// TestHTTPTLS: with http-tls the HTTP listener serves HTTPS with the ssl-*
// files (TLS 1.2+); a plaintext HTTP request gets no answer. A broker
// whose TLS files are missing does not start, and says which file. With
// http-auth required too, the probes stay open and the client subcommands
// check the certificate against BROKER_CLIENT_TLS_CA_FILE and send their
// credentials over HTTPS.
func TestHTTPTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, pool := writeTestCert(t, dir)
	cfg := defaultConfig()
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.KafkaAddr = freeLocalAddr(t)
	cfg.HTTPAddr = freeLocalAddr(t)
	cfg.MemtableSize, cfg.CacheSize = 4<<20, 8<<20
	cfg.Security.HTTPTLS = true
	cfg.Security.SSLCertFile, cfg.Security.SSLKeyFile = certFile, keyFile
	cfg.Security.HTTPAuth = "required"
	pwFile := filepath.Join(dir, "admin.password")
	if err := os.WriteFile(pwFile, []byte("admin-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.Security.BootstrapUser, cfg.Security.BootstrapPasswordFile = "admin", pwFile
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg, zerolog.Nop()) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("broker: %v", err)
		}
	})
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	var resp *http.Response
	var err error
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if resp, err = client.Get("https://" + cfg.HTTPAddr + "/healthz"); err == nil {
			break
		}
	}
	if err != nil || resp.StatusCode != http.StatusOK || resp.TLS == nil || resp.TLS.Version < tls.VersionTLS12 {
		t.Fatalf("GET https /healthz: %v %+v", err, resp)
	}
	resp.Body.Close()
	if resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + cfg.HTTPAddr + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("plaintext HTTP answered on the HTTPS listener")
		}
	}

	// broker healthcheck speaks HTTPS with --http-tls, checking the CA.
	healthcheck := func(args ...string) (int, string) {
		var out, errOut bytes.Buffer
		code := realMain(append([]string{"broker", "healthcheck", "--http-addr", cfg.HTTPAddr}, args...), &out, &errOut)
		return code, out.String() + errOut.String()
	}
	if code, out := healthcheck(); code != 1 {
		t.Fatalf("plain healthcheck against HTTPS: exit %d: %s", code, out)
	}
	queueList := func(args ...string) (int, string) {
		var out, errOut bytes.Buffer
		code := realMain(append([]string{"broker", "queue", "list", "--server", "https://" + cfg.HTTPAddr, "-o", "json"}, args...), &out, &errOut)
		return code, out.String() + errOut.String()
	}
	if code, out := queueList("--user", "admin", "--password-file", pwFile); code != exitUnavailable || !strings.Contains(out, "certificate") {
		t.Fatalf("CLI over HTTPS without the CA: exit %d: %s", code, out)
	}
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, pemOf(t, certFile), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BROKER_CLIENT_TLS_CA_FILE", caFile)
	if code, out := healthcheck("--http-tls"); code != 0 || !strings.Contains(out, "ready") {
		t.Fatalf("healthcheck --http-tls: exit %d: %s", code, out)
	}
	if code, out := queueList(); code != exitFailure || !strings.Contains(out, "unauthorized") {
		t.Fatalf("CLI over HTTPS without credentials: exit %d: %s", code, out)
	}
	if code, out := queueList("--user", "admin", "--password-file", pwFile); code != 0 || !strings.Contains(out, "[]") {
		t.Fatalf("CLI over HTTPS with credentials: exit %d: %s", code, out)
	}

	bad := *cfg
	bad.DataDir = filepath.Join(dir, "data2")
	bad.KafkaAddr, bad.HTTPAddr = freeLocalAddr(t), freeLocalAddr(t)
	bad.Security.SSLKeyFile = filepath.Join(dir, "missing.pem")
	if err := run(context.Background(), &bad, zerolog.Nop()); err == nil || !strings.Contains(err.Error(), "ssl-key-file") {
		t.Fatalf("missing key file: %v", err)
	}
}

func pemOf(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestListenerTLSOverrides: two SSL listeners, one with the broker-wide
// ssl-cert-file and one with its own certificate (listener-ssl-cert-files
// and listener-ssl-key-files, Kafka's listener.name.<name>.ssl.*): each
// presents its own, a Kafka client trusting only that certificate works
// on its listener and fails the handshake on the other.
func TestListenerTLSOverrides(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "a"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "b"), 0o700); err != nil {
		t.Fatal(err)
	}
	certA, keyA, poolA := writeTestCert(t, filepath.Join(dir, "a"))
	certB, keyB, poolB := writeTestCert(t, filepath.Join(dir, "b"))
	addrA, addrB := freeLocalAddr(t), freeLocalAddr(t)
	c, err := loadFromArgs(t, []string{
		"--data-dir", filepath.Join(dir, "data"), "--http-addr", "",
		"--listeners", "SSL://" + addrA + ",INTERNAL://" + addrB,
		"--listener-security-protocol-map", "INTERNAL:SSL",
		"--ssl-cert-file", certA, "--ssl-key-file", keyA,
		"--listener-ssl-cert-files", "internal:" + certB, "--listener-ssl-key-files", "INTERNAL:" + keyB,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c.MemtableSize, c.CacheSize = 4<<20, 8<<20
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, c, zerolog.Nop()) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("broker: %v", err)
		}
	}()
	ping := func(addr string, pool *x509.CertPool) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DialTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}),
			kgo.RetryTimeout(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return cl.Ping(ctx)
	}
	for deadline := time.Now().Add(20 * time.Second); ping(addrA, poolA) != nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("listener SSL not serving with the broker-wide certificate")
		}
	}
	if err := ping(addrB, poolB); err != nil {
		t.Errorf("listener INTERNAL with its own certificate: %v", err)
	}
	if err := ping(addrB, poolA); err == nil {
		t.Error("listener INTERNAL presented the broker-wide certificate")
	}
	if err := ping(addrA, poolB); err == nil {
		t.Error("listener SSL presented INTERNAL's certificate")
	}
}

// TestListenerTLSOverridesRefused: the listener-ssl-* keys name TLS
// listeners, a certificate comes with its key, entries are NAME:path.
func TestListenerTLSOverridesRefused(t *testing.T) {
	base := []string{"--listeners", "SSL://127.0.0.1:9093,PLAINTEXT://127.0.0.1:9092", "--ssl-cert-file", "c.pem", "--ssl-key-file", "k.pem"}
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"unknown listener": {[]string{"--listener-ssl-cert-files", "EXTERNAL:x.pem", "--listener-ssl-key-files", "EXTERNAL:y.pem"}, "listener-ssl-cert-files names EXTERNAL, which is not in listeners"},
		"plaintext":        {[]string{"--listener-ssl-client-ca-files", "PLAINTEXT:ca.pem", "--ssl-client-auth", "required", "--ssl-client-ca-file", "ca.pem"}, "without TLS"},
		"CA without auth":  {[]string{"--listener-ssl-client-ca-files", "SSL:ca.pem"}, "ssl-client-auth is none"},
		"cert without key": {[]string{"--listener-ssl-cert-files", "SSL:x.pem"}, "set both listener-ssl-cert-files and listener-ssl-key-files"},
		"not NAME:path":    {[]string{"--listener-ssl-cert-files", "x.pem", "--listener-ssl-key-files", "SSL:y.pem"}, "is not NAME:path"},
	} {
		c, err := loadFromArgs(t, append(append([]string{}, base...), tc.args...), nil)
		if err == nil {
			err = c.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
}
