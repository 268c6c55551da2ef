package main

import (
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/urfave/cli/v2"

	"github.com/vibemq/broker/auth"
)

// aclsCommand manages ACL bindings on a running broker over the Kafka
// protocol (CreateAcls, DescribeAcls, DeleteAcls), like Kafka's
// kafka-acls.sh: the same resources, patterns, operations and filters.
func aclsCommand() *cli.Command {
	resource := []cli.Flag{
		&cli.StringFlag{Name: "topic", Usage: "topic resource (\"*\" for every topic)"},
		&cli.StringFlag{Name: "group", Usage: "consumer group resource (\"*\" for every group)"},
		&cli.StringFlag{Name: "transactional-id", Usage: "transactional ID resource (\"*\" for every one)"},
		&cli.BoolFlag{Name: "cluster", Usage: "the cluster resource (also the HTTP API's admin routes, /metrics and /debug/pprof/)"},
		&cli.StringFlag{Name: "queue", Usage: "native queue resource, with its DLQ (\"*\" for every queue; HTTP API only)"},
		&cli.StringFlag{Name: "store", Usage: "event store resource (\"*\" for every store; HTTP API only)"},
		&cli.StringFlag{Name: "principal", Usage: "principal, as User:name (User:* for everyone)"},
		&cli.StringFlag{Name: "host", Usage: "client IP address the binding applies to"},
		&cli.StringFlag{Name: "operation", Usage: "operations, comma-separated: ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE"},
		&cli.StringFlag{Name: "permission", Usage: "ALLOW or DENY"},
	}
	common := append([]cli.Flag{bootstrapFlag()}, clientSecurityFlags()...)
	addFlags := append(append([]cli.Flag{
		&cli.StringFlag{Name: "resource-pattern-type", Value: "LITERAL", Usage: "LITERAL or PREFIXED"},
	}, resource...), common...)
	filterFlags := append(append([]cli.Flag{
		&cli.StringFlag{Name: "resource-pattern-type", Value: "ANY", Usage: "LITERAL, PREFIXED, ANY (names compared exactly) or MATCH (every binding that applies to the named resource)"},
	}, resource...), common...)
	return &cli.Command{
		Name:  "acls",
		Usage: "add, list and remove ACLs on a running broker (needs authorizer-enabled)",
		Description: "Resources are --topic, --group, --transactional-id, --cluster, and the native\n" +
			"API's --queue and --store (resource types of their own: an ACL on queue q does\n" +
			"not open topic q to Kafka clients). add needs a\n" +
			"resource, --principal and --operation; --permission defaults to ALLOW and --host to *.\n" +
			"list and remove take the same flags as a filter; a flag not given matches anything.\n" +
			"Example: broker acls add --principal User:alice --operation READ,DESCRIBE --topic orders",
		Subcommands: []*cli.Command{
			{Name: "add", Usage: "create ACL bindings (one per operation)", Flags: addFlags, Action: aclsAdd},
			{Name: "list", Usage: "list the bindings a filter selects (every binding without flags)", Flags: filterFlags, Action: aclsList},
			{Name: "remove", Usage: "delete the bindings a filter selects and list them", Flags: filterFlags, Action: aclsRemove},
		},
	}
}

// aclResource reads the resource flags: at most one (required is exactly
// one); none gives ANY with no name.
func aclResource(cCtx *cli.Context, required bool) (auth.ResourceType, *string, error) {
	var rt auth.ResourceType = auth.ResourceAny
	var name *string
	n := 0
	for _, f := range []struct {
		flag string
		rt   auth.ResourceType
	}{{"topic", auth.ResourceTopic}, {"group", auth.ResourceGroup}, {"transactional-id", auth.ResourceTransactionalID}, {"queue", auth.ResourceQueue}, {"store", auth.ResourceStore}} {
		if cCtx.IsSet(f.flag) {
			n++
			v := cCtx.String(f.flag)
			rt, name = f.rt, &v
		}
	}
	if cCtx.Bool("cluster") {
		n++
		v := auth.ClusterName
		rt, name = auth.ResourceCluster, &v
	}
	switch {
	case n > 1:
		return 0, nil, usageErrorf("name one resource: --topic, --group, --transactional-id, --cluster, --queue or --store")
	case n == 0 && required:
		return 0, nil, usageErrorf("name a resource: --topic, --group, --transactional-id, --cluster, --queue or --store")
	}
	return rt, name, nil
}

