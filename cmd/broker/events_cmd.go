package main

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/urfave/cli/v2"
)

// eventsCommand is `broker events`: the event store client.
func eventsCommand() *cli.Command {
	return &cli.Command{
		Name:  "events",
		Usage: "append to, read and tail event stores, and delete streams, through a running broker's HTTP API",
		Description: "An event store holds streams of events with gap-free positions. Flags come before\n" +
			"the arguments. " + clientExitCodes,
		Subcommands: []*cli.Command{eventsAppendCommand(), eventsReadCommand(), eventsTailCommand(), eventsDeleteCommand(), eventsConsumerCommand()},
	}
}

// eventPath is the API path of a store, or of a stream when stream != "".
func eventPath(store, stream string) string {
	p := "/v1/stores/" + pathSegment(store)
	if stream != "" {
		p += "/streams/" + pathSegment(stream)
	}
	return p
}

// pathSegment escapes a name as one path segment. url.PathEscape leaves
// "." and ".." as they are; the broker's router answers such a path with a
// redirect to the cleaned one (".../consumers/.." -> the store), which the
// client follows with the same method. Escaped dots reach the named route.
func pathSegment(name string) string {
	switch name {
	case ".":
		return "%2E"
	case "..":
		return "%2E%2E"
	}
	return url.PathEscape(name)
}

// cliEvent is an event as the API returns it.
type cliEvent struct {
	Position    int64           `json:"position"`
	Stream      string          `json:"stream"`
	Revision    *int64          `json:"revision"`
	ID          string          `json:"id,omitempty"`
	Type        string          `json:"type"`
	Data        json.RawMessage `json:"data,omitempty"`
	DataBase64  *string         `json:"data_base64,omitempty"`
	Metadata    json.RawMessage `json:"metadata,omitempty"`
	Timestamp   string          `json:"timestamp"`
	TimestampMs int64           `json:"timestamp_ms"`
}

// proposedEvent is one event of an append request.
type proposedEvent struct {
	ID         string          `json:"id,omitempty"`
	Type       string          `json:"type"`
	Data       json.RawMessage `json:"data,omitempty"`
	DataBase64 *string         `json:"data_base64,omitempty"`
	Metadata   json.RawMessage `json:"metadata,omitempty"`
}

func eventsAppendCommand() *cli.Command {
	return &cli.Command{
		Name:      "append",
		Usage:     "append events to a stream (creating the store if needed)",
		ArgsUsage: "STORE STREAM",
		Description: "Appends one event (--type, --data) or every line of --batch-file, an NDJSON file of\n" +
			"{\"id\", \"type\", \"data\" | \"data_base64\", \"metadata\"} objects, in one atomic append.\n" +
			"--expected makes the append conditional: any (default), no_stream, exists, or the\n" +
			"stream's last revision; a mismatch exits 4 and writes nothing. Retrying an append\n" +
			"with the same event ids (--id) returns the original positions.\n" + clientExitCodes,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "type", Aliases: []string{"t"}, Usage: "event type"},
			&cli.StringFlag{Name: "data", Aliases: []string{"d"}, Usage: "event data: JSON text, @FILE, or - for stdin"},
			&cli.BoolFlag{Name: "binary", Usage: "send --data as raw bytes (base64 on the wire) instead of JSON"},
			&cli.StringFlag{Name: "id", Usage: "event id (default: a new UUIDv7); the key of idempotent retries"},
			&cli.StringFlag{Name: "metadata", Aliases: []string{"m"}, Usage: "event metadata: JSON text"},
			&cli.StringFlag{Name: "expected", Aliases: []string{"e"}, Usage: "expected revision: any, no_stream, exists or N", Value: "any"},
			&cli.StringFlag{Name: "batch-file", Usage: "NDJSON file of events to append together (- for stdin)"},
		}, clientFlags()...),
		Action: eventsAppend,
	}
}

