package httpapi

import (
	"maps"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
	"github.com/vibemq/broker/groups"
	"github.com/vibemq/broker/topics"
)

// GroupSummary is one group of GET /v1/admin/groups.
type GroupSummary struct {
	Group        string `json:"group"`
	State        string `json:"state"`
	ProtocolType string `json:"protocol_type"`
	Members      int    `json:"members"`
	// Lag sums the lag of the group's committed partitions.
	Lag int64 `json:"lag"`
}

// GroupMember is one member of a group and the partitions assigned to it
// (decoded when the group uses the consumer protocol and is Stable).
type GroupMember struct {
	MemberID   string           `json:"member_id"`
	InstanceID *string          `json:"instance_id,omitempty"`
	ClientID   string           `json:"client_id"`
	ClientHost string           `json:"client_host"`
	Assignment []AssignedTopics `json:"assignment"`
}

// AssignedTopics is one topic of a member's assignment.
type AssignedTopics struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

// GroupOffset is one committed partition of a group, with its lag.
type GroupOffset struct {
	Topic          string `json:"topic"`
	Partition      int32  `json:"partition"`
	Committed      int64  `json:"committed"`
	LogStartOffset int64  `json:"log_start_offset"`
	HighWatermark  int64  `json:"high_watermark"`
	Lag            int64  `json:"lag"`
	MemberID       string `json:"member_id,omitempty"`
}

// GroupDetail is GET /v1/admin/groups/{group}.
type GroupDetail struct {
	Group        string        `json:"group"`
	State        string        `json:"state"`
	ProtocolType string        `json:"protocol_type"`
	Protocol     string        `json:"protocol"`
	Members      []GroupMember `json:"members"`
	Offsets      []GroupOffset `json:"offsets"`
	Lag          int64         `json:"lag"`
	// SharePartitions is a share group's delivery state per partition it
	// has read (KIP-932); absent for other groups.
	SharePartitions []SharePartitionDetail `json:"share_partitions,omitempty"`
}

// SharePartitionDetail is one share-partition of GET
// /v1/admin/groups/{group}: its start offset, the records acquired by
// members now (in_flight), those waiting for delivery in the in-flight
// window (available), and the lag (offsets from the start offset to the
// high watermark not yet acknowledged or archived, as
// DescribeShareGroupOffsets answers it). No Kafka API carries in_flight.
type SharePartitionDetail struct {
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	StartOffset int64  `json:"start_offset"`
	InFlight    int64  `json:"in_flight"`
	Available   int64  `json:"available"`
	Lag         int64  `json:"lag"`
}

// groupLags sums each group's lag over its committed partitions: the high
// watermark minus the committed offset (Kafka's consumer-groups tool).
func (api *adminAPI) groupLags() map[string]int64 {
	lags := map[string]int64{}
	for _, g := range api.cfg.Groups.Offsets() {
		var sum int64
		for _, o := range g.Offsets {
			if _, _, lag, ok := api.partitionLag(o.Topic, o.Partition, o.Offset); ok {
				sum += lag
			}
		}
		lags[g.Group] = sum
	}
	return lags
}

// partitionLag is the log start, high watermark and lag of a committed
// offset; ok is false for a partition that no longer exists.
func (api *adminAPI) partitionLag(topic string, partition int32, committed int64) (start, hwm, lag int64, ok bool) {
	t, found := api.cfg.Topics.Topic(topic)
	if !found {
		return 0, 0, 0, false
	}
	p, found := t.Partition(partition)
	if !found {
		return 0, 0, 0, false
	}
	start, hwm = p.LogStartOffset(), p.HighWatermark()
	if committed < 0 {
		return start, hwm, hwm - start, true
	}
	return start, hwm, max(hwm-committed, 0), true
}

func (api *adminAPI) listGroups(r adminRequest) (int, any, error) {
	after, prefix, limit, err := pageParams(r)
	if err != nil {
		return 0, nil, err
	}
	listed := api.cfg.Groups.ListGroups(nil, nil)
	sort.Slice(listed, func(i, j int) bool { return listed[i].Group < listed[j].Group })
	lags := api.groupLags()
	out := struct {
		Groups []GroupSummary `json:"groups"`
		Next   string         `json:"next,omitempty"`
	}{Groups: []GroupSummary{}}
	var page []string
	for _, g := range listed {
		if g.Group <= after || !strings.HasPrefix(g.Group, prefix) || !visible(r.Request, g.Group) {
			continue
		}
		if len(out.Groups) == limit {
			out.Next = out.Groups[limit-1].Group
			break
		}
		out.Groups = append(out.Groups, GroupSummary{Group: g.Group, State: g.State, ProtocolType: g.ProtocolType, Lag: lags[g.Group]})
		page = append(page, g.Group)
	}
	for i, d := range api.cfg.Groups.DescribeGroups(page) {
		out.Groups[i].Members = len(d.Members)
	}
	return http.StatusOK, out, nil
}

