package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/vibemq/broker/auth"
	"github.com/vibemq/broker/httpapi"
	"github.com/vibemq/broker/kafkaproto"
)

// SecurityConfig is the listeners, TLS and SASL part of Config (the
// security keys below).
type SecurityConfig struct {
	// Listeners is Kafka's listeners: NAME://host:port,... Empty means
	// one PLAINTEXT listener on kafka-addr.
	Listeners string
	// AdvertisedListeners is Kafka's advertised.listeners, by listener
	// name; a listener it does not name advertises its own address.
	AdvertisedListeners string
	// ListenerProtocolMap is Kafka's listener.security.protocol.map
	// (NAME:PROTOCOL,...) for listener names that are not protocols.
	ListenerProtocolMap string

	SSLCertFile              string
	SSLKeyFile               string
	SSLClientCAFile          string
	SSLClientAuth            string
	SSLPrincipalMappingRules string
	HTTPTLS                  bool
	// Per-listener overrides of the three files, as NAME:path,... (Kafka
	// listener.name.<name>.ssl.*).
	ListenerSSLCertFiles     string
	ListenerSSLKeyFiles      string
	ListenerSSLClientCAFiles string

	SASLMechanisms            string
	ConnectionsMaxReauth      time.Duration
	FailedAuthenticationDelay time.Duration
	BootstrapUser             string
	BootstrapPasswordFile     string

	// OAUTHBEARER and HTTP Bearer tokens (Kafka's sasl.oauthbearer.*).
	OAuthPublicKeyFiles string
	OAuthJWKSFile       string
	OAuthJWKSURL        string
	OAuthJWKSRefresh    time.Duration
	OAuthJWKSCAFile     string
	OAuthIssuer         string
	OAuthAudience       string
	OAuthSubClaim       string
	OAuthClockSkew      time.Duration

	// HTTPAuth is none or required; HTTPAuthMetrics open or required.
	HTTPAuth        string
	HTTPAuthMetrics string

	AuthorizerEnabled    bool
	SuperUsers           string
	AllowEveryoneIfNoACL bool
}

// jwtConfig is the OAUTHBEARER settings as auth takes them.
func (sc *SecurityConfig) jwtConfig() auth.JWTConfig {
	var files []string
	for _, f := range strings.Split(sc.OAuthPublicKeyFiles, ",") {
		if f = strings.TrimSpace(f); f != "" {
			files = append(files, f)
		}
	}
	return auth.JWTConfig{
		PublicKeyFiles: files, JWKSFile: sc.OAuthJWKSFile, Issuer: sc.OAuthIssuer, Audience: sc.OAuthAudience,
		JWKSURL: sc.OAuthJWKSURL, JWKSRefresh: sc.OAuthJWKSRefresh,
		PrincipalClaim: sc.OAuthSubClaim, ClockSkew: sc.OAuthClockSkew,
	}
}

// bootstrapPasswordEnv gives the bootstrap user's password when no file
// does. It is read only by serve, never logged, and is not a config key (a
// password must not be a flag).
const bootstrapPasswordEnv = "BROKER_SASL_BOOTSTRAP_PASSWORD"

func boolKey(k keyInfo, field func(*Config) *bool) configKey {
	return configKey{
		name: k.name, def: k.def, usage: k.usage, doc: k.doc, isBool: true,
		set: func(c *Config, v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return errors.New("is not true or false")
			}
			*field(c) = b
			return nil
		},
		get: func(c *Config) string { return strconv.FormatBool(*field(c)) },
	}
}

func noCheck(string) string { return "" }

