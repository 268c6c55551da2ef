package main

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/urfave/cli/v2"
)

// eventsConsumerCommand is `broker events consumer`: durable consumers
// (checkpoints) of event stores.
func eventsConsumerCommand() *cli.Command {
	return &cli.Command{
		Name:  "consumer",
		Usage: "create, list, describe, commit and delete durable consumers (checkpoints) of a store",
		Description: "A durable consumer is a named checkpoint in a store: the position it reads next. Reads with\n" +
			"`events read --consumer C` or `events tail --consumer C` start there; only `commit` moves it.\n" +
			clientExitCodes,
		Subcommands: []*cli.Command{
			{
				Name:      "create",
				Usage:     "create a consumer (the same --start again changes nothing; another exits 4)",
				ArgsUsage: "STORE CONSUMER",
				Flags: append([]cli.Flag{
					&cli.StringFlag{Name: "start", Aliases: []string{"s"}, Value: "first",
						Usage: "where it starts: first, last, new, N (pos:N), time:RFC3339 or delta:DURATION"},
				}, clientFlags()...),
				Action: eventsConsumerCreate,
			},
			{
				Name:      "list",
				Usage:     "list a store's consumers with their positions and lag",
				ArgsUsage: "STORE",
				Flags:     clientFlags(),
				Action:    eventsConsumerList,
			},
			{
				Name:      "describe",
				Usage:     "show a consumer's position, the store's head and the lag",
				ArgsUsage: "STORE CONSUMER",
				Flags:     clientFlags(),
				Action:    eventsConsumerDescribe,
			},
			{
				Name:      "commit",
				Usage:     "set a consumer's checkpoint: POSITION is the next position it reads",
				ArgsUsage: "STORE CONSUMER POSITION",
				Description: "POSITION is the last position processed + 1 (next_position of a read). A position below\n" +
					"the checkpoint exits 4 (checkpoint_regression) unless --force.\n" + clientExitCodes,
				Flags: append([]cli.Flag{
					&cli.BoolFlag{Name: "force", Usage: "allow moving the checkpoint back (a rewind)"},
				}, clientFlags()...),
				Action: eventsConsumerCommit,
			},
			{
				Name:      "delete",
				Usage:     "delete a consumer",
				ArgsUsage: "STORE CONSUMER",
				Flags:     clientFlags(),
				Action:    eventsConsumerDelete,
			},
		},
	}
}

// cliConsumer is a consumer as the API returns it.
type cliConsumer struct {
	Consumer      string `json:"consumer"`
	Store         string `json:"store"`
	Start         string `json:"start"`
	Position      int64  `json:"position"`
	HeadPosition  int64  `json:"head_position"`
	FirstPosition int64  `json:"first_position"`
	Lag           int64  `json:"lag"`
	Truncated     bool   `json:"truncated"`
	CreatedAt     string `json:"created_at"`
	CreatedMs     int64  `json:"created_ms"`
	UpdatedAt     string `json:"updated_at"`
	UpdatedMs     int64  `json:"updated_ms"`
}

func consumerPath(store, consumer string) string {
	return eventPath(store, "") + "/consumers/" + pathSegment(consumer)
}

// consumerArgs checks the argument count and returns the arguments and the
// output format and client.
func consumerArgs(cCtx *cli.Context, what string, n int) ([]string, string, *apiClient, error) {
	if cCtx.NArg() != n {
		return nil, "", nil, usageErrorf("events consumer %s takes %s, got %d arguments; flags go before them", what, cCtx.Command.ArgsUsage, cCtx.NArg())
	}
	format, c, err := outputAndClient(cCtx)
	return cCtx.Args().Slice(), format, c, err
}