// decodeAssignment decodes a consumer-protocol member assignment (KIP-429
// ConsumerProtocolAssignment); nil for another protocol or bad bytes.
func decodeAssignment(protocolType string, b []byte) []AssignedTopics {
	out := []AssignedTopics{}
	if protocolType != "consumer" || len(b) == 0 {
		return out
	}
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(b); err != nil {
		return out
	}
	for _, t := range a.Topics {
		ps := append([]int32(nil), t.Partitions...)
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		out = append(out, AssignedTopics{Topic: t.Topic, Partitions: ps})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Topic < out[j].Topic })
	return out
}

func (api *adminAPI) describeGroup(r adminRequest) (int, any, error) {
	name := r.PathValue("group")
	if v, ok := api.cfg.Groups.DescribeShareGroup(name); ok {
		return http.StatusOK, api.shareGroupDetail(r.Request, v), nil
	}
	d := api.cfg.Groups.DescribeGroups([]string{name})[0]
	if d.Err != nil {
		return 0, nil, d.Err
	}
	fetched := api.cfg.Groups.FetchOffsets(groups.FetchOffsetsRequest{Group: name})
	if d.State == "Dead" && len(fetched.Topics) == 0 {
		return 0, nil, adminErrorf("group_not_found", "", "consumer group %q does not exist; list the groups with GET /v1/admin/groups", name)
	}
	out := GroupDetail{Group: name, State: d.State, ProtocolType: d.ProtocolType, Protocol: d.Protocol, Members: []GroupMember{}, Offsets: []GroupOffset{}}
	owner := map[[2]any]string{}
	for _, m := range d.Members {
		gm := GroupMember{MemberID: m.MemberID, InstanceID: m.InstanceID, ClientID: m.ClientID, ClientHost: m.ClientHost, Assignment: decodeAssignment(d.ProtocolType, m.Assignment)}
		for _, a := range gm.Assignment {
			for _, p := range a.Partitions {
				owner[[2]any{a.Topic, p}] = m.MemberID
			}
		}
		out.Members = append(out.Members, gm)
	}
	for _, t := range fetched.Topics {
		if !topicDescribable(r.Request, t.Topic) {
			continue
		}
		for _, p := range t.Partitions {
			if p.Err != nil || p.Offset < 0 {
				continue
			}
			start, hwm, lag, ok := api.partitionLag(t.Topic, p.Partition, p.Offset)
			if !ok {
				continue
			}
			out.Offsets = append(out.Offsets, GroupOffset{Topic: t.Topic, Partition: p.Partition, Committed: p.Offset, LogStartOffset: start, HighWatermark: hwm, Lag: lag, MemberID: owner[[2]any{t.Topic, p.Partition}]})
			out.Lag += lag
		}
	}
	sort.Slice(out.Offsets, func(i, j int) bool {
		a, b := out.Offsets[i], out.Offsets[j]
		return a.Topic < b.Topic || (a.Topic == b.Topic && a.Partition < b.Partition)
	})
	return http.StatusOK, out, nil
}

// topicDescribable reports whether a group's offsets (or share-partitions)
// of topic may be shown: DESCRIBE on the topic, as Kafka's OffsetFetch
// and DescribeShareGroupOffsets leave out (all-topics form) or refuse
// per partition (TOPIC_AUTHORIZATION_FAILED) the topics the principal may
// not describe. True without an authorizer.
func topicDescribable(r *http.Request, topic string) bool {
	return authorizeAlso(r, auth.ResourceTopic, topic, auth.OpDescribe) == nil
}

// ResetOffsetsRequest is the body of POST
// /v1/admin/groups/{group}/reset-offsets, with the parameters of `broker
// groups reset-offsets`: topics (TOPIC or TOPIC:P,P,...) or all_topics,
// exactly one target, and execute (without it, a dry run).
type ResetOffsetsRequest struct {
	Topics     []string `json:"topics"`
	AllTopics  bool     `json:"all_topics"`
	ToEarliest bool     `json:"to_earliest"`
	ToLatest   bool     `json:"to_latest"`
	ToDatetime string   `json:"to_datetime"`
	ToOffset   *int64   `json:"to_offset"`
	Execute    bool     `json:"execute"`
}

