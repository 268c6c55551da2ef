package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/urfave/cli/v2"
)

// quotasCommand manages client quotas on a running broker over the Kafka
// protocol (DescribeClientQuotas, AlterClientQuotas), like Kafka's
// kafka-configs.sh --entity-type users/clients/ips: the same entities,
// defaults and keys.
func quotasCommand() *cli.Command {
	entity := []cli.Flag{
		&cli.StringFlag{Name: "user", Usage: "user entity (the principal's name: alice for User:alice; ANONYMOUS for unauthenticated clients)"},
		&cli.BoolFlag{Name: "user-default", Usage: "the default user entity (every user without its own)"},
		&cli.StringFlag{Name: "client-id", Usage: "client-id entity"},
		&cli.BoolFlag{Name: "client-id-default", Usage: "the default client-id entity"},
		&cli.StringFlag{Name: "ip", Usage: "ip entity (connection_creation_rate only; stored, not enforced)"},
		&cli.BoolFlag{Name: "ip-default", Usage: "the default ip entity"},
	}
	common := append([]cli.Flag{bootstrapFlag()}, clientSecurityFlags()...)
	listFlags := append(append([]cli.Flag{
		&cli.BoolFlag{Name: "strict", Usage: "only entities made of exactly the types named"},
	}, entity...), common...)
	return &cli.Command{
		Name:  "quotas",
		Usage: "list, set and delete client quotas on a running broker",
		Description: "Entities are --user, --client-id (each a name or --user-default, --client-id-default)\n" +
			"or --ip. Keys: producer_byte_rate and consumer_byte_rate (bytes per second),\n" +
			"request_percentage (percent of one thread), controller_mutation_rate; ip entities\n" +
			"connection_creation_rate. A client gets the first quota set in Kafka's order: user and\n" +
			"client-id, user and default client-id, user, default user and client-id, ... ,\n" +
			"client-id, default client-id. list filters by the entity flags given (none: every\n" +
			"entity). Example: broker quotas set --client-id reporting consumer_byte_rate=1048576",
		Subcommands: []*cli.Command{
			{Name: "list", Usage: "list quota entities and their values", Flags: listFlags, Action: quotasList},
			{Name: "set", Usage: "set quota values: key=value ...", ArgsUsage: "key=value ...", Flags: append(entity, common...), Action: quotasSet},
			{Name: "delete", Usage: "delete quota keys of an entity (every key when none is named)", ArgsUsage: "[key ...]", Flags: append(entity, common...), Action: quotasDelete},
		},
	}
}

// quotaEntityFlags reads the entity flags: each type once, as a name or
// its default.
func quotaEntityFlags(cCtx *cli.Context) ([]kmsg.AlterClientQuotasRequestEntryEntity, error) {
	var ents []kmsg.AlterClientQuotasRequestEntryEntity
	for _, typ := range []string{"user", "client-id", "ip"} {
		named, def := cCtx.IsSet(typ), cCtx.Bool(typ+"-default")
		switch {
		case named && def:
			return nil, usageErrorf("give --%s or --%s-default, not both", typ, typ)
		case named:
			name := cCtx.String(typ)
			ents = append(ents, kmsg.AlterClientQuotasRequestEntryEntity{Type: typ, Name: &name})
		case def:
			ents = append(ents, kmsg.AlterClientQuotasRequestEntryEntity{Type: typ})
		}
	}
	return ents, nil
}

func quotaEntityText(types []string, names []*string) string {
	parts := make([]string, len(types))
	for i, t := range types {
		n := "<default>"
		if names[i] != nil {
			n = *names[i]
		}
		parts[i] = t + "=" + n
	}
	return strings.Join(parts, ",")
}

func quotasList(cCtx *cli.Context) error {
	ents, err := quotaEntityFlags(cCtx)
	if err != nil {
		return err
	}
	cl, ctx, done, err := kafkaClient(cCtx, topicsCommandTimeout)
	if err != nil {
		return err
	}
	defer done()
	entries, err := describeQuotas(ctx, cl, ents, cCtx.Bool("strict"))
	if err != nil {
		return err
	}
	w := newTable(cCtx.App.Writer)
	fmt.Fprintln(w, "ENTITY\tQUOTAS")
	for _, e := range entries {
		fmt.Fprintf(w, "%s\t%s\n", e.entity, strings.Join(e.values, ","))
	}
	return w.Flush()
}

type quotaLine struct {
	entity string
	keys   []string
	values []string
}

