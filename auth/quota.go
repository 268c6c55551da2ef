package auth

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"sort"
	"strings"
)

// Client quotas (KIP-13 byte rates, KIP-124 request percentage, KIP-257
// entity model, KIP-546 DescribeClientQuotas/AlterClientQuotas): an entity
// is a set of (type, name) parts, a nil name meaning the type's default
// entity; each entity holds quota values by key. The decisions of Kafka's
// ClientQuotaControlManager (alter) and ClientQuotasImage (describe) are
// followed, messages included.

// Quota entity types.
const (
	QuotaEntityUser     = "user"
	QuotaEntityClientID = "client-id"
	QuotaEntityIP       = "ip"
)

// Quota keys (Kafka QuotaConfigs).
const (
	QuotaProducerByteRate       = "producer_byte_rate"
	QuotaConsumerByteRate       = "consumer_byte_rate"
	QuotaRequestPercentage      = "request_percentage"
	QuotaControllerMutationRate = "controller_mutation_rate"
	QuotaConnectionCreationRate = "connection_creation_rate"
)

// Errors of the quota APIs: kafkaproto answers ErrInvalidQuota with
// INVALID_REQUEST and ErrUnsupportedQuotaEntity with UNSUPPORTED_VERSION
// (Kafka's InvalidRequestException and UnsupportedVersionException), each
// with the error's text.
var (
	ErrInvalidQuota           = errors.New("invalid client quota request")
	ErrUnsupportedQuotaEntity = errors.New("unsupported client quota entity type")
)

// quotaError is one refusal: its message is Kafka's, its class a sentinel.
type quotaError struct {
	class error
	msg   string
}

func (e *quotaError) Error() string { return e.msg }
func (e *quotaError) Unwrap() error { return e.class }

func invalidQuota(format string, args ...any) error {
	return &quotaError{class: ErrInvalidQuota, msg: fmt.Sprintf(format, args...)}
}

// QuotaEntityPart is one component of an entity: a type and a name, nil for
// the type's default entity ("<default>").
type QuotaEntityPart struct {
	Type string  `json:"type"`
	Name *string `json:"name"`
}

// QuotaEntity is an entity: at most one part per type, sorted by type.
type QuotaEntity []QuotaEntityPart

// sorted returns the entity's parts ordered by type (a copy).
func (e QuotaEntity) sorted() QuotaEntity {
	out := append(QuotaEntity(nil), e...)
	sort.Slice(out, func(i, j int) bool { return out[i].Type < out[j].Type })
	return out
}

// key is the canonical text of a sorted entity: the map key of the index
// and what the row key hashes.
func (e QuotaEntity) key() string {
	var b strings.Builder
	for _, p := range e {
		b.WriteString(p.Type)
		if p.Name == nil {
			b.WriteString("\x00d")
		} else {
			b.WriteString("\x00n")
			b.WriteString(*p.Name)
		}
		b.WriteByte(0)
	}
	return b.String()
}

// name returns the part of the given type: present, and its name (nil for
// the default entity).
func (e QuotaEntity) name(typ string) (*string, bool) {
	for _, p := range e {
		if p.Type == typ {
			return p.Name, true
		}
	}
	return nil, false
}

// String renders the entity as Kafka's ClientQuotaEntity does.
func (e QuotaEntity) String() string {
	parts := make([]string, 0, len(e))
	for _, p := range e.sorted() {
		n := "null"
		if p.Name != nil {
			n = *p.Name
		}
		parts = append(parts, p.Type+"="+n)
	}
	return "ClientQuotaEntity(entries={" + strings.Join(parts, ", ") + "})"
}

// quotaKeyKind is how a key's value must look (Kafka's ConfigDef type).
type quotaKeyKind int

const (
	quotaLong quotaKeyKind = iota
	quotaDouble
	quotaInt
)

// userClientKeys are the keys of user and client-id entities (Kafka
// QuotaConfigs.userConfigs and clientConfigs); ipKeys those of ip entities.
var (
	userClientKeys = map[string]quotaKeyKind{
		QuotaProducerByteRate:       quotaLong,
		QuotaConsumerByteRate:       quotaLong,
		QuotaRequestPercentage:      quotaDouble,
		QuotaControllerMutationRate: quotaDouble,
	}
	ipKeys = map[string]quotaKeyKind{
		QuotaConnectionCreationRate: quotaInt,
	}
)

// QuotaOp sets a key to Value, or removes it.
type QuotaOp struct {
	Key    string
	Value  float64
	Remove bool
}

// QuotaAlteration is one entity's changes.
type QuotaAlteration struct {
	Entity QuotaEntity
	Ops    []QuotaOp
}

// NormalizeQuotaEntity makes an entity of the parts of a request: one
// part per type, the last one named winning (Kafka reads the parts into a
// map), sorted by type.
func NormalizeQuotaEntity(parts []QuotaEntityPart) QuotaEntity {
	var e QuotaEntity
	for _, p := range parts {
		replaced := false
		for i := range e {
			if e[i].Type == p.Type {
				e[i].Name, replaced = p.Name, true
			}
		}
		if !replaced {
			e = append(e, p)
		}
	}
	return e.sorted()
}

