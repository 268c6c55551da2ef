package auth

import (
	"errors"
	"fmt"
	"strings"
)

// Kafka's ACL model (KIP-11, prefixed patterns KIP-290): a binding allows
// or denies one operation on a resource pattern to a principal from a host.
// The codes below are Kafka's wire codes (AclOperation, ResourceType,
// PatternType, AclPermissionType), so kafkaproto converts nothing.

// ResourceType is Kafka's ResourceType code.
type ResourceType int8

// Resource types. DelegationToken and User exist on the wire but this
// broker has neither delegation tokens nor user resources: bindings on them
// are refused (ValidateBinding).
const (
	ResourceUnknown         ResourceType = 0
	ResourceAny             ResourceType = 1
	ResourceTopic           ResourceType = 2
	ResourceGroup           ResourceType = 3
	ResourceCluster         ResourceType = 4
	ResourceTransactionalID ResourceType = 5
	ResourceDelegationToken ResourceType = 6
	ResourceUser            ResourceType = 7
)

// The native API's resource types (DESIGN.md "Security"): a queue (with
// its DLQ) and an event store are resources of their own, not topics, so
// an ACL on a queue does not open its topic to Kafka clients nor the
// reverse. Their codes are this broker's, far above Kafka's (0-7, which
// grow by one per KIP), and a Kafka client never meets them unless it
// names one: a filter of resource type ANY selects Kafka's types only
// (Filter.Matches), so DescribeAcls never answers a row a Kafka client
// cannot parse and DeleteAcls ANY leaves the native bindings alone.
const (
	ResourceQueue ResourceType = 100
	ResourceStore ResourceType = 101
)

// Native reports whether t is one of the native API's resource types.
func (t ResourceType) Native() bool { return t == ResourceQueue || t == ResourceStore }

// PatternType is Kafka's PatternType code.
type PatternType int8

// Pattern types: bindings are LITERAL or PREFIXED; filters may also say ANY
// (every pattern type, names compared exactly) or MATCH (the patterns that
// would apply to the named resource: the literal name, the wildcard, and
// every prefix of it).
const (
	PatternUnknown  PatternType = 0
	PatternAny      PatternType = 1
	PatternMatch    PatternType = 2
	PatternLiteral  PatternType = 3
	PatternPrefixed PatternType = 4
)

// Operation is Kafka's AclOperation code.
type Operation int8

// Operations.
const (
	OpUnknown         Operation = 0
	OpAny             Operation = 1
	OpAll             Operation = 2
	OpRead            Operation = 3
	OpWrite           Operation = 4
	OpCreate          Operation = 5
	OpDelete          Operation = 6
	OpAlter           Operation = 7
	OpDescribe        Operation = 8
	OpClusterAction   Operation = 9
	OpDescribeConfigs Operation = 10
	OpAlterConfigs    Operation = 11
	OpIdempotentWrite Operation = 12
	OpCreateTokens    Operation = 13
	OpDescribeTokens  Operation = 14
)

// Permission is Kafka's AclPermissionType code.
type Permission int8

// Permissions.
const (
	PermissionUnknown Permission = 0
	PermissionAny     Permission = 1
	PermissionDeny    Permission = 2
	PermissionAllow   Permission = 3
)

// Wildcards: a LITERAL resource named "*" matches every resource of its
// type, principal "User:*" every principal, host "*" every host.
const (
	WildcardResource  = "*"
	WildcardPrincipal = "User:*"
	WildcardHost      = "*"
	// ClusterName is the one Cluster resource's name (Kafka
	// Resource.CLUSTER_NAME).
	ClusterName = "kafka-cluster"
)

// Binding is one ACL: Kafka's AclBinding.
type Binding struct {
	ResourceType ResourceType `json:"resource_type"`
	ResourceName string       `json:"resource_name"`
	PatternType  PatternType  `json:"pattern_type"`
	Principal    string       `json:"principal"`
	Host         string       `json:"host"`
	Operation    Operation    `json:"operation"`
	Permission   Permission   `json:"permission"`
}

// Filter selects bindings (Kafka AclBindingFilter): nil strings and the
// ANY codes match everything.
type Filter struct {
	ResourceType ResourceType
	ResourceName *string
	PatternType  PatternType
	Principal    *string
	Host         *string
	Operation    Operation
	Permission   Permission
}