// securityConfigKeys are the listener, TLS and SASL keys (Kafka's names in
// this file's spelling: listeners, advertised.listeners, ssl.client.auth...).
var securityConfigKeys = []configKey{
	stringKey(keyInfo{name: "listeners", def: "", usage: "Kafka listeners as NAME://host:port, comma-separated (Kafka listeners); empty means one PLAINTEXT listener on kafka-addr", doc: "E.g. PLAINTEXT://localhost:9092,SASL_SSL://:9093. A name is a security protocol\n(PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL) or is given one by\nlistener-security-protocol-map. When set, kafka-addr and advertised-addr are\nignored (with a warning at start)."},
		func(c *Config) *string { return &c.Security.Listeners }, noCheck),
	stringKey(keyInfo{name: "advertised-listeners", def: "", usage: "addresses given to clients, per listener name, as NAME://host:port (Kafka advertised.listeners); a listener not named here advertises its own address", doc: "Each client is answered (Metadata, FindCoordinator, DescribeCluster) with the\naddress of the listener it connected to."},
		func(c *Config) *string { return &c.Security.AdvertisedListeners }, noCheck),
	stringKey(keyInfo{name: "listener-security-protocol-map", def: "", usage: "security protocol of listener names that are not protocols, as NAME:PROTOCOL,... (Kafka listener.security.protocol.map)", doc: "E.g. INTERNAL:SASL_PLAINTEXT,EXTERNAL:SASL_SSL."},
		func(c *Config) *string { return &c.Security.ListenerProtocolMap }, noCheck),
	stringKey(keyInfo{name: "ssl-cert-file", def: "", usage: "PEM certificate chain of the SSL and SASL_SSL listeners (and of HTTPS with http-tls)", doc: "Reloaded without a restart when the file changes (checked at most once a second,\non a handshake). TLS 1.2 or later."},
		func(c *Config) *string { return &c.Security.SSLCertFile }, noCheck),
	stringKey(keyInfo{name: "ssl-key-file", def: "", usage: "PEM private key of ssl-cert-file", doc: ""},
		func(c *Config) *string { return &c.Security.SSLKeyFile }, noCheck),
	stringKey(keyInfo{name: "ssl-client-ca-file", def: "", usage: "PEM CA certificates that client certificates must chain to (mutual TLS)", doc: ""},
		func(c *Config) *string { return &c.Security.SSLClientCAFile }, noCheck),
	stringKey(keyInfo{name: "listener-ssl-cert-files", def: "", usage: "per-listener certificates overriding ssl-cert-file, as NAME:path,... (Kafka listener.name.<name>.ssl.keystore.location)", doc: "E.g. EXTERNAL:/etc/broker/public.pem,INTERNAL:/etc/broker/internal.pem. A\nlistener named here needs its key in listener-ssl-key-files; the others use\nssl-cert-file. Reloaded like ssl-cert-file."},
		func(c *Config) *string { return &c.Security.ListenerSSLCertFiles }, noCheck),
	stringKey(keyInfo{name: "listener-ssl-key-files", def: "", usage: "per-listener private keys of listener-ssl-cert-files, as NAME:path,...", doc: ""},
		func(c *Config) *string { return &c.Security.ListenerSSLKeyFiles }, noCheck),
	stringKey(keyInfo{name: "listener-ssl-client-ca-files", def: "", usage: "per-listener client CAs overriding ssl-client-ca-file, as NAME:path,... (Kafka listener.name.<name>.ssl.truststore.location)", doc: "Client certificates are asked for as ssl-client-auth says."},
		func(c *Config) *string { return &c.Security.ListenerSSLClientCAFiles }, noCheck),
	enumKey(keyInfo{name: "ssl-client-auth", def: "none", usage: "client certificates on TLS listeners: none, requested or required (Kafka ssl.client.auth)", doc: "On an SSL listener the principal is the certificate's subject, mapped by\nssl-principal-mapping-rules; without a certificate it is User:ANONYMOUS."},
		func(c *Config) *string { return &c.Security.SSLClientAuth }, "none", "requested", "required"),
	stringKey(keyInfo{name: "ssl-principal-mapping-rules", def: "DEFAULT", usage: "how a client certificate's subject becomes a user name (Kafka ssl.principal.mapping.rules)", doc: "RULE:pattern/replacement/[LU],...,DEFAULT; DEFAULT is the whole DN as Kafka\nwrites it (CN=alice,OU=eng,O=Example,C=US). E.g. RULE:^CN=([^,]+),.*$/$1/,DEFAULT."},
		func(c *Config) *string { return &c.Security.SSLPrincipalMappingRules },
		func(v string) string {
			if _, err := auth.ParsePrincipalRules(v); err != nil {
				return "is not valid: " + err.Error()
			}
			return ""
		}),
	boolKey(keyInfo{name: "http-tls", def: "false", usage: "serve the HTTP listener over TLS with ssl-cert-file, ssl-key-file, ssl-client-ca-file and ssl-client-auth", doc: ""},
		func(c *Config) *bool { return &c.Security.HTTPTLS }),
	stringKey(keyInfo{name: "sasl-enabled-mechanisms", def: "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512", usage: "SASL mechanisms of the SASL listeners (Kafka sasl.enabled.mechanisms)", doc: "PLAIN checks the password against the stored SCRAM credentials. Use PLAIN only\nover SASL_SSL: it sends the password."},
		func(c *Config) *string { return &c.Security.SASLMechanisms },
		func(v string) string {
			if _, err := parseMechanisms(v); err != nil {
				return err.Error()
			}
			return ""
		}),
	durationKey(keyInfo{name: "connections-max-reauth", def: "0s", usage: "longest SASL session before the client must re-authenticate on its connection (KIP-368, Kafka connections.max.reauth.ms); 0 means never", doc: ""}, func(c *Config) *time.Duration { return &c.Security.ConnectionsMaxReauth }, 0, 365*24*time.Hour),
	durationKey(keyInfo{name: "connection-failed-authentication-delay", def: "100ms", usage: "delay before answering a failed SASL authentication; repeated failures from one address within a minute wait longer, up to 5s (Kafka connection.failed.authentication.delay.ms)", doc: ""}, func(c *Config) *time.Duration { return &c.Security.FailedAuthenticationDelay }, 0, 5*time.Second),
	stringKey(keyInfo{name: "sasl-bootstrap-user", def: "", usage: "user created at start with SCRAM-SHA-256 and SCRAM-SHA-512 credentials if it has none yet (the first admin)", doc: "Its password comes from sasl-bootstrap-password-file or the environment\nvariable " + bootstrapPasswordEnv + " (never a flag; never logged). An existing\nuser is never changed, so `broker users passwd` stays in force."},
		func(c *Config) *string { return &c.Security.BootstrapUser },
		func(v string) string {
			if v != "" && auth.CheckUser(v) != nil {
				return "is longer than 256 bytes; use a short user name"
			}
			return ""
		}),
	stringKey(keyInfo{name: "sasl-bootstrap-password-file", def: "", usage: "file holding the password of sasl-bootstrap-user (trailing newline ignored)", doc: ""},
		func(c *Config) *string { return &c.Security.BootstrapPasswordFile }, noCheck),
	stringKey(keyInfo{name: "sasl-oauthbearer-public-key-files", def: "", usage: "PEM files of the public keys (RSA, ECDSA, Ed25519, or certificates) that sign the JWTs of OAUTHBEARER and of HTTP Bearer, comma-separated", doc: "Read at start. Tokens are checked for signature, exp (required), nbf, iat,\nand the expected issuer and audience when set (KIP-255)."},
		func(c *Config) *string { return &c.Security.OAuthPublicKeyFiles }, noCheck),
	stringKey(keyInfo{name: "sasl-oauthbearer-jwks-file", def: "", usage: "JSON Web Key Set file of the JWT signing keys (instead of or beside sasl-oauthbearer-public-key-files; Kafka sasl.oauthbearer.jwks.endpoint.url with a file: URL)", doc: "A key with a kid is used only for tokens with that kid. Read at start."},
		func(c *Config) *string { return &c.Security.OAuthJWKSFile }, noCheck),
	stringKey(keyInfo{name: "sasl-oauthbearer-jwks-endpoint-url", def: "", usage: "URL of the identity provider's JSON Web Key Set (Kafka sasl.oauthbearer.jwks.endpoint.url, KIP-768): https, or http to a loopback address only", doc: "Fetched at start (a provider that is down does not stop the broker: tokens are\nrefused until a fetch succeeds), again in the background when the keys are\nolder than sasl-oauthbearer-jwks-endpoint-refresh, and at once when a token\nnames a kid the keys lack (at most every 10 s). A failed fetch keeps the last\nkeys. Beside or instead of the key files."},
		func(c *Config) *string { return &c.Security.OAuthJWKSURL }, noCheck),
	durationKey(keyInfo{name: "sasl-oauthbearer-jwks-endpoint-refresh", def: "1h", usage: "how old the keys of sasl-oauthbearer-jwks-endpoint-url may get before they are fetched again (Kafka sasl.oauthbearer.jwks.endpoint.refresh.ms)", doc: ""},
		func(c *Config) *time.Duration { return &c.Security.OAuthJWKSRefresh }, 10*time.Second, 7*24*time.Hour),
	stringKey(keyInfo{name: "sasl-oauthbearer-jwks-endpoint-ca-file", def: "", usage: "PEM CAs that sign the certificate of sasl-oauthbearer-jwks-endpoint-url (default: the system roots)", doc: ""},
		func(c *Config) *string { return &c.Security.OAuthJWKSCAFile }, noCheck),
	stringKey(keyInfo{name: "sasl-oauthbearer-expected-issuer", def: "", usage: "iss that every JWT must have; empty accepts any (Kafka sasl.oauthbearer.expected.issuer)", doc: ""},
		func(c *Config) *string { return &c.Security.OAuthIssuer }, noCheck),
	stringKey(keyInfo{name: "sasl-oauthbearer-expected-audience", def: "", usage: "audience that every JWT's aud must contain; empty accepts any (Kafka sasl.oauthbearer.expected.audience)", doc: ""},
		func(c *Config) *string { return &c.Security.OAuthAudience }, noCheck),
	stringKey(keyInfo{name: "sasl-oauthbearer-sub-claim-name", def: "sub", usage: "JWT claim whose value is the user name of the principal (Kafka sasl.oauthbearer.sub.claim.name)", doc: ""},
		func(c *Config) *string { return &c.Security.OAuthSubClaim },
		func(v string) string {
			if v == "" {
				return "is empty; use e.g. sub"
			}
			return ""
		}),
	durationKey(keyInfo{name: "sasl-oauthbearer-clock-skew", def: "30s", usage: "clock difference allowed when checking a JWT's exp, nbf and iat (Kafka sasl.oauthbearer.clock.skew.seconds)", doc: ""}, func(c *Config) *time.Duration { return &c.Security.OAuthClockSkew }, 0, 10*time.Minute),
	enumKey(keyInfo{name: "http-auth", def: "none", usage: "authentication on the HTTP listener: none, or required (HTTP Basic with a broker user, Bearer with a JWT, or the console's login)", doc: "With required, /healthz, /readyz and the console's login page stay open;\n/metrics and /debug/pprof/ follow http-auth-metrics."},
		func(c *Config) *string { return &c.Security.HTTPAuth }, "none", "required"),
	enumKey(keyInfo{name: "http-auth-metrics", def: "required", usage: "with http-auth required: whether /metrics and /debug/pprof/ need credentials too (required) or stay open (open)", doc: "Keep required when the HTTP port is reachable by others: profiles and metrics\ntell a lot about the broker. A Prometheus scrape can send Basic credentials.\nWith authorizer-enabled, required also needs DESCRIBE on the cluster; open\nskips the ACLs too."},
		func(c *Config) *string { return &c.Security.HTTPAuthMetrics }, "open", "required"),
	boolKey(keyInfo{name: "authorizer-enabled", def: "false", usage: "check every Kafka request and every HTTP API request against the ACLs (Kafka authorizer.class.name=StandardAuthorizer); off allows everything", doc: "ACLs are managed with `broker acls` or any Kafka admin client (CreateAcls,\nDescribeAcls, DeleteAcls) and stored in the data directory. Put the admin in\nsuper-users, or nobody may create the first ACL. The HTTP API is checked with\nthe same ACLs: queues and event stores are resources of their own\n(broker acls add --queue NAME / --store NAME), the admin routes are the\ncluster's; with http-auth none every HTTP request is User:ANONYMOUS."},
		func(c *Config) *bool { return &c.Security.AuthorizerEnabled }),
	stringKey(keyInfo{name: "super-users", def: "", usage: "principals allowed everything when authorizer-enabled, as User:alice;User:bob (Kafka super.users)", doc: ""},
		func(c *Config) *string { return &c.Security.SuperUsers },
		func(v string) string {
			if _, err := parseSuperUsers(v); err != nil {
				return err.Error()
			}
			return ""
		}),
	boolKey(keyInfo{name: "allow-everyone-if-no-acl-found", def: "false", usage: "with authorizer-enabled, allow an operation on a resource no ACL names at all (Kafka allow.everyone.if.no.acl.found)", doc: ""},
		func(c *Config) *bool { return &c.Security.AllowEveryoneIfNoACL }),
}

