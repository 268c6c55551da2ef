package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/urfave/cli/v2"
)

// groupsExitCodes documents the exit codes of `broker groups` in --help.
const groupsExitCodes = "Exit codes: 0 ok, 1 error, 2 usage (nothing was sent), 3 group not found,\n" +
	"4 conflict (the group has members: delete or reset-offsets refused), 6 broker unreachable."

// groupsCommand administers consumer groups over the Kafka protocol
// (kadm), so it works against any running broker, ours or Kafka.
func groupsCommand() *cli.Command {
	flags := func(extra ...cli.Flag) []cli.Flag {
		return append([]cli.Flag{
			bootstrapFlag(),
			&cli.StringFlag{Name: outputFlag, Aliases: []string{"o"}, Value: "table", Usage: "output format: table or json"},
			&cli.DurationFlag{Name: timeoutFlag, Value: 30 * time.Second, Usage: "give up after this long"},
		}, extra...)
	}
	return &cli.Command{
		Name:        "groups",
		Usage:       "list, describe, show the lag of, delete consumer groups and reset their offsets",
		Description: "Talks to a running broker over the Kafka protocol.\n" + groupsExitCodes,
		Subcommands: []*cli.Command{
			{
				Name:        "list",
				Usage:       "list consumer groups with their state, protocol type and type (classic, consumer for group.protocol=consumer, share for share groups)",
				Description: groupsExitCodes,
				Flags:       flags(&cli.StringSliceFlag{Name: "state", Usage: "only groups in this state (Empty, Stable, PreparingRebalance, CompletingRebalance; Assigning, Reconciling for consumer-protocol groups), repeatable"}),
				Action:      groupsList,
			},
			{
				Name:      "describe",
				Usage:     "show the state, protocol and members of groups, with each member's assignment",
				ArgsUsage: "GROUP...",
				Description: "A share group also lists its partitions: start offset, lag, and IN-FLIGHT, the records\n" +
					"members hold now. No Kafka API carries IN-FLIGHT: it is read from the broker's HTTP\n" +
					"listener (GET /v1/admin/groups/GROUP) when --server (or BROKER_HTTP_ADDR) names it, else \"-\".\n" + groupsExitCodes,
				Flags:  flags(shareInFlightFlags()...),
				Action: groupsDescribe,
			},
			{
				Name:        "lag",
				Usage:       "show each partition's committed offset (a share group's start offset), end offset and lag, with the member consuming it",
				ArgsUsage:   "GROUP...",
				Description: groupsExitCodes,
				Flags:       flags(),
				Action:      groupsLag,
			},
			{
				Name:        "delete",
				Usage:       "delete empty groups and their committed offsets",
				ArgsUsage:   "GROUP...",
				Description: groupsExitCodes,
				Flags:       flags(),
				Action:      groupsDelete,
			},
			{
				Name:      "reset-offsets",
				Usage:     "set an empty group's committed offsets (a dry run unless --execute)",
				ArgsUsage: "GROUP (after the flags)",
				Description: "Moves the committed offsets of a group that has no members to the earliest or latest\n" +
					"offset, the first offset at or after a time, or a given offset (kept inside the log).\n" +
					"Prints the plan; --execute commits it. Refused (exit 4) while the group has members.\n" + groupsExitCodes,
				Flags: flags(
					&cli.StringSliceFlag{Name: "topic", Aliases: []string{"t"}, Usage: "TOPIC or TOPIC:P,P,... to reset, repeatable"},
					&cli.BoolFlag{Name: "all-topics", Usage: "reset every topic the group has committed offsets for"},
					&cli.BoolFlag{Name: "to-earliest", Usage: "reset to the log start offset"},
					&cli.BoolFlag{Name: "to-latest", Usage: "reset to the end (high watermark)"},
					&cli.StringFlag{Name: "to-datetime", Usage: "reset to the first offset at or after this time (RFC 3339, e.g. 2026-01-02T15:04:05Z)"},
					&cli.Int64Flag{Name: "to-offset", Value: -1, Usage: "reset to this offset, clamped to the log's range"},
					&cli.BoolFlag{Name: "execute", Usage: "commit the new offsets (without it nothing changes)"},
				),
				Action: groupsResetOffsets,
			},
		},
	}
}

