package auth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// TLSFiles names the PEM files of a TLS listener and how it treats client
// certificates (Kafka ssl.client.auth: none, requested, required).
type TLSFiles struct {
	CertFile     string
	KeyFile      string
	ClientCAFile string // "" means no client certificates are verified
	ClientAuth   string // "none", "requested" or "required"
}

// TLSSource serves a listener's certificate and client CAs from files and
// reloads them when a file changes: each handshake stats the files (at
// most once a second) and reloads on a new modification time or size. A
// reload that fails keeps the previous, working configuration and logs why.
type TLSSource struct {
	files TLSFiles
	log   zerolog.Logger
	now   func() time.Time

	mu struct {
		sync.Mutex
		config    *tls.Config
		stamps    [3]fileStamp
		lastCheck time.Time
	}
}

type fileStamp struct {
	mod  time.Time
	size int64
}

// NewTLSSource loads the files and checks them: readable, the key matches
// the certificate, the certificate is valid now. now is the clock (nil:
// time.Now).
func NewTLSSource(files TLSFiles, log zerolog.Logger, now func() time.Time) (*TLSSource, error) {
	if now == nil {
		now = time.Now
	}
	switch files.ClientAuth {
	case "", "none", "requested", "required":
	default:
		return nil, fmt.Errorf("ssl-client-auth %q is not none, requested or required", files.ClientAuth)
	}
	if files.ClientAuth != "" && files.ClientAuth != "none" && files.ClientCAFile == "" {
		return nil, fmt.Errorf("ssl-client-auth is %s but no ssl-client-ca-file says which client certificates to trust; set ssl-client-ca-file", files.ClientAuth)
	}
	t := &TLSSource{files: files, log: log, now: now}
	cfg, stamps, err := t.load()
	if err != nil {
		return nil, err
	}
	t.mu.config, t.mu.stamps, t.mu.lastCheck = cfg, stamps, now()
	return t, nil
}

// Config is the tls.Config to serve with: TLS 1.2 or later, the current
// certificate and client CAs on every handshake.
func (t *TLSSource) Config() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return t.current(), nil
		},
	}
}

// current returns the configuration, reloading it when a file changed.
func (t *TLSSource) current() *tls.Config {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if now.Sub(t.mu.lastCheck) < time.Second {
		return t.mu.config
	}
	t.mu.lastCheck = now
	stamps, err := t.stamps()
	if err != nil || stamps == t.mu.stamps {
		return t.mu.config
	}
	cfg, stamps, err := t.load()
	if err != nil {
		t.log.Error().Err(err).Msg("TLS files changed but cannot be loaded; still serving the previous certificate")
		t.mu.stamps = stamps // do not retry until a file changes again
		return t.mu.config
	}
	t.log.Info().Str("cert_file", t.files.CertFile).Msg("TLS certificate reloaded")
	t.mu.config, t.mu.stamps = cfg, stamps
	return cfg
}

func (t *TLSSource) stamps() ([3]fileStamp, error) {
	var out [3]fileStamp
	for i, name := range []string{t.files.CertFile, t.files.KeyFile, t.files.ClientCAFile} {
		if name == "" {
			continue
		}
		fi, err := os.Stat(name)
		if err != nil {
			return out, err
		}
		out[i] = fileStamp{mod: fi.ModTime(), size: fi.Size()}
	}
	return out, nil
}

func (t *TLSSource) load() (*tls.Config, [3]fileStamp, error) {
	stamps, _ := t.stamps()
	f := t.files
	certPEM, err := os.ReadFile(f.CertFile)
	if err != nil {
		return nil, stamps, fmt.Errorf("cannot read the TLS certificate file (ssl-cert-file): %w", err)
	}
	keyPEM, err := os.ReadFile(f.KeyFile)
	if err != nil {
		return nil, stamps, fmt.Errorf("cannot read the TLS key file (ssl-key-file): %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, stamps, fmt.Errorf("the TLS certificate %s and key %s do not form a pair (%v); give the PEM certificate chain and its matching private key", f.CertFile, f.KeyFile, err)
	}
	leaf := cert.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, stamps, fmt.Errorf("the TLS certificate %s cannot be parsed: %w", f.CertFile, err)
		}
	}
	now := t.now()
	switch {
	case now.After(leaf.NotAfter):
		return nil, stamps, fmt.Errorf("the TLS certificate %s expired on %s; renew it", f.CertFile, leaf.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(leaf.NotBefore):
		return nil, stamps, fmt.Errorf("the TLS certificate %s is not valid before %s; check the clock or the certificate", f.CertFile, leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if f.ClientCAFile != "" {
		caPEM, err := os.ReadFile(f.ClientCAFile)
		if err != nil {
			return nil, stamps, fmt.Errorf("cannot read the client CA file (ssl-client-ca-file): %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return nil, stamps, errors.New("the client CA file " + f.ClientCAFile + " holds no PEM certificate")
		}
		cfg.ClientCAs = pool
		switch f.ClientAuth {
		case "required":
			cfg.ClientAuth = tls.RequireAndVerifyClientCert
		case "requested":
			cfg.ClientAuth = tls.VerifyClientCertIfGiven
		}
	}
	return cfg, stamps, nil
}
