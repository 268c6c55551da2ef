package main

import (
	"github.com/rs/zerolog"

	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSecurityConfig: the listener keys resolve as Kafka's do (names are
// protocols or mapped, advertised per name) and bad combinations are
// refused with a sentence naming the fix.
func TestSecurityConfig(t *testing.T) {
	c, err := loadFromArgs(t, []string{
		"--listeners", "internal://127.0.0.1:9092,SASL_SSL://:9093",
		"--listener-security-protocol-map", "INTERNAL:SASL_PLAINTEXT",
		"--advertised-listeners", "SASL_SSL://broker.example.com:19093",
		"--ssl-cert-file", "c.pem", "--ssl-key-file", "k.pem",
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	specs, err := c.listeners()
	if err != nil || len(specs) != 2 {
		t.Fatalf("listeners: %v %+v", err, specs)
	}
	if s := specs[0]; s.name != "INTERNAL" || s.protocol != "SASL_PLAINTEXT" || s.advertised != "" {
		t.Errorf("INTERNAL: %+v", s)
	}
	if s := specs[1]; s.protocol != "SASL_SSL" || s.addr != ":9093" || s.advertised != "broker.example.com:19093" {
		t.Errorf("SASL_SSL: %+v", s)
	}
	// Defaults: one PLAINTEXT listener on kafka-addr (the quick start).
	d := defaultConfig()
	if specs, err := d.listeners(); err != nil || len(specs) != 1 || specs[0].protocol != "PLAINTEXT" || specs[0].addr != "localhost:9092" {
		t.Fatalf("default listeners: %v %+v", err, specs)
	}

	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"unknown name":                 {[]string{"--listeners", "FOO://:1"}, "name one or map it in listener-security-protocol-map"},
		"not a URL":                    {[]string{"--listeners", "PLAINTEXT:1"}, "is not NAME://host:port"},
		"duplicate name":               {[]string{"--listeners", "PLAINTEXT://:1,PLAINTEXT://:2"}, "twice"},
		"same address":                 {[]string{"--listeners", "PLAINTEXT://:1,SSL://:1", "--ssl-cert-file", "c", "--ssl-key-file", "k"}, "the same address"},
		"TLS without files":            {[]string{"--listeners", "SASL_SSL://:1"}, "needs ssl-cert-file and ssl-key-file"},
		"http-tls without files":       {[]string{"--http-tls"}, "needs ssl-cert-file and ssl-key-file"},
		"advertised unknown":           {[]string{"--listeners", "PLAINTEXT://:1", "--advertised-listeners", "SSL://h:1"}, "not in listeners"},
		"advertised unreachable":       {[]string{"--listeners", "PLAINTEXT://:1", "--advertised-listeners", "PLAINTEXT://0.0.0.0:1"}, "does not name a host clients can dial"},
		"advertised without listeners": {[]string{"--advertised-listeners", "PLAINTEXT://h:1"}, "set listeners too"},
		"client auth without CA":       {[]string{"--ssl-client-auth", "required"}, "ssl-client-ca-file is empty"},
		"bad mechanism":                {[]string{"--sasl-enabled-mechanisms", "PLAIN,GSSAPI"}, "GSSAPI"},
		"bad mapping rule":             {[]string{"--ssl-principal-mapping-rules", "RULE:oops"}, "not RULE:pattern/replacement/[LU] or DEFAULT"},
		"password file without user":   {[]string{"--sasl-bootstrap-password-file", "pw"}, "sasl-bootstrap-user is not"},
		"OAUTHBEARER without keys":     {[]string{"--sasl-enabled-mechanisms", "OAUTHBEARER"}, "set sasl-oauthbearer-public-key-files, sasl-oauthbearer-jwks-file or sasl-oauthbearer-jwks-endpoint-url"},
		"bad http-auth":                {[]string{"--http-auth", "basic"}, "none or required"},
		"bad http-auth-metrics":        {[]string{"--http-auth-metrics", "yes"}, "open or required"},
		"empty sub claim":              {[]string{"--sasl-oauthbearer-sub-claim-name", ""}, "use e.g. sub"},
	} {
		c, err := loadFromArgs(t, tc.args, nil)
		if err == nil {
			err = c.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", name, err, tc.want)
		}
	}
	// listeners replaces kafka-addr (set by the container image's
	// environment): a warning, not an error.
	both, err := loadFromArgs(t, []string{"--listeners", "SASL_SSL://:2", "--ssl-cert-file", "c", "--ssl-key-file", "k"}, []string{"BROKER_KAFKA_ADDR=0.0.0.0:9092"})
	if err != nil {
		t.Fatal(err)
	}
	if err := both.Validate(); err != nil {
		t.Fatalf("listeners with kafka-addr from the environment: %v", err)
	}
	if got := both.ignoredAddrKeys(); len(got) != 1 || !strings.Contains(got[0], "kafka-addr (from environment variable BROKER_KAFKA_ADDR)") {
		t.Fatalf("ignored keys: %v", got)
	}
	// The client and bootstrap-password variables are not config keys but
	// serve accepts them.
	if _, err := loadFromArgs(t, nil, []string{"BROKER_SASL_BOOTSTRAP_PASSWORD=x", "BROKER_CLIENT_SASL_USER=u", "BROKER_CLIENT_TOKEN_FILE=t"}); err != nil {
		t.Fatalf("client variables refused: %v", err)
	}
}

// TestJWTKeysAtStart: the OAUTHBEARER key files are read at start; an
// unreadable file or one without a key stops the broker with a sentence
// naming the key and the file.
func TestJWTKeysAtStart(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.pem")
	if err := os.WriteFile(empty, []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"missing PEM":                       {[]string{"--sasl-oauthbearer-public-key-files", filepath.Join(dir, "nope.pem")}, "nope.pem"},
		"no key":                            {[]string{"--sasl-oauthbearer-public-key-files", empty}, "holds no PEM public key"},
		"bad JWKS":                          {[]string{"--sasl-oauthbearer-jwks-file", empty}, "is not a JSON Web Key Set"},
		"JWKS over http to another machine": {[]string{"--sasl-oauthbearer-jwks-endpoint-url", "http://idp.example.com/jwks"}, "use https"},
	} {
		c, err := loadFromArgs(t, tc.args, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := newJWTValidator(c, zerolog.Nop()); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "sasl-oauthbearer") {
			t.Errorf("%s: got %v, want an error naming sasl-oauthbearer and %q", name, err, tc.want)
		}
	}
	c, err := loadFromArgs(t, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := newJWTValidator(c, zerolog.Nop()); v != nil || err != nil {
		t.Errorf("no key files: %v %v, want no validator", v, err)
	}
}

// TestJWKSURLRule: the JWKS endpoint is https, or http to a loopback
// address only (a sidecar); anything else is refused with what to do.
func TestJWKSURLRule(t *testing.T) {
	for raw, want := range map[string]string{
		"https://idp.example.com/jwks":   "",
		"http://127.0.0.1:8081/jwks":     "",
		"http://[::1]/jwks":              "",
		"http://localhost/jwks":          "",
		"http://idp.example.com/jwks":    "use https",
		"http://10.0.0.1/jwks":           "use https",
		"ftp://idp.example.com/jwks":     "scheme must be https",
		"idp.example.com/.well-known/jw": "not an absolute URL",
	} {
		err := checkJWKSURL(raw)
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("%s: %v, want %q", raw, err, want)
		}
	}
}
