package compattests

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
)

// TestSecurityHTTPACL: the built broker with authorizer-enabled and
// http-auth required. `broker acls add --queue` (over SASL as the super
// user) gives a Bearer principal WRITE on a prefix of queues: it sends (200)
// but may not receive (403 forbidden), sees only those queues in the list,
// and may not touch the topic of the same name; a Kafka client's
// DescribeAcls with resource type ANY does not return the queue binding
// (a code it could not parse), `broker acls list` does.
func TestSecurityHTTPACL(t *testing.T) {
	ti := newTokenIssuer(t)
	b := startSecureBroker(t, append(ti.brokerArgs(), "--http-auth", "required",
		"--authorizer-enabled", "--super-users", "User:"+adminUser)...)
	base := "http://" + b.HTTPAddr()
	admin := basic(adminUser, adminPassword)
	for _, q := range []string{"jobs-email", "payroll"} {
		if status, _, _, raw := httpCall(t, "PUT", base+"/v1/queues/"+q, `{}`, admin); status != 201 {
			t.Fatalf("super user creates queue %s: %d %s", q, status, raw)
		}
	}
	env := []string{"BROKER_CLIENT_SECURITY_PROTOCOL=SASL_PLAINTEXT", "BROKER_CLIENT_SASL_USER=" + adminUser, "BROKER_CLIENT_SASL_PASSWORD=" + adminPassword}
	out, errOut, code := runBrokerCLI(t, env, "acls", "add", "--bootstrap-server", b.saslPlaintext(),
		"--principal", "User:svc", "--operation", "WRITE", "--queue", "jobs-", "--resource-pattern-type", "prefixed")
	if code != 0 || !strings.Contains(out, "QUEUE:jobs-") {
		t.Fatalf("acls add --queue: exit %d\n%s%s", code, out, errOut)
	}
	svc := bearer(ti.token(t, "rsa", "svc", time.Now().Add(time.Hour), nil))
	for _, tc := range []struct {
		method, path, body string
		status             int
		code               string
	}{
		{"POST", "/v1/queues/jobs-email/messages", `{"messages":[{"body":"hello"}]}`, 200, ""},
		{"POST", "/v1/queues/jobs-email/receive", `{}`, 403, "forbidden"},
		{"POST", "/v1/queues/payroll/messages", `{"messages":[{"body":"x"}]}`, 403, "forbidden"},
		{"GET", "/v1/admin/topics/jobs-email", "", 403, "forbidden"},
	} {
		if status, code, _, raw := httpCall(t, tc.method, base+tc.path, tc.body, svc); status != tc.status || code != tc.code {
			t.Errorf("svc %s %s: %d %q %s, want %d %q", tc.method, tc.path, status, code, raw, tc.status, tc.code)
		}
	}
	_, _, _, raw := httpCall(t, "GET", base+"/v1/queues", "", svc)
	if !strings.Contains(string(raw), `"name":"jobs-email"`) || strings.Contains(string(raw), `"name":"payroll"`) {
		t.Errorf("svc's queue list: %s, want jobs-email and not payroll", raw)
	}

	cl := newClient(t, b.saslPlaintext(), kgo.SASL(scram512(adminUser, adminPassword)))
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType, req.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	resp, err := req.RequestWith(testCtx(t, opTimeout), cl)
	if err != nil || resp.ErrorCode != 0 || len(resp.Resources) != 0 {
		t.Errorf("DescribeAcls ANY: %v %+v, want no binding (the queue's is not a Kafka resource type)", err, resp)
	}
	out, _, code = runBrokerCLI(t, env, "acls", "list", "--bootstrap-server", b.saslPlaintext())
	if code != 0 || !strings.Contains(out, "QUEUE:jobs-") {
		t.Errorf("acls list: exit %d\n%s", code, out)
	}
}

// TestSecurityJWKSEndpoint: the built broker takes its OAUTHBEARER keys
// from an HTTPS JWKS endpoint (sasl-oauthbearer-jwks-endpoint-url, with
// the endpoint's CA in sasl-oauthbearer-jwks-endpoint-ca-file): a franz-go
// client and an HTTP Bearer request with a token of the published key are
// accepted; a token of an unpublished key is refused.
func TestSecurityJWKSEndpoint(t *testing.T) {
	ti := newTokenIssuer(t)
	jwks, err := os.ReadFile(ti.jwksFile) // the EC key, kid ec1
	if err != nil {
		t.Fatal(err)
	}
	idp := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(jwks)
	}))
	defer idp.Close()
	ca := filepath.Join(t.TempDir(), "idp-ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: idp.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	b := startSecureBroker(t, "--sasl-enabled-mechanisms", "SCRAM-SHA-512,OAUTHBEARER",
		"--sasl-oauthbearer-jwks-endpoint-url", idp.URL+"/.well-known/jwks.json", "--sasl-oauthbearer-jwks-endpoint-ca-file", ca,
		"--sasl-oauthbearer-expected-issuer", tokenIssuerName, "--sasl-oauthbearer-expected-audience", tokenAudience,
		"--http-auth", "required")
	hour := time.Now().Add(time.Hour)
	ping := func(token string) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.saslPlaintext()), kgo.SASL(oauth.Auth{Token: token}.AsMechanism()), kgo.RequestRetries(0))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		return cl.Ping(ctx)
	}
	if err := ping(ti.token(t, "ec", "svc", hour, nil)); err != nil {
		t.Errorf("OAUTHBEARER with the endpoint's key: %v", err)
	}
	if err := ping(ti.token(t, "other", "svc", hour, nil)); err == nil {
		t.Error("OAUTHBEARER with an unpublished key was accepted")
	}
	_, _, _, raw := httpCall(t, "GET", "http://"+b.HTTPAddr()+"/v1/auth/whoami", "", bearer(ti.token(t, "ec", "svc", hour, nil)))
	var who struct {
		Principal string `json:"principal"`
	}
	if err := json.Unmarshal(raw, &who); err != nil || who.Principal != "User:svc" {
		t.Errorf("HTTP Bearer with the endpoint's key: %s", raw)
	}
}
