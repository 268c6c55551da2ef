package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"

	"github.com/vibemq/broker/auth"
)

// checkJWKSURL accepts https URLs, and http ones only to a loopback
// address (a sidecar on this machine: nothing off the host can read or
// change that traffic). Elsewhere a key set over plain HTTP would let
// anyone on the path sign tokens.
func checkJWKSURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%q is not an absolute URL, e.g. https://idp.example.com/.well-known/jwks.json", raw)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		host := u.Hostname()
		if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
			return nil
		}
		return fmt.Errorf("%s uses http to another machine: use https (http is accepted only to a loopback address)", u.Redacted())
	}
	return fmt.Errorf("%s: the scheme must be https", u.Redacted())
}

// jwksFetcher returns the function that reads the key set of
// sasl-oauthbearer-jwks-endpoint-url (auth.JWTConfig.JWKSFetch): a GET
// over TLS 1.2+ checked against caFile's CAs (else the system roots),
// redirects held to the same URL rule, at most auth.JWKSMaxBytes+1 bytes
// read, any status but 200 an error.
func jwksFetcher(rawURL, caFile string) (func(context.Context) ([]byte, error), error) {
	if err := checkJWKSURL(rawURL); err != nil {
		return nil, fmt.Errorf("sasl-oauthbearer-jwks-endpoint-url %w", err)
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("sasl-oauthbearer-jwks-endpoint-ca-file: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("sasl-oauthbearer-jwks-endpoint-ca-file %s holds no PEM certificate", caFile)
		}
	}
	client := &http.Client{
		Transport: &http.Transport{TLSClientConfig: tc, Proxy: http.ProxyFromEnvironment},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 5 {
				return errors.New("more than 5 redirects")
			}
			return checkJWKSURL(req.URL.String())
		},
	}
	return func(ctx context.Context) ([]byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Accept", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("the endpoint answered %s", resp.Status)
		}
		return io.ReadAll(io.LimitReader(resp.Body, auth.JWKSMaxBytes+1))
	}, nil
}
