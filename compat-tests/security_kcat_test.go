package compattests

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// kcatSecure runs kcat with the security settings of one listener; it
// returns stdout, stderr and the exit error.
func kcatSecure(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcatPath(t), args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("kcat %v timed out; stderr:\n%s", args, stderr.String())
	}
	return stdout.String(), stderr.String(), err
}

// TestSecurityKcat: kcat (librdkafka) over SASL_SSL with SCRAM-SHA-512 and
// SCRAM-SHA-256, and over SSL with a client certificate (mTLS): metadata
// (-L: the listener's own address), produce, consume in a balanced
// consumer group (-G); a wrong password fails with an authentication
// error.
func TestSecurityKcat(t *testing.T) {
	kcatPath(t)
	b := startSecureBroker(t)
	createUser(t, b.adminClient(t), "kcat", "kcat-pw")
	scramArgs := func(mech, pw string) []string {
		return []string{"-b", b.saslSSL(), "-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=" + mech,
			"-X", "sasl.username=kcat", "-X", "sasl.password=" + pw, "-X", "ssl.ca.location=" + b.pki.caFile}
	}
	mtlsArgs := []string{"-b", b.ssl(), "-X", "security.protocol=SSL", "-X", "ssl.ca.location=" + b.pki.caFile,
		"-X", "ssl.certificate.location=" + b.pki.aliceCert, "-X", "ssl.key.location=" + b.pki.aliceKey}
	for name, args := range map[string][]string{
		"SASL_SSL-SCRAM-SHA-512": scramArgs("SCRAM-SHA-512", "kcat-pw"),
		"SASL_SSL-SCRAM-SHA-256": scramArgs("SCRAM-SHA-256", "kcat-pw"),
		"SSL-mTLS":               mtlsArgs,
	} {
		t.Run(name, func(t *testing.T) {
			topic := topicName(t, "")
			createTopic(t, newAdmin(t, b.plaintext()), topic, 1, nil)
			out, errOut, err := kcatSecure(t, "", append(args, "-L", "-t", topic)...)
			addr := args[1]
			if err != nil || !strings.Contains(out, addr) || !strings.Contains(out, topic) {
				t.Fatalf("kcat -L: %v\n%s\n%s", err, out, errOut)
			}
			if _, errOut, err := kcatSecure(t, "a\nb\nc\n", append(args, "-P", "-t", topic)...); err != nil {
				t.Fatalf("kcat -P: %v\n%s", err, errOut)
			}
			out, errOut, err = kcatSecure(t, "", append(args, "-G", topic+"-g", "-o", "beginning", "-e", "-f", "%s\n", topic)...)
			if err != nil || strings.TrimSpace(out) != "a\nb\nc" {
				t.Fatalf("kcat -G: %v, got %q\n%s", err, out, errOut)
			}
		})
	}
	_, errOut, err := kcatSecure(t, "", append(scramArgs("SCRAM-SHA-512", "wrong"), "-L", "-m", "10")...)
	if err == nil || !strings.Contains(strings.ToLower(errOut), "authentication") {
		t.Fatalf("wrong password: %v\n%s", err, errOut)
	}
}