func printConsumer(cCtx *cli.Context, format, verb string, c cliConsumer) error {
	out := cCtx.App.Writer
	if format == "json" {
		return printJSON(out, c)
	}
	truncated := ""
	if c.Truncated {
		truncated = fmt.Sprintf(" (below the first position %d: reads start there)", c.FirstPosition)
	}
	_, err := fmt.Fprintf(out, "%sconsumer %s/%s at position %d%s; head %d, lag %d; start %s; updated %s\n",
		verb, c.Store, c.Consumer, c.Position, truncated, c.HeadPosition, c.Lag, c.Start, c.UpdatedAt)
	return err
}

func eventsConsumerCreate(cCtx *cli.Context) error {
	args, format, c, err := consumerArgs(cCtx, "create", 2)
	if err != nil {
		return err
	}
	var res cliConsumer
	status, err := c.call(cCtx.Context, apiCall{method: http.MethodPut, path: consumerPath(args[0], args[1]), query: nil, body: map[string]string{"start": cCtx.String("start")}}, &res)
	if err != nil {
		return err
	}
	verb := "created "
	if status == http.StatusOK {
		verb = "exists: "
	}
	return printConsumer(cCtx, format, verb, res)
}

func eventsConsumerDescribe(cCtx *cli.Context) error {
	args, format, c, err := consumerArgs(cCtx, "describe", 2)
	if err != nil {
		return err
	}
	var res cliConsumer
	if _, err := c.call(cCtx.Context, apiCall{method: http.MethodGet, path: consumerPath(args[0], args[1]), query: nil, body: nil}, &res); err != nil {
		return err
	}
	return printConsumer(cCtx, format, "", res)
}

func eventsConsumerList(cCtx *cli.Context) error {
	args, format, c, err := consumerArgs(cCtx, "list", 1)
	if err != nil {
		return err
	}
	var res struct {
		Consumers []cliConsumer `json:"consumers"`
	}
	if _, err := c.call(cCtx.Context, apiCall{method: http.MethodGet, path: eventPath(args[0], "") + "/consumers", query: nil, body: nil}, &res); err != nil {
		return err
	}
	if format == "json" {
		return printJSON(cCtx.App.Writer, res)
	}
	tw := newTable(cCtx.App.Writer)
	fmt.Fprintln(tw, "CONSUMER\tPOSITION\tHEAD\tLAG\tSTART\tUPDATED")
	for _, c := range res.Consumers {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\n", c.Consumer, c.Position, c.HeadPosition, c.Lag, c.Start, c.UpdatedAt)
	}
	return tw.Flush()
}

func eventsConsumerCommit(cCtx *cli.Context) error {
	if cCtx.NArg() == 3 {
		if n, err := strconv.ParseInt(cCtx.Args().Get(2), 10, 64); err != nil || n < 0 {
			return usageErrorf("POSITION %q is not a position (an integer >= 0)", cCtx.Args().Get(2))
		}
	}
	args, format, c, err := consumerArgs(cCtx, "commit", 3)
	if err != nil {
		return err
	}
	pos, _ := strconv.ParseInt(args[2], 10, 64)
	var res cliConsumer
	body := map[string]any{"position": pos, "force": cCtx.Bool("force")}
	if _, err := c.call(cCtx.Context, apiCall{method: http.MethodPost, path: consumerPath(args[0], args[1]) + "/commit", query: nil, body: body}, &res); err != nil {
		return err
	}
	return printConsumer(cCtx, format, "committed: ", res)
}

func eventsConsumerDelete(cCtx *cli.Context) error {
	args, format, c, err := consumerArgs(cCtx, "delete", 2)
	if err != nil {
		return err
	}
	if _, err := c.call(cCtx.Context, apiCall{method: http.MethodDelete, path: consumerPath(args[0], args[1]), query: nil, body: nil}, nil); err != nil {
		return err
	}
	if format == "json" {
		return printJSON(cCtx.App.Writer, map[string]any{"deleted": args[1], "store": args[0]})
	}
	_, err = fmt.Fprintf(cCtx.App.Writer, "consumer %s/%s deleted\n", args[0], args[1])
	return err
}
