package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/urfave/cli/v2"
)

// topicsCommandTimeout bounds one `broker topics` command.
const topicsCommandTimeout = 30 * time.Second

// topicsCommand administers topics over the Kafka protocol (kadm), so it
// works against any running broker, ours or Kafka.
func topicsCommand() *cli.Command {
	bootstrap := bootstrapFlag()
	validateOnly := &cli.BoolFlag{Name: "validate-only", Usage: "check the request on the broker without changing anything"}
	return &cli.Command{
		Name:  "topics",
		Usage: "create, list, describe, alter and delete topics on a running broker",
		Subcommands: []*cli.Command{
			{
				Name:      "create",
				Usage:     "create a topic",
				ArgsUsage: "TOPIC",
				Flags: []cli.Flag{bootstrap, validateOnly,
					&cli.IntFlag{Name: "partitions", Aliases: []string{"p"}, Value: -1, Usage: "partition count; -1 for the broker's default"},
					&cli.IntFlag{Name: "replication-factor", Value: -1, Usage: "replication factor; -1 for the broker's default"},
					&cli.StringSliceFlag{Name: "config", Aliases: []string{"c"}, Usage: "topic config as KEY=VALUE, repeatable (e.g. cleanup.policy=compact)"},
					&cli.BoolFlag{Name: "if-not-exists", Usage: "succeed when the topic exists already"},
				},
				Action: topicsCreate,
			},
			{
				Name:   "list",
				Usage:  "list topics with their partition counts",
				Flags:  []cli.Flag{bootstrap, &cli.BoolFlag{Name: "internal", Usage: "include internal topics"}},
				Action: topicsList,
			},
			{
				Name:      "describe",
				Usage:     "show partitions, offsets and configs of topics (all topics when none is named)",
				ArgsUsage: "[TOPIC...]",
				Flags:     []cli.Flag{bootstrap, &cli.BoolFlag{Name: "all-configs", Usage: "list every config, not only those set on the topic"}},
				Action:    topicsDescribe,
			},
			{
				Name:      "alter",
				Usage:     "set or delete topic configs (IncrementalAlterConfigs)",
				ArgsUsage: "TOPIC",
				Flags: []cli.Flag{bootstrap, validateOnly,
					&cli.StringSliceFlag{Name: "config", Aliases: []string{"c"}, Usage: "config to set as KEY=VALUE, repeatable"},
					&cli.StringSliceFlag{Name: "delete-config", Usage: "config to return to its default, repeatable"},
				},
				Action: topicsAlter,
			},
			{
				Name:      "delete",
				Usage:     "delete topics and their data",
				ArgsUsage: "TOPIC...",
				Flags:     []cli.Flag{bootstrap},
				Action:    topicsDelete,
			},
			{
				Name:      "delete-records",
				Usage:     "delete the records before an offset (DeleteRecords; the topic's cleanup.policy must include delete)",
				ArgsUsage: "TOPIC",
				Flags: []cli.Flag{bootstrap,
					&cli.IntSliceFlag{Name: "partition", Usage: "partition to trim, repeatable; all partitions when not given"},
					&cli.Int64Flag{Name: "offset", Required: true, Usage: "first offset to keep; -1 for the high watermark (delete everything)"},
				},
				Action: topicsDeleteRecords,
			},
			{
				Name:      "add-partitions",
				Usage:     "raise a topic's partition count (CreatePartitions)",
				ArgsUsage: "TOPIC",
				Flags: []cli.Flag{bootstrap, validateOnly,
					&cli.IntFlag{Name: "partitions", Aliases: []string{"p"}, Required: true, Usage: "the new total partition count"},
				},
				Action: topicsAddPartitions,
			},
		},
	}
}

// bootstrapFlag is --bootstrap-server of the subcommands that talk the
// Kafka protocol (topics, groups).
func bootstrapFlag() *cli.StringFlag {
	return &cli.StringFlag{
		Name:    "bootstrap-server",
		Aliases: []string{"b"},
		Value:   "localhost:9092",
		Usage:   "host:port of a broker to connect to",
		EnvVars: []string{bootstrapEnv},
	}
}