// groupsAdmin connects a kadm client to --bootstrap-server.
func groupsAdmin(cCtx *cli.Context) (*kadm.Client, context.Context, func(), error) {
	if _, err := outputFormat(cCtx); err != nil {
		return nil, nil, nil, err
	}
	return kafkaAdmin(cCtx, cCtx.Duration(timeoutFlag))
}

// groupsNamed returns the GROUP arguments, at least one.
func groupsNamed(cCtx *cli.Context) ([]string, error) {
	if !cCtx.Args().Present() {
		return nil, usageErrorf("broker groups %s needs at least one group name", cCtx.Command.Name)
	}
	if err := flagsAfterArgs(cCtx); err != nil {
		return nil, err
	}
	return cCtx.Args().Slice(), nil
}

// flagsAfterArgs refuses a flag written after the group names: it would
// be read as a group name.
func flagsAfterArgs(cCtx *cli.Context) error {
	for _, a := range cCtx.Args().Slice() {
		if strings.HasPrefix(a, "-") {
			return usageErrorf("broker groups %s: flag %s comes after the group name; put flags first, e.g. broker groups %s %s GROUP", cCtx.Command.Name, a, cCtx.Command.Name, a)
		}
	}
	return nil
}

// groupsError gives a failed request its exit code: unreachable broker 6,
// unknown group 3, non-empty group 4, anything else 1.
func groupsError(what string, err error) error {
	var ne net.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ne), errors.Is(err, context.DeadlineExceeded), errors.Is(err, kgo.ErrClientClosed),
		strings.Contains(err.Error(), "unable to dial"), strings.Contains(err.Error(), "connection refused"):
		return &exitError{code: exitUnavailable, err: fmt.Errorf("%s: the broker is unreachable: %w", what, err)}
	case errors.Is(err, kerr.GroupIDNotFound):
		return &exitError{code: exitNotFound, err: fmt.Errorf("%s: %w", what, err)}
	case errors.Is(err, kerr.NonEmptyGroup):
		return &exitError{code: exitConflict, err: fmt.Errorf("%s: %w", what, err)}
	default:
		return fmt.Errorf("%s: %w", what, err)
	}
}

func groupsList(cCtx *cli.Context) error {
	if cCtx.Args().Present() {
		return usageErrorf("broker groups list takes no arguments; use describe for given groups")
	}
	adm, ctx, done, err := groupsAdmin(cCtx)
	if err != nil {
		return err
	}
	defer done()
	listed, err := adm.ListGroups(ctx, cCtx.StringSlice("state")...)
	if err != nil {
		return groupsError("listing groups", err)
	}
	type row struct {
		Group        string `json:"group"`
		State        string `json:"state"`
		ProtocolType string `json:"protocol_type"`
		Coordinator  int32  `json:"coordinator"`
		// Type is "classic", "consumer" (KIP-848, group.protocol=consumer)
		// or "share" (KIP-932).
		Type string `json:"type"`
	}
	rows := []row{}
	for _, g := range listed.Sorted() {
		rows = append(rows, row{g.Group, g.State, g.ProtocolType, g.Coordinator, g.GroupType})
	}
	if cCtx.String(outputFlag) == "json" {
		return printJSON(cCtx.App.Writer, rows)
	}
	w := newTable(cCtx.App.Writer)
	fmt.Fprintln(w, "GROUP\tSTATE\tPROTOCOL TYPE\tCOORDINATOR\tTYPE")
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\n", r.Group, r.State, dash(r.ProtocolType), r.Coordinator, dash(r.Type))
	}
	return w.Flush()
}

// describedMember is one member in `groups describe` output.
type describedMember struct {
	MemberID   string           `json:"member_id"`
	InstanceID *string          `json:"instance_id,omitempty"`
	ClientID   string           `json:"client_id"`
	ClientHost string           `json:"client_host"`
	Assigned   map[string][]int `json:"assigned,omitempty"`
	// AssignmentBytes is the size of a non-"consumer" assignment.
	AssignmentBytes int `json:"assignment_bytes,omitempty"`
}

type describedGroup struct {
	Group        string            `json:"group"`
	State        string            `json:"state"`
	ProtocolType string            `json:"protocol_type"`
	Protocol     string            `json:"protocol"`
	Members      []describedMember `json:"members"`
	// Partitions are a share group's partitions (KIP-932), else absent.
	Partitions []sharePartitionRow `json:"partitions,omitempty"`
}