func aclOperations(cCtx *cli.Context, required bool) ([]auth.Operation, error) {
	v := cCtx.String("operation")
	if v == "" {
		if required {
			return nil, usageErrorf("--operation is required, e.g. --operation READ,DESCRIBE")
		}
		return []auth.Operation{auth.OpAny}, nil
	}
	var ops []auth.Operation
	for _, s := range strings.Split(v, ",") {
		op, ok := auth.ParseOperation(strings.TrimSpace(s))
		if !ok || op == auth.OpUnknown || (required && op == auth.OpAny) {
			return nil, usageErrorf("--operation %q is not an operation: ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE", s)
		}
		ops = append(ops, op)
	}
	return ops, nil
}

func aclPermission(cCtx *cli.Context, def auth.Permission) (auth.Permission, error) {
	v := cCtx.String("permission")
	if v == "" {
		return def, nil
	}
	p, ok := auth.ParsePermission(v)
	if !ok || (def == auth.PermissionAllow && p == auth.PermissionAny) {
		return 0, usageErrorf("--permission %q is not ALLOW or DENY", v)
	}
	return p, nil
}

func aclPatternType(cCtx *cli.Context, add bool) (auth.PatternType, error) {
	v := cCtx.String("resource-pattern-type")
	pt, ok := auth.ParsePatternType(v)
	if !ok || pt == auth.PatternUnknown || (add && pt != auth.PatternLiteral && pt != auth.PatternPrefixed) {
		if add {
			return 0, usageErrorf("--resource-pattern-type %q is not LITERAL or PREFIXED", v)
		}
		return 0, usageErrorf("--resource-pattern-type %q is not LITERAL, PREFIXED, ANY or MATCH", v)
	}
	return pt, nil
}

func aclsAdd(cCtx *cli.Context) error {
	rt, name, err := aclResource(cCtx, true)
	if err != nil {
		return err
	}
	pt, err := aclPatternType(cCtx, true)
	if err != nil {
		return err
	}
	ops, err := aclOperations(cCtx, true)
	if err != nil {
		return err
	}
	perm, err := aclPermission(cCtx, auth.PermissionAllow)
	if err != nil {
		return err
	}
	principal := cCtx.String("principal")
	if principal == "" {
		return usageErrorf("--principal is required, e.g. --principal User:alice")
	}
	host := cCtx.String("host")
	if host == "" {
		host = auth.WildcardHost
	}
	req := kmsg.NewPtrCreateACLsRequest()
	var bs []auth.Binding
	for _, op := range ops {
		b := auth.Binding{ResourceType: rt, ResourceName: *name, PatternType: pt, Principal: principal, Host: host, Operation: op, Permission: perm}
		if err := auth.ValidateBinding(b); err != nil {
			return usageErrorf("%v", err)
		}
		bs = append(bs, b)
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceType(rt), *name, kmsg.ACLResourcePatternType(pt)
		c.Principal, c.Host = principal, host
		c.Operation, c.PermissionType = kmsg.ACLOperation(op), kmsg.ACLPermissionType(perm)
		req.Creations = append(req.Creations, c)
	}
	cl, ctx, done, err := kafkaClient(cCtx, topicsCommandTimeout)
	if err != nil {
		return err
	}
	defer done()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("creating ACLs: %w", err)
	}
	for i, r := range resp.Results {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return brokerError("creating ACLs", err, derefString(r.ErrorMessage))
		}
		fmt.Fprintf(cCtx.App.Writer, "added %s\n", bindingText(bs[i]))
	}
	return nil
}

