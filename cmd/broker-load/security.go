package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// seedOptions are the seed brokers and the connection security of every
// client the tool makes (parseFlags checked securityOptions).
func seedOptions(cfg *Config) []kgo.Opt {
	sec, _ := securityOptions(cfg)
	return append([]kgo.Opt{kgo.SeedBrokers(cfg.Brokers...)}, sec...)
}

// securityOptions turns --security-protocol and friends into kgo options.
func securityOptions(cfg *Config) ([]kgo.Opt, error) {
	proto := strings.ToUpper(cfg.SecurityProtocol)
	var opts []kgo.Opt
	switch proto {
	case "", "PLAINTEXT", "SASL_PLAINTEXT":
	case "SSL", "SASL_SSL":
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if cfg.TLSCAFile != "" {
			pem, err := os.ReadFile(cfg.TLSCAFile)
			if err != nil {
				return nil, fmt.Errorf("--tls-ca-file: %w", err)
			}
			tc.RootCAs = x509.NewCertPool()
			if !tc.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("--tls-ca-file %s holds no PEM certificate", cfg.TLSCAFile)
			}
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	default:
		return nil, fmt.Errorf("--security-protocol %q is not PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", cfg.SecurityProtocol)
	}
	if !strings.HasPrefix(proto, "SASL_") {
		return opts, nil
	}
	switch strings.ToUpper(cfg.SASLMechanism) {
	case "PLAIN":
		opts = append(opts, kgo.SASL(plain.Auth{User: cfg.SASLUser, Pass: cfg.SASLPassword}.AsMechanism()))
	case "SCRAM-SHA-256":
		opts = append(opts, kgo.SASL(scram.Auth{User: cfg.SASLUser, Pass: cfg.SASLPassword}.AsSha256Mechanism()))
	case "SCRAM-SHA-512":
		opts = append(opts, kgo.SASL(scram.Auth{User: cfg.SASLUser, Pass: cfg.SASLPassword}.AsSha512Mechanism()))
	default:
		return nil, fmt.Errorf("--sasl-mechanism %q is not PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", cfg.SASLMechanism)
	}
	return opts, nil
}