// readInput reads v as text, @FILE, or - (stdin).
func readInput(v string) ([]byte, error) {
	switch {
	case v == "-":
		return io.ReadAll(io.LimitReader(os.Stdin, 64<<20))
	case strings.HasPrefix(v, "@"):
		return os.ReadFile(v[1:])
	}
	return []byte(v), nil
}

func eventsAppend(cCtx *cli.Context) error {
	if cCtx.NArg() != 2 {
		return usageErrorf("events append takes STORE and STREAM, got %d arguments; flags go before them", cCtx.NArg())
	}
	store, stream := cCtx.Args().Get(0), cCtx.Args().Get(1)
	format, err := outputFormat(cCtx)
	if err != nil {
		return err
	}
	var evs []proposedEvent
	if f := cCtx.String("batch-file"); f != "" {
		if cCtx.IsSet("type") || cCtx.IsSet("data") || cCtx.IsSet("id") || cCtx.IsSet("metadata") {
			return usageErrorf("--batch-file replaces --type, --data, --id and --metadata; give one or the other")
		}
		raw, err := readInput("@" + f)
		if f == "-" {
			raw, err = readInput("-")
		}
		if err != nil {
			return usageErrorf("cannot read --batch-file: %v", err)
		}
		for i, line := range strings.Split(string(raw), "\n") {
			if strings.TrimSpace(line) == "" {
				continue
			}
			var ev proposedEvent
			dec := json.NewDecoder(strings.NewReader(line))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&ev); err != nil {
				return usageErrorf("--batch-file line %d is not an event object: %v", i+1, err)
			}
			evs = append(evs, ev)
		}
		if len(evs) == 0 {
			return usageErrorf("--batch-file holds no events")
		}
	} else {
		if cCtx.String("type") == "" {
			return usageErrorf("events append needs --type (or --batch-file)")
		}
		ev := proposedEvent{ID: cCtx.String("id"), Type: cCtx.String("type")}
		if cCtx.IsSet("data") {
			data, err := readInput(cCtx.String("data"))
			if err != nil {
				return usageErrorf("cannot read --data: %v", err)
			}
			if cCtx.Bool("binary") {
				b := base64.StdEncoding.EncodeToString(data)
				ev.DataBase64 = &b
			} else {
				if !json.Valid(data) {
					return usageErrorf("--data is not valid JSON; quote strings ('\"text\"') or use --binary")
				}
				ev.Data = data
			}
		}
		if m := cCtx.String("metadata"); m != "" {
			if !json.Valid([]byte(m)) {
				return usageErrorf("--metadata is not valid JSON")
			}
			ev.Metadata = json.RawMessage(m)
		}
		evs = append(evs, ev)
	}
	expected := cCtx.String("expected")
	var expectedJSON any = expected
	switch expected {
	case "any", "no_stream", "exists":
	default:
		n, err := strconv.ParseInt(expected, 10, 64)
		if err != nil || n < 0 {
			return usageErrorf("--expected %q is not any, no_stream, exists or a revision number", expected)
		}
		expectedJSON = n
	}
	c, err := newAPIClient(cCtx)
	if err != nil {
		return err
	}
	var res struct {
		FirstPosition        int64    `json:"first_position"`
		LastPosition         int64    `json:"last_position"`
		FirstRevision        int64    `json:"first_revision"`
		LastRevision         int64    `json:"last_revision"`
		NextExpectedRevision int64    `json:"next_expected_revision"`
		Idempotent           bool     `json:"idempotent"`
		EventIDs             []string `json:"event_ids"`
	}
	body := map[string]any{"expected_revision": expectedJSON, "events": evs}
	if _, err := c.call(cCtx.Context, apiCall{method: http.MethodPost, path: eventPath(store, stream) + "/events", query: nil, body: body}, &res); err != nil {
		return err
	}
	out := cCtx.App.Writer
	if format == "json" {
		return printJSON(out, res)
	}
	verb := "appended"
	if res.Idempotent {
		verb = "already appended (idempotent retry)"
	}
	_, err = fmt.Fprintf(out, "%s %d event(s) to %s/%s: revisions %d-%d, positions %d-%d; next expected revision %d\n",
		verb, len(res.EventIDs), store, stream, res.FirstRevision, res.LastRevision, res.FirstPosition, res.LastPosition, res.NextExpectedRevision)
	return err
}