// kafkaAdmin connects a kadm client to --bootstrap-server. Its context
// ends after timeout; done cancels it and closes the client.
func kafkaAdmin(cCtx *cli.Context, timeout time.Duration) (adm *kadm.Client, ctx context.Context, done func(), err error) {
	cl, ctx, done, err := kafkaClient(cCtx, timeout)
	if err != nil {
		return nil, nil, nil, err
	}
	return kadm.NewClient(cl), ctx, done, nil
}

// kafkaClient connects a franz-go client to --bootstrap-server with the
// client security settings.
func kafkaClient(cCtx *cli.Context, timeout time.Duration) (cl *kgo.Client, ctx context.Context, done func(), err error) {
	addr := cCtx.String("bootstrap-server")
	security, err := clientSecurityOpts(cCtx) // users_cmd.go
	if err != nil {
		return nil, nil, nil, err
	}
	cl, err = kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(strings.Split(addr, ",")...), kgo.ClientID("broker-cli"),
		kgo.RequestRetries(2), kgo.RetryTimeout(10 * time.Second)}, security...)...)
	if err != nil {
		return nil, nil, nil, usageErrorf("--bootstrap-server %q: %v", addr, err)
	}
	ctx, cancel := context.WithTimeout(cCtx.Context, timeout)
	return cl, ctx, func() { cancel(); cl.Close() }, nil
}

// topicsAdmin connects a kadm client to --bootstrap-server.
func topicsAdmin(cCtx *cli.Context) (*kadm.Client, context.Context, func(), error) {
	return kafkaAdmin(cCtx, topicsCommandTimeout)
}

// oneTopic returns the single TOPIC argument.
func oneTopic(cCtx *cli.Context) (string, error) {
	if cCtx.NArg() != 1 {
		return "", usageErrorf("broker topics %s takes one topic name, got %d arguments", cCtx.Command.Name, cCtx.NArg())
	}
	return cCtx.Args().First(), nil
}

// parseConfigFlags reads KEY=VALUE pairs.
func parseConfigFlags(values []string) (map[string]*string, error) {
	out := make(map[string]*string, len(values))
	for _, kv := range values {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, usageErrorf("--config %q is not KEY=VALUE, e.g. --config retention.ms=86400000", kv)
		}
		out[strings.TrimSpace(k)] = &v
	}
	return out, nil
}

// brokerError describes a failed request with the broker's message.
func brokerError(what string, err error, message string) error {
	if message != "" && (err == nil || !strings.Contains(err.Error(), message)) {
		return fmt.Errorf("%s: %v: %s", what, err, message)
	}
	return fmt.Errorf("%s: %v", what, err)
}

func topicsCreate(cCtx *cli.Context) error {
	topic, err := oneTopic(cCtx)
	if err != nil {
		return err
	}
	configs, err := parseConfigFlags(cCtx.StringSlice("config"))
	if err != nil {
		return err
	}
	adm, ctx, done, err := topicsAdmin(cCtx)
	if err != nil {
		return err
	}
	defer done()
	create := adm.CreateTopics
	if cCtx.Bool("validate-only") {
		create = adm.ValidateCreateTopics
	}
	resps, err := create(ctx, int32(cCtx.Int("partitions")), int16(cCtx.Int("replication-factor")), configs, topic)
	if err != nil {
		return fmt.Errorf("creating topic %s: %w", topic, err)
	}
	r := resps[topic]
	if errors.Is(r.Err, kerr.TopicAlreadyExists) && cCtx.Bool("if-not-exists") {
		fmt.Fprintf(cCtx.App.Writer, "topic %s exists already\n", topic)
		return nil
	}
	if r.Err != nil {
		return brokerError("creating topic "+topic, r.Err, r.ErrMessage)
	}
	verb := "created"
	if cCtx.Bool("validate-only") {
		verb = "would be created"
	}
	fmt.Fprintf(cCtx.App.Writer, "topic %s %s with %d partitions (id %s)\n", topic, verb, r.NumPartitions, r.ID)
	return nil
}