// ResetOffset is one partition of a reset: the committed offset (-1: none)
// and the new one.
type ResetOffset struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Current   int64  `json:"current"`
	New       int64  `json:"new"`
}

func (api *adminAPI) resetOffsets(r adminRequest) (int, any, error) {
	name := r.PathValue("group")
	var req ResetOffsetsRequest
	if err := r.decode(&req); err != nil {
		return 0, nil, err
	}
	wanted, at, err := req.parse()
	if err != nil {
		return 0, nil, err
	}
	d := api.cfg.Groups.DescribeGroups([]string{name})[0]
	if d.Err != nil {
		return 0, nil, d.Err
	}
	if d.State != "Empty" && d.State != "Dead" {
		return 0, nil, adminErrorf("group_not_empty", "", "group %s is %s with %d members; stop its consumers first (offsets can only be reset while the group is empty)", name, d.State, len(d.Members))
	}
	current := map[[2]any]int64{}
	for _, t := range api.cfg.Groups.FetchOffsets(groups.FetchOffsetsRequest{Group: name}).Topics {
		for _, p := range t.Partitions {
			if p.Err == nil && p.Offset >= 0 {
				current[[2]any{t.Topic, p.Partition}] = p.Offset
				if req.AllTopics {
					wanted[t.Topic] = nil
				}
			}
		}
	}
	if req.AllTopics && len(wanted) == 0 {
		return 0, nil, adminErrorf("group_not_found", "", "group %s has no committed offsets; name topics", name)
	}
	// As Kafka's OffsetCommit: READ on the group (routeAccess) and on
	// every topic whose offsets change.
	for _, topic := range slices.Sorted(maps.Keys(wanted)) {
		if err := authorizeAlso(r.Request, auth.ResourceTopic, topic, auth.OpRead); err != nil {
			return 0, nil, err
		}
	}
	rows, commit, err := api.planReset(&req, wanted, at, current)
	if err != nil {
		return 0, nil, err
	}
	if req.Execute {
		if err := api.commitReset(r, name, commit); err != nil {
			return 0, nil, err
		}
	}
	return http.StatusOK, map[string]any{"group": name, "executed": req.Execute, "offsets": rows}, nil
}

// parse checks a reset request and returns the partitions it names by
// topic (nil: every partition) and the time of to_datetime.
func (req *ResetOffsetsRequest) parse() (map[string][]int32, time.Time, error) {
	var at time.Time
	targets := 0
	for _, set := range []bool{req.ToEarliest, req.ToLatest, req.ToDatetime != "", req.ToOffset != nil} {
		if set {
			targets++
		}
	}
	if targets != 1 {
		return nil, at, adminErrorf("conflicting_fields", "to_earliest", "give exactly one of to_earliest, to_latest, to_datetime, to_offset")
	}
	if req.ToDatetime != "" {
		var err error
		if at, err = time.Parse(time.RFC3339, req.ToDatetime); err != nil {
			return nil, at, adminErrorf("invalid_body", "to_datetime", "to_datetime %q is not an RFC 3339 time such as 2026-01-02T15:04:05Z", req.ToDatetime)
		}
	}
	if req.ToOffset != nil && *req.ToOffset < 0 {
		return nil, at, adminErrorf("out_of_range", "to_offset", "to_offset must not be negative")
	}
	if (len(req.Topics) == 0) == !req.AllTopics {
		return nil, at, adminErrorf("conflicting_fields", "topics", "give topics or all_topics (one of them)")
	}
	wanted := map[string][]int32{} // nil: every partition
	for _, tf := range req.Topics {
		topic, parts, hasParts := strings.Cut(tf, ":")
		if topic == "" {
			return nil, at, adminErrorf("invalid_body", "topics", "%q has no topic name", tf)
		}
		if !hasParts {
			wanted[topic] = nil
			continue
		}
		for _, p := range strings.Split(parts, ",") {
			n, err := strconv.ParseInt(strings.TrimSpace(p), 10, 32)
			if err != nil || n < 0 {
				return nil, at, adminErrorf("invalid_body", "topics", "%q: %q is not a partition number", tf, p)
			}
			wanted[topic] = append(wanted[topic], int32(n))
		}
	}
	return wanted, at, nil
}