func groupsDescribe(cCtx *cli.Context) error {
	names, err := groupsNamed(cCtx)
	if err != nil {
		return err
	}
	adm, ctx, done, err := groupsAdmin(cCtx)
	if err != nil {
		return err
	}
	defer done()
	described, err := adm.DescribeGroups(ctx, names...)
	if err != nil {
		return groupsError("describing groups", err)
	}
	var dead []string
	for _, name := range names {
		// Kafka 4.2 answers DescribeGroups v6 for a share group with
		// GROUP_ID_NOT_FOUND; before v6, and here, it is Dead.
		if d, ok := described[name]; ok && (d.Err == nil && d.State == "Dead" || errors.Is(d.Err, kerr.GroupIDNotFound)) {
			dead = append(dead, name)
		}
	}
	consumerGroups := describeConsumerGroups(ctx, adm, dead)
	var notConsumer []string
	for _, name := range dead {
		if _, ok := consumerGroups[name]; !ok {
			notConsumer = append(notConsumer, name)
		}
	}
	shareGroups := describeShareGroups(ctx, adm, notConsumer)
	var out []describedGroup
	var missing []string
	for _, name := range names {
		if cg, ok := consumerGroups[name]; ok {
			out = append(out, consumerGroupDescribed(cg))
			continue
		}
		if sg, ok := shareGroups[name]; ok {
			g := shareGroupDescribed(sg)
			g.Partitions = shareGroupPartitions(ctx, cCtx, adm, name)
			out = append(out, g)
			continue
		}
		d, ok := described[name]
		if !ok {
			return groupsError("describing group "+name, errors.New("no answer"))
		}
		if errors.Is(d.Err, kerr.GroupIDNotFound) {
			missing = append(missing, name)
			continue
		}
		if d.Err != nil {
			return groupsError("describing group "+name, d.Err)
		}
		if d.State == "Dead" {
			missing = append(missing, name)
			continue
		}
		g := describedGroup{Group: d.Group, State: d.State, ProtocolType: d.ProtocolType, Protocol: d.Protocol, Members: []describedMember{}}
		for _, m := range d.Members {
			dm := describedMember{MemberID: m.MemberID, InstanceID: m.InstanceID, ClientID: m.ClientID, ClientHost: m.ClientHost}
			if c, ok := m.Assigned.AsConsumer(); ok {
				dm.Assigned = map[string][]int{}
				for _, t := range c.Topics {
					for _, p := range t.Partitions {
						dm.Assigned[t.Topic] = append(dm.Assigned[t.Topic], int(p))
					}
				}
			}
			g.Members = append(g.Members, dm)
		}
		out = append(out, g)
	}
	if cCtx.String(outputFlag) == "json" {
		if out == nil {
			out = []describedGroup{}
		}
		if err := printJSON(cCtx.App.Writer, out); err != nil {
			return err
		}
	} else if err := printDescribed(cCtx.App.Writer, out); err != nil {
		return err
	}
	return noSuchGroups(missing)
}

// printDescribed prints `groups describe` as tables: each group's line,
// its members, and a share group's partitions.
func printDescribed(out io.Writer, groups []describedGroup) error {
	w := newTable(out)
	for i, g := range groups {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "group %s: %s, protocol type %s, protocol %s, %d members\n", g.Group, g.State, dash(g.ProtocolType), dash(g.Protocol), len(g.Members))
		if len(g.Members) > 0 {
			fmt.Fprintln(w, "MEMBER\tINSTANCE\tCLIENT\tHOST\tASSIGNED")
		}
		for _, m := range g.Members {
			inst := "-"
			if m.InstanceID != nil {
				inst = *m.InstanceID
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", m.MemberID, inst, m.ClientID, m.ClientHost, formatAssigned(m.Assigned))
		}
		printSharePartitions(w, g.Partitions)
	}
	return w.Flush()
}

// noSuchGroups is the exit-3 error naming the missing (Dead) groups, or
// nil when none is missing.
func noSuchGroups(missing []string) error {
	if len(missing) == 0 {
		return nil
	}
	return &exitError{code: exitNotFound, err: fmt.Errorf("no such group: %s", strings.Join(missing, ", "))}
}