// ErrInvalidACL is the class of bindings and filters Kafka refuses with
// INVALID_REQUEST; the message says which field is wrong.
var ErrInvalidACL = errors.New("invalid ACL")

// ValidateBinding says why a binding cannot be created, or nil (Kafka
// AclControlManager.validateNewAcl).
func ValidateBinding(b Binding) error {
	switch b.ResourceType {
	case ResourceTopic, ResourceGroup, ResourceCluster, ResourceTransactionalID, ResourceQueue, ResourceStore:
	case ResourceDelegationToken, ResourceUser:
		return fmt.Errorf("%w: resource type %s is not supported: this broker has no delegation tokens or user resources; use Topic, Group, Cluster or TransactionalId", ErrInvalidACL, b.ResourceType)
	default:
		return fmt.Errorf("%w: resource type %d is not a resource type a binding can name (Topic, Group, Cluster, TransactionalId, and the native API's Queue and Store)", ErrInvalidACL, b.ResourceType)
	}
	if b.PatternType != PatternLiteral && b.PatternType != PatternPrefixed {
		return fmt.Errorf("%w: pattern type %s: a binding is LITERAL or PREFIXED", ErrInvalidACL, b.PatternType)
	}
	if b.ResourceName == "" {
		return fmt.Errorf("%w: the resource name is empty", ErrInvalidACL)
	}
	if b.ResourceType == ResourceCluster && (b.PatternType != PatternLiteral || b.ResourceName != ClusterName) {
		return fmt.Errorf("%w: the cluster resource is LITERAL %q", ErrInvalidACL, ClusterName)
	}
	if b.Operation < OpAll || b.Operation > OpDescribeTokens {
		return fmt.Errorf("%w: operation %d is not an operation a binding can name", ErrInvalidACL, b.Operation)
	}
	if b.Permission != PermissionAllow && b.Permission != PermissionDeny {
		return fmt.Errorf("%w: permission %d: a binding ALLOWs or DENYs", ErrInvalidACL, b.Permission)
	}
	typ, name, ok := strings.Cut(b.Principal, ":")
	if !ok || typ == "" || name == "" {
		return fmt.Errorf("%w: principal %q is not of the form User:name", ErrInvalidACL, b.Principal)
	}
	if typ != PrincipalType {
		return fmt.Errorf("%w: principal type %q: the only principal type is User", ErrInvalidACL, typ)
	}
	if b.Host == "" {
		return fmt.Errorf("%w: the host is empty; use * for every host", ErrInvalidACL)
	}
	if len(b.ResourceName) > 1024 || len(b.Principal) > 1024 || len(b.Host) > 256 {
		return fmt.Errorf("%w: a resource name or principal longer than 1024 bytes, or a host longer than 256", ErrInvalidACL)
	}
	return nil
}

// Matches reports whether the filter selects the binding (Kafka
// AclBindingFilter.matches).
func (f Filter) Matches(b Binding) bool {
	if f.ResourceType == ResourceAny && b.ResourceType.Native() {
		return false // Kafka's ANY: Kafka's resource types only
	}
	if f.ResourceType != ResourceAny && f.ResourceType != b.ResourceType {
		return false
	}
	if f.PatternType != PatternAny && f.PatternType != PatternMatch && f.PatternType != b.PatternType {
		return false
	}
	if f.ResourceName != nil {
		name := *f.ResourceName
		if f.PatternType == PatternAny || f.PatternType == b.PatternType {
			if name != b.ResourceName {
				return false
			}
		} else { // MATCH
			switch b.PatternType {
			case PatternLiteral:
				if name != b.ResourceName && b.ResourceName != WildcardResource {
					return false
				}
			case PatternPrefixed:
				if !strings.HasPrefix(name, b.ResourceName) {
					return false
				}
			default:
				return false
			}
		}
	}
	if f.Principal != nil && *f.Principal != b.Principal {
		return false
	}
	if f.Host != nil && *f.Host != b.Host {
		return false
	}
	if f.Operation != OpAny && f.Operation != b.Operation {
		return false
	}
	return f.Permission == PermissionAny || f.Permission == b.Permission
}