// parseSuperUsers reads Kafka's super.users: principals separated by ";".
func parseSuperUsers(v string) ([]string, error) {
	var out []string
	for _, p := range strings.Split(v, ";") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		typ, name, ok := strings.Cut(p, ":")
		if !ok || typ != auth.PrincipalType || name == "" {
			return nil, fmt.Errorf("names %q, which is not a principal; use User:alice;User:bob", p)
		}
		out = append(out, p)
	}
	return out, nil
}

func parseMechanisms(v string) ([]string, error) {
	var out []string
	for _, m := range strings.Split(v, ",") {
		m = strings.TrimSpace(m)
		if m == "" {
			continue
		}
		if m != auth.MechanismPlain && m != auth.MechanismOAuthBearer {
			if _, ok := auth.ParseMechanism(m); !ok {
				return nil, fmt.Errorf("names %q, which is not PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER", m)
			}
		}
		out = append(out, m)
	}
	if len(out) == 0 {
		return nil, errors.New("is empty; use e.g. SCRAM-SHA-512")
	}
	return out, nil
}

// listenerSpec is one parsed listener.
type listenerSpec struct {
	name       string
	protocol   kafkaproto.SecurityProtocol
	addr       string // host:port to listen on
	advertised string // host:port; "" means derived from the bound address
	// tls is the listener's TLS files (TLS protocols only): the ssl-*
	// keys with the listener-ssl-* overrides; tlsOwn when it has any.
	tls    auth.TLSFiles
	tlsOwn bool
}

