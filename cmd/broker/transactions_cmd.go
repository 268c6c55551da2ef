package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/urfave/cli/v2"
)

// transactionsExitCodes documents the exit codes of `broker transactions`.
const transactionsExitCodes = "Exit codes: 0 ok, 1 error, 2 usage (nothing was sent), 3 transactional ID not found,\n" +
	"6 broker unreachable."

// transactionsCommand inspects and aborts transactions over the Kafka
// protocol (ListTransactions, DescribeTransactions, InitProducerId).
func transactionsCommand() *cli.Command {
	flags := func(extra ...cli.Flag) []cli.Flag {
		return append([]cli.Flag{
			&cli.StringFlag{Name: "bootstrap-server", Aliases: []string{"b"}, Value: "localhost:9092", Usage: "host:port of a broker to connect to", EnvVars: []string{bootstrapEnv}},
			&cli.StringFlag{Name: outputFlag, Aliases: []string{"o"}, Value: "table", Usage: "output format: table or json"},
			&cli.DurationFlag{Name: timeoutFlag, Value: 30 * time.Second, Usage: "give up after this long"},
		}, extra...)
	}
	return &cli.Command{
		Name:        "transactions",
		Usage:       "list, describe and abort transactions of transactional producers",
		Description: "Talks to a running broker over the Kafka protocol.\n" + transactionsExitCodes,
		Subcommands: []*cli.Command{
			{
				Name:        "list",
				Usage:       "list transactional IDs with their producer ID and state",
				Description: transactionsExitCodes,
				Flags:       flags(&cli.StringSliceFlag{Name: "state", Usage: "only this state (Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort), repeatable"}),
				Action:      transactionsList,
			},
			{
				Name:        "describe",
				Usage:       "show the state, producer ID and epoch, timeout, start time and partitions of transactional IDs",
				ArgsUsage:   "TRANSACTIONAL-ID...",
				Description: transactionsExitCodes,
				Flags:       flags(),
				Action:      transactionsDescribe,
			},
			{
				Name:      "abort",
				Usage:     "fence the producer of a transactional ID and abort its open transaction, or end a hanging transaction on one partition",
				ArgsUsage: "TRANSACTIONAL-ID... | --topic T --partition P --start-offset O",
				Description: "With transactional IDs: bumps the producer epoch of each ID (InitProducerId with\n" +
					"producer ID -1, as Admin.fenceProducers does): an open transaction is aborted and\n" +
					"the current producer is fenced; it must re-initialize to produce again.\n" +
					"With --topic, --partition and --start-offset (as kafka-transactions abort): finds the\n" +
					"producer whose open transaction on that partition starts at that offset\n" +
					"(DescribeProducers) and writes an ABORT marker there (WriteTxnMarkers), for a\n" +
					"transaction that holds the partition's last stable offset back.\n" + transactionsExitCodes,
				Flags: flags(
					&cli.StringFlag{Name: "topic", Usage: "partition mode: the topic of the hanging transaction"},
					&cli.IntFlag{Name: "partition", Value: -1, Usage: "partition mode: its partition"},
					&cli.Int64Flag{Name: "start-offset", Value: -1, Usage: "partition mode: the first offset of the transaction (describe the partition's producers to find it)"},
				),
				Action: transactionsAbort,
			},
		},
	}
}

func transactionsList(cCtx *cli.Context) error {
	if cCtx.Args().Present() {
		return usageErrorf("broker transactions list takes no arguments; use describe for given IDs")
	}
	cl, ctx, done, err := transactionsClient(cCtx)
	if err != nil {
		return err
	}
	defer done()
	req := kmsg.NewPtrListTransactionsRequest()
	req.StateFilters = cCtx.StringSlice("state")
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		return groupsError("listing transactions", err)
	}
	type row struct {
		TransactionalID string `json:"transactional_id"`
		ProducerID      int64  `json:"producer_id"`
		State           string `json:"state"`
	}
	rows := []row{}
	for _, s := range resp.TransactionStates {
		rows = append(rows, row{s.TransactionalID, s.ProducerID, s.TransactionState})
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].TransactionalID < rows[j].TransactionalID })
	if cCtx.String(outputFlag) == "json" {
		return printJSON(cCtx.App.Writer, rows)
	}
	w := tabwriter.NewWriter(cCtx.App.Writer, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TRANSACTIONAL ID\tPRODUCER ID\tSTATE")
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%d\t%s\n", r.TransactionalID, r.ProducerID, r.State)
	}
	return w.Flush()
}