func eventsReadCommand() *cli.Command {
	return &cli.Command{
		Name:      "read",
		Usage:     "read a stream, or the whole store in position order",
		ArgsUsage: "STORE [STREAM]",
		Description: "With STREAM, --from is a revision (or start, end) and --backward reads toward the\n" +
			"start. Without, --from is first, last, new, a position, time:RFC3339 or delta:DURATION.\n" +
			"--all follows pages to the end. " + clientExitCodes,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "from", Aliases: []string{"f"}, Usage: "where to start (see above)"},
			&cli.IntFlag{Name: "limit", Aliases: []string{"n"}, Usage: "events per page, 1-1000", Value: 100},
			&cli.BoolFlag{Name: "backward", Aliases: []string{"b"}, Usage: "read a stream from the end toward the start"},
			&cli.BoolFlag{Name: "all", Usage: "follow pages to the end"},
			&cli.StringFlag{Name: "stream-prefix", Usage: "store reads: only streams with this prefix"},
			&cli.DurationFlag{Name: "wait", Usage: "store reads: wait up to this long (max 60s) for new events when there are none"},
			&cli.StringFlag{Name: "consumer", Usage: "store reads: start at this durable consumer's checkpoint (unless --from); reading does not move it"},
		}, clientFlags()...),
		Action: eventsRead,
	}
}

type readPage struct {
	Stream       string     `json:"stream,omitempty"`
	Events       []cliEvent `json:"events"`
	NextRevision *int64     `json:"next_revision,omitempty"`
	HeadRevision *int64     `json:"head_revision,omitempty"`
	EndOfStream  *bool      `json:"end_of_stream,omitempty"`
	NextPosition *int64     `json:"next_position,omitempty"`
	HeadPosition *int64     `json:"head_position,omitempty"`
	FirstPos     *int64     `json:"first_position,omitempty"`
	Truncated    *bool      `json:"truncated,omitempty"`
}