// parseListenerMap parses NAME:value,... (the value is what follows the
// first colon, so a path may hold colons).
func parseListenerMap(key, v string) (map[string]string, error) {
	out := map[string]string{}
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, value, ok := strings.Cut(item, ":")
		name, value = strings.ToUpper(strings.TrimSpace(name)), strings.TrimSpace(value)
		if !ok || name == "" || value == "" {
			return nil, fmt.Errorf("%s entry %q is not NAME:path; use e.g. EXTERNAL:/etc/broker/external.pem", key, item)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%s names listener %s twice", key, name)
		}
		out[name] = value
	}
	return out, nil
}

// listenerTLS sets each TLS listener's files: the ssl-* keys, overridden
// by the listener-ssl-* keys, whose names must be TLS listeners; a
// listener's own certificate comes with its own key.
func (sc *SecurityConfig) listenerTLS(specs []listenerSpec) error {
	certs, err := parseListenerMap("listener-ssl-cert-files", sc.ListenerSSLCertFiles)
	if err != nil {
		return err
	}
	keys, err := parseListenerMap("listener-ssl-key-files", sc.ListenerSSLKeyFiles)
	if err != nil {
		return err
	}
	cas, err := parseListenerMap("listener-ssl-client-ca-files", sc.ListenerSSLClientCAFiles)
	if err != nil {
		return err
	}
	if len(cas) > 0 && sc.SSLClientAuth == "none" {
		return errors.New("listener-ssl-client-ca-files is set but ssl-client-auth is none, so no client certificate is asked for; set ssl-client-auth to requested or required")
	}
	byName := map[string]*listenerSpec{}
	for i := range specs {
		byName[specs[i].name] = &specs[i]
		if specs[i].protocol.TLS() {
			specs[i].tls = auth.TLSFiles{CertFile: sc.SSLCertFile, KeyFile: sc.SSLKeyFile, ClientCAFile: sc.SSLClientCAFile, ClientAuth: sc.SSLClientAuth}
		}
	}
	// Checked in a fixed order so that the same wrong settings always get the same error.
	for _, kv := range []struct {
		key string
		m   map[string]string
	}{{"listener-ssl-cert-files", certs}, {"listener-ssl-key-files", keys}, {"listener-ssl-client-ca-files", cas}} {
		key := kv.key
		for _, name := range slices.Sorted(maps.Keys(kv.m)) {
			l := byName[name]
			switch {
			case l == nil:
				return fmt.Errorf("%s names %s, which is not in listeners", key, name)
			case !l.protocol.TLS():
				return fmt.Errorf("%s names %s, a %s listener without TLS; name an SSL or SASL_SSL listener", key, name, l.protocol)
			}
		}
	}
	for name, l := range byName {
		cert, hasCert := certs[name]
		key, hasKey := keys[name]
		if hasCert != hasKey {
			return fmt.Errorf("listener %s has its own certificate or key but not both; set both listener-ssl-cert-files and listener-ssl-key-files for it", name)
		}
		if hasCert {
			l.tls.CertFile, l.tls.KeyFile, l.tlsOwn = cert, key, true
		}
		if ca, ok := cas[name]; ok {
			l.tls.ClientCAFile, l.tlsOwn = ca, true
		}
	}
	return nil
}