// transactionsClient connects a franz-go client to --bootstrap-server.
func transactionsClient(cCtx *cli.Context) (*kgo.Client, context.Context, func(), error) {
	if _, err := outputFormat(cCtx); err != nil {
		return nil, nil, nil, err
	}
	addr := cCtx.String("bootstrap-server")
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(addr, ",")...), kgo.ClientID("broker-cli"),
		kgo.RequestRetries(2), kgo.RetryTimeout(10*time.Second))
	if err != nil {
		return nil, nil, nil, usageErrorf("--bootstrap-server %q: %v", addr, err)
	}
	ctx, cancel := context.WithTimeout(cCtx.Context, cCtx.Duration(timeoutFlag))
	return cl, ctx, func() { cancel(); cl.Close() }, nil
}

func transactionsNamed(cCtx *cli.Context) ([]string, error) {
	if !cCtx.Args().Present() {
		return nil, usageErrorf("broker transactions %s needs at least one transactional ID", cCtx.Command.Name)
	}
	for _, a := range cCtx.Args().Slice() {
		if strings.HasPrefix(a, "-") {
			return nil, usageErrorf("broker transactions %s: flag %s comes after the transactional ID; put flags first", cCtx.Command.Name, a)
		}
	}
	return cCtx.Args().Slice(), nil
}

func transactionsDescribe(cCtx *cli.Context) error {
	ids, err := transactionsNamed(cCtx)
	if err != nil {
		return err
	}
	cl, ctx, done, err := transactionsClient(cCtx)
	if err != nil {
		return err
	}
	defer done()
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = ids
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return groupsError("describing transactions", err)
	}
	type described struct {
		TransactionalID string           `json:"transactional_id"`
		State           string           `json:"state"`
		ProducerID      int64            `json:"producer_id"`
		ProducerEpoch   int16            `json:"producer_epoch"`
		TimeoutMs       int32            `json:"timeout_ms"`
		Started         *time.Time       `json:"started,omitempty"`
		Partitions      map[string][]int `json:"partitions,omitempty"`
	}
	var out []described
	var missing []string
	for _, s := range resp.TransactionStates {
		if s.ErrorCode == kerr.TransactionalIDNotFound.Code {
			missing = append(missing, s.TransactionalID)
			continue
		}
		if err := kerr.ErrorForCode(s.ErrorCode); err != nil {
			return groupsError("describing transaction "+s.TransactionalID, err)
		}
		d := described{TransactionalID: s.TransactionalID, State: s.State, ProducerID: s.ProducerID, ProducerEpoch: s.ProducerEpoch, TimeoutMs: s.TimeoutMillis}
		if s.StartTimestamp >= 0 {
			st := time.UnixMilli(s.StartTimestamp).UTC()
			d.Started = &st
		}
		for _, t := range s.Topics {
			if d.Partitions == nil {
				d.Partitions = map[string][]int{}
			}
			for _, p := range t.Partitions {
				d.Partitions[t.Topic] = append(d.Partitions[t.Topic], int(p))
			}
		}
		out = append(out, d)
	}
	if cCtx.String(outputFlag) == "json" {
		if err := printJSON(cCtx.App.Writer, out); err != nil {
			return err
		}
	} else {
		for _, d := range out {
			started := "-"
			if d.Started != nil {
				started = d.Started.Format(time.RFC3339)
			}
			fmt.Fprintf(cCtx.App.Writer, "Transactional ID: %s\nState: %s\nProducer: id %d, epoch %d\nTimeout: %dms\nStarted: %s\nPartitions: %s\n\n",
				d.TransactionalID, d.State, d.ProducerID, d.ProducerEpoch, d.TimeoutMs, started, formatAssigned(d.Partitions))
		}
	}
	if len(missing) > 0 {
		return &exitError{code: exitNotFound, err: fmt.Errorf("transactional ID not found: %s", strings.Join(missing, ", "))}
	}
	return nil
}