// ValidateFilter says why a filter cannot be used, or nil.
func ValidateFilter(f Filter) error {
	if (f.ResourceType <= ResourceUnknown || f.ResourceType > ResourceUser) && !f.ResourceType.Native() {
		return fmt.Errorf("%w: filter resource type %d", ErrInvalidACL, f.ResourceType)
	}
	if f.PatternType <= PatternUnknown || f.PatternType > PatternPrefixed {
		return fmt.Errorf("%w: filter pattern type %d", ErrInvalidACL, f.PatternType)
	}
	if f.Operation <= OpUnknown || f.Operation > OpDescribeTokens {
		return fmt.Errorf("%w: filter operation %d", ErrInvalidACL, f.Operation)
	}
	if f.Permission <= PermissionUnknown || f.Permission > PermissionAllow {
		return fmt.Errorf("%w: filter permission %d", ErrInvalidACL, f.Permission)
	}
	return nil
}

var resourceTypeNames = map[ResourceType]string{ResourceUnknown: "UNKNOWN", ResourceAny: "ANY", ResourceTopic: "TOPIC", ResourceGroup: "GROUP", ResourceCluster: "CLUSTER", ResourceTransactionalID: "TRANSACTIONAL_ID", ResourceDelegationToken: "DELEGATION_TOKEN", ResourceUser: "USER", ResourceQueue: "QUEUE", ResourceStore: "STORE"}

func (t ResourceType) String() string {
	if s, ok := resourceTypeNames[t]; ok {
		return s
	}
	return fmt.Sprintf("ResourceType(%d)", int8(t))
}

var patternTypeNames = map[PatternType]string{PatternUnknown: "UNKNOWN", PatternAny: "ANY", PatternMatch: "MATCH", PatternLiteral: "LITERAL", PatternPrefixed: "PREFIXED"}

func (p PatternType) String() string {
	if s, ok := patternTypeNames[p]; ok {
		return s
	}
	return fmt.Sprintf("PatternType(%d)", int8(p))
}

var operationNames = map[Operation]string{OpUnknown: "UNKNOWN", OpAny: "ANY", OpAll: "ALL", OpRead: "READ", OpWrite: "WRITE", OpCreate: "CREATE", OpDelete: "DELETE", OpAlter: "ALTER", OpDescribe: "DESCRIBE", OpClusterAction: "CLUSTER_ACTION", OpDescribeConfigs: "DESCRIBE_CONFIGS", OpAlterConfigs: "ALTER_CONFIGS", OpIdempotentWrite: "IDEMPOTENT_WRITE", OpCreateTokens: "CREATE_TOKENS", OpDescribeTokens: "DESCRIBE_TOKENS"}

func (o Operation) String() string {
	if s, ok := operationNames[o]; ok {
		return s
	}
	return fmt.Sprintf("Operation(%d)", int8(o))
}

func (p Permission) String() string {
	switch p {
	case PermissionAllow:
		return "ALLOW"
	case PermissionDeny:
		return "DENY"
	case PermissionAny:
		return "ANY"
	}
	return "UNKNOWN"
}

// ParseResourceType, ParsePatternType, ParseOperation and ParsePermission
// read the names above, case-insensitively, with "-" or "_" alike (for the
// CLI).
func ParseResourceType(s string) (ResourceType, bool) {
	return parseName(resourceTypeNames, s)
}

// ParsePatternType reads a pattern type name.
func ParsePatternType(s string) (PatternType, bool) { return parseName(patternTypeNames, s) }

// ParseOperation reads an operation name.
func ParseOperation(s string) (Operation, bool) { return parseName(operationNames, s) }

// ParsePermission reads ALLOW or DENY.
func ParsePermission(s string) (Permission, bool) {
	return parseName(map[Permission]string{PermissionAllow: "ALLOW", PermissionDeny: "DENY", PermissionAny: "ANY"}, s)
}

func parseName[T comparable](names map[T]string, s string) (T, bool) {
	s = strings.ToUpper(strings.ReplaceAll(s, "-", "_"))
	if s == "TRANSACTIONALID" {
		s = "TRANSACTIONAL_ID"
	}
	for k, v := range names {
		if v == s {
			return k, true
		}
	}
	var zero T
	return zero, false
}