// parseListenerList parses NAME://host:port,...
func parseListenerList(key, v string) ([][2]string, error) {
	var out [][2]string
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, addr, ok := strings.Cut(item, "://")
		if !ok || name == "" {
			return nil, fmt.Errorf("%s entry %q is not NAME://host:port; use e.g. SASL_SSL://:9093", key, item)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("%s entry %q has no host:port; use e.g. SASL_SSL://:9093", key, item)
		}
		out = append(out, [2]string{strings.ToUpper(name), addr})
	}
	return out, nil
}

// listeners resolves the listener keys (and kafka-addr when listeners is
// empty) into listener specs.
func (c *Config) listeners() ([]listenerSpec, error) {
	sc := &c.Security
	if sc.Listeners == "" {
		if sc.AdvertisedListeners != "" {
			return nil, errors.New("advertised-listeners is set but listeners is not; set listeners too, or use advertised-addr")
		}
		return []listenerSpec{{name: "PLAINTEXT", protocol: kafkaproto.Plaintext, addr: c.KafkaAddr, advertised: c.AdvertisedAddr}}, nil
	}
	protoMap := map[string]kafkaproto.SecurityProtocol{}
	for _, item := range strings.Split(sc.ListenerProtocolMap, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, proto, ok := strings.Cut(item, ":")
		p, known := kafkaproto.ParseSecurityProtocol(strings.ToUpper(strings.TrimSpace(proto)))
		if !ok || !known {
			return nil, fmt.Errorf("listener-security-protocol-map entry %q is not NAME:PROTOCOL with PROTOCOL one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL", item)
		}
		protoMap[strings.ToUpper(strings.TrimSpace(name))] = p
	}
	list, err := parseListenerList("listeners", sc.Listeners)
	if err != nil {
		return nil, err
	}
	adv, err := parseListenerList("advertised-listeners", sc.AdvertisedListeners)
	if err != nil {
		return nil, err
	}
	var out []listenerSpec
	seen := map[string]bool{}
	for _, l := range list {
		if seen[l[0]] {
			return nil, fmt.Errorf("listeners names %s twice; give each listener its own name", l[0])
		}
		seen[l[0]] = true
		p, ok := protoMap[l[0]]
		if !ok {
			if p, ok = kafkaproto.ParseSecurityProtocol(l[0]); !ok {
				return nil, fmt.Errorf("listener %s is not a security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL); name one or map it in listener-security-protocol-map", l[0])
			}
		}
		for _, o := range out {
			if sameListenAddr(o.addr, l[1]) {
				return nil, fmt.Errorf("listeners %s and %s have the same address %s; give each its own port", o.name, l[0], l[1])
			}
		}
		out = append(out, listenerSpec{name: l[0], protocol: p, addr: l[1]})
	}
	if err := sc.listenerTLS(out); err != nil {
		return nil, err
	}
	for _, a := range adv {
		found := false
		for i := range out {
			if out[i].name == a[0] {
				if problem := checkHostPort(a[1], hostPortRules{example: "broker1.example.com:9093", dialable: true}); problem != "" {
					return nil, fmt.Errorf("advertised-listeners entry %s://%s %s", a[0], a[1], problem)
				}
				out[i].advertised, found = a[1], true
			}
		}
		if !found {
			return nil, fmt.Errorf("advertised-listeners names %s, which is not in listeners", a[0])
		}
	}
	return out, nil
}

