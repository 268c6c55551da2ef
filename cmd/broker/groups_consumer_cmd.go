package main

// Consumer groups of the KIP-848 protocol in `broker groups`: DescribeGroups
// answers them as Dead (as Apache Kafka 4 does), so describe, lag and
// reset-offsets ask ConsumerGroupDescribe for the groups DescribeGroups did
// not know.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/urfave/cli/v2"
)

// describeConsumerGroups describes names with ConsumerGroupDescribe and
// returns the consumer groups among them. A broker without the API, or a
// group it does not know, gives nothing.
func describeConsumerGroups(ctx context.Context, adm *kadm.Client, names []string) map[string]kadm.DescribedConsumerGroup {
	out := map[string]kadm.DescribedConsumerGroup{}
	if len(names) == 0 {
		return out
	}
	described, _ := adm.DescribeConsumerGroups(ctx, names...) // partial answers are kept
	for name, d := range described {
		if d.Err == nil && d.State != "" && d.State != "Dead" {
			out[name] = d
		}
	}
	return out
}

// consumerGroupDescribed is a consumer group in `groups describe` form:
// protocol type "consumer", the assignor as the protocol.
func consumerGroupDescribed(d kadm.DescribedConsumerGroup) describedGroup {
	g := describedGroup{Group: d.Group, State: d.State, ProtocolType: "consumer", Protocol: d.AssignorName, Members: []describedMember{}}
	for _, m := range d.Members {
		dm := describedMember{MemberID: m.MemberID, InstanceID: m.InstanceID, ClientID: m.ClientID, ClientHost: m.ClientHost, Assigned: map[string][]int{}}
		m.Assignment.Each(func(t string, p int32) { dm.Assigned[t] = append(dm.Assigned[t], int(p)) })
		for t := range dm.Assigned {
			slices.Sort(dm.Assigned[t])
		}
		g.Members = append(g.Members, dm)
	}
	return g
}

// consumerGroupLag is the lag of a consumer group: every partition that is
// assigned or has a committed offset, with its committed offset (-1 when
// none), end offset, lag (from the start offset when nothing is
// committed) and the member it is assigned to.
func consumerGroupLag(ctx context.Context, adm *kadm.Client, d kadm.DescribedConsumerGroup) ([]lagRow, error) {
	committed, err := adm.FetchOffsets(ctx, d.Group)
	if err != nil {
		return nil, err
	}
	owner := map[string]map[int32]kadm.ConsumerGroupMember{}
	parts := kadm.TopicsSet{}
	for _, m := range d.Members {
		m.Assignment.Each(func(t string, p int32) {
			if owner[t] == nil {
				owner[t] = map[int32]kadm.ConsumerGroupMember{}
			}
			owner[t][p] = m
			parts.Add(t, p)
		})
	}
	committed.Each(func(o kadm.OffsetResponse) { parts.Add(o.Topic, o.Partition) })
	topics := parts.Topics()
	var starts, ends kadm.ListedOffsets
	if len(topics) > 0 {
		if starts, err = adm.ListStartOffsets(ctx, topics...); err != nil {
			return nil, err
		}
		if ends, err = adm.ListEndOffsets(ctx, topics...); err != nil {
			return nil, err
		}
	}
	var rows []lagRow
	parts.Each(func(t string, p int32) {
		r := lagRow{Group: d.Group, Topic: t, Partition: p, Committed: -1}
		from := int64(0)
		if s, ok := starts.Lookup(t, p); ok && s.Err == nil {
			from = s.Offset
		}
		if c, ok := committed.Lookup(t, p); ok && c.Err == nil && c.At >= 0 {
			r.Committed, from = c.At, c.At
		}
		if e, ok := ends.Lookup(t, p); ok && e.Err == nil {
			r.End = e.Offset
			r.Lag = max(r.End-from, 0)
		} else if ok && e.Err != nil {
			r.Error = e.Err.Error()
		}
		if m, ok := owner[t][p]; ok {
			r.MemberID, r.ClientID = m.MemberID, m.ClientID
		}
		rows = append(rows, r)
	})
	slices.SortFunc(rows, func(a, b lagRow) int {
		if c := cmp.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return cmp.Compare(a.Partition, b.Partition)
	})
	return rows, nil
}

// describeShareGroups describes, through ShareGroupDescribe, the named
// groups that are share groups (KIP-932); others are left out.
func describeShareGroups(ctx context.Context, adm *kadm.Client, names []string) map[string]kadm.DescribedShareGroup {
	out := map[string]kadm.DescribedShareGroup{}
	if len(names) == 0 {
		return out
	}
	described, _ := adm.DescribeShareGroups(ctx, names...) // partial answers are kept
	for name, d := range described {
		if d.Err == nil && d.GroupState != "" && d.GroupState != "Dead" {
			out[name] = d
		}
	}
	return out
}

// shareGroupDescribed is a share group in `groups describe` form:
// protocol type "share", the assignor as the protocol; every member is
// assigned every partition of its topics.
func shareGroupDescribed(d kadm.DescribedShareGroup) describedGroup {
	g := describedGroup{Group: d.GroupID, State: d.GroupState, ProtocolType: "share", Protocol: d.Assignor, Members: []describedMember{}}
	for _, m := range d.Members {
		dm := describedMember{MemberID: m.MemberID, ClientID: m.ClientID, ClientHost: m.ClientHost, Assigned: map[string][]int{}}
		m.Assignment.Each(func(t string, p int32) { dm.Assigned[t] = append(dm.Assigned[t], int(p)) })
		for t := range dm.Assigned {
			slices.Sort(dm.Assigned[t])
		}
		g.Members = append(g.Members, dm)
	}
	return g
}