// describeQuotas describes the entities matching the components (exact
// names, defaults), sorted by entity text.
func describeQuotas(ctx context.Context, cl *kgo.Client, ents []kmsg.AlterClientQuotasRequestEntryEntity, strict bool) ([]quotaLine, error) {
	req := kmsg.NewPtrDescribeClientQuotasRequest()
	req.Strict = strict
	for _, e := range ents {
		c := kmsg.NewDescribeClientQuotasRequestComponent()
		c.EntityType, c.Match, c.MatchType = e.Type, e.Name, kmsg.QuotasMatchTypeExact
		if e.Name == nil {
			c.MatchType = kmsg.QuotasMatchTypeDefault
		}
		req.Components = append(req.Components, c)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("listing client quotas: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, brokerError("listing client quotas", err, derefString(resp.ErrorMessage))
	}
	var out []quotaLine
	for _, e := range resp.Entries {
		ent := append([]kmsg.DescribeClientQuotasResponseEntryEntity(nil), e.Entity...)
		sort.Slice(ent, func(i, j int) bool { return ent[i].Type > ent[j].Type })
		types, names := make([]string, len(ent)), make([]*string, len(ent))
		for i, p := range ent {
			types[i], names[i] = p.Type, p.Name
		}
		line := quotaLine{entity: quotaEntityText(types, names)}
		vals := append([]kmsg.DescribeClientQuotasResponseEntryValue(nil), e.Values...)
		sort.Slice(vals, func(i, j int) bool { return vals[i].Key < vals[j].Key })
		for _, v := range vals {
			line.keys = append(line.keys, v.Key)
			line.values = append(line.values, v.Key+"="+strconv.FormatFloat(v.Value, 'f', -1, 64))
		}
		out = append(out, line)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].entity < out[j].entity })
	return out, nil
}

func quotasSet(cCtx *cli.Context) error {
	ents, err := quotaEntityFlags(cCtx)
	if err != nil {
		return err
	}
	if len(ents) == 0 {
		return usageErrorf("name an entity: --user, --client-id or --ip (or their -default)")
	}
	if cCtx.NArg() == 0 {
		return usageErrorf("give the values to set as key=value, e.g. producer_byte_rate=1048576")
	}
	var ops []kmsg.AlterClientQuotasRequestEntryOp
	for _, a := range cCtx.Args().Slice() {
		k, v, ok := strings.Cut(a, "=")
		f, err := strconv.ParseFloat(v, 64)
		if !ok || k == "" || err != nil {
			return usageErrorf("%q is not key=number, e.g. producer_byte_rate=1048576", a)
		}
		ops = append(ops, kmsg.AlterClientQuotasRequestEntryOp{Key: k, Value: f})
	}
	return alterQuotas(cCtx, ents, ops, "set")
}

func quotasDelete(cCtx *cli.Context) error {
	ents, err := quotaEntityFlags(cCtx)
	if err != nil {
		return err
	}
	if len(ents) == 0 {
		return usageErrorf("name an entity: --user, --client-id or --ip (or their -default)")
	}
	keys := cCtx.Args().Slice()
	if len(keys) == 0 {
		cl, ctx, done, err := kafkaClient(cCtx, topicsCommandTimeout)
		if err != nil {
			return err
		}
		lines, err := describeQuotas(ctx, cl, ents, true)
		done()
		if err != nil {
			return err
		}
		if len(lines) == 0 {
			fmt.Fprintln(cCtx.App.Writer, "no quota set for that entity")
			return nil
		}
		keys = lines[0].keys
	}
	var ops []kmsg.AlterClientQuotasRequestEntryOp
	for _, k := range keys {
		ops = append(ops, kmsg.AlterClientQuotasRequestEntryOp{Key: k, Remove: true})
	}
	return alterQuotas(cCtx, ents, ops, "deleted")
}

// alterQuotas sends one entity's ops and reports the result.
func alterQuotas(cCtx *cli.Context, ents []kmsg.AlterClientQuotasRequestEntryEntity, ops []kmsg.AlterClientQuotasRequestEntryOp, verb string) error {
	req := kmsg.NewPtrAlterClientQuotasRequest()
	req.Entries = []kmsg.AlterClientQuotasRequestEntry{{Entity: ents, Ops: ops}}
	cl, ctx, done, err := kafkaClient(cCtx, topicsCommandTimeout)
	if err != nil {
		return err
	}
	defer done()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("altering client quotas: %w", err)
	}
	types, names := make([]string, len(ents)), make([]*string, len(ents))
	for i, e := range ents {
		types[i], names[i] = e.Type, e.Name
	}
	for _, r := range resp.Entries {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return brokerError("altering client quotas", err, derefString(r.ErrorMessage))
		}
	}
	for _, op := range ops {
		if op.Remove {
			fmt.Fprintf(cCtx.App.Writer, "%s %s of %s\n", verb, op.Key, quotaEntityText(types, names))
			continue
		}
		fmt.Fprintf(cCtx.App.Writer, "%s %s=%s for %s\n", verb, op.Key, strconv.FormatFloat(op.Value, 'f', -1, 64), quotaEntityText(types, names))
	}
	return nil
}