// validateSecurity checks the rules between the security keys.
func (c *Config) validateSecurity() []error {
	var errs []error
	specs, err := c.listeners()
	if err != nil {
		return []error{err}
	}
	sc := &c.Security
	needTLS := sc.HTTPTLS
	for _, l := range specs {
		needTLS = needTLS || (l.protocol.TLS() && (l.tls.CertFile == "" || l.tls.KeyFile == ""))
		if c.HTTPAddr != "" && sameListenAddr(c.HTTPAddr, l.addr) && c.Security.Listeners != "" {
			errs = append(errs, fmt.Errorf("http-addr %q is the address of the Kafka listener %s; give the HTTP listener its own port", c.HTTPAddr, l.name))
		}
	}
	if needTLS && (sc.SSLCertFile == "" || sc.SSLKeyFile == "") {
		errs = append(errs, errors.New("a TLS listener (SSL, SASL_SSL or http-tls) needs ssl-cert-file and ssl-key-file (or, for a Kafka listener, its own in listener-ssl-cert-files and listener-ssl-key-files); set both to PEM files"))
	}
	if sc.SSLClientAuth != "none" && sc.SSLClientCAFile == "" {
		errs = append(errs, fmt.Errorf("ssl-client-auth is %s but ssl-client-ca-file is empty; set it to the PEM CA that signs client certificates", sc.SSLClientAuth))
	}
	if mechs, _ := parseMechanisms(sc.SASLMechanisms); slices.Contains(mechs, auth.MechanismOAuthBearer) && !sc.jwtConfig().Enabled() {
		errs = append(errs, errors.New("sasl-enabled-mechanisms has OAUTHBEARER but no JWT key is configured; set sasl-oauthbearer-public-key-files, sasl-oauthbearer-jwks-file or sasl-oauthbearer-jwks-endpoint-url"))
	}
	if sc.BootstrapPasswordFile != "" && sc.BootstrapUser == "" {
		errs = append(errs, errors.New("sasl-bootstrap-password-file is set but sasl-bootstrap-user is not; name the user"))
	}
	return errs
}

