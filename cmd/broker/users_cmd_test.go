package main

import (
	"bytes"
	"context"
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
	"github.com/vibemq/broker/auth"
	"github.com/vibemq/broker/pebblestore"
)

func freeLocalAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestUsersCommand: `broker users` over a SASL_PLAINTEXT listener (named
// INTERNAL through listener-security-protocol-map) as the
// bootstrap admin (credentials from the environment and a file): create,
// list, passwd, delete, and the errors for an existing or missing user;
// the new user authenticates with its password, and after passwd only
// with the new one.
func TestUsersCommand(t *testing.T) {
	dir := t.TempDir()
	adminPw := filepath.Join(dir, "admin.pw")
	if err := os.WriteFile(adminPw, []byte("admin-pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	saslAddr := freeLocalAddr(t)
	cfg := defaultConfig()
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.HTTPAddr = ""
	cfg.MemtableSize, cfg.CacheSize = 4<<20, 8<<20
	// A listener named as Kafka lets operators name them, given its
	// protocol by listener-security-protocol-map.
	cfg.Security.Listeners = "INTERNAL://" + saslAddr
	cfg.Security.ListenerProtocolMap = "INTERNAL:SASL_PLAINTEXT"
	cfg.Security.BootstrapUser = "admin"
	cfg.Security.BootstrapPasswordFile = adminPw
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
		if c, err := net.DialTimeout("tcp", saslAddr, time.Second); err == nil {
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
	newPw := filepath.Join(dir, "bob.pw")
	if err := os.WriteFile(newPw, []byte("bob-pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	expect := func(wantCode int, want string, args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		full := append([]string{"broker", "users", args[0], "--bootstrap-server", saslAddr}, args[1:]...)
		code := realMain(full, &out, &errOut)
		got := out.String() + errOut.String()
		if code != wantCode || !strings.Contains(got, want) {
			t.Fatalf("broker users %v: exit %d, output:\n%s\nwant exit %d and %q", args, code, got, wantCode, want)
		}
		return got
	}
	login := func(user, pw string) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(saslAddr), kgo.SASL(scram.Auth{User: user, Pass: pw}.AsSha256Mechanism()), kgo.RetryTimeout(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, err = kadm.NewClient(cl).ListTopics(ctx)
		return err
	}

	expect(0, "user bob created", "create", "--password-file", newPw, "bob")
	expect(1, "exists already", "create", "--password-file", newPw, "bob")
	out := expect(0, "bob", "list")
	if !strings.Contains(out, "SCRAM-SHA-256") || !strings.Contains(out, "SCRAM-SHA-512") || !strings.Contains(out, "admin") {
		t.Fatalf("list:\n%s", out)
	}
	if err := login("bob", "bob-pw"); err != nil {
		t.Fatalf("bob cannot log in: %v", err)
	}
	t.Setenv("BROKER_USER_PASSWORD", "bob-pw-2")
	expect(0, "password changed", "passwd", "bob")
	if err := login("bob", "bob-pw"); !errorsIsAuth(err) {
		t.Fatalf("old password: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	if err := login("bob", "bob-pw-2"); err != nil {
		t.Fatalf("new password: %v", err)
	}
	expect(1, "does not exist", "passwd", "carol")
	expect(2, "iterations", "create", "--iterations", "100", "carol")
	expect(0, "user bob deleted", "delete", "bob")
	expect(1, "does not exist", "delete", "bob")
	if err := login("bob", "bob-pw-2"); !errorsIsAuth(err) {
		t.Fatalf("deleted user: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	t.Setenv("BROKER_CLIENT_SASL_PASSWORD_FILE", newPw)
	expect(1, "SASL_AUTHENTICATION_FAILED", "list")
}

func errorsIsAuth(err error) bool {
	return err != nil && strings.Contains(err.Error(), kerr.SaslAuthenticationFailed.Message)
}

// TestBootstrapUser: the bootstrap user gets both SCRAM credentials from
// the environment variable or the file (which wins); an existing user is
// left as it is, so a password changed later stays; no password is an
// error that names both sources.
func TestBootstrapUser(t *testing.T) {
	ps, err := pebblestore.Open(t.TempDir(), pebblestore.Options{Logger: zerolog.Nop(), MemTableSize: 4 << 20, CacheSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	creds, err := auth.Open(ps)
	if err != nil {
		t.Fatal(err)
	}
	cfg := defaultConfig()
	cfg.Security.BootstrapUser = "root"
	t.Setenv(bootstrapPasswordEnv, "")
	if err := bootstrapUser(cfg, creds, zerolog.Nop()); err == nil || !strings.Contains(err.Error(), bootstrapPasswordEnv) {
		t.Fatalf("no password: %v", err)
	}
	t.Setenv(bootstrapPasswordEnv, "from-env")
	if err := bootstrapUser(cfg, creds, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	for _, m := range auth.Mechanisms {
		if c, ok := creds.Lookup("root", m); !ok || !c.Verify(m, "from-env") {
			t.Fatalf("%s credential of root missing or wrong", m)
		}
	}
	// Exists already: a new bootstrap password does not overwrite it.
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.Security.BootstrapPasswordFile = pw
	if err := bootstrapUser(cfg, creds, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	if c, _ := creds.Lookup("root", auth.ScramSHA256); !c.Verify(auth.ScramSHA256, "from-env") {
		t.Fatal("an existing bootstrap user was overwritten")
	}
	cfg.Security.BootstrapUser = "other"
	if err := bootstrapUser(cfg, creds, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	if c, _ := creds.Lookup("other", auth.ScramSHA512); !c.Verify(auth.ScramSHA512, "from-file") {
		t.Fatal("the password file did not win over the environment")
	}
}
