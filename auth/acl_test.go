package auth

import (
	"errors"
	"testing"

	"github.com/rs/zerolog"
	"github.com/vibemq/broker/pebblestore"
)

func openTestAuthorizer(t testing.TB, dir string, cfg AuthorizerConfig) (*Authorizer, *pebblestore.Store) {
	t.Helper()
	store, err := pebblestore.Open(dir, pebblestore.Options{Logger: zerolog.Nop(), MemTableSize: 4 << 20, CacheSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	a, err := OpenAuthorizer(store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a, store
}

func allow(rt ResourceType, name string, pt PatternType, principal, host string, op Operation) Binding {
	return Binding{ResourceType: rt, ResourceName: name, PatternType: pt, Principal: principal, Host: host, Operation: op, Permission: PermissionAllow}
}

func deny(rt ResourceType, name string, pt PatternType, principal, host string, op Operation) Binding {
	b := allow(rt, name, pt, principal, host, op)
	b.Permission = PermissionDeny
	return b
}

// TestAuthorizeKafkaRules checks the decisions of Kafka's
// StandardAuthorizer: literal, prefixed and wildcard patterns, the User:*
// principal, host matching, DENY winning, the implied operations, super
// users and allow.everyone.if.no.acl.found.
func TestAuthorizeKafkaRules(t *testing.T) {
	a, store := openTestAuthorizer(t, t.TempDir(), AuthorizerConfig{SuperUsers: []string{"User:root"}})
	defer store.Close()
	errs, err := a.Create([]Binding{
		allow(ResourceTopic, "orders", PatternLiteral, "User:alice", "*", OpWrite),
		allow(ResourceTopic, "logs-", PatternPrefixed, "User:alice", "*", OpRead),
		deny(ResourceTopic, "logs-secret", PatternLiteral, "User:alice", "*", OpRead),
		allow(ResourceTopic, "*", PatternLiteral, "User:*", "10.0.0.1", OpDescribe),
		allow(ResourceTopic, "cfg", PatternLiteral, "User:bob", "*", OpAlterConfigs),
		allow(ResourceGroup, "g", PatternLiteral, "User:bob", "*", OpAll),
		deny(ResourceGroup, "g", PatternLiteral, "User:bob", "10.0.0.9", OpDelete),
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range errs {
		if e != nil {
			t.Fatalf("binding %d refused: %v", i, e)
		}
	}
	for _, tc := range []struct {
		principal, host string
		op              Operation
		rt              ResourceType
		name            string
		want            bool
	}{
		{"User:alice", "1.2.3.4", OpWrite, ResourceTopic, "orders", true},
		{"User:alice", "1.2.3.4", OpDescribe, ResourceTopic, "orders", true}, // WRITE implies DESCRIBE
		{"User:alice", "1.2.3.4", OpRead, ResourceTopic, "orders", false},
		{"User:bob", "1.2.3.4", OpWrite, ResourceTopic, "orders", false},
		{"User:alice", "1.2.3.4", OpRead, ResourceTopic, "logs-app", true}, // prefixed
		{"User:alice", "1.2.3.4", OpRead, ResourceTopic, "logs", false},    // shorter than the prefix
		{"User:alice", "1.2.3.4", OpRead, ResourceTopic, "logs-secret", false},
		{"User:alice", "1.2.3.4", OpDescribe, ResourceTopic, "logs-secret", true}, // a DENY of READ does not deny DESCRIBE
		{"User:carol", "10.0.0.1", OpDescribe, ResourceTopic, "anything", true},   // wildcard resource and principal, host matched
		{"User:carol", "10.0.0.2", OpDescribe, ResourceTopic, "anything", false},
		{"User:bob", "1.2.3.4", OpDescribeConfigs, ResourceTopic, "cfg", true}, // ALTER_CONFIGS implies DESCRIBE_CONFIGS
		{"User:bob", "1.2.3.4", OpDescribe, ResourceTopic, "cfg", false},
		{"User:bob", "1.2.3.4", OpDelete, ResourceGroup, "g", true},   // ALL
		{"User:bob", "10.0.0.9", OpDelete, ResourceGroup, "g", false}, // DENY from that host wins
		{"User:bob", "10.0.0.9", OpRead, ResourceGroup, "g", true},
		{"User:root", "1.2.3.4", OpAlter, ResourceCluster, ClusterName, true}, // super user
		{"User:alice", "1.2.3.4", OpRead, ResourceGroup, "nobody-named-it", false},
	} {
		if got := a.Authorize(tc.principal, tc.host, tc.op, tc.rt, tc.name); got != tc.want {
			t.Errorf("%s from %s: %s %s %q = %v, want %v", tc.principal, tc.host, tc.op, tc.rt, tc.name, got, tc.want)
		}
	}
	// KIP-679: WRITE on some topic, unless a DENY covers it.
	if !a.AuthorizeAny("User:alice", "1.2.3.4", OpWrite, ResourceTopic) {
		t.Error("alice may write a topic, AuthorizeAny says no")
	}
	if a.AuthorizeAny("User:bob", "1.2.3.4", OpWrite, ResourceTopic) {
		t.Error("bob may write no topic, AuthorizeAny says yes")
	}
}

// TestAllowEveryoneIfNoACL: with allow.everyone.if.no.acl.found, a resource
// no binding names is open to all, and one that any binding names is not.
func TestAllowEveryoneIfNoACL(t *testing.T) {
	a, store := openTestAuthorizer(t, t.TempDir(), AuthorizerConfig{AllowIfNoACL: true})
	defer store.Close()
	if !a.Authorize("User:x", "h", OpRead, ResourceTopic, "t") {
		t.Fatal("no ACL at all: denied")
	}
	if _, err := a.Create([]Binding{allow(ResourceTopic, "t", PatternLiteral, "User:y", "*", OpRead)}); err != nil {
		t.Fatal(err)
	}
	if a.Authorize("User:x", "h", OpRead, ResourceTopic, "t") {
		t.Error("a topic with an ACL for someone else: allowed")
	}
	if !a.Authorize("User:x", "h", OpRead, ResourceTopic, "other") {
		t.Error("a topic without ACLs: denied")
	}
}

// TestACLsPersistAndFilter: bindings survive a reopen; describe and delete
// filters follow Kafka's ANY and MATCH semantics; invalid bindings are
// refused with a reason.
func TestACLsPersistAndFilter(t *testing.T) {
	dir := t.TempDir()
	a, store := openTestAuthorizer(t, dir, AuthorizerConfig{})
	bs := []Binding{
		allow(ResourceTopic, "foo", PatternLiteral, "User:a", "*", OpRead),
		allow(ResourceTopic, "fo", PatternPrefixed, "User:a", "*", OpRead),
		allow(ResourceTopic, "*", PatternLiteral, "User:a", "*", OpRead),
		allow(ResourceTopic, "bar", PatternLiteral, "User:a", "*", OpRead),
		allow(ResourceTopic, "foo", PatternLiteral, "User:a", "*", OpRead), // duplicate: stored once
		allow(ResourceDelegationToken, "tok", PatternLiteral, "User:a", "*", OpDescribe),
		allow(ResourceCluster, "other", PatternLiteral, "User:a", "*", OpAlter),
		allow(ResourceTopic, "x", PatternLiteral, "alice", "*", OpRead),
	}
	errs, err := a.Create(bs)
	if err != nil {
		t.Fatal(err)
	}
	for i := 5; i < len(bs); i++ {
		if !errors.Is(errs[i], ErrInvalidACL) {
			t.Errorf("binding %d: %v, want ErrInvalidACL", i, errs[i])
		}
	}
	store.Close()
	a, store = openTestAuthorizer(t, dir, AuthorizerConfig{})
	defer store.Close()
	foo := "foo"
	count := func(f Filter) int { return len(a.Describe(f)) }
	all := Filter{ResourceType: ResourceAny, PatternType: PatternAny, Operation: OpAny, Permission: PermissionAny}
	if n := count(all); n != 4 {
		t.Fatalf("after reopen: %d bindings, want 4", n)
	}
	match := all
	match.ResourceName, match.PatternType = &foo, PatternMatch
	if n := count(match); n != 3 { // foo, prefix fo, wildcard
		t.Errorf("MATCH foo: %d bindings, want 3", n)
	}
	exact := all
	exact.ResourceName = &foo
	if n := count(exact); n != 1 {
		t.Errorf("ANY foo: %d bindings, want 1", n)
	}
	deleted, err := a.Delete([]Filter{match})
	if err != nil || len(deleted[0]) != 3 {
		t.Fatalf("delete MATCH foo: %v, %v", deleted, err)
	}
	if n := count(all); n != 1 {
		t.Errorf("after delete: %d bindings, want 1 (bar)", n)
	}
}

// BenchmarkAuthorize is the cost of one check on the Produce/Fetch path
// with a few hundred bindings.
func BenchmarkAuthorize(b *testing.B) {
	a, store := openTestAuthorizer(b, b.TempDir(), AuthorizerConfig{})
	defer store.Close()
	var bs []Binding
	for i := range 100 {
		name := string(rune('a'+i%26)) + "-topic-" + string(rune('a'+i/26))
		bs = append(bs, allow(ResourceTopic, name, PatternLiteral, "User:app", "*", OpWrite))
		bs = append(bs, allow(ResourceTopic, name[:3], PatternPrefixed, "User:other", "*", OpRead))
		bs = append(bs, allow(ResourceGroup, name, PatternLiteral, "User:app", "*", OpRead))
	}
	if _, err := a.Create(bs); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if !a.Authorize("User:app", "127.0.0.1", OpWrite, ResourceTopic, "c-topic-a") {
			b.Fatal("denied")
		}
	}
}

// TestNativeResourceTypes: queue and event-store bindings decide only
// their own type (an ACL on queue "orders" opens neither topic "orders"
// nor store "orders"), and Kafka's filters of resource type ANY neither
// list nor delete them (a Kafka client cannot parse their codes); a
// filter naming the type selects them.
func TestNativeResourceTypes(t *testing.T) {
	a, store := openTestAuthorizer(t, t.TempDir(), AuthorizerConfig{})
	defer store.Close()
	errs, err := a.Create([]Binding{
		allow(ResourceQueue, "orders", PatternLiteral, "User:alice", "*", OpWrite),
		allow(ResourceStore, "acct-", PatternPrefixed, "User:alice", "*", OpRead),
		deny(ResourceStore, "acct-secret", PatternLiteral, "User:alice", "*", OpAll),
		allow(ResourceTopic, "t", PatternLiteral, "User:alice", "*", OpRead),
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range errs {
		if e != nil {
			t.Fatalf("binding %d refused: %v", i, e)
		}
	}
	for _, tc := range []struct {
		op   Operation
		rt   ResourceType
		name string
		want bool
	}{
		{OpWrite, ResourceQueue, "orders", true},
		{OpDescribe, ResourceQueue, "orders", true},
		{OpRead, ResourceQueue, "orders", false},
		{OpWrite, ResourceTopic, "orders", false},
		{OpWrite, ResourceStore, "orders", false},
		{OpRead, ResourceStore, "acct-1", true},
		{OpRead, ResourceStore, "acct-secret", false},
		{OpRead, ResourceQueue, "acct-1", false},
	} {
		if got := a.Authorize("User:alice", "10.0.0.1", tc.op, tc.rt, tc.name); got != tc.want {
			t.Errorf("%s %s %q: %v, want %v", tc.op, tc.rt, tc.name, got, tc.want)
		}
	}
	any := Filter{ResourceType: ResourceAny, PatternType: PatternAny, Operation: OpAny, Permission: PermissionAny}
	if got := a.Describe(any); len(got) != 1 || got[0].ResourceType != ResourceTopic {
		t.Errorf("filter ANY selects %v, want the topic binding only", got)
	}
	queues := any
	queues.ResourceType = ResourceQueue
	if err := ValidateFilter(queues); err != nil {
		t.Fatal(err)
	}
	if got := a.Describe(queues); len(got) != 1 || got[0].ResourceName != "orders" {
		t.Errorf("filter QUEUE selects %v", got)
	}
	if _, err := a.Delete([]Filter{any}); err != nil {
		t.Fatal(err)
	}
	if a.Len() != 3 || !a.Authorize("User:alice", "h", OpWrite, ResourceQueue, "orders") {
		t.Errorf("DeleteAcls ANY removed native bindings: %d left", a.Len())
	}
	if rt, ok := ParseResourceType("queue"); !ok || rt != ResourceQueue {
		t.Errorf("ParseResourceType(queue) = %v %v", rt, ok)
	}
}