// planReset computes each wanted partition's new offset: the rows answered
// and the commit that makes them so.
func (api *adminAPI) planReset(req *ResetOffsetsRequest, wanted map[string][]int32, at time.Time, current map[[2]any]int64) ([]ResetOffset, []groups.CommitTopic, error) {
	names := make([]string, 0, len(wanted))
	for t := range wanted {
		names = append(names, t)
	}
	sort.Strings(names)
	rows := []ResetOffset{}
	var commit []groups.CommitTopic
	for _, topic := range names {
		t, ok := api.cfg.Topics.Topic(topic)
		if !ok {
			return nil, nil, adminErrorf("topic_not_found", "topics", "topic %s does not exist; nothing was reset", topic)
		}
		parts := wanted[topic]
		if parts == nil {
			for _, p := range t.Partitions() {
				parts = append(parts, p.Index)
			}
		}
		ct := groups.CommitTopic{Topic: topic}
		for _, pi := range parts {
			p, ok := t.Partition(pi)
			if !ok {
				return nil, nil, adminErrorf("topic_not_found", "topics", "%s/%d: no such partition; nothing was reset", topic, pi)
			}
			cur, has := current[[2]any{topic, pi}]
			if !has {
				cur = -1
			}
			next := resetTarget(req, p, at)
			rows = append(rows, ResetOffset{Topic: topic, Partition: pi, Current: cur, New: next})
			ct.Partitions = append(ct.Partitions, groups.CommitPartition{Partition: pi, Offset: next, LeaderEpoch: -1})
		}
		commit = append(commit, ct)
	}
	return rows, commit, nil
}

// resetTarget is the offset a reset moves partition p to.
func resetTarget(req *ResetOffsetsRequest, p *topics.Partition, at time.Time) int64 {
	start, end := p.LogStartOffset(), p.HighWatermark()
	switch {
	case req.ToEarliest:
		return start
	case req.ToLatest:
		return end
	case req.ToOffset != nil:
		return min(max(*req.ToOffset, start), end)
	}
	if o, _, err := p.OffsetForTimestamp(at.UnixMilli()); err == nil && o >= 0 {
		return o
	}
	return end // no record at or after the time: the end
}

// commitReset commits a reset outside group management (generation -1),
// as an admin client's OffsetCommit; fenced if members joined meanwhile.
func (api *adminAPI) commitReset(r adminRequest, name string, commit []groups.CommitTopic) error {
	res := api.cfg.Groups.Commit(groups.CommitRequest{Group: name, Generation: -1, Topics: commit, Version: 8}, api.cfg.Now()).Wait(r.Context().Done())
	if err := r.Context().Err(); err != nil && res.Topics == nil {
		return adminErrorf("storage_unavailable", "", "the request ended before the commit of group %s was durable; check the offsets with GET /v1/admin/groups/%s", name, name)
	}
	for i := range res.Topics {
		for j, err := range res.Topics[i] {
			if err != nil {
				return adminErrorf(adminDomainError(err).code, "", "committing %s/%d of group %s: %v", commit[i].Topic, commit[i].Partitions[j].Partition, name, err)
			}
		}
	}
	return nil
}

// shareGroupDetail is a share group (KIP-932) in GET
// /v1/admin/groups/{group} form: protocol type "share", the simple
// assignor, members with their assignments, no committed offsets, and
// the delivery state of each share-partition of a topic the request may
// describe; lag sums the partitions shown.
func (api *adminAPI) shareGroupDetail(r *http.Request, v groups.ShareGroupView) GroupDetail {
	out := GroupDetail{Group: v.Group, State: v.State, ProtocolType: "share", Protocol: "simple", Members: []GroupMember{}, Offsets: []GroupOffset{}, SharePartitions: []SharePartitionDetail{}}
	for _, m := range v.Members {
		gm := GroupMember{MemberID: m.MemberID, ClientID: m.ClientID, ClientHost: m.ClientHost, Assignment: []AssignedTopics{}}
		for _, a := range m.Assignment {
			if t, ok := api.cfg.Topics.TopicByID(a.TopicID); ok {
				ps := slices.Clone(a.Partitions)
				slices.Sort(ps)
				gm.Assignment = append(gm.Assignment, AssignedTopics{Topic: t.Name, Partitions: ps})
			}
		}
		sort.Slice(gm.Assignment, func(i, j int) bool { return gm.Assignment[i].Topic < gm.Assignment[j].Topic })
		out.Members = append(out.Members, gm)
	}
	for _, p := range v.Partitions {
		if !topicDescribable(r, p.Topic) {
			continue
		}
		out.SharePartitions = append(out.SharePartitions, SharePartitionDetail{Topic: p.Topic, Partition: p.Partition, StartOffset: p.StartOffset, InFlight: int64(p.Acquired), Available: p.Available, Lag: p.Lag})
		out.Lag += p.Lag
	}
	return out
}