func eventsRead(cCtx *cli.Context) error {
	if cCtx.NArg() < 1 || cCtx.NArg() > 2 {
		return usageErrorf("events read takes STORE and optionally STREAM, got %d arguments; flags go before them", cCtx.NArg())
	}
	store, stream := cCtx.Args().Get(0), cCtx.Args().Get(1)
	format, err := outputFormat(cCtx)
	if err != nil {
		return err
	}
	limit := cCtx.Int("limit")
	if limit < 1 || limit > 1000 {
		return usageErrorf("--limit %d is not between 1 and 1000", limit)
	}
	if cCtx.Duration("wait") < 0 || cCtx.Duration("wait") > time.Minute {
		return usageErrorf("--wait %v is not between 0 and 60s", cCtx.Duration("wait"))
	}
	c, err := newAPIClient(cCtx)
	if err != nil {
		return err
	}
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	var path string
	if stream != "" {
		if cCtx.IsSet("stream-prefix") || cCtx.IsSet("wait") || cCtx.IsSet("consumer") {
			return usageErrorf("--stream-prefix, --wait and --consumer apply to store reads, not to a stream")
		}
		path = eventPath(store, stream) + "/events"
		if cCtx.Bool("backward") {
			q.Set("direction", "backward")
		}
		if f := cCtx.String("from"); f != "" {
			q.Set("from_revision", f)
		}
	} else {
		if cCtx.Bool("backward") {
			return usageErrorf("--backward applies to stream reads; give a STREAM")
		}
		path = eventPath(store, "") + "/events"
		q.Set("from", cCtx.String("from"))
		if consumer := cCtx.String("consumer"); consumer != "" {
			q.Set("consumer", consumer)
			if q.Get("from") == "" {
				q.Del("from")
			}
		} else if q.Get("from") == "" {
			q.Set("from", "first")
		}
		if p := cCtx.String("stream-prefix"); p != "" {
			q.Set("stream_prefix", p)
		}
		if w := cCtx.Duration("wait"); w > 0 {
			q.Set("wait_ms", strconv.FormatInt(w.Milliseconds(), 10))
		}
	}
	c.timeout = longPollTimeout(cCtx.Duration("wait"), c.timeout)

	var all readPage
	for {
		var page readPage
		if _, err := c.call(cCtx.Context, apiCall{method: http.MethodGet, path: path, query: q, body: nil}, &page); err != nil {
			return err
		}
		all.Events = append(all.Events, page.Events...)
		all.Stream, all.NextRevision, all.HeadRevision, all.EndOfStream = page.Stream, page.NextRevision, page.HeadRevision, page.EndOfStream
		all.NextPosition, all.HeadPosition, all.FirstPos, all.Truncated = page.NextPosition, page.HeadPosition, page.FirstPos, page.Truncated
		if !cCtx.Bool("all") {
			break
		}
		if stream != "" {
			if page.EndOfStream == nil || *page.EndOfStream || len(page.Events) == 0 {
				break
			}
			q.Set("from_revision", strconv.FormatInt(*page.NextRevision, 10))
		} else {
			if page.NextPosition == nil || page.HeadPosition == nil || *page.NextPosition >= *page.HeadPosition {
				break
			}
			q.Set("from", strconv.FormatInt(*page.NextPosition, 10))
			q.Del("wait_ms")
		}
	}
	if format == "json" {
		return printJSON(cCtx.App.Writer, all)
	}
	tw := newTable(cCtx.App.Writer)
	fmt.Fprintln(tw, "POSITION\tREVISION\tSTREAM\tTYPE\tTIME\tDATA")
	for i := range all.Events {
		fmt.Fprintln(tw, eventRow(&all.Events[i]))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	w := stderrOf(cCtx)
	switch {
	case stream != "" && all.NextRevision != nil && all.HeadRevision != nil:
		fmt.Fprintf(w, "%d event(s); head revision %d; next revision %d\n", len(all.Events), *all.HeadRevision, *all.NextRevision)
	case all.NextPosition != nil && all.HeadPosition != nil:
		fmt.Fprintf(w, "%d event(s); next position %d of %d\n", len(all.Events), *all.NextPosition, *all.HeadPosition)
	}
	return nil
}

// eventRow is one table row: position, revision, stream, type, time, data.
func eventRow(e *cliEvent) string {
	rev := "-"
	if e.Revision != nil {
		rev = strconv.FormatInt(*e.Revision, 10)
	}
	data := string(e.Data)
	if e.DataBase64 != nil {
		data = "base64:" + *e.DataBase64
	}
	data = strings.Join(strings.Fields(data), " ")
	if utf8.RuneCountInString(data) > 60 {
		data = string([]rune(data)[:59]) + "…"
	}
	return fmt.Sprintf("%d\t%s\t%s\t%s\t%s\t%s", e.Position, rev, e.Stream, e.Type, e.Timestamp, data)
}

func eventsTailCommand() *cli.Command {
	return &cli.Command{
		Name:      "tail",
		Usage:     "follow a store's new events (Server-Sent Events) until interrupted",
		ArgsUsage: "STORE",
		Description: "Prints each event as it is appended. --from (default new) is first, last, new, a\n" +
			"position, time:RFC3339 or delta:DURATION. A dropped connection is resumed after the\n" +
			"last event printed, so none is missed or repeated. -o json prints one event per line.\n" +
			clientExitCodes,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "from", Aliases: []string{"f"}, Usage: "where to start", Value: "new"},
			&cli.StringFlag{Name: "stream", Usage: "only this stream"},
			&cli.StringFlag{Name: "stream-prefix", Usage: "only streams with this prefix"},
			&cli.IntFlag{Name: "count", Aliases: []string{"n"}, Usage: "exit after this many events (0: never)"},
			&cli.StringFlag{Name: "consumer", Usage: "start at this durable consumer's checkpoint (unless --from); the tail does not move it"},
		}, clientFlags()...),
		Action: eventsTail,
	}
}