// ignoredAddrKeys names kafka-addr and advertised-addr when they are set
// but listeners replaces them (the container image sets BROKER_KAFKA_ADDR,
// so this is a warning at start, not an error).
func (c *Config) ignoredAddrKeys() []string {
	if c.Security.Listeners == "" {
		return nil
	}
	var out []string
	for _, k := range []string{"kafka-addr", "advertised-addr"} {
		if _, set := c.source[k]; set {
			out = append(out, k+c.from(k))
		}
	}
	return out
}

// boundListener is a Kafka listener bound to its socket.
type boundListener struct {
	ln   net.Listener
	spec kafkaproto.Listener
}

// openListeners binds every Kafka listener and builds its TLS settings.
// On error nothing stays open.
func openListeners(cfg *Config, tlsSource *auth.TLSSource, log zerolog.Logger) ([]boundListener, error) {
	specs, err := cfg.listeners()
	if err != nil {
		return nil, err
	}
	mapper, err := auth.ParsePrincipalRules(cfg.Security.SSLPrincipalMappingRules)
	if err != nil {
		return nil, err
	}
	var out []boundListener
	closeAll := func() {
		for _, b := range out {
			_ = b.ln.Close()
		}
	}
	for _, s := range specs {
		ln, err := net.Listen("tcp", s.addr)
		if err != nil {
			closeAll()
			flag := "--kafka-addr"
			if cfg.Security.Listeners != "" {
				flag = "--listeners"
			}
			return nil, fmt.Errorf("cannot listen for Kafka clients on %s (listener %s): %w; choose a free address with %s", s.addr, s.name, err, flag)
		}
		advertised, err := advertisedAddr(s.advertised, ln.Addr())
		if err != nil {
			_ = ln.Close()
			closeAll()
			return nil, err
		}
		l := kafkaproto.Listener{Name: s.name, Protocol: s.protocol, AdvertisedAddr: advertised, PrincipalMapper: mapper}
		switch {
		case s.tlsOwn:
			// The listener's own files (listener-ssl-*), checked and
			// reloaded like the broker-wide ones.
			own, err := auth.NewTLSSource(s.tls, log.With().Str("component", "tls").Str("listener", s.name).Logger(), nil)
			if err != nil {
				_ = ln.Close()
				closeAll()
				return nil, fmt.Errorf("listener %s: %w (listener-ssl-cert-files, listener-ssl-key-files, listener-ssl-client-ca-files)", s.name, err)
			}
			l.TLS = own.Config()
		case s.protocol.TLS():
			l.TLS = tlsSource.Config()
		}
		out = append(out, boundListener{ln: ln, spec: l})
	}
	return out, nil
}

// newTLSSource loads the TLS files when a listener needs them; nil when
// none does.
func newTLSSource(cfg *Config, log zerolog.Logger) (*auth.TLSSource, error) {
	sc := &cfg.Security
	if sc.SSLCertFile == "" {
		return nil, nil
	}
	return auth.NewTLSSource(auth.TLSFiles{
		CertFile: sc.SSLCertFile, KeyFile: sc.SSLKeyFile, ClientCAFile: sc.SSLClientCAFile, ClientAuth: sc.SSLClientAuth,
	}, log.With().Str("component", "tls").Logger(), nil)
}

// saslConfig is the kafkaproto SASL configuration.
func saslConfig(cfg *Config, creds *auth.Store, jwt *auth.JWTValidator) kafkaproto.SASLConfig {
	mechs, _ := parseMechanisms(cfg.Security.SASLMechanisms) // Validate checked
	return kafkaproto.SASLConfig{
		Mechanisms:   mechs,
		Credentials:  creds,
		JWT:          jwt,
		MaxReauth:    cfg.Security.ConnectionsMaxReauth,
		FailureDelay: cfg.Security.FailedAuthenticationDelay,
	}
}