// aclFilters reads the filter flags: one filter per operation named.
func aclFilters(cCtx *cli.Context) ([]auth.Filter, error) {
	rt, name, err := aclResource(cCtx, false)
	if err != nil {
		return nil, err
	}
	pt, err := aclPatternType(cCtx, false)
	if err != nil {
		return nil, err
	}
	ops, err := aclOperations(cCtx, false)
	if err != nil {
		return nil, err
	}
	perm, err := aclPermission(cCtx, auth.PermissionAny)
	if err != nil {
		return nil, err
	}
	var principal, host *string
	if v := cCtx.String("principal"); v != "" {
		principal = &v
	}
	if v := cCtx.String("host"); v != "" {
		host = &v
	}
	// Kafka's resource type ANY selects Kafka's types only (a Kafka client
	// cannot parse the native ones): without a resource flag the native
	// types are asked for by name too.
	types := []auth.ResourceType{rt}
	if rt == auth.ResourceAny {
		types = append(types, auth.ResourceQueue, auth.ResourceStore)
	}
	var fs []auth.Filter
	for _, t := range types {
		for _, op := range ops {
			fs = append(fs, auth.Filter{ResourceType: t, ResourceName: name, PatternType: pt, Principal: principal, Host: host, Operation: op, Permission: perm})
		}
	}
	return fs, nil
}

func aclsList(cCtx *cli.Context) error {
	fs, err := aclFilters(cCtx)
	if err != nil {
		return err
	}
	cl, ctx, done, err := kafkaClient(cCtx, topicsCommandTimeout)
	if err != nil {
		return err
	}
	defer done()
	w := newTable(cCtx.App.Writer)
	fmt.Fprintln(w, "RESOURCE\tPATTERN\tPRINCIPAL\tHOST\tOPERATION\tPERMISSION")
	for _, f := range fs {
		req := kmsg.NewPtrDescribeACLsRequest()
		req.ResourceType, req.ResourceName, req.ResourcePatternType = kmsg.ACLResourceType(f.ResourceType), f.ResourceName, kmsg.ACLResourcePatternType(f.PatternType)
		req.Principal, req.Host = f.Principal, f.Host
		req.Operation, req.PermissionType = kmsg.ACLOperation(f.Operation), kmsg.ACLPermissionType(f.Permission)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return fmt.Errorf("listing ACLs: %w", err)
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return brokerError("listing ACLs", err, derefString(resp.ErrorMessage))
		}
		for _, res := range resp.Resources {
			for _, a := range res.ACLs {
				fmt.Fprintf(w, "%s:%s\t%s\t%s\t%s\t%s\t%s\n", auth.ResourceType(res.ResourceType), res.ResourceName, auth.PatternType(res.ResourcePatternType),
					a.Principal, a.Host, auth.Operation(a.Operation), auth.Permission(a.PermissionType))
			}
		}
	}
	return w.Flush()
}

func aclsRemove(cCtx *cli.Context) error {
	fs, err := aclFilters(cCtx)
	if err != nil {
		return err
	}
	req := kmsg.NewPtrDeleteACLsRequest()
	for _, f := range fs {
		rf := kmsg.NewDeleteACLsRequestFilter()
		rf.ResourceType, rf.ResourceName, rf.ResourcePatternType = kmsg.ACLResourceType(f.ResourceType), f.ResourceName, kmsg.ACLResourcePatternType(f.PatternType)
		rf.Principal, rf.Host = f.Principal, f.Host
		rf.Operation, rf.PermissionType = kmsg.ACLOperation(f.Operation), kmsg.ACLPermissionType(f.Permission)
		req.Filters = append(req.Filters, rf)
	}
	cl, ctx, done, err := kafkaClient(cCtx, topicsCommandTimeout)
	if err != nil {
		return err
	}
	defer done()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("removing ACLs: %w", err)
	}
	n := 0
	for _, r := range resp.Results {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return brokerError("removing ACLs", err, derefString(r.ErrorMessage))
		}
		for _, m := range r.MatchingACLs {
			n++
			fmt.Fprintf(cCtx.App.Writer, "removed %s\n", bindingText(auth.Binding{
				ResourceType: auth.ResourceType(m.ResourceType), ResourceName: m.ResourceName, PatternType: auth.PatternType(m.ResourcePatternType),
				Principal: m.Principal, Host: m.Host, Operation: auth.Operation(m.Operation), Permission: auth.Permission(m.PermissionType),
			}))
		}
	}
	if n == 0 {
		fmt.Fprintln(cCtx.App.Writer, "no ACL matched")
	}
	return nil
}

func bindingText(b auth.Binding) string {
	return fmt.Sprintf("%s %s %s on %s:%s (%s) from host %s", b.Permission, b.Principal, b.Operation, b.ResourceType, b.ResourceName, b.PatternType, b.Host)
}

func derefString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