func transactionsAbort(cCtx *cli.Context) error {
	if cCtx.IsSet("topic") || cCtx.IsSet("partition") || cCtx.IsSet("start-offset") {
		return transactionsAbortPartition(cCtx)
	}
	ids, err := transactionsNamed(cCtx)
	if err != nil {
		return err
	}
	cl, ctx, done, err := transactionsClient(cCtx)
	if err != nil {
		return err
	}
	defer done()
	// Refuse unknown IDs: InitProducerId would create them.
	dreq := kmsg.NewPtrDescribeTransactionsRequest()
	dreq.TransactionalIDs = ids
	dresp, err := dreq.RequestWith(ctx, cl)
	if err != nil {
		return groupsError("describing transactions", err)
	}
	for _, s := range dresp.TransactionStates {
		if s.ErrorCode == kerr.TransactionalIDNotFound.Code {
			return &exitError{code: exitNotFound, err: fmt.Errorf("transactional ID not found: %s (nothing was aborted)", s.TransactionalID)}
		}
	}
	for _, id := range ids {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = &id
		req.TransactionTimeoutMillis = 60000
		req.ProducerID, req.ProducerEpoch = -1, -1
		resp, err := req.RequestWith(ctx, cl)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err != nil {
			return groupsError("aborting "+id, err)
		}
		fmt.Fprintf(cCtx.App.Writer, "transactional ID %s fenced: producer id %d now at epoch %d; any open transaction was aborted\n", id, resp.ProducerID, resp.ProducerEpoch)
	}
	return nil
}

// transactionsAbortPartition ends the open transaction that starts at
// --start-offset on one partition with an ABORT marker, as
// kafka-transactions abort does (KIP-664).
func transactionsAbortPartition(cCtx *cli.Context) error {
	topic, partition, start := cCtx.String("topic"), cCtx.Int("partition"), cCtx.Int64("start-offset")
	switch {
	case cCtx.Args().Present():
		return usageErrorf("broker transactions abort: give transactional IDs or --topic/--partition/--start-offset, not both")
	case topic == "" || partition < 0 || start < 0:
		return usageErrorf("broker transactions abort: --topic, --partition and --start-offset go together (a topic, a partition >= 0, an offset >= 0)")
	}
	cl, ctx, done, err := transactionsClient(cCtx)
	if err != nil {
		return err
	}
	defer done()
	dreq := kmsg.NewPtrDescribeProducersRequest()
	dt := kmsg.NewDescribeProducersRequestTopic()
	dt.Topic, dt.Partitions = topic, []int32{int32(partition)}
	dreq.Topics = append(dreq.Topics, dt)
	dresp, err := dreq.RequestWith(ctx, cl)
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		return &exitError{code: exitNotFound, err: fmt.Errorf("partition %s-%d not found (nothing was aborted)", topic, partition)}
	}
	if err != nil {
		return groupsError("describing the producers of "+topic, err)
	}
	if len(dresp.Topics) != 1 || len(dresp.Topics[0].Partitions) != 1 {
		return fmt.Errorf("describing the producers of %s-%d: malformed answer", topic, partition)
	}
	dp := dresp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(dp.ErrorCode); err != nil {
		if dp.ErrorCode == kerr.UnknownTopicOrPartition.Code {
			return &exitError{code: exitNotFound, err: fmt.Errorf("partition %s-%d not found (nothing was aborted)", topic, partition)}
		}
		return groupsError(fmt.Sprintf("describing the producers of %s-%d", topic, partition), err)
	}
	var prod *kmsg.DescribeProducersResponseTopicPartitionActiveProducer
	for i, ap := range dp.ActiveProducers {
		if ap.CurrentTxnStartOffset == start {
			prod = &dp.ActiveProducers[i]
		}
	}
	if prod == nil {
		return &exitError{code: exitNotFound, err: fmt.Errorf("no open transaction starts at offset %d of %s-%d (nothing was aborted); list the partition's producers to find the start offset", start, topic, partition)}
	}
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch = prod.ProducerID, int16(prod.ProducerEpoch), false, prod.CoordinatorEpoch
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = topic, []int32{int32(partition)}
	m.Topics = append(m.Topics, mt)
	req.Markers = append(req.Markers, m)
	// The marker goes to the partition's leader: the broker named, here.
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		for _, rm := range resp.Markers {
			for _, rt := range rm.Topics {
				for _, rp := range rt.Partitions {
					if err == nil {
						err = kerr.ErrorForCode(rp.ErrorCode)
					}
				}
			}
		}
	}
	if err != nil {
		return groupsError(fmt.Sprintf("aborting the transaction at %s-%d offset %d", topic, partition, start), err)
	}
	fmt.Fprintf(cCtx.App.Writer, "aborted the transaction of producer id %d (epoch %d) on %s-%d starting at offset %d\n", prod.ProducerID, prod.ProducerEpoch, topic, partition, start)
	return nil
}
