package auth

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/vibemq/broker/pebblestore"
)

// An ACL row (pebblestore.ACLKey) holds the JSON of a Binding; its key is
// the hash of the binding's canonical encoding (bindingHash), so creating
// a binding twice writes the same row.

// AuthorizerConfig configures the Authorizer.
type AuthorizerConfig struct {
	// SuperUsers are principals ("User:alice") allowed everything (Kafka
	// super.users).
	SuperUsers []string
	// AllowIfNoACL allows an operation on a resource that no binding
	// names at all (Kafka allow.everyone.if.no.acl.found); default false.
	AllowIfNoACL bool
}

// Authorizer decides every request's operations from the ACL bindings
// (Kafka StandardAuthorizer). Bindings are read at Open and kept in an
// immutable index swapped atomically after each durable change, so checks
// take no lock. writeMu serializes changes (durable batch, then the new
// index); it is a leaf and is never held by a check.
type Authorizer struct {
	store        *pebblestore.Store
	superUsers   map[string]bool
	allowIfNoACL bool
	writeMu      sync.Mutex
	idx          atomic.Pointer[aclIndex]
}

// aclIndex holds the bindings by resource type: literal names (the
// wildcard "*" among them) in a map, prefixes in a map with the set of
// their lengths, so a check looks up at most one key per prefix length.
type aclIndex struct {
	all   []Binding
	types map[ResourceType]*typeIndex
}

type typeIndex struct {
	literal    map[string][]Binding
	prefixed   map[string][]Binding
	prefixLens []int // distinct lengths of the prefixed names, ascending
}

// OpenAuthorizer reads every ACL row.
func OpenAuthorizer(store *pebblestore.Store, cfg AuthorizerConfig) (*Authorizer, error) {
	a := &Authorizer{store: store, superUsers: map[string]bool{}, allowIfNoACL: cfg.AllowIfNoACL}
	for _, u := range cfg.SuperUsers {
		a.superUsers[u] = true
	}
	prefix := []byte{pebblestore.PrefixACL}
	it, err := store.NewIter(prefix, pebblestore.PrefixEnd(prefix))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStorage, err)
	}
	defer it.Close()
	var all []Binding
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.Value()
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrStorage, err)
		}
		var b Binding
		if err := json.Unmarshal(v, &b); err != nil || ValidateBinding(b) != nil {
			return nil, fmt.Errorf("auth: ACL row %x cannot be read: %w", it.Key(), pebblestore.ErrCorruption)
		}
		all = append(all, b)
	}
	a.idx.Store(buildIndex(all))
	return a, nil
}

func buildIndex(all []Binding) *aclIndex {
	sortBindings(all)
	idx := &aclIndex{all: all, types: map[ResourceType]*typeIndex{}}
	for _, b := range all {
		t := idx.types[b.ResourceType]
		if t == nil {
			t = &typeIndex{literal: map[string][]Binding{}, prefixed: map[string][]Binding{}}
			idx.types[b.ResourceType] = t
		}
		if b.PatternType == PatternLiteral {
			t.literal[b.ResourceName] = append(t.literal[b.ResourceName], b)
			continue
		}
		if _, ok := t.prefixed[b.ResourceName]; !ok {
			t.prefixLens = append(t.prefixLens, len(b.ResourceName))
		}
		t.prefixed[b.ResourceName] = append(t.prefixed[b.ResourceName], b)
	}
	for _, t := range idx.types {
		sort.Ints(t.prefixLens)
		t.prefixLens = dedupInts(t.prefixLens)
	}
	return idx
}

