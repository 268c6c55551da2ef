package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/vibemq/broker/auth"
	"github.com/vibemq/broker/httpapi"
)

// aclBroker is a broker with authorizer-enabled, a SASL_PLAINTEXT Kafka
// listener where the super user admin manages ACLs, and the HTTP API.
type aclBroker struct {
	t         *testing.T
	kafkaAddr string
	httpURL   string
	adminPw   string
	admin     *kgo.Client
	jwtKey    ed25519.PrivateKey
}

// startACLBroker starts the broker; httpAuth is the http-auth setting,
// edit changes the rest of the configuration.
func startACLBroker(t *testing.T, httpAuth string, edit ...func(*Config)) *aclBroker {
	dir := t.TempDir()
	b := &aclBroker{t: t, kafkaAddr: freeLocalAddr(t), adminPw: filepath.Join(dir, "admin.pw")}
	if err := os.WriteFile(b.adminPw, []byte("admin-pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	b.jwtKey = priv
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	pubFile := filepath.Join(dir, "jwt.pem")
	if err := os.WriteFile(pubFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := defaultConfig()
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.HTTPAddr = freeLocalAddr(t)
	b.httpURL = "http://" + cfg.HTTPAddr
	cfg.MemtableSize, cfg.CacheSize = 4<<20, 8<<20
	cfg.Security.Listeners = "SASL_PLAINTEXT://" + b.kafkaAddr
	cfg.Security.BootstrapUser = "admin"
	cfg.Security.BootstrapPasswordFile = b.adminPw
	cfg.Security.AuthorizerEnabled = true
	cfg.Security.SuperUsers = "User:admin"
	cfg.Security.HTTPAuth = httpAuth
	cfg.Security.OAuthPublicKeyFiles = pubFile
	cfg.Security.FailedAuthenticationDelay = time.Millisecond
	for _, e := range edit {
		e(cfg)
	}
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
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if resp, err := http.Get(b.httpURL + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("broker not ready")
		}
	}
	b.admin, err = kgo.NewClient(kgo.SeedBrokers(b.kafkaAddr), kgo.SASL(scram.Auth{User: "admin", Pass: "admin-pw"}.AsSha512Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.admin.Close)
	return b
}

// cli runs a broker subcommand as the admin (Kafka SASL credentials from
// the environment) and returns its exit code and output.
func (b *aclBroker) cli(args ...string) (int, string) {
	b.t.Helper()
	b.t.Setenv("BROKER_CLIENT_SECURITY_PROTOCOL", "SASL_PLAINTEXT")
	b.t.Setenv("BROKER_CLIENT_SASL_USER", "admin")
	b.t.Setenv("BROKER_CLIENT_SASL_PASSWORD_FILE", b.adminPw)
	var out, errOut bytes.Buffer
	code := realMain(append([]string{"broker"}, args...), &out, &errOut)
	return code, out.String() + errOut.String()
}

func (b *aclBroker) createUser(name, password string) {
	b.t.Helper()
	f := filepath.Join(b.t.TempDir(), name+".pw")
	if err := os.WriteFile(f, []byte(password+"\n"), 0o600); err != nil {
		b.t.Fatal(err)
	}
	if code, out := b.cli("users", "create", "--bootstrap-server", b.kafkaAddr, "--password-file", f, name); code != 0 {
		b.t.Fatalf("users create %s: %d %s", name, code, out)
	}
}

// acl creates (or with remove deletes) one binding over the Kafka
// protocol, as the admin.
func (b *aclBroker) acl(remove bool, rt auth.ResourceType, name string, pt auth.PatternType, principal, host string, op auth.Operation, perm auth.Permission) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if !remove {
		req := kmsg.NewPtrCreateACLsRequest()
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceType(rt), name, kmsg.ACLResourcePatternType(pt)
		c.Principal, c.Host, c.Operation, c.PermissionType = principal, host, kmsg.ACLOperation(op), kmsg.ACLPermissionType(perm)
		req.Creations = append(req.Creations, c)
		resp, err := req.RequestWith(ctx, b.admin)
		if err == nil {
			err = kerr.ErrorForCode(resp.Results[0].ErrorCode)
		}
		if err != nil {
			b.t.Fatalf("create ACL %s %s: %v", rt, name, err)
		}
		return
	}
	req := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourceName, f.ResourcePatternType = kmsg.ACLResourceType(rt), &name, kmsg.ACLResourcePatternType(pt)
	f.Principal, f.Host, f.Operation, f.PermissionType = &principal, &host, kmsg.ACLOperation(op), kmsg.ACLPermissionType(perm)
	req.Filters = append(req.Filters, f)
	resp, err := req.RequestWith(ctx, b.admin)
	if err == nil {
		err = kerr.ErrorForCode(resp.Results[0].ErrorCode)
	}
	if err != nil || len(resp.Results[0].MatchingACLs) != 1 {
		b.t.Fatalf("delete ACL %s %s: %v", rt, name, err)
	}
}

type httpAnswer struct {
	status int
	body   string
}

// call sends one request; auth is an Authorization header value ("" for
// none).
func (b *aclBroker) call(method, path, authz, body string) httpAnswer {
	b.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, b.httpURL+path, rd)
	if err != nil {
		b.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return httpAnswer{resp.StatusCode, string(data)}
}

func basic(user, password string) string {
	r, _ := http.NewRequest("GET", "/", nil)
	r.SetBasicAuth(user, password)
	return r.Header.Get("Authorization")
}

func (b *aclBroker) bearer(sub string) string {
	b.t.Helper()
	tok, err := jwt.NewWithClaims(jwt.SigningMethodEdDSA, jwt.MapClaims{"sub": sub, "exp": time.Now().Add(time.Hour).Unix()}).SignedString(b.jwtKey)
	if err != nil {
		b.t.Fatal(err)
	}
	return "Bearer " + tok
}

// routeCase is one request per route of httpapi.RouteRules: the path with
// the resource's name, a body, and the status when allowed (0: any answer
// but 401, 403 and 5xx: the route ran and refused the request itself,
// e.g. a 404 for a message that does not exist).
type routeCase struct {
	path, body string
	status     int
	// item is what a list route must show once allowed.
	item string
	// name is the resource a route of RouteRule.Found acts on (the
	// handler finds it: task 1's queue).
	name string
	// also is a binding the route needs beyond its own (granted with it):
	// a topic READ for a group's offset reset, as Kafka's OffsetCommit.
	also *aclTarget
}

type aclTarget struct {
	rt   auth.ResourceType
	name string
	op   auth.Operation
}

// routeCases covers every route of httpapi.RouteRules
// (TestHTTPACLMatrix fails for a route without a case). Names: queue q1,
// store s1 (stream st), topic t1, group g1 and a redrive task on q1.dlq
// (task 1) exist; q2, s2, t2 are created
// and q3, s3, t3 deleted by the allowed requests.
var routeCases = map[string]routeCase{
	"GET /metrics":             {path: "/metrics", status: 200},
	"GET /debug/pprof/":        {path: "/debug/pprof/", status: 200},
	"GET /debug/pprof/profile": {path: "/debug/pprof/profile?seconds=1", status: 200},
	"GET /debug/pprof/trace":   {path: "/debug/pprof/trace?seconds=0.01", status: 200},
	"GET /debug/pprof/symbol":  {path: "/debug/pprof/symbol", status: 200},

	"GET /v1/queues":                               {path: "/v1/queues", status: 200, item: `"name":"q1"`},
	"PUT /v1/queues/{queue}":                       {path: "/v1/queues/q2", body: "{}", status: 201},
	"GET /v1/queues/{queue}":                       {path: "/v1/queues/q1", status: 200},
	"PATCH /v1/queues/{queue}":                     {path: "/v1/queues/q1", body: "{}", status: 200},
	"DELETE /v1/queues/{queue}":                    {path: "/v1/queues/q3", status: 204},
	"POST /v1/queues/{queue}/messages":             {path: "/v1/queues/q1/messages", body: `{"messages":[{"body":"m"}]}`, status: 200},
	"GET /v1/queues/{queue}/messages":              {path: "/v1/queues/q1/messages", status: 200},
	"GET /v1/queues/{queue}/messages/{id}":         {path: "/v1/queues/q1/messages/nope"},
	"DELETE /v1/queues/{queue}/messages/{id}":      {path: "/v1/queues/q1/messages/nope"},
	"POST /v1/queues/{queue}/receive":              {path: "/v1/queues/q1/receive", body: `{"max_messages":1}`, status: 200},
	"POST /v1/queues/{queue}/ack":                  {path: "/v1/queues/q1/ack", body: `{"receipts":["bad"]}`},
	"POST /v1/queues/{queue}/nack":                 {path: "/v1/queues/q1/nack", body: `{"receipts":["bad"]}`},
	"POST /v1/queues/{queue}/extend":               {path: "/v1/queues/q1/extend", body: `{"receipts":["bad"]}`},
	"DELETE /v1/queues/{queue}/receipts/{receipt}": {path: "/v1/queues/q1/receipts/bad"},
	"POST /v1/queues/{queue}/purge":                {path: "/v1/queues/q1/purge", body: "{}", status: 200},
	"GET /v1/queues/{queue}/stats":                 {path: "/v1/queues/q1/stats", status: 200},
	"GET /v1/queues/{queue}/dlq":                   {path: "/v1/queues/q1/dlq"},
	"POST /v1/queues/{queue}/redrive":              {path: "/v1/queues/q1/redrive", body: "{}"},
	"GET /v1/tasks":                                {path: "/v1/tasks", status: 200, item: `"dlq":"q1.dlq"`},
	"GET /v1/tasks/{id}":                           {path: "/v1/tasks/1", name: "q1.dlq", status: 200},
	"DELETE /v1/tasks/{id}":                        {path: "/v1/tasks/1", name: "q1.dlq", status: 200},

	"GET /v1/stores":                                      {path: "/v1/stores", status: 200, item: `"name":"s1"`},
	"PUT /v1/stores/{store}":                              {path: "/v1/stores/s2", status: 201},
	"GET /v1/stores/{store}":                              {path: "/v1/stores/s1", status: 200},
	"DELETE /v1/stores/{store}":                           {path: "/v1/stores/s3", status: 204},
	"GET /v1/stores/{store}/events":                       {path: "/v1/stores/s1/events", status: 200},
	"GET /v1/stores/{store}/streams":                      {path: "/v1/stores/s1/streams", status: 200},
	"GET /v1/stores/{store}/streams/{stream}":             {path: "/v1/stores/s1/streams/st", status: 200},
	"GET /v1/stores/{store}/streams/{stream}/events":      {path: "/v1/stores/s1/streams/st/events", status: 200},
	"POST /v1/stores/{store}/streams/{stream}/events":     {path: "/v1/stores/s1/streams/st/events", body: `{"events":[{"type":"t","data":{}}]}`},
	"DELETE /v1/stores/{store}/streams/{stream}":          {path: "/v1/stores/s1/streams/gone"},
	"GET /v1/stores/{store}/consumers":                    {path: "/v1/stores/s1/consumers", status: 200},
	"PUT /v1/stores/{store}/consumers/{consumer}":         {path: "/v1/stores/s1/consumers/c1", body: "{}"},
	"GET /v1/stores/{store}/consumers/{consumer}":         {path: "/v1/stores/s1/consumers/nope", status: 404},
	"DELETE /v1/stores/{store}/consumers/{consumer}":      {path: "/v1/stores/s1/consumers/nope", status: 404},
	"POST /v1/stores/{store}/consumers/{consumer}/commit": {path: "/v1/stores/s1/consumers/nope/commit", body: `{"position":0}`},

	"GET /v1/admin/storage":  {path: "/v1/admin/storage", status: 200},
	"POST /v1/admin/backup":  {path: "/v1/admin/backup", body: "{}"},
	"POST /v1/admin/compact": {path: "/v1/admin/compact"},
	"POST /v1/admin/verify":  {path: "/v1/admin/verify"},

	"GET /v1/admin/cluster":                                       {path: "/v1/admin/cluster", status: 200},
	"POST /v1/admin/cluster/nodes":                                {path: "/v1/admin/cluster/nodes", body: `{"node_id":4,"address":"127.0.0.1:1"}`, status: 409},
	"DELETE /v1/admin/cluster/nodes/{id}":                         {path: "/v1/admin/cluster/nodes/2", status: 409},
	"GET /v1/admin/overview":                                      {path: "/v1/admin/overview", status: 200},
	"GET /v1/admin/topics":                                        {path: "/v1/admin/topics", status: 200, item: `"name":"t1"`},
	"POST /v1/admin/topics":                                       {path: "/v1/admin/topics", body: `{"name":"t2","partitions":1}`, status: 201},
	"GET /v1/admin/topics/{topic}":                                {path: "/v1/admin/topics/t1", status: 200},
	"PATCH /v1/admin/topics/{topic}/configs":                      {path: "/v1/admin/topics/t1/configs", body: `{"set":{"retention.ms":"3600000"}}`},
	"DELETE /v1/admin/topics/{topic}":                             {path: "/v1/admin/topics/t3", status: 204},
	"GET /v1/admin/topics/{topic}/partitions/{partition}/records": {path: "/v1/admin/topics/t1/partitions/0/records", status: 200},
	"GET /v1/admin/groups":                                        {path: "/v1/admin/groups", status: 200, item: `"group":"g1"`},
	"GET /v1/admin/groups/{group}":                                {path: "/v1/admin/groups/g1", status: 200},
	"POST /v1/admin/groups/{group}/reset-offsets":                 {path: "/v1/admin/groups/g1/reset-offsets", body: `{"all_topics":true,"to_earliest":true}`, status: 200, also: &aclTarget{auth.ResourceTopic, "t1", auth.OpRead}},
	"GET /v1/admin/transactions":                                  {path: "/v1/admin/transactions", status: 200},
}

// TestHTTPACLMatrix: every route of the HTTP API under authorizer-enabled
// with Basic authentication: user dave without ACLs is refused 403
// forbidden (a list route answers without the item), and with exactly the
// one binding the route needs (its resource type, the name from the path,
// its operation; routeAccess in httpapi/access.go) the route runs. Before
// this, the HTTP API had no authorizer plugged in: dave could do
// everything.
func TestHTTPACLMatrix(t *testing.T) {
	rules := httpapi.RouteRules()
	for p := range rules {
		if _, ok := routeCases[p]; !ok {
			t.Errorf("route %s has no case in routeCases: add one", p)
		}
	}
	for p := range routeCases {
		if _, ok := rules[p]; !ok {
			t.Errorf("routeCases has %s, which is not a route of httpapi.RouteRules", p)
		}
	}
	if t.Failed() {
		return
	}
	b := startACLBroker(t, "required")
	b.createUser("dave", "dave-pw")
	admin := basic("admin", "admin-pw")
	for _, setup := range []struct{ method, path, body string }{
		{"PUT", "/v1/queues/q1", "{}"}, {"PUT", "/v1/queues/q3", "{}"},
		{"PUT", "/v1/stores/s1", ""}, {"PUT", "/v1/stores/s3", ""},
		{"POST", "/v1/stores/s1/streams/st/events", `{"events":[{"type":"t","data":{}}]}`},
		{"POST", "/v1/queues/q1.dlq/redrive", "{}"}, // a task on q1.dlq for the tasks list
		{"POST", "/v1/admin/topics", `{"name":"t1","partitions":1}`}, {"POST", "/v1/admin/topics", `{"name":"t3","partitions":1}`},
	} {
		if r := b.call(setup.method, setup.path, admin, setup.body); r.status >= 300 {
			t.Fatalf("setup %s %s as the super user: %d %s", setup.method, setup.path, r.status, r.body)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group, commit.Generation = "g1", -1
	md, err := kadm.NewClient(b.admin).Metadata(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic, ct.TopicID = "t1", md.Topics["t1"].ID // v10 names the topic by ID
	cp := kmsg.NewOffsetCommitRequestTopicPartition()
	ct.Partitions = append(ct.Partitions, cp)
	commit.Topics = append(commit.Topics, ct)
	if resp, err := commit.RequestWith(ctx, b.admin); err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("committing an offset of group g1: %v %+v", err, resp)
	}

	dave := basic("dave", "dave-pw")
	patterns := make([]string, 0, len(rules))
	for p := range rules {
		patterns = append(patterns, p)
	}
	sort.Strings(patterns)
	for _, p := range patterns {
		rule, tc := rules[p], routeCases[p]
		method, _, _ := strings.Cut(p, " ")
		name := auth.ClusterName
		if rule.Param != "" {
			path, _, _ := strings.Cut(tc.path, "?")
			name = strings.Split(strings.TrimPrefix(path, "/"), "/")[indexOfParam(p[len(method)+1:], rule.Param)]
		}
		if rule.Found {
			name = tc.name
		}
		if rule.List {
			_, name, _ = strings.Cut(tc.item, ":") // "name":"q1", "group":"g1", "dlq":"q1.dlq"
			name = strings.Trim(name, `"`)
		}
		r := b.call(method, tc.path, dave, tc.body)
		switch {
		case rule.List && (r.status != 200 || tc.item != "" && strings.Contains(r.body, tc.item)):
			t.Errorf("%s without ACL: %d %s, want 200 without %s", p, r.status, r.body, tc.item)
		case !rule.List && (r.status != 403 || !strings.Contains(r.body, `"forbidden"`)):
			t.Errorf("%s without ACL: %d %s, want 403 forbidden", p, r.status, r.body)
		}
		if rule.List && tc.item == "" {
			continue // nothing to show (no transaction)
		}
		b.acl(false, rule.Resource, name, auth.PatternLiteral, "User:dave", "*", rule.Operation, auth.PermissionAllow)
		if tc.also != nil {
			if r := b.call(method, tc.path, dave, tc.body); r.status != 403 {
				t.Errorf("%s with %s on %s %q but not %s on %s %q: %d %s, want 403", p, rule.Operation, rule.Resource, name, tc.also.op, tc.also.rt, tc.also.name, r.status, r.body)
			}
			b.acl(false, tc.also.rt, tc.also.name, auth.PatternLiteral, "User:dave", "*", tc.also.op, auth.PermissionAllow)
		}
		r = b.call(method, tc.path, dave, tc.body)
		switch {
		case tc.status != 0 && r.status != tc.status:
			t.Errorf("%s with %s on %s %q: %d %s, want %d", p, rule.Operation, rule.Resource, name, r.status, r.body, tc.status)
		case r.status == 401 || r.status == 403 || r.status >= 500:
			t.Errorf("%s with %s on %s %q: %d %s", p, rule.Operation, rule.Resource, name, r.status, r.body)
		case tc.item != "" && !strings.Contains(r.body, tc.item):
			t.Errorf("%s with %s on %s %q does not show %s: %s", p, rule.Operation, rule.Resource, name, tc.item, r.body)
		}
		b.acl(true, rule.Resource, name, auth.PatternLiteral, "User:dave", "*", rule.Operation, auth.PermissionAllow)
		if tc.also != nil {
			b.acl(true, tc.also.rt, tc.also.name, auth.PatternLiteral, "User:dave", "*", tc.also.op, auth.PermissionAllow)
		}
	}
}

// indexOfParam is the index of the path segment {param} in pattern.
func indexOfParam(pattern, param string) int {
	for i, s := range strings.Split(strings.TrimPrefix(pattern, "/"), "/") {
		if s == "{"+param+"}" {
			return i
		}
	}
	return -1
}

// TestHTTPACLRules: the HTTP API decides as the Kafka listener: a Bearer
// JWT's sub is the principal; a super user may do everything; a DENY wins
// over a prefixed ALLOW; a binding for another host does not apply; ACLs
// on a queue do not open the topic of the same name; a list shows only
// what may be described (the tasks list too: it needed DESCRIBE on the
// cluster); the console's session user is the principal of
// the admin routes.
func TestHTTPACLRules(t *testing.T) {
	b := startACLBroker(t, "required")
	admin := basic("admin", "admin-pw")
	for _, q := range []string{"/v1/queues/jobs", "/v1/queues/jobs-secret", "/v1/queues/other", "/v1/queues/zeta"} {
		if r := b.call("PUT", q, admin, "{}"); r.status != 201 {
			t.Fatalf("PUT %s as the super user: %d %s", q, r.status, r.body)
		}
	}
	erin := b.bearer("erin")
	send := func(authz, queue string) int {
		return b.call("POST", "/v1/queues/"+queue+"/messages", authz, `{"messages":[{"body":"m"}]}`).status
	}
	receive := func(authz, queue string) int {
		return b.call("POST", "/v1/queues/"+queue+"/receive", authz, `{"max_messages":1}`).status
	}
	if got := send(erin, "jobs"); got != 403 {
		t.Fatalf("erin (Bearer) without ACL sends: %d, want 403", got)
	}
	b.acl(false, auth.ResourceQueue, "jobs", auth.PatternPrefixed, "User:erin", "*", auth.OpAll, auth.PermissionAllow)
	b.acl(false, auth.ResourceQueue, "jobs-secret", auth.PatternLiteral, "User:erin", "*", auth.OpRead, auth.PermissionDeny)
	b.acl(false, auth.ResourceQueue, "other", auth.PatternLiteral, "User:erin", "10.9.9.9", auth.OpAll, auth.PermissionAllow)
	for _, tc := range []struct {
		what string
		got  int
		want int
	}{
		{"send to jobs (prefix ALL)", send(erin, "jobs"), 200},
		{"receive from jobs", receive(erin, "jobs"), 200},
		{"send to jobs-secret (DENY READ only)", send(erin, "jobs-secret"), 200},
		{"receive from jobs-secret (DENY wins)", receive(erin, "jobs-secret"), 403},
		{"send to other (ALLOW from another host)", send(erin, "other"), 403},
		{"super user receives from jobs-secret", receive(admin, "jobs-secret"), 200},
		{"topic jobs is another resource", b.call("GET", "/v1/admin/topics/jobs", erin, "").status, 403},
		{"no credentials", send("", "jobs"), 401},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %d, want %d", tc.what, tc.got, tc.want)
		}
	}
	// A redrive writes to its destination: ALTER on the DLQ and WRITE on
	// the queue the messages go to.
	b.acl(false, auth.ResourceQueue, "other.dlq", auth.PatternLiteral, "User:erin", "*", auth.OpAlter, auth.PermissionAllow)
	if r := b.call("POST", "/v1/queues/other.dlq/redrive", erin, "{}"); r.status != 403 {
		t.Errorf("redrive into other without WRITE on it: %d %s", r.status, r.body)
	}
	if r := b.call("POST", "/v1/queues/other.dlq/redrive", erin, `{"destination":"jobs"}`); r.status != 202 {
		t.Errorf("redrive into jobs (WRITE through the prefix): %d %s", r.status, r.body)
	}
	// The tasks list shows the tasks on the queues erin may describe, not
	// the super user's redrive of zeta.dlq (it needed DESCRIBE on the
	// cluster, so erin could not follow the redrive she started).
	if r := b.call("POST", "/v1/queues/zeta.dlq/redrive", admin, "{}"); r.status != 202 {
		t.Fatalf("redrive of zeta.dlq as the super user: %d %s", r.status, r.body)
	}
	if r := b.call("GET", "/v1/tasks", erin, ""); r.status != 200 || !strings.Contains(r.body, `"dlq":"other.dlq"`) || strings.Contains(r.body, `"dlq":"zeta.dlq"`) {
		t.Errorf("erin's tasks: %d %s, want the redrive of other.dlq and not zeta.dlq's", r.status, r.body)
	}
	if r := b.call("GET", "/v1/tasks", admin, ""); r.status != 200 || !strings.Contains(r.body, `"dlq":"zeta.dlq"`) {
		t.Errorf("the super user's tasks: %d %s, want zeta.dlq's", r.status, r.body)
	}
	// One task is its queue's too: erin follows her redrive (task 1) and
	// may not see nor cancel zeta.dlq's (task 2).
	for _, tc := range []struct {
		method, path string
		want         int
	}{
		{"GET", "/v1/tasks/1", 200},
		{"GET", "/v1/tasks/2", 403},
		{"DELETE", "/v1/tasks/2", 403},
		{"DELETE", "/v1/tasks/1", 200},
		{"GET", "/v1/tasks/99", 404},
	} {
		if r := b.call(tc.method, tc.path, erin, ""); r.status != tc.want {
			t.Errorf("erin: %s %s: %d %s, want %d", tc.method, tc.path, r.status, r.body, tc.want)
		}
	}
	r := b.call("GET", "/v1/queues", erin, "")
	if r.status != 200 || !strings.Contains(r.body, `"name":"jobs"`) || !strings.Contains(r.body, `"name":"jobs-secret"`) || strings.Contains(r.body, `"name":"other"`) || !strings.Contains(r.body, `"name":"other.dlq"`) {
		t.Errorf("erin's queue list: %d %s, want jobs, jobs-secret and other.dlq but not other", r.status, r.body)
	}
	// Pages of one, followed to the end, show the same queues.
	var full, paged struct {
		Queues []struct{ Name string } `json:"queues"`
		Next   string                  `json:"next"`
	}
	if err := json.Unmarshal([]byte(r.body), &full); err != nil {
		t.Fatal(err)
	}
	var names []string
	for after, pages := "", 0; pages < 20; pages++ {
		r = b.call("GET", "/v1/queues?limit=1&after="+after, erin, "")
		paged.Next = ""
		if err := json.Unmarshal([]byte(r.body), &paged); err != nil || len(paged.Queues) > 1 {
			t.Fatalf("page after %q: %d %s", after, r.status, r.body)
		}
		for _, q := range paged.Queues {
			names = append(names, q.Name)
		}
		if after = paged.Next; after == "" {
			break
		}
	}
	var want []string
	for _, q := range full.Queues {
		want = append(want, q.Name)
	}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Errorf("pages of one show %v, the whole list %v", names, want)
	}
	// The console's session: its user is the principal of the admin routes.
	b.createUser("dave", "dave-pw")
	b.acl(false, auth.ResourceTopic, "visible", auth.PatternLiteral, "User:dave", "*", auth.OpDescribe, auth.PermissionAllow)
	for _, topic := range []string{"visible", "hidden"} {
		if r := b.call("POST", "/v1/admin/topics", admin, `{"name":"`+topic+`","partitions":1}`); r.status != 201 {
			t.Fatalf("creating topic %s: %d %s", topic, r.status, r.body)
		}
	}
	login, err := http.Post(b.httpURL+"/v1/auth/login", "application/json", strings.NewReader(`{"user":"dave","password":"dave-pw"}`))
	if err != nil {
		t.Fatal(err)
	}
	login.Body.Close()
	var cookie *http.Cookie
	for _, c := range login.Cookies() {
		if c.Name == httpapi.SessionCookie {
			cookie = c
		}
	}
	if login.StatusCode != 200 || cookie == nil {
		t.Fatalf("console login: %d", login.StatusCode)
	}
	console := func(method, path, body string) httpAnswer {
		req, _ := http.NewRequest(method, b.httpURL+path, strings.NewReader(body))
		req.AddCookie(cookie)
		req.Header.Set(httpapi.ConsoleHeader, "1")
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return httpAnswer{resp.StatusCode, string(data)}
	}
	if r := console("GET", "/v1/admin/topics", ""); r.status != 200 || !strings.Contains(r.body, `"name":"visible"`) || strings.Contains(r.body, `"name":"hidden"`) {
		t.Errorf("console topics of dave: %d %s, want visible and not hidden", r.status, r.body)
	}
	if r := console("POST", "/v1/admin/topics", `{"name":"new","partitions":1}`); r.status != 403 {
		t.Errorf("console create topic without cluster CREATE: %d %s", r.status, r.body)
	}
	if r := console("GET", "/v1/admin/overview", ""); r.status != 403 {
		t.Errorf("console overview without cluster DESCRIBE: %d %s", r.status, r.body)
	}
	// /metrics needs DESCRIBE on the cluster (http-auth-metrics required).
	if r := b.call("GET", "/metrics", erin, ""); r.status != 403 {
		t.Errorf("/metrics without cluster DESCRIBE: %d", r.status)
	}
	if r := b.call("GET", "/healthz", "", ""); r.status != 200 {
		t.Errorf("/healthz stays open: %d", r.status)
	}
}

// TestHTTPACLGroupOffsets: GET /v1/admin/groups/{group} shows only the
// committed offsets (a share group: the share-partitions) of topics the
// principal may DESCRIBE, as Kafka's
// OffsetFetch for all topics leaves the others out. Before, DESCRIBE on
// the group showed the offsets (and lag) of every topic it committed.
func TestHTTPACLGroupOffsets(t *testing.T) {
	b := startACLBroker(t, "required")
	admin := basic("admin", "admin-pw")
	for _, topic := range []string{"shown", "secret"} {
		if r := b.call("POST", "/v1/admin/topics", admin, `{"name":"`+topic+`","partitions":1}`); r.status != 201 {
			t.Fatalf("creating topic %s: %d %s", topic, r.status, r.body)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "shown", Partition: 0, At: 0, LeaderEpoch: -1})
	offs.Add(kadm.Offset{Topic: "secret", Partition: 0, At: 0, LeaderEpoch: -1})
	if resp, err := kadm.NewClient(b.admin).CommitOffsets(ctx, "g", offs); err != nil || resp.Error() != nil {
		t.Fatalf("committing offsets of group g: %v %v", err, resp.Error())
	}
	b.createUser("dave", "dave-pw")
	dave := basic("dave", "dave-pw")
	b.acl(false, auth.ResourceGroup, "g", auth.PatternLiteral, "User:dave", "*", auth.OpDescribe, auth.PermissionAllow)
	b.acl(false, auth.ResourceTopic, "shown", auth.PatternLiteral, "User:dave", "*", auth.OpDescribe, auth.PermissionAllow)
	if r := b.call("GET", "/v1/admin/groups/g", dave, ""); r.status != 200 || !strings.Contains(r.body, `"topic":"shown"`) || strings.Contains(r.body, "secret") {
		t.Errorf("group g as dave (DESCRIBE on topic shown only): %d %s, want the offset of shown and not secret's", r.status, r.body)
	}
	if r := b.call("GET", "/v1/admin/groups/g", admin, ""); r.status != 200 || !strings.Contains(r.body, `"topic":"shown"`) || !strings.Contains(r.body, `"topic":"secret"`) {
		t.Errorf("group g as the super user: %d %s, want both offsets", r.status, r.body)
	}
	// A share group's share-partitions likewise (Kafka's
	// DescribeShareGroupOffsets refuses the topics per partition).
	if resp, err := kadm.NewClient(b.admin).AlterShareGroupOffsets(ctx, "sg", offs); err != nil || resp.Error() != nil {
		t.Fatalf("setting start offsets of share group sg: %v %v", err, resp.Error())
	}
	b.acl(false, auth.ResourceGroup, "sg", auth.PatternLiteral, "User:dave", "*", auth.OpDescribe, auth.PermissionAllow)
	if r := b.call("GET", "/v1/admin/groups/sg", dave, ""); r.status != 200 || !strings.Contains(r.body, `"share_partitions":[{"topic":"shown"`) || strings.Contains(r.body, "secret") {
		t.Errorf("share group sg as dave (DESCRIBE on topic shown only): %d %s, want the share-partition of shown and not secret's", r.status, r.body)
	}
	if r := b.call("GET", "/v1/admin/groups/sg", admin, ""); r.status != 200 || !strings.Contains(r.body, `"topic":"shown"`) || !strings.Contains(r.body, `"topic":"secret"`) {
		t.Errorf("share group sg as the super user: %d %s, want both share-partitions", r.status, r.body)
	}
}

// TestHTTPACLAnonymousAndCLI: with http-auth none every HTTP request is
// User:ANONYMOUS, decided by the same ACLs; `broker acls add --queue`
// grants it a queue, `acls list` shows the binding (and Kafka's ANY filter
// of a Kafka client does not), `acls remove --queue` takes it away. With
// http-auth-metrics open, /metrics and /debug/pprof/ need no ACL.
func TestHTTPACLAnonymousAndCLI(t *testing.T) {
	b := startACLBroker(t, "none", func(c *Config) { c.Security.HTTPAuthMetrics = "open" })
	for _, path := range []string{"/metrics", "/debug/pprof/"} {
		if r := b.call("GET", path, "", ""); r.status != 200 {
			t.Errorf("GET %s with http-auth-metrics open: %d", path, r.status)
		}
	}
	if r := b.call("GET", "/v1/admin/overview", "", ""); r.status != 403 {
		t.Errorf("GET /v1/admin/overview as User:ANONYMOUS without ACL: %d", r.status)
	}
	if r := b.call("PUT", "/v1/queues/inbox", "", "{}"); r.status != 403 {
		t.Fatalf("anonymous PUT without ACL: %d %s", r.status, r.body)
	}
	code, out := b.cli("acls", "add", "--bootstrap-server", b.kafkaAddr, "--principal", "User:ANONYMOUS", "--operation", "CREATE,WRITE", "--queue", "in", "--resource-pattern-type", "prefixed")
	if code != 0 || !strings.Contains(out, "added ALLOW User:ANONYMOUS WRITE on QUEUE:in (PREFIXED)") {
		t.Fatalf("acls add --queue: %d %s", code, out)
	}
	if r := b.call("PUT", "/v1/queues/inbox", "", "{}"); r.status != 201 {
		t.Fatalf("anonymous PUT with CREATE on queue in*: %d %s", r.status, r.body)
	}
	if r := b.call("POST", "/v1/queues/inbox/messages", "", `{"messages":[{"body":"m"}]}`); r.status != 200 {
		t.Errorf("anonymous send with WRITE: %d %s", r.status, r.body)
	}
	if r := b.call("POST", "/v1/queues/inbox/receive", "", `{}`); r.status != 403 {
		t.Errorf("anonymous receive without READ: %d %s", r.status, r.body)
	}
	code, out = b.cli("acls", "add", "--bootstrap-server", b.kafkaAddr, "--principal", "User:ANONYMOUS", "--operation", "READ", "--store", "audit")
	if code != 0 || !strings.Contains(out, "STORE:audit") {
		t.Fatalf("acls add --store: %d %s", code, out)
	}
	code, out = b.cli("acls", "list", "--bootstrap-server", b.kafkaAddr)
	if code != 0 || strings.Count(out, "QUEUE:in") != 2 || !strings.Contains(out, "STORE:audit") {
		t.Fatalf("acls list: %d %s", code, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType, req.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	resp, err := req.RequestWith(ctx, b.admin)
	if err != nil || resp.ErrorCode != 0 || len(resp.Resources) != 0 {
		t.Fatalf("a Kafka client's DescribeAcls ANY: %v %+v, want no native bindings", err, resp)
	}
	code, out = b.cli("acls", "remove", "--bootstrap-server", b.kafkaAddr, "--queue", "in", "--resource-pattern-type", "prefixed")
	if code != 0 || strings.Count(out, "removed") != 2 {
		t.Fatalf("acls remove --queue: %d %s", code, out)
	}
	if r := b.call("POST", "/v1/queues/inbox/messages", "", `{"messages":[{"body":"m"}]}`); r.status != 403 {
		t.Errorf("anonymous send after remove: %d %s", r.status, r.body)
	}
}

// TestHTTPClientCredentials: the HTTP client subcommands (here `broker
// queue list`) take credentials from flags (--user with --password-file,
// --token-file), from the environment (BROKER_CLIENT_SASL_USER with
// BROKER_CLIENT_SASL_PASSWORD, BROKER_CLIENT_TOKEN) and from files; each
// principal sees the queues its ACLs let it describe.
func TestHTTPClientCredentials(t *testing.T) {
	b := startACLBroker(t, "required")
	b.createUser("dave", "dave-pw")
	for _, q := range []string{"alpha", "beta"} {
		if r := b.call("PUT", "/v1/queues/"+q, basic("admin", "admin-pw"), "{}"); r.status != 201 {
			t.Fatalf("PUT %s: %d %s", q, r.status, r.body)
		}
	}
	b.acl(false, auth.ResourceQueue, "alpha", auth.PatternLiteral, "User:dave", "*", auth.OpDescribe, auth.PermissionAllow)
	b.acl(false, auth.ResourceQueue, "beta", auth.PatternLiteral, "User:erin", "*", auth.OpDescribe, auth.PermissionAllow)
	dir := t.TempDir()
	pwFile, tokenFile := filepath.Join(dir, "dave.pw"), filepath.Join(dir, "erin.jwt")
	token := strings.TrimPrefix(b.bearer("erin"), "Bearer ")
	if err := os.WriteFile(pwFile, []byte("dave-pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	list := func(env map[string]string, args ...string) (int, string) {
		t.Helper()
		for _, k := range []string{"BROKER_CLIENT_SASL_USER", "BROKER_CLIENT_SASL_PASSWORD", "BROKER_CLIENT_SASL_PASSWORD_FILE", "BROKER_CLIENT_TOKEN", "BROKER_CLIENT_TOKEN_FILE"} {
			t.Setenv(k, env[k])
		}
		var out, errOut bytes.Buffer
		code := realMain(append([]string{"broker", "queue", "list", "--server", b.httpURL, "-o", "json"}, args...), &out, &errOut)
		return code, out.String() + errOut.String()
	}
	for _, tc := range []struct {
		what      string
		env       map[string]string
		args      []string
		sees, not string
	}{
		{"--user --password-file", nil, []string{"--user", "dave", "--password-file", pwFile}, "alpha", "beta"},
		{"user and password from the environment", map[string]string{"BROKER_CLIENT_SASL_USER": "dave", "BROKER_CLIENT_SASL_PASSWORD": "dave-pw"}, nil, "alpha", "beta"},
		{"password file from the environment", map[string]string{"BROKER_CLIENT_SASL_USER": "dave", "BROKER_CLIENT_SASL_PASSWORD_FILE": pwFile}, nil, "alpha", "beta"},
		{"--token-file", nil, []string{"--token-file", tokenFile}, "beta", "alpha"},
		{"token file from the environment", map[string]string{"BROKER_CLIENT_TOKEN_FILE": tokenFile}, nil, "beta", "alpha"},
		{"token from the environment", map[string]string{"BROKER_CLIENT_TOKEN": token}, nil, "beta", "alpha"},
	} {
		code, out := list(tc.env, tc.args...)
		if code != 0 || !strings.Contains(out, `"name": "`+tc.sees+`"`) || strings.Contains(out, `"name": "`+tc.not+`"`) {
			t.Errorf("%s: exit %d\n%s\nwant %s and not %s", tc.what, code, out, tc.sees, tc.not)
		}
	}
	if code, out := list(nil); code == 0 || !strings.Contains(out, "unauthorized") {
		t.Errorf("no credentials: exit %d\n%s", code, out)
	}
}

// TestJWKSEndpointBroker: with sasl-oauthbearer-jwks-endpoint-url (over
// HTTPS, the CA from sasl-oauthbearer-jwks-endpoint-ca-file) the same
// fetched keys check the Kafka listener's OAUTHBEARER and the HTTP API's
// Bearer tokens, and a key the provider publishes later is accepted on
// both without a restart.
func TestJWKSEndpointBroker(t *testing.T) {
	var mu sync.Mutex
	keys := map[string]ed25519.PrivateKey{}
	addKey := func(kid string) ed25519.PrivateKey {
		_, k, _ := ed25519.GenerateKey(rand.Reader)
		mu.Lock()
		keys[kid] = k
		mu.Unlock()
		return k
	}
	idp := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		var set struct {
			Keys []map[string]string `json:"keys"`
		}
		for kid, k := range keys {
			set.Keys = append(set.Keys, map[string]string{"kty": "OKP", "crv": "Ed25519", "kid": kid, "x": base64.RawURLEncoding.EncodeToString(k.Public().(ed25519.PublicKey))})
		}
		_ = json.NewEncoder(w).Encode(set)
	}))
	defer idp.Close()
	k1 := addKey("k1")
	dir := t.TempDir()
	caFile := filepath.Join(dir, "idp-ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: idp.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := defaultConfig()
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.HTTPAddr = freeLocalAddr(t)
	cfg.MemtableSize, cfg.CacheSize = 4<<20, 8<<20
	kafkaAddr := freeLocalAddr(t)
	cfg.Security.Listeners = "SASL_PLAINTEXT://" + kafkaAddr
	cfg.Security.SASLMechanisms = "OAUTHBEARER"
	cfg.Security.HTTPAuth = "required"
	cfg.Security.OAuthJWKSURL = idp.URL + "/jwks"
	cfg.Security.OAuthJWKSCAFile = caFile
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg, zerolog.Nop()) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("broker: %v", err)
		}
	}()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if resp, err := http.Get("http://" + cfg.HTTPAddr + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("broker not ready")
		}
	}
	token := func(key ed25519.PrivateKey, kid, sub string) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodEdDSA, jwt.MapClaims{"sub": sub, "exp": time.Now().Add(time.Hour).Unix()})
		tok.Header["kid"] = kid
		s, err := tok.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	whoami := func(tok string) string {
		req, _ := http.NewRequest("GET", "http://"+cfg.HTTPAddr+"/v1/auth/whoami", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return string(body)
	}
	kafkaAs := func(tok string) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr), kgo.SASL(oauth.Auth{Token: tok}.AsMechanism()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return cl.Ping(ctx)
	}
	if got := whoami(token(k1, "k1", "frank")); !strings.Contains(got, `"principal":"User:frank"`) {
		t.Errorf("HTTP Bearer with k1: %s", got)
	}
	if err := kafkaAs(token(k1, "k1", "frank")); err != nil {
		t.Errorf("OAUTHBEARER with k1: %v", err)
	}
	k2 := addKey("k2") // rotation at the provider
	if err := kafkaAs(token(k2, "k2", "grace")); err != nil {
		t.Errorf("OAUTHBEARER with the new key k2: %v", err)
	}
	if got := whoami(token(k2, "k2", "grace")); !strings.Contains(got, `"principal":"User:grace"`) {
		t.Errorf("HTTP Bearer with the new key k2: %s", got)
	}
	_, rogue, _ := ed25519.GenerateKey(rand.Reader)
	if err := kafkaAs(token(rogue, "k9", "mallory")); err == nil {
		t.Error("OAUTHBEARER with an unpublished key was accepted")
	}
}