// bootstrapUser creates sasl-bootstrap-user with both SCRAM mechanisms
// when it has no credential yet. The password is never logged.
func bootstrapUser(cfg *Config, creds *auth.Store, log zerolog.Logger) error {
	user := cfg.Security.BootstrapUser
	if user == "" {
		return nil
	}
	if len(creds.Describe([]string{user})) > 0 {
		log.Info().Str("user", user).Msg("bootstrap user exists; its credentials are left as they are")
		return nil
	}
	password := os.Getenv(bootstrapPasswordEnv)
	source := bootstrapPasswordEnv
	if f := cfg.Security.BootstrapPasswordFile; f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("cannot read sasl-bootstrap-password-file: %w", err)
		}
		password, source = strings.TrimRight(string(b), "\r\n"), f
	}
	if password == "" {
		return fmt.Errorf("sasl-bootstrap-user %q has no password: put it in sasl-bootstrap-password-file or %s", user, bootstrapPasswordEnv)
	}
	var changes []auth.Change
	for _, m := range auth.Mechanisms {
		c, err := auth.NewCredential(m, password, auth.DefaultIterations)
		if err != nil {
			return fmt.Errorf("bootstrap user %q: %w", user, err)
		}
		changes = append(changes, auth.Change{User: user, Mechanism: m, Credential: c})
	}
	if err := creds.Apply(changes); err != nil {
		return fmt.Errorf("storing the bootstrap user %q: %w", user, err)
	}
	log.Info().Str("user", user).Str("password_from", source).Msg("bootstrap user created (SCRAM-SHA-256, SCRAM-SHA-512)")
	return nil
}

// newJWTValidator loads the OAUTHBEARER keys; nil when none is configured.
func newJWTValidator(cfg *Config, log zerolog.Logger) (*auth.JWTValidator, error) {
	jc := cfg.Security.jwtConfig()
	jc.Logger = log.With().Str("component", "jwks").Logger()
	if sc := cfg.Security; sc.OAuthJWKSURL != "" {
		fetch, err := jwksFetcher(sc.OAuthJWKSURL, sc.OAuthJWKSCAFile)
		if err != nil {
			return nil, err
		}
		jc.JWKSFetch = fetch
	}
	if !jc.Enabled() {
		return nil, nil
	}
	v, err := auth.NewJWTValidator(jc)
	if err != nil {
		return nil, fmt.Errorf("sasl-oauthbearer keys: %w", err)
	}
	return v, nil
}

// httpAuth is the HTTP listener's authentication.
func httpAuth(cfg *Config, creds *auth.Store, jwt *auth.JWTValidator, authz *auth.Authorizer) httpapi.AuthConfig {
	ac := httpapi.AuthConfig{
		Required:     cfg.Security.HTTPAuth == "required",
		Passwords:    auth.NewPasswordChecker(creds, 0, 0),
		JWT:          jwt,
		MetricsOpen:  cfg.Security.HTTPAuthMetrics == "open",
		FailureDelay: cfg.Security.FailedAuthenticationDelay,
	}
	if authz != nil { // a nil *auth.Authorizer in the interface would not be nil
		ac.Authorizer = authz
	}
	return ac
}

// httpTLS is the HTTP listener's TLS configuration when http-tls is on.
func httpTLS(cfg *Config, src *auth.TLSSource) *tls.Config {
	if !cfg.Security.HTTPTLS || src == nil {
		return nil
	}
	return src.Config()
}

// healthcheckTLSClient is the HTTPS client of `broker healthcheck` with
// http-tls: it trusts BROKER_CLIENT_TLS_CA_FILE when set and presents
// BROKER_CLIENT_TLS_CERT_FILE/KEY_FILE (ssl-client-auth required). Without a
// CA it does not verify the certificate: the probe sends nothing and reads
// only a status, usually over loopback, where the name in the certificate
// rarely matches.
func healthcheckTLSClient() (*http.Client, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca := os.Getenv(clientSecurityEnv["tls-ca-file"]); ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s holds no PEM certificate", ca)
		}
	} else {
		cfg.InsecureSkipVerify = true
	}
	if cert := os.Getenv(clientSecurityEnv["tls-cert-file"]); cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, os.Getenv(clientSecurityEnv["tls-key-file"]))
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}, nil
}