func dedupInts(s []int) []int {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

func sortBindings(bs []Binding) {
	sort.Slice(bs, func(i, j int) bool {
		a, b := bs[i], bs[j]
		if a.ResourceType != b.ResourceType {
			return a.ResourceType < b.ResourceType
		}
		if a.ResourceName != b.ResourceName {
			return a.ResourceName < b.ResourceName
		}
		if a.PatternType != b.PatternType {
			return a.PatternType < b.PatternType
		}
		if a.Principal != b.Principal {
			return a.Principal < b.Principal
		}
		if a.Host != b.Host {
			return a.Host < b.Host
		}
		if a.Operation != b.Operation {
			return a.Operation < b.Operation
		}
		return a.Permission < b.Permission
	})
}

// bindingHash is the row key suffix of a binding: SHA-256 over its fields,
// each length-prefixed, truncated to 16 bytes.
func bindingHash(b Binding) [16]byte {
	h := sha256.New()
	var n [4]byte
	for _, s := range []string{b.ResourceName, b.Principal, b.Host} {
		binary.BigEndian.PutUint32(n[:], uint32(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	h.Write([]byte{byte(b.ResourceType), byte(b.PatternType), byte(b.Operation), byte(b.Permission)})
	var out [16]byte
	copy(out[:], h.Sum(nil))
	return out
}

// implies reports whether a binding's operation grants op (Kafka
// AclEntry.supportedOperations' implications): ALL grants everything;
// READ, WRITE, DELETE and ALTER grant DESCRIBE; ALTER_CONFIGS grants
// DESCRIBE_CONFIGS. A DENY binding denies only its own operation, or every
// one when it is ALL.
func implies(granted, op Operation) bool {
	if granted == op || granted == OpAll {
		return true
	}
	switch op {
	case OpDescribe:
		return granted == OpRead || granted == OpWrite || granted == OpDelete || granted == OpAlter
	case OpDescribeConfigs:
		return granted == OpAlterConfigs
	}
	return false
}

// Enabled reports whether an authorizer is configured; a nil Authorizer
// allows everything (Kafka without authorizer.class.name).
func (a *Authorizer) Enabled() bool { return a != nil }

// Len is the number of bindings, of every resource type.
func (a *Authorizer) Len() int { return len(a.idx.Load().all) }

// IsSuperUser reports whether the principal is a super user.
func (a *Authorizer) IsSuperUser(principal string) bool { return a.superUsers[principal] }

// Authorize decides one operation on one resource for a principal
// connected from host (an IP address): super users may do everything; a
// matching DENY wins over any ALLOW; without a matching ALLOW the answer
// is no, unless no binding names the resource at all and AllowIfNoACL is
// set (Kafka StandardAuthorizerData.authorize).
func (a *Authorizer) Authorize(principal, host string, op Operation, rt ResourceType, name string) bool {
	if a.superUsers[principal] {
		return true
	}
	t := a.idx.Load().types[rt]
	if t == nil {
		return a.allowIfNoACL
	}
	found, allowed := false, false
	check := func(bs []Binding) bool { // false: denied
		for i := range bs {
			b := &bs[i]
			found = true
			if b.Principal != principal && b.Principal != WildcardPrincipal {
				continue
			}
			if b.Host != host && b.Host != WildcardHost {
				continue
			}
			if b.Permission == PermissionDeny {
				if b.Operation == op || b.Operation == OpAll {
					return false
				}
				continue
			}
			if implies(b.Operation, op) {
				allowed = true
			}
		}
		return true
	}
	if bs, ok := t.literal[name]; ok && !check(bs) {
		return false
	}
	if bs, ok := t.literal[WildcardResource]; ok && !check(bs) {
		return false
	}
	for _, n := range t.prefixLens {
		if n > len(name) {
			break
		}
		if bs, ok := t.prefixed[name[:n]]; ok && !check(bs) {
			return false
		}
	}
	if !found {
		return a.allowIfNoACL
	}
	return allowed
}

// AuthorizeAny reports whether the principal may do op on some resource
// of the type (Kafka Authorizer.authorizeByResourceType, KIP-679: an
// idempotent producer needs IDEMPOTENT_WRITE on the cluster or WRITE on
// any topic): an ALLOW binding for it that no DENY binding covers whole.
func (a *Authorizer) AuthorizeAny(principal, host string, op Operation, rt ResourceType) bool {
	if a.superUsers[principal] {
		return true
	}
	idx := a.idx.Load()
	t := idx.types[rt]
	if t == nil {
		return a.allowIfNoACL
	}
	applies := func(b *Binding) bool {
		return (b.Principal == principal || b.Principal == WildcardPrincipal) && (b.Host == host || b.Host == WildcardHost)
	}
	var denyLiteral, denyPrefix []string
	for i := range idx.all {
		b := &idx.all[i]
		if b.ResourceType != rt || b.Permission != PermissionDeny || !applies(b) || (b.Operation != op && b.Operation != OpAll) {
			continue
		}
		if b.PatternType == PatternLiteral {
			if b.ResourceName == WildcardResource {
				return false
			}
			denyLiteral = append(denyLiteral, b.ResourceName)
		} else {
			denyPrefix = append(denyPrefix, b.ResourceName)
		}
	}
	covered := func(b *Binding) bool {
		for _, p := range denyPrefix {
			if strings.HasPrefix(b.ResourceName, p) {
				return true
			}
		}
		if b.PatternType == PatternLiteral {
			for _, n := range denyLiteral {
				if n == b.ResourceName {
					return true
				}
			}
		}
		return false
	}
	for i := range idx.all {
		b := &idx.all[i]
		if b.ResourceType == rt && b.Permission == PermissionAllow && applies(b) && implies(b.Operation, op) && !covered(b) {
			return true
		}
	}
	return false
}

// Operations returns the operations of ops the principal may do on the
// resource (KIP-430 authorized operations).
func (a *Authorizer) Operations(principal, host string, rt ResourceType, name string, ops []Operation) []Operation {
	var out []Operation
	for _, op := range ops {
		if a.Authorize(principal, host, op, rt, name) {
			out = append(out, op)
		}
	}
	return out
}

// Describe returns the bindings the filter selects, sorted.
func (a *Authorizer) Describe(f Filter) []Binding {
	var out []Binding
	for _, b := range a.idx.Load().all {
		if f.Matches(b) {
			out = append(out, b)
		}
	}
	return out
}

// Create stores the bindings (each validated; the result says per binding
// why it was refused, nil when stored or already present) in one durable
// batch, then shows them to checks.
func (a *Authorizer) Create(bs []Binding) ([]error, error) {
	a.writeMu.Lock()
	defer a.writeMu.Unlock()
	errs := make([]error, len(bs))
	batch := a.store.NewBatch()
	cur := a.idx.Load().all
	have := map[[16]byte]bool{}
	for _, b := range cur {
		have[bindingHash(b)] = true
	}
	next := append([]Binding(nil), cur...)
	for i, b := range bs {
		if errs[i] = ValidateBinding(b); errs[i] != nil {
			continue
		}
		h := bindingHash(b)
		if have[h] {
			continue
		}
		v, err := json.Marshal(b)
		if err != nil {
			batch.Close()
			return nil, fmt.Errorf("auth: encoding an ACL: %v", err)
		}
		batch.Set(pebblestore.ACLKey(h), v)
		have[h] = true
		next = append(next, b)
	}
	if err := batch.Commit(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStorage, err)
	}
	a.idx.Store(buildIndex(next))
	return errs, nil
}

// Delete removes the bindings each filter selects in one durable batch
// and returns them per filter (a binding selected by several filters is
// listed under each, as Kafka does).
func (a *Authorizer) Delete(filters []Filter) ([][]Binding, error) {
	a.writeMu.Lock()
	defer a.writeMu.Unlock()
	cur := a.idx.Load().all
	out := make([][]Binding, len(filters))
	gone := map[[16]byte]bool{}
	batch := a.store.NewBatch()
	for i, f := range filters {
		for _, b := range cur {
			if f.Matches(b) {
				out[i] = append(out[i], b)
				h := bindingHash(b)
				if !gone[h] {
					gone[h] = true
					batch.Delete(pebblestore.ACLKey(h))
				}
			}
		}
	}
	if err := batch.Commit(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStorage, err)
	}
	var next []Binding
	for _, b := range cur {
		if !gone[bindingHash(b)] {
			next = append(next, b)
		}
	}
	a.idx.Store(buildIndex(next))
	return out, nil
}
