package groups

// Administrative calls: ListGroups, DescribeGroups, DeleteGroups, and the
// views the CLI and metrics use.

import (
	"cmp"
	"slices"
	"strings"
	"time"
)

// ListGroups lists the groups whose state is one of states (any when
// empty; case-insensitive, as Kafka compares) and whose type is one of
// types (any when empty; "classic" or "consumer", case-insensitive).
// Consumer groups (KIP-848) are listed with protocol type "consumer" and
// their own states (Empty, Assigning, Reconciling, Stable), as Kafka 4.
func (c *Coordinator) ListGroups(states, types []string) []GroupListing {
	wantState := map[string]bool{}
	for _, s := range states {
		wantState[strings.ToLower(strings.TrimSpace(s))] = true
	}
	wantType := map[string]bool{}
	for _, t := range types {
		wantType[strings.ToLower(strings.TrimSpace(t))] = true
	}
	all := c.shareListings()
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]GroupListing, 0, len(c.mu.groups)+len(all))
	for _, l := range all {
		if (len(wantState) == 0 || wantState[strings.ToLower(l.State)]) && (len(wantType) == 0 || wantType[l.Type]) {
			out = append(out, l)
		}
	}
	for _, g := range c.mu.groups {
		l := GroupListing{Group: g.name, State: g.state.String(), Type: "classic"}
		if g.protocolType != nil {
			l.ProtocolType = *g.protocolType
		}
		if g.cg != nil {
			l = GroupListing{Group: g.name, State: g.cg.state(), Type: "consumer", ProtocolType: "consumer"}
		}
		if len(wantState) > 0 && !wantState[strings.ToLower(l.State)] {
			continue
		}
		if len(wantType) > 0 && !wantType[l.Type] {
			continue
		}
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b GroupListing) int { return cmp.Compare(a.Group, b.Group) })
	return out
}

// DescribeGroups describes each named group; an unknown one, and a
// consumer group (KIP-848), is Dead without error, as Kafka 4 answers
// DescribeGroups before v6.
func (c *Coordinator) DescribeGroups(names []string) []GroupDescription {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]GroupDescription, 0, len(names))
	for _, name := range names {
		g := c.mu.groups[name]
		if g == nil {
			out = append(out, GroupDescription{Group: name, State: StateDead.String(), NotClassic: true})
			continue
		}
		if g.cg != nil {
			// Kafka 4 describes a consumer group (KIP-848) to DescribeGroups
			// v0-v5 as it does a missing one: Dead, no error.
			// ConsumerGroupDescribe describes it.
			out = append(out, GroupDescription{Group: name, State: StateDead.String(), NotClassic: true})
			continue
		}
		d := GroupDescription{Group: name, State: g.state.String()}
		if g.protocolType != nil {
			d.ProtocolType = *g.protocolType
		}
		stable := g.is(StateStable) && g.protocolName != nil
		if stable {
			d.Protocol = *g.protocolName
		}
		for _, m := range g.orderedMembers() {
			md := MemberDescription{MemberID: m.id, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.clientHost}
			if stable {
				md.Metadata = nonNil(m.metadata(*g.protocolName))
				md.Assignment = nonNil(m.assignment)
			}
			d.Members = append(d.Members, md)
		}
		out = append(out, d)
	}
	return out
}

// DeleteGroups deletes each named group that is Empty: its offsets and
// metadata get tombstones in __consumer_offsets. The result has one error
// per name: ErrGroupIDNotFound, ErrNonEmptyGroup, or a storage error.
func (c *Coordinator) DeleteGroups(names []string, now time.Time) *Future[[]error] {
	var deleted []int
	failed := func(r []error, err error) []error {
		for _, i := range deleted {
			r[i] = err
		}
		return r
	}
	f := newFuture(failed)
	res := make([]error, len(names))
	share := c.deleteShareGroups(names, res)
	o := &op{now: now}
	c.mu.Lock()
	for i, name := range names {
		if share[i] {
			continue
		}
		g := c.mu.groups[name]
		switch {
		case g == nil || g.is(StateDead):
			res[i] = ErrGroupIDNotFound
		case !g.is(StateEmpty):
			res[i] = ErrNonEmptyGroup
		default:
			for id := range g.pending {
				g.remove(id)
			}
			if err := c.deleteGroupLocked(o, g); err != nil {
				res[i] = err
				continue
			}
			c.log.Info().Str("group", name).Msg("group deleted")
			deleted = append(deleted, i)
		}
	}
	c.mu.Unlock()
	f.persists = o.persists
	f.ch <- res
	return f
}

// GroupOffsets is a group's committed offsets, for lag views.
type GroupOffsets struct {
	Group   string
	State   string
	Offsets []CommittedOffset
}

// CommittedOffset is one durable committed offset.
type CommittedOffset struct {
	Topic     string
	Partition int32
	Offset    int64
}

// Offsets returns every group's committed offsets to topics that exist,
// sorted by group, topic and partition.
func (c *Coordinator) Offsets() []GroupOffsets {
	ids := map[string][16]byte{}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]GroupOffsets, 0, len(c.mu.groups))
	for _, g := range c.mu.groups {
		gos := GroupOffsets{Group: g.name, State: g.state.String()}
		if g.cg != nil {
			gos.State = g.cg.state()
		}
		for _, tp := range sortedOffsets(g) {
			e := g.offsets[tp]
			if id, ok := c.currentTopicID(tp.topic, ids); !ok || id != e.topicID {
				continue
			}
			gos.Offsets = append(gos.Offsets, CommittedOffset{Topic: tp.topic, Partition: tp.partition, Offset: e.offset})
		}
		out = append(out, gos)
	}
	slices.SortFunc(out, func(a, b GroupOffsets) int { return cmp.Compare(a.Group, b.Group) })
	return out
}

// sortedOffsets lists g's committed partitions by topic and partition.
func sortedOffsets(g *group) []topicPartition {
	out := make([]topicPartition, 0, len(g.offsets))
	for tp := range g.offsets {
		out = append(out, tp)
	}
	slices.SortFunc(out, func(a, b topicPartition) int {
		if c := cmp.Compare(a.topic, b.topic); c != 0 {
			return c
		}
		return cmp.Compare(a.partition, b.partition)
	})
	return out
}

// stateCounts counts the groups in each state.
func (c *Coordinator) stateCounts() map[State]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[State]int{}
	for _, g := range c.mu.groups {
		out[g.state]++
	}
	return out
}
