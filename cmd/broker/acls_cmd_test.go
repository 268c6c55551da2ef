package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// TestAclsCommand: `broker acls` against a broker with authorizer-enabled
// over SASL_PLAINTEXT, as the bootstrap admin (a super user): bob, who has
// no ACL, may not describe a topic; add gives him READ and DESCRIBE on a
// prefix, list shows the two bindings (and filters them), bob then sees the
// topic; remove takes them away again. A user without ALTER on the cluster
// gets CLUSTER_AUTHORIZATION_FAILED from add.
func TestAclsCommand(t *testing.T) {
	dir := t.TempDir()
	adminPw := filepath.Join(dir, "admin.pw")
	if err := os.WriteFile(adminPw, []byte("admin-pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeLocalAddr(t)
	cfg := defaultConfig()
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.HTTPAddr = ""
	cfg.MemtableSize, cfg.CacheSize = 4<<20, 8<<20
	cfg.Security.Listeners = "SASL_PLAINTEXT://" + addr
	cfg.Security.BootstrapUser = "admin"
	cfg.Security.BootstrapPasswordFile = adminPw
	cfg.Security.AuthorizerEnabled = true
	cfg.Security.SuperUsers = "User:admin"
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
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("broker not listening")
		}
	}
	t.Setenv("BROKER_CLIENT_SECURITY_PROTOCOL", "SASL_PLAINTEXT")
	t.Setenv("BROKER_CLIENT_SASL_USER", "admin")
	t.Setenv("BROKER_CLIENT_SASL_PASSWORD_FILE", adminPw)
	expect := func(wantCode int, want string, args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		full := append([]string{"broker", args[0], args[1], "--bootstrap-server", addr}, args[2:]...)
		code := realMain(full, &out, &errOut)
		got := out.String() + errOut.String()
		if code != wantCode || !strings.Contains(got, want) {
			t.Fatalf("broker %v: exit %d, output:\n%s\nwant exit %d and %q", args, code, got, wantCode, want)
		}
		return got
	}
	bobPw := filepath.Join(dir, "bob.pw")
	if err := os.WriteFile(bobPw, []byte("bob-pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	expect(0, "user bob created", "users", "create", "--password-file", bobPw, "bob")
	expect(0, "created", "topics", "create", "orders-eu")

	bobSees := func() error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(scram.Auth{User: "bob", Pass: "bob-pw"}.AsSha512Mechanism()), kgo.RetryTimeout(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		md, err := kadm.NewClient(cl).Metadata(ctx, "orders-eu")
		if err != nil {
			return err
		}
		return md.Topics["orders-eu"].Err
	}
	if err := bobSees(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("bob without ACLs: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	out := expect(0, "added ALLOW User:bob READ on TOPIC:orders- (PREFIXED)", "acls", "add",
		"--principal", "User:bob", "--operation", "READ,DESCRIBE", "--topic", "orders-", "--resource-pattern-type", "prefixed")
	if !strings.Contains(out, "DESCRIBE") {
		t.Fatalf("add:\n%s", out)
	}
	if err := bobSees(); err != nil {
		t.Fatalf("bob with READ and DESCRIBE on orders-*: %v", err)
	}
	out = expect(0, "TOPIC:orders-", "acls", "list")
	if strings.Count(out, "User:bob") != 2 {
		t.Fatalf("list shows not 2 bindings:\n%s", out)
	}
	out = expect(0, "READ", "acls", "list", "--topic", "orders-eu", "--resource-pattern-type", "match", "--operation", "READ")
	if strings.Count(out, "User:bob") != 1 {
		t.Fatalf("list MATCH orders-eu READ:\n%s", out)
	}
	expect(2, "LITERAL or PREFIXED", "acls", "add", "--principal", "User:bob", "--operation", "READ", "--topic", "x", "--resource-pattern-type", "match")
	expect(2, "name a resource", "acls", "add", "--principal", "User:bob", "--operation", "READ")

	// bob may not create ACLs.
	t.Setenv("BROKER_CLIENT_SASL_USER", "bob")
	t.Setenv("BROKER_CLIENT_SASL_PASSWORD_FILE", bobPw)
	expect(1, "CLUSTER_AUTHORIZATION_FAILED", "acls", "add", "--principal", "User:bob", "--operation", "ALL", "--cluster")
	t.Setenv("BROKER_CLIENT_SASL_USER", "admin")
	t.Setenv("BROKER_CLIENT_SASL_PASSWORD_FILE", adminPw)

	out = expect(0, "removed", "acls", "remove", "--principal", "User:bob")
	if strings.Count(out, "removed") != 2 {
		t.Fatalf("remove:\n%s", out)
	}
	expect(0, "no ACL matched", "acls", "remove", "--principal", "User:bob")
	if err := bobSees(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("bob after remove: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
}