func topicsList(cCtx *cli.Context) error {
	if cCtx.Args().Present() {
		return usageErrorf("broker topics list takes no arguments; use describe for given topics")
	}
	adm, ctx, done, err := topicsAdmin(cCtx)
	if err != nil {
		return err
	}
	defer done()
	list := adm.ListTopics
	if cCtx.Bool("internal") {
		list = adm.ListTopicsWithInternal
	}
	details, err := list(ctx)
	if err != nil {
		return fmt.Errorf("listing topics: %w", err)
	}
	w := newTable(cCtx.App.Writer)
	fmt.Fprintln(w, "TOPIC\tPARTITIONS\tID")
	for _, d := range details.Sorted() {
		fmt.Fprintf(w, "%s\t%d\t%s\n", d.Topic, len(d.Partitions), d.ID)
	}
	return w.Flush()
}

func topicsDescribe(cCtx *cli.Context) error {
	adm, ctx, done, err := topicsAdmin(cCtx)
	if err != nil {
		return err
	}
	defer done()
	details, err := adm.ListTopicsWithInternal(ctx, cCtx.Args().Slice()...)
	if err != nil {
		return fmt.Errorf("describing topics: %w", err)
	}
	var names []string
	for _, d := range details.Sorted() {
		if d.Err != nil {
			return fmt.Errorf("topic %s: %w", d.Topic, d.Err)
		}
		if cCtx.Args().Present() || !d.IsInternal {
			names = append(names, d.Topic)
		}
	}
	if len(names) == 0 {
		return nil
	}
	starts, err := adm.ListStartOffsets(ctx, names...)
	if err != nil {
		return fmt.Errorf("listing start offsets: %w", err)
	}
	ends, err := adm.ListEndOffsets(ctx, names...)
	if err != nil {
		return fmt.Errorf("listing end offsets: %w", err)
	}
	configs, err := adm.DescribeTopicConfigs(ctx, names...)
	if err != nil {
		return fmt.Errorf("describing configs: %w", err)
	}
	out := cCtx.App.Writer
	for i, name := range names {
		if i > 0 {
			fmt.Fprintln(out)
		}
		d := details[name]
		fmt.Fprintf(out, "Topic: %s\tID: %s\tPartitions: %d\n", name, d.ID, len(d.Partitions))
		if rc, err := configs.On(name, nil); err == nil {
			printConfigs(out, rc, cCtx.Bool("all-configs"))
		}
		w := newTable(out)
		fmt.Fprintln(w, "  PARTITION\tLEADER\tLOG START\tLOG END\tRECORDS")
		for _, p := range d.Partitions.Sorted() {
			start, _ := starts.Lookup(name, p.Partition)
			end, _ := ends.Lookup(name, p.Partition)
			fmt.Fprintf(w, "  %d\t%d\t%d\t%d\t%d\n", p.Partition, p.Leader, start.Offset, end.Offset, end.Offset-start.Offset)
		}
		_ = w.Flush()
	}
	return nil
}

// printConfigs prints the topic's explicitly set configs, or all of them
// with their sources.
func printConfigs(out io.Writer, rc kadm.ResourceConfig, all bool) {
	var lines []string
	for _, c := range rc.Configs {
		if all {
			lines = append(lines, fmt.Sprintf("%s=%s (%s)", c.Key, c.MaybeValue(), strings.ToLower(c.Source.String())))
		} else if c.Source == kmsg.ConfigSourceDynamicTopicConfig {
			lines = append(lines, c.Key+"="+c.MaybeValue())
		}
	}
	sort.Strings(lines)
	if len(lines) == 0 {
		fmt.Fprintln(out, "  Configs: (defaults)")
		return
	}
	fmt.Fprintln(out, "  Configs:")
	for _, l := range lines {
		fmt.Fprintln(out, "    "+l)
	}
}

func topicsAlter(cCtx *cli.Context) error {
	topic, err := oneTopic(cCtx)
	if err != nil {
		return err
	}
	sets, err := parseConfigFlags(cCtx.StringSlice("config"))
	if err != nil {
		return err
	}
	var ops []kadm.AlterConfig
	for _, k := range sortedConfigKeys(sets) {
		ops = append(ops, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: sets[k]})
	}
	for _, k := range cCtx.StringSlice("delete-config") {
		ops = append(ops, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
	}
	if len(ops) == 0 {
		return usageErrorf("broker topics alter needs --config KEY=VALUE or --delete-config KEY")
	}
	adm, ctx, done, err := topicsAdmin(cCtx)
	if err != nil {
		return err
	}
	defer done()
	alter := adm.AlterTopicConfigs
	if cCtx.Bool("validate-only") {
		alter = adm.ValidateAlterTopicConfigs
	}
	resps, err := alter(ctx, ops, topic)
	if err != nil {
		return fmt.Errorf("altering topic %s: %w", topic, err)
	}
	for _, r := range resps {
		if r.Err != nil {
			return brokerError("altering topic "+r.Name, r.Err, r.ErrMessage)
		}
	}
	if cCtx.Bool("validate-only") {
		fmt.Fprintf(cCtx.App.Writer, "topic %s: the change is valid\n", topic)
	} else {
		fmt.Fprintf(cCtx.App.Writer, "topic %s altered\n", topic)
	}
	return nil
}