func eventsTail(cCtx *cli.Context) error {
	if cCtx.NArg() != 1 {
		return usageErrorf("events tail takes STORE, got %d arguments; flags go before it", cCtx.NArg())
	}
	store := cCtx.Args().First()
	format, err := outputFormat(cCtx)
	if err != nil {
		return err
	}
	if cCtx.Int("count") < 0 {
		return usageErrorf("--count must not be negative")
	}
	c, err := newAPIClient(cCtx)
	if err != nil {
		return err
	}
	q := url.Values{"from": {cCtx.String("from")}}
	if consumer := cCtx.String("consumer"); consumer != "" {
		q.Set("consumer", consumer)
		if !cCtx.IsSet("from") {
			q.Del("from")
		}
	}
	if s := cCtx.String("stream"); s != "" {
		q.Set("stream", s)
	}
	if p := cCtx.String("stream-prefix"); p != "" {
		q.Set("stream_prefix", p)
	}
	out := cCtx.App.Writer
	tw := newTable(out)
	if format == "table" {
		fmt.Fprintln(tw, "POSITION\tREVISION\tSTREAM\tTYPE\tTIME\tDATA")
		_ = tw.Flush()
	}
	printed := 0
	lastID := int64(-1)
	header := http.Header{"Accept": {"text/event-stream"}}
	ctx := cCtx.Context
	var failedSince time.Time
	for {
		if lastID >= 0 {
			header.Set("Last-Event-ID", strconv.FormatInt(lastID, 10))
		}
		err := func() error {
			resp, cancel, err := c.request(ctx, apiCall{method: http.MethodGet, path: eventPath(store, "") + "/events", query: q, body: nil}, header)
			if err != nil {
				return err
			}
			defer cancel()
			defer resp.Body.Close()
			failedSince = time.Time{}
			return readSSE(resp.Body, func(id, _ string, data []byte) error {
				var ev cliEvent
				if err := json.Unmarshal(data, &ev); err != nil {
					return fmt.Errorf("cannot decode an event: %w", err)
				}
				if format == "json" {
					fmt.Fprintf(out, "%s\n", data)
				} else {
					fmt.Fprintln(tw, eventRow(&ev))
					_ = tw.Flush()
				}
				if n, err := strconv.ParseInt(id, 10, 64); err == nil {
					lastID = n
				}
				printed++
				if n := cCtx.Int("count"); n > 0 && printed >= n {
					return errTailDone
				}
				return nil
			})
		}()
		switch {
		case errors.Is(err, errTailDone):
			return nil
		case ctx.Err() != nil:
			return nil
		}
		var ee *exitError
		if errors.As(err, &ee) && ee.code != exitUnavailable {
			return err // a 4xx: retrying will not help
		}
		// The broker went away (restart, network): resume after the last
		// event, giving up after a minute of failures.
		if failedSince.IsZero() {
			failedSince = time.Now()
		} else if time.Since(failedSince) > time.Minute {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

var errTailDone = errors.New("tail: enough events")

// readSSE parses a text/event-stream body, calling fn for each message
// with its id, event name and data. An "error" event ends the stream with
// the API error it carries.
func readSSE(r io.Reader, fn func(id, event string, data []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 80<<20)
	var id, event string
	var data []byte
	hasData := false
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if hasData {
				if event == "error" {
					e := &apiError{Status: http.StatusInternalServerError}
					_ = json.Unmarshal(data, e)
					if e.Code == "store_not_found" {
						e.Status = http.StatusNotFound
					}
					return &exitError{code: e.ExitCode(), err: e}
				}
				if err := fn(id, event, data); err != nil {
					return err
				}
			}
			event, data, hasData = "", data[:0], false
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			id = value
		case "event":
			event = value
		case "data":
			if hasData {
				data = append(data, '\n')
			}
			data = append(data, value...)
			hasData = true
		}
	}
	if err := sc.Err(); err != nil {
		return &exitError{code: exitUnavailable, err: fmt.Errorf("the event stream broke: %w", err)}
	}
	return &exitError{code: exitUnavailable, err: errors.New("the broker closed the event stream")}
}

// longPollTimeout is the client timeout of a request that may wait up to
// wait on the server: at least wait plus 5 s, and 0 (no timeout) stays 0.
func longPollTimeout(wait, timeout time.Duration) time.Duration {
	if wait > 0 && timeout > 0 && wait+5*time.Second > timeout {
		return wait + 5*time.Second
	}
	return timeout
}

func eventsDeleteCommand() *cli.Command {
	return &cli.Command{
		Name:      "delete",
		Usage:     "delete a stream (soft: it can start again; --hard: for good)",
		ArgsUsage: "STORE STREAM",
		Description: "A soft delete hides the stream's events from stream reads; appending with --expected\n" +
			"no_stream or any starts it again, its revisions continuing. --hard tombstones it: no\n" +
			"more appends. The events stay in the store's log either way (store reads and Kafka\n" +
			"consumers see them). --expected makes the delete conditional: any (default), exists,\n" +
			"or the stream's last revision; a mismatch exits 4 and deletes nothing.\n" + clientExitCodes,
		Flags: append([]cli.Flag{
			&cli.BoolFlag{Name: "hard", Usage: "tombstone the stream: it takes no more events, ever"},
			&cli.StringFlag{Name: "expected", Aliases: []string{"e"}, Usage: "expected revision: any, exists or N", Value: "any"},
		}, clientFlags()...),
		Action: eventsDelete,
	}
}

// cliStreamInfo is a stream's description as the API returns it.
type cliStreamInfo struct {
	Stream            string `json:"stream"`
	State             string `json:"state"`
	HeadRevision      int64  `json:"head_revision"`
	FirstRevision     int64  `json:"first_revision"`
	DeletedAtRevision *int64 `json:"deleted_at_revision,omitempty"`
	HeadPosition      *int64 `json:"head_position,omitempty"`
	LastEventAt       string `json:"last_event_at,omitempty"`
}

func eventsDelete(cCtx *cli.Context) error {
	if cCtx.NArg() != 2 {
		return usageErrorf("events delete takes STORE and STREAM, got %d arguments; flags go before them", cCtx.NArg())
	}
	store, stream := cCtx.Args().Get(0), cCtx.Args().Get(1)
	format, err := outputFormat(cCtx)
	if err != nil {
		return err
	}
	expected := cCtx.String("expected")
	switch expected {
	case "any", "exists":
	default:
		if n, err := strconv.ParseInt(expected, 10, 64); err != nil || n < 0 {
			return usageErrorf("--expected %q is not any, exists or a revision number", expected)
		}
	}
	c, err := newAPIClient(cCtx)
	if err != nil {
		return err
	}
	q := url.Values{}
	if expected != "any" {
		q.Set("expected_revision", expected)
	}
	if cCtx.Bool("hard") {
		q.Set("hard", "true")
	}
	var info cliStreamInfo
	if _, err := c.call(cCtx.Context, apiCall{method: http.MethodDelete, path: eventPath(store, stream), query: q, body: nil}, &info); err != nil {
		return err
	}
	out := cCtx.App.Writer
	if format == "json" {
		return printJSON(out, info)
	}
	at := info.HeadRevision
	if info.DeletedAtRevision != nil {
		at = *info.DeletedAtRevision
	}
	if info.State == "tombstoned" {
		_, err = fmt.Fprintf(out, "stream %s/%s tombstoned at revision %d: it takes no more events\n", store, stream, at)
		return err
	}
	_, err = fmt.Fprintf(out, "stream %s/%s deleted at revision %d; an append with --expected no_stream or any starts it again at revision %d\n",
		store, stream, at, info.HeadRevision+1)
	return err
}