// validateEntity checks an entity's parts: known types, names not empty
// (ClientQuotaControlManager.validateEntity), and the allowed
// combinations, returning the keys the entity may hold
// (configKeysForEntityType).
func validateEntity(e QuotaEntity) (map[string]quotaKeyKind, error) {
	if len(e) == 0 {
		return nil, invalidQuota("Invalid empty client quota entity")
	}
	seen := map[string]bool{}
	for _, p := range e {
		if seen[p.Type] {
			return nil, invalidQuota("Invalid empty client quota entity, duplicate entity entry %s", p.Type)
		}
		seen[p.Type] = true
		switch p.Type {
		case QuotaEntityUser, QuotaEntityClientID, QuotaEntityIP:
		default:
			return nil, invalidQuota("Unhandled client quota entity type: %s", p.Type)
		}
		if p.Name != nil && *p.Name == "" {
			return nil, invalidQuota("Empty %s not supported", p.Type)
		}
		if p.Name != nil && len(*p.Name) > MaxUserNameBytes {
			return nil, invalidQuota("%s name is longer than %d bytes", p.Type, MaxUserNameBytes)
		}
	}
	user, client, ip := seen[QuotaEntityUser], seen[QuotaEntityClientID], seen[QuotaEntityIP]
	switch {
	case ip && (user || client):
		return nil, invalidQuota("Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId")
	case ip:
		if name, _ := e.name(QuotaEntityIP); name != nil && !validHost(*name) {
			return nil, invalidQuota("%s is not a valid IP or resolvable host.", *name)
		}
		return ipKeys, nil
	}
	return userClientKeys, nil
}

// validHost accepts an IP address or a host name (letters, digits,
// hyphens, dots). Kafka resolves the name at that moment; this broker does
// not look names up.
func validHost(name string) bool {
	if _, err := netip.ParseAddr(name); err == nil {
		return true
	}
	for _, r := range name {
		ok := r == '-' || r == '.' || (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')
		if !ok {
			return false
		}
	}
	return true
}

// validateValue checks one key's value as Kafka 4.2 does: a known key, a
// positive value, a whole number for byte and connection rates, within
// the range of the key's type.
func validateValue(keys map[string]quotaKeyKind, key string, v float64) error {
	kind, ok := keys[key]
	if !ok {
		return invalidQuota("Invalid configuration key %s", key)
	}
	if math.IsNaN(v) || v <= 0 {
		return invalidQuota("Quota %s must be greater than 0", key)
	}
	switch kind {
	case quotaLong, quotaInt:
		if v != math.Trunc(v) {
			return invalidQuota("%s cannot be a fractional value.", key)
		}
		if kind == quotaLong && v >= math.MaxInt64 {
			return invalidQuota("Proposed value for %s is too large for a LONG.", key)
		}
		if kind == quotaInt && v > math.MaxInt32 {
			return invalidQuota("Proposed value for %s is too large for an INT.", key)
		}
	case quotaDouble:
		if math.IsInf(v, 0) {
			return invalidQuota("Quota %s must be a finite number", key)
		}
	}
	return nil
}

// QuotaFilterComponent is one component of a describe filter (KIP-546):
// Match exact (Name set), default (the default entity of the type) or any
// entity that has the type.
type QuotaFilterComponent struct {
	Type  string
	Match QuotaMatch
	Name  *string
}

// QuotaMatch is Kafka's match type code.
type QuotaMatch int8

// Match types.
const (
	QuotaMatchExact   QuotaMatch = 0
	QuotaMatchDefault QuotaMatch = 1
	QuotaMatchAny     QuotaMatch = 2
)

// QuotaFilter selects entities to describe; Strict leaves out entities with
// types the filter does not name.
type QuotaFilter struct {
	Components []QuotaFilterComponent
	Strict     bool
}

// validate checks the filter as ClientQuotasImage.describe does.
func (f QuotaFilter) validate() error {
	seen := map[string]bool{}
	for _, c := range f.Components {
		switch {
		case c.Type == "":
			return invalidQuota("Invalid empty entity type.")
		case seen[c.Type]:
			return invalidQuota("Entity type %s cannot appear more than once in the filter.", c.Type)
		}
		seen[c.Type] = true
		switch c.Type {
		case QuotaEntityUser, QuotaEntityClientID, QuotaEntityIP:
		default:
			return &quotaError{class: ErrUnsupportedQuotaEntity, msg: "Unsupported entity type " + c.Type}
		}
		switch c.Match {
		case QuotaMatchExact:
			if c.Name == nil {
				return invalidQuota("Request specified MATCH_TYPE_EXACT, but set match string to null.")
			}
		case QuotaMatchDefault:
			if c.Name != nil {
				return invalidQuota("Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
			}
		case QuotaMatchAny:
			if c.Name != nil {
				return invalidQuota("Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
			}
		default:
			return invalidQuota("Unknown match type %d", c.Match)
		}
	}
	if seen[QuotaEntityIP] && (seen[QuotaEntityUser] || seen[QuotaEntityClientID]) {
		return invalidQuota("Invalid entity filter component combination. IP filter component should not be used with user or clientId filter component.")
	}
	return nil
}

// matches reports whether the filter selects the entity.
func (f QuotaFilter) matches(e QuotaEntity) bool {
	if len(f.Components) == 0 {
		return !f.Strict
	}
	for _, c := range f.Components {
		name, ok := e.name(c.Type)
		if !ok {
			return false
		}
		switch c.Match {
		case QuotaMatchExact:
			if name == nil || *name != *c.Name {
				return false
			}
		case QuotaMatchDefault:
			if name != nil {
				return false
			}
		}
	}
	return !f.Strict || len(e) == len(f.Components)
}