func sortedConfigKeys(m map[string]*string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func topicsDelete(cCtx *cli.Context) error {
	if !cCtx.Args().Present() {
		return usageErrorf("broker topics delete needs at least one topic name")
	}
	adm, ctx, done, err := topicsAdmin(cCtx)
	if err != nil {
		return err
	}
	defer done()
	resps, err := adm.DeleteTopics(ctx, cCtx.Args().Slice()...)
	if err != nil {
		return fmt.Errorf("deleting topics: %w", err)
	}
	var failed []error
	for _, r := range resps.Sorted() {
		if r.Err != nil {
			failed = append(failed, brokerError("deleting topic "+r.Topic, r.Err, r.ErrMessage))
			continue
		}
		fmt.Fprintf(cCtx.App.Writer, "topic %s deleted\n", r.Topic)
	}
	return errors.Join(failed...)
}

func topicsDeleteRecords(cCtx *cli.Context) error {
	topic, err := oneTopic(cCtx)
	if err != nil {
		return err
	}
	offset := cCtx.Int64("offset")
	if offset < -1 {
		return usageErrorf("--offset %d: use an offset >= 0, or -1 for the high watermark", offset)
	}
	adm, ctx, done, err := topicsAdmin(cCtx)
	if err != nil {
		return err
	}
	defer done()
	parts := cCtx.IntSlice("partition")
	if len(parts) == 0 {
		details, err := adm.ListTopics(ctx, topic)
		if err != nil {
			return fmt.Errorf("describing topic %s: %w", topic, err)
		}
		d := details[topic]
		if d.Err != nil {
			return fmt.Errorf("topic %s: %w", topic, d.Err)
		}
		for _, p := range d.Partitions.Numbers() {
			parts = append(parts, int(p))
		}
		sort.Ints(parts)
	}
	offsets := kadm.Offsets{}
	for _, p := range parts {
		offsets.Add(kadm.Offset{Topic: topic, Partition: int32(p), At: offset})
	}
	resps, err := adm.DeleteRecords(ctx, offsets)
	if err != nil {
		return fmt.Errorf("deleting records of %s: %w", topic, err)
	}
	var failed []error
	for _, r := range resps.Sorted() {
		if r.Err != nil {
			failed = append(failed, fmt.Errorf("partition %s/%d: %w", r.Topic, r.Partition, r.Err))
			continue
		}
		fmt.Fprintf(cCtx.App.Writer, "partition %s/%d: log start offset %d\n", r.Topic, r.Partition, r.LowWatermark)
	}
	return errors.Join(failed...)
}

func topicsAddPartitions(cCtx *cli.Context) error {
	topic, err := oneTopic(cCtx)
	if err != nil {
		return err
	}
	n := cCtx.Int("partitions")
	adm, ctx, done, err := topicsAdmin(cCtx)
	if err != nil {
		return err
	}
	defer done()
	update := adm.UpdatePartitions
	if cCtx.Bool("validate-only") {
		update = adm.ValidateUpdatePartitions
	}
	resps, err := update(ctx, n, topic)
	if err != nil {
		return fmt.Errorf("adding partitions to %s: %w", topic, err)
	}
	if r := resps[topic]; r.Err != nil {
		return brokerError("adding partitions to "+topic, r.Err, r.ErrMessage)
	}
	verb := "now has"
	if cCtx.Bool("validate-only") {
		verb = "can have"
	}
	fmt.Fprintf(cCtx.App.Writer, "topic %s %s %s partitions\n", topic, verb, strconv.Itoa(n))
	return nil
}