func formatAssigned(a map[string][]int) string {
	if len(a) == 0 {
		return "-"
	}
	topics := make([]string, 0, len(a))
	for t := range a {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	var parts []string
	for _, t := range topics {
		ps := a[t]
		sort.Ints(ps)
		s := make([]string, len(ps))
		for i, p := range ps {
			s[i] = strconv.Itoa(p)
		}
		parts = append(parts, t+":"+strings.Join(s, ","))
	}
	return strings.Join(parts, " ")
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// lagRow is one partition in `groups lag` output.
type lagRow struct {
	Group     string `json:"group"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Committed int64  `json:"committed"`
	End       int64  `json:"end"`
	Lag       int64  `json:"lag"`
	MemberID  string `json:"member_id,omitempty"`
	ClientID  string `json:"client_id,omitempty"`
	Error     string `json:"error,omitempty"`
}

func groupsLag(cCtx *cli.Context) error {
	names, err := groupsNamed(cCtx)
	if err != nil {
		return err
	}
	adm, ctx, done, err := groupsAdmin(cCtx)
	if err != nil {
		return err
	}
	defer done()
	lags, err := adm.Lag(ctx, names...)
	if err != nil {
		return groupsError("computing lag", err)
	}
	var dead []string
	for _, name := range names {
		if l, ok := lags[name]; ok && (l.Error() == nil && l.State == "Dead" || errors.Is(l.Error(), kerr.GroupIDNotFound)) {
			dead = append(dead, name)
		}
	}
	consumerGroups := describeConsumerGroups(ctx, adm, dead)
	var notConsumer []string
	for _, name := range dead {
		if _, ok := consumerGroups[name]; !ok {
			notConsumer = append(notConsumer, name)
		}
	}
	shareGroups := describeShareGroups(ctx, adm, notConsumer)
	rows := []lagRow{}
	var missing []string
	for _, name := range names {
		var more []lagRow
		if cg, ok := consumerGroups[name]; ok {
			more, err = consumerGroupLag(ctx, adm, cg)
		} else if _, ok := shareGroups[name]; ok {
			more, err = shareGroupLag(ctx, adm, name)
		}
		if err != nil {
			return groupsError("computing the lag of "+name, err)
		}
		if more != nil {
			rows = append(rows, more...)
			continue
		}
		l, ok := lags[name]
		if !ok {
			return groupsError("computing the lag of "+name, errors.New("no answer"))
		}
		if errors.Is(l.Error(), kerr.GroupIDNotFound) {
			missing = append(missing, name)
			continue
		}
		if err := l.Error(); err != nil {
			return groupsError("computing the lag of "+name, err)
		}
		if l.State == "Dead" {
			missing = append(missing, name)
			continue
		}
		for _, ml := range l.Lag.Sorted() {
			r := lagRow{Group: name, Topic: ml.Topic, Partition: ml.Partition, Committed: ml.Commit.At, End: ml.End.Offset, Lag: ml.Lag}
			if ml.Member != nil {
				r.MemberID, r.ClientID = ml.Member.MemberID, ml.Member.ClientID
			}
			if ml.Err != nil {
				r.Error = ml.Err.Error()
			}
			rows = append(rows, r)
		}
	}
	if cCtx.String(outputFlag) == "json" {
		if err := printJSON(cCtx.App.Writer, rows); err != nil {
			return err
		}
	} else if err := printLag(cCtx.App.Writer, rows); err != nil {
		return err
	}
	return noSuchGroups(missing)
}

func printLag(out io.Writer, rows []lagRow) error {
	w := newTable(out)
	fmt.Fprintln(w, "GROUP\tTOPIC\tPARTITION\tCOMMITTED\tEND\tLAG\tMEMBER\tCLIENT")
	for _, r := range rows {
		committed := strconv.FormatInt(r.Committed, 10)
		if r.Committed < 0 {
			committed = "-"
		}
		lag := strconv.FormatInt(r.Lag, 10)
		if r.Error != "" {
			lag = "error: " + r.Error
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%d\t%s\t%s\t%s\n", r.Group, r.Topic, r.Partition, committed, r.End, lag, dash(r.MemberID), dash(r.ClientID))
	}
	return w.Flush()
}

func groupsDelete(cCtx *cli.Context) error {
	names, err := groupsNamed(cCtx)
	if err != nil {
		return err
	}
	adm, ctx, done, err := groupsAdmin(cCtx)
	if err != nil {
		return err
	}
	defer done()
	resps, err := adm.DeleteGroups(ctx, names...)
	if err != nil {
		return groupsError("deleting groups", err)
	}
	type row struct {
		Group string `json:"group"`
		Error string `json:"error,omitempty"`
	}
	rows := []row{}
	var firstErr error
	for _, name := range names {
		r := resps[name]
		if r.Err != nil {
			rows = append(rows, row{name, r.Err.Error()})
			if firstErr == nil {
				firstErr = groupsError("deleting group "+name, r.Err)
			}
			continue
		}
		rows = append(rows, row{Group: name})
	}
	if cCtx.String(outputFlag) == "json" {
		if err := printJSON(cCtx.App.Writer, rows); err != nil {
			return err
		}
	} else {
		for _, r := range rows {
			if r.Error == "" {
				fmt.Fprintf(cCtx.App.Writer, "group %s deleted\n", r.Group)
			}
		}
	}
	return firstErr
}

// resetRow is one partition of a reset-offsets plan.
type resetRow struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Current   int64  `json:"current"`
	New       int64  `json:"new"`
	Error     string `json:"error,omitempty"`
}

// groupsResetOffsets is `broker groups reset-offsets`: it plans the new
// offsets of the group's partitions (planReset), commits them with
// --execute, and prints the plan.
func groupsResetOffsets(cCtx *cli.Context) error {
	if err := flagsAfterArgs(cCtx); err != nil {
		return err
	}
	if cCtx.NArg() != 1 {
		return usageErrorf("broker groups reset-offsets takes one group name, got %d arguments", cCtx.NArg())
	}
	req := resetRequest{group: cCtx.Args().First(), allTopics: cCtx.Bool("all-topics")}
	var err error
	if req.target, err = parseResetTarget(cCtx); err != nil {
		return err
	}
	topicFlags := joinPartitionLists(cCtx.StringSlice("topic"))
	if len(topicFlags) == 0 == !req.allTopics {
		return usageErrorf("give --topic (repeatable) or --all-topics")
	}
	if req.wanted, err = parseTopicPartitions(topicFlags); err != nil {
		return err
	}
	group := req.group

	adm, ctx, done, err := groupsAdmin(cCtx)
	if err != nil {
		return err
	}
	defer done()
	if err := checkGroupEmpty(ctx, adm, group); err != nil {
		return err
	}
	offsets, err := listResetOffsets(ctx, adm, req)
	if err != nil {
		return err
	}
	rows, commit, err := planReset(offsets, req.target)
	if err != nil {
		return err
	}
	if cCtx.Bool("execute") {
		if err := commitReset(ctx, adm, group, commit, rows); err != nil {
			return err
		}
	}
	return printReset(cCtx, group, rows)
}

// resetRequest is what reset-offsets was asked to do: the group, where
// to, and which partitions (by topic; nil partitions mean all of the
// topic's), or all the topics the group has offsets for.
type resetRequest struct {
	group     string
	target    resetTarget
	wanted    map[string][]int32
	allTopics bool
}

// resetTarget is where reset-offsets moves the offsets: exactly one of
// earliest, latest, toOffset (offset) and a time (at, not zero).
type resetTarget struct {
	earliest, latest bool
	toOffset         bool
	offset           int64
	at               time.Time
}

// parseResetTarget reads the --to-* flags.
func parseResetTarget(cCtx *cli.Context) (resetTarget, error) {
	targets := 0
	for _, f := range []string{"to-earliest", "to-latest", "to-datetime", "to-offset"} {
		if cCtx.IsSet(f) {
			targets++
		}
	}
	if targets != 1 {
		return resetTarget{}, usageErrorf("give exactly one of --to-earliest, --to-latest, --to-datetime, --to-offset")
	}
	t := resetTarget{earliest: cCtx.Bool("to-earliest"), latest: cCtx.Bool("to-latest"), toOffset: cCtx.IsSet("to-offset"), offset: cCtx.Int64("to-offset")}
	if cCtx.IsSet("to-datetime") {
		var err error
		if t.at, err = time.Parse(time.RFC3339, cCtx.String("to-datetime")); err != nil {
			return resetTarget{}, usageErrorf("--to-datetime %q is not an RFC 3339 time such as 2026-01-02T15:04:05Z", cCtx.String("to-datetime"))
		}
	}
	if t.toOffset && t.offset < 0 {
		return resetTarget{}, usageErrorf("--to-offset must not be negative")
	}
	return t, nil
}

// parseTopicPartitions reads --topic values (topic or topic:p1,p2) into
// partitions by topic; nil partitions mean all of the topic's.
func parseTopicPartitions(topicFlags []string) (map[string][]int32, error) {
	wanted := map[string][]int32{}
	for _, tf := range topicFlags {
		name, parts, hasParts := strings.Cut(tf, ":")
		if name == "" {
			return nil, usageErrorf("--topic %q has no topic name", tf)
		}
		if !hasParts {
			wanted[name] = nil
			continue
		}
		for _, p := range strings.Split(parts, ",") {
			n, err := strconv.ParseInt(strings.TrimSpace(p), 10, 32)
			if err != nil || n < 0 {
				return nil, usageErrorf("--topic %q: %q is not a partition number", tf, p)
			}
			wanted[name] = append(wanted[name], int32(n))
		}
	}
	return wanted, nil
}

// checkGroupEmpty refuses a group with members: offsets can only be reset
// while it is empty (or dead).
func checkGroupEmpty(ctx context.Context, adm *kadm.Client, group string) error {
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return groupsError("describing group "+group, err)
	}
	if d := described[group]; d.Err != nil {
		return groupsError("describing group "+group, d.Err)
	} else if d.State != "Empty" && d.State != "Dead" {
		return &exitError{code: exitConflict, err: fmt.Errorf("group %s is %s with %d members; stop its consumers first (offsets can only be reset while the group is empty)", group, d.State, len(d.Members))}
	} else if cg, ok := describeConsumerGroups(ctx, adm, []string{group})[group]; ok && len(cg.Members) > 0 {
		return &exitError{code: exitConflict, err: fmt.Errorf("consumer group %s is %s with %d members; stop its consumers first (offsets can only be reset while the group is empty)", group, cg.State, len(cg.Members))}
	}
	return nil
}

// resetOffsets is what a reset is planned from: the partitions wanted (by
// topic, nil: all), the group's committed offsets and the partitions'
// start and end offsets, and the offsets at the target time (when the
// target is a time).
type resetOffsets struct {
	topics  []string // sorted
	wanted  map[string][]int32
	current kadm.OffsetResponses
	starts  kadm.ListedOffsets
	ends    kadm.ListedOffsets
	byTime  kadm.ListedOffsets
}

// listResetOffsets fetches what planReset needs. With allTopics, every
// topic the group has offsets for is wanted, whole.
func listResetOffsets(ctx context.Context, adm *kadm.Client, req resetRequest) (resetOffsets, error) {
	group, wanted, at := req.group, req.wanted, req.target.at
	current, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return resetOffsets{}, groupsError("fetching the offsets of "+group, err)
	}
	if req.allTopics {
		for t := range current {
			wanted[t] = nil
		}
		if len(wanted) == 0 {
			return resetOffsets{}, &exitError{code: exitNotFound, err: fmt.Errorf("group %s has no committed offsets; name topics with --topic", group)}
		}
	}
	o := resetOffsets{wanted: wanted, current: current}
	for t := range wanted {
		o.topics = append(o.topics, t)
	}
	sort.Strings(o.topics)
	if o.starts, err = adm.ListStartOffsets(ctx, o.topics...); err != nil {
		return resetOffsets{}, groupsError("listing start offsets", err)
	}
	if o.ends, err = adm.ListEndOffsets(ctx, o.topics...); err != nil {
		return resetOffsets{}, groupsError("listing end offsets", err)
	}
	if !at.IsZero() {
		if o.byTime, err = adm.ListOffsetsAfterMilli(ctx, at.UnixMilli(), o.topics...); err != nil {
			return resetOffsets{}, groupsError("listing offsets by time", err)
		}
	}
	return o, nil
}

// planReset computes each wanted partition's new offset (resetRow) and the
// commit that sets them. It fails when a topic does not exist or any
// partition cannot be reset: then nothing is reset.
func planReset(o resetOffsets, target resetTarget) ([]resetRow, kadm.Offsets, error) {
	var rows []resetRow
	commit := kadm.Offsets{}
	for _, t := range o.topics {
		parts := o.wanted[t]
		if parts == nil {
			for p := range o.ends[t] {
				parts = append(parts, p)
			}
			if len(parts) == 0 {
				return nil, nil, &exitError{code: exitNotFound, err: fmt.Errorf("topic %s does not exist", t)}
			}
			sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
		}
		for _, p := range parts {
			row := o.plan(t, p, target)
			if row.Error == "" {
				commit.Add(kadm.Offset{Topic: t, Partition: p, At: row.New, LeaderEpoch: -1})
			}
			rows = append(rows, row)
		}
	}
	for _, r := range rows {
		if r.Error != "" {
			return nil, nil, fmt.Errorf("%s/%d: %s; nothing was reset", r.Topic, r.Partition, r.Error)
		}
	}
	return rows, commit, nil
}

// plan is the reset of one partition: its new offset within its start and
// end offsets, or why it cannot be reset.
func (o resetOffsets) plan(t string, p int32, target resetTarget) resetRow {
	row := resetRow{Topic: t, Partition: p, Current: -1, New: -1}
	if c, ok := o.current.Lookup(t, p); ok && c.Err == nil {
		row.Current = c.At
	}
	start, okS := o.starts.Lookup(t, p)
	end, okE := o.ends.Lookup(t, p)
	switch {
	case !okS || !okE:
		row.Error = "no such partition"
	case start.Err != nil:
		row.Error = start.Err.Error()
	case end.Err != nil:
		row.Error = end.Err.Error()
	case target.earliest:
		row.New = start.Offset
	case target.latest:
		row.New = end.Offset
	case target.toOffset:
		row.New = min(max(target.offset, start.Offset), end.Offset)
	default:
		row.New = end.Offset // no record at or after the time: the end
		if at, ok := o.byTime.Lookup(t, p); ok && at.Err == nil && at.Offset >= 0 {
			row.New = at.Offset
		}
	}
	return row
}

// commitReset commits the planned offsets; a partition the commit failed
// for gets its error in rows.
func commitReset(ctx context.Context, adm *kadm.Client, group string, commit kadm.Offsets, rows []resetRow) error {
	resps, err := adm.CommitOffsets(ctx, group, commit)
	if err != nil {
		return groupsError("committing offsets of "+group, err)
	}
	var failed error
	for i := range rows {
		if r, ok := resps.Lookup(rows[i].Topic, rows[i].Partition); ok && r.Err != nil {
			rows[i].Error = r.Err.Error()
			if failed == nil {
				failed = r.Err
			}
		}
	}
	if failed != nil {
		if errors.Is(failed, kerr.UnknownMemberID) || errors.Is(failed, kerr.IllegalGeneration) {
			return &exitError{code: exitConflict, err: fmt.Errorf("committing offsets of %s: %w; members joined the group meanwhile", group, failed)}
		}
		return groupsError("committing offsets of "+group, failed)
	}
	return nil
}

// printReset prints the plan (JSON or a table) and what was done.
func printReset(cCtx *cli.Context, group string, rows []resetRow) error {
	if cCtx.String(outputFlag) == "json" {
		return printJSON(cCtx.App.Writer, map[string]any{"group": group, "executed": cCtx.Bool("execute"), "offsets": rows})
	}
	w := newTable(cCtx.App.Writer)
	fmt.Fprintln(w, "TOPIC\tPARTITION\tCURRENT\tNEW")
	for _, r := range rows {
		cur := strconv.FormatInt(r.Current, 10)
		if r.Current < 0 {
			cur = "-"
		}
		fmt.Fprintf(w, "%s\t%d\t%s\t%d\n", r.Topic, r.Partition, cur, r.New)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if !cCtx.Bool("execute") {
		fmt.Fprintln(cCtx.App.Writer, "dry run: nothing changed; add --execute to commit these offsets")
	} else {
		fmt.Fprintf(cCtx.App.Writer, "offsets of group %s reset\n", group)
	}
	return nil
}

// joinPartitionLists undoes the comma splitting of slice flags for
// --topic TOPIC:P,P,...: a bare number continues the previous value's
// partition list.
func joinPartitionLists(values []string) []string {
	var out []string
	for _, v := range values {
		if _, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && len(out) > 0 && strings.Contains(out[len(out)-1], ":") {
			out[len(out)-1] += "," + v
			continue
		}
		out = append(out, v)
	}
	return out
}