// shareGroupLag is the lag of a share group (DescribeShareGroupOffsets,
// KIP-1226): per partition it has read, the share-partition start offset
// (as "committed"), the end offset, and the records from the start offset
// to the end not yet acknowledged or archived. Every member reads every
// partition, so no member is named.
func shareGroupLag(ctx context.Context, adm *kadm.Client, group string) ([]lagRow, error) {
	described, err := adm.DescribeShareGroupOffsets(ctx, group)
	if err != nil {
		return nil, err
	}
	d, ok := described[group]
	if !ok {
		return nil, errors.New("no answer")
	}
	if d.Err != nil {
		return nil, d.Err
	}
	offsets := d.Offsets.Sorted()
	var topics []string
	for _, o := range offsets {
		if !slices.Contains(topics, o.Topic) {
			topics = append(topics, o.Topic)
		}
	}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return nil, err
	}
	rows := []lagRow{}
	for _, o := range offsets {
		r := lagRow{Group: group, Topic: o.Topic, Partition: o.Partition, Committed: o.StartOffset, End: -1, Lag: o.Lag}
		if e, ok := ends.Lookup(o.Topic, o.Partition); ok && e.Err == nil {
			r.End = e.Offset
		}
		if o.Err != nil {
			r.Error = o.Err.Error()
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// sharePartitionRow is one partition of a share group in `groups
// describe`: its start offset and lag (DescribeShareGroupOffsets) and its
// in-flight count, the records members hold now, which no Kafka API
// carries: read from the broker's HTTP admin route, nil (JSON null, "-"
// in the table) without --server or when that fails.
type sharePartitionRow struct {
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	StartOffset int64  `json:"start_offset"`
	InFlight    *int64 `json:"in_flight"`
	Lag         int64  `json:"lag"`
	Error       string `json:"error,omitempty"`
}

// shareInFlightFlags are `groups describe`'s flags for the HTTP listener
// that answers share groups' in-flight counts: --server without a
// default (an HTTP listener is only asked when named, never guessed from
// --bootstrap-server) and the client commands' credentials.
func shareInFlightFlags() []cli.Flag {
	out := []cli.Flag{&cli.StringFlag{Name: serverFlag, EnvVars: []string{"BROKER_HTTP_ADDR"},
		Usage: "URL (or host:port) of the broker's HTTP listener, for share groups' in-flight counts (without it: -)"}}
	for _, f := range clientFlags() {
		if n := f.Names()[0]; n == userFlag || n == passwordFileFlag || n == tokenFileFlag {
			out = append(out, f)
		}
	}
	return out
}

// shareGroupPartitions lists a share group's partitions for `groups
// describe`: start offsets and lag over the Kafka protocol, in-flight
// counts from the HTTP listener when --server names one. A failure of
// either is a warning on stderr: the members are still described.
func shareGroupPartitions(ctx context.Context, cCtx *cli.Context, adm *kadm.Client, group string) []sharePartitionRow {
	lags, err := shareGroupLag(ctx, adm, group)
	if err != nil {
		fmt.Fprintf(stderrOf(cCtx), "warning: share group %s: no partitions (DescribeShareGroupOffsets: %v)\n", group, err)
		return nil
	}
	rows := make([]sharePartitionRow, 0, len(lags))
	for _, l := range lags {
		rows = append(rows, sharePartitionRow{Topic: l.Topic, Partition: l.Partition, StartOffset: l.Committed, Lag: l.Lag, Error: l.Error})
	}
	if cCtx.String(serverFlag) == "" {
		return rows
	}
	inFlight, err := shareInFlight(ctx, cCtx, group)
	if err != nil {
		fmt.Fprintf(stderrOf(cCtx), "warning: share group %s: in-flight counts unavailable from %s: %v\n", group, cCtx.String(serverFlag), err)
		return rows
	}
	for i := range rows {
		if n, ok := inFlight[rows[i].Topic+"/"+strconv.Itoa(int(rows[i].Partition))]; ok {
			rows[i].InFlight = &n
		}
	}
	return rows
}

// shareInFlight reads GET /v1/admin/groups/{group}: each share-partition's
// in-flight count by "topic/partition".
func shareInFlight(ctx context.Context, cCtx *cli.Context, group string) (map[string]int64, error) {
	c, err := newAPIClient(cCtx)
	if err != nil {
		return nil, err
	}
	var detail struct {
		ProtocolType    string `json:"protocol_type"`
		SharePartitions []struct {
			Topic     string `json:"topic"`
			Partition int32  `json:"partition"`
			InFlight  int64  `json:"in_flight"`
		} `json:"share_partitions"`
	}
	if _, err := c.call(ctx, apiCall{method: http.MethodGet, path: "/v1/admin/groups/" + url.PathEscape(group)}, &detail); err != nil {
		return nil, err
	}
	if detail.ProtocolType != "share" {
		return nil, fmt.Errorf("the HTTP listener describes %s as a %q group, not a share group: is it the same broker as --bootstrap-server?", group, detail.ProtocolType)
	}
	out := map[string]int64{}
	for _, p := range detail.SharePartitions {
		out[p.Topic+"/"+strconv.Itoa(int(p.Partition))] = p.InFlight
	}
	return out, nil
}

// printSharePartitions prints a share group's partitions under its
// members (nothing for other groups).
func printSharePartitions(w io.Writer, rows []sharePartitionRow) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w, "TOPIC\tPARTITION\tSTART-OFFSET\tIN-FLIGHT\tLAG")
	for _, r := range rows {
		inFlight := "-"
		if r.InFlight != nil {
			inFlight = strconv.FormatInt(*r.InFlight, 10)
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%s\t%d\n", r.Topic, r.Partition, r.StartOffset, inFlight, r.Lag)
	}
}
