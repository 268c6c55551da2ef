package main

import (
	"strings"
	"testing"
)

// TestQuotasCommand: `broker quotas` sets values on user, client-id and
// default entities, lists them (filtered and strict), refuses bad input
// with the broker's message, and deletes one key or every key.
func TestQuotasCommand(t *testing.T) {
	addr := startServing(t)
	expect := func(wantCode int, want string, args ...string) string {
		t.Helper()
		full := append([]string{args[0], args[1], "--bootstrap-server", addr}, args[2:]...)
		code, out, errOut := runCLI(t, full...)
		// Table columns are padded: compare with single spaces.
		var lines []string
		for _, l := range strings.Split(out+errOut, "\n") {
			lines = append(lines, strings.Join(strings.Fields(l), " "))
		}
		got := strings.Join(lines, "\n")
		if code != wantCode || !strings.Contains(got, want) {
			t.Fatalf("broker %v: exit %d, output:\n%s\nwant exit %d and %q", args, code, got, wantCode, want)
		}
		return got
	}
	expect(0, "set producer_byte_rate=1048576 for user=alice", "quotas", "set", "--user", "alice", "producer_byte_rate=1048576", "consumer_byte_rate=2097152")
	expect(0, "set request_percentage=25.5 for user=alice,client-id=<default>", "quotas", "set", "--user", "alice", "--client-id-default", "request_percentage=25.5")
	expect(0, "set consumer_byte_rate=1024 for client-id=reports", "quotas", "set", "--client-id", "reports", "consumer_byte_rate=1024")
	out := expect(0, "user=alice consumer_byte_rate=2097152,producer_byte_rate=1048576", "quotas", "list")
	if strings.Count(out, "\n") != 4 {
		t.Fatalf("list shows not 3 entities:\n%s", out)
	}
	out = expect(0, "user=alice", "quotas", "list", "--user", "alice", "--strict")
	if strings.Contains(out, "client-id") && strings.Count(out, "\n") != 2 {
		t.Fatalf("strict list:\n%s", out)
	}
	expect(0, "user=alice,client-id=<default> request_percentage=25.5", "quotas", "list", "--user", "alice", "--client-id-default")
	expect(1, "producer_byte_rate cannot be a fractional value.", "quotas", "set", "--client-id", "x", "producer_byte_rate=1.5")
	expect(1, "Invalid configuration key bogus", "quotas", "set", "--client-id", "x", "bogus=1")
	expect(2, "not key=number", "quotas", "set", "--client-id", "x", "producer_byte_rate")
	expect(2, "name an entity", "quotas", "set", "producer_byte_rate=1")
	expect(2, "not both", "quotas", "list", "--user", "a", "--user-default")
	expect(0, "deleted producer_byte_rate of user=alice", "quotas", "delete", "--user", "alice", "producer_byte_rate")
	expect(0, "user=alice consumer_byte_rate=2097152\n", "quotas", "list", "--user", "alice", "--strict")
	expect(0, "deleted consumer_byte_rate of client-id=reports", "quotas", "delete", "--client-id", "reports")
	expect(0, "no quota set", "quotas", "delete", "--client-id", "reports")
	out = expect(0, "ENTITY", "quotas", "list", "--client-id", "reports")
	if strings.Contains(out, "reports") {
		t.Fatalf("deleted entity listed:\n%s", out)
	}
}
