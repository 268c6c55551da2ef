package groups

// Server-side assignors of the consumer group protocol (KIP-848): the
// "uniform" assignor (Kafka's UniformAssignor: balanced and sticky) and the
// "range" assignor (Kafka's server-side RangeAssignor: per topic,
// consecutive ranges to the subscribed members in member ID order). Both
// are pure functions of their input, so they are tested without a broker.

import (
	"bytes"
	"cmp"
	"slices"
)

// Assignor names, as clients send them in group.remote.assignor.
const (
	AssignorUniform = "uniform"
	AssignorRange   = "range"
)

// assignment maps a topic ID to its sorted partitions.
type assignment map[[16]byte][]int32

func (a assignment) count() int {
	n := 0
	for _, ps := range a {
		n += len(ps)
	}
	return n
}

func (a assignment) clone() assignment {
	out := make(assignment, len(a))
	for t, ps := range a {
		out[t] = slices.Clone(ps)
	}
	return out
}

func (a assignment) has(t [16]byte, p int32) bool {
	_, ok := slices.BinarySearch(a[t], p)
	return ok
}

func (a assignment) add(t [16]byte, p int32) {
	ps := a[t]
	i, ok := slices.BinarySearch(ps, p)
	if !ok {
		a[t] = slices.Insert(ps, i, p)
	}
}

func (a assignment) remove(t [16]byte, p int32) {
	ps := a[t]
	if i, ok := slices.BinarySearch(ps, p); ok {
		ps = slices.Delete(ps, i, i+1)
		if len(ps) == 0 {
			delete(a, t)
		} else {
			a[t] = ps
		}
	}
}

func (a assignment) equal(b assignment) bool {
	if len(a) != len(b) {
		return false
	}
	for t, ps := range a {
		if !slices.Equal(ps, b[t]) {
			return false
		}
	}
	return true
}

// sortedTopics returns the topic IDs of a in byte order.
func (a assignment) sortedTopics() [][16]byte {
	out := make([][16]byte, 0, len(a))
	for t := range a {
		out = append(out, t)
	}
	slices.SortFunc(out, func(x, y [16]byte) int { return bytes.Compare(x[:], y[:]) })
	return out
}

// assignTopic is a topic some member subscribes to.
type assignTopic struct {
	id         [16]byte
	name       string
	partitions int32
}

// assignMember is one member as an assignor sees it.
type assignMember struct {
	id         string
	subscribed map[[16]byte]bool
	// current is the member's current target assignment (stickiness).
	current assignment
}

// assign runs the named assignor. Members must be sorted by ID and topics
// by name; every member gets an entry (possibly empty).
func assign(name string, members []assignMember, topics []assignTopic) map[string]assignment {
	if name == AssignorRange {
		return assignRange(members, topics)
	}
	return assignUniform(members, topics)
}

// assignRange gives each topic's partitions to its subscribers in
// consecutive ranges, the first (partitions mod subscribers) members in ID
// order getting one more.
func assignRange(members []assignMember, topics []assignTopic) map[string]assignment {
	out := make(map[string]assignment, len(members))
	for _, m := range members {
		out[m.id] = assignment{}
	}
	for _, t := range topics {
		var subs []string
		for _, m := range members {
			if m.subscribed[t.id] {
				subs = append(subs, m.id)
			}
		}
		if len(subs) == 0 {
			continue
		}
		per, extra := int(t.partitions)/len(subs), int(t.partitions)%len(subs)
		p := int32(0)
		for i, id := range subs {
			n := per
			if i < extra {
				n++
			}
			for k := 0; k < n; k++ {
				out[id].add(t.id, p)
				p++
			}
		}
	}
	return out
}

// assignUniform balances the partitions over the members that subscribe
// to them, keeping every partition with its current owner where the
// balance allows (sticky): first each member keeps its current partitions
// that it still subscribes to, then the unassigned partitions go, most
// constrained first, to the least loaded eligible member, and finally
// partitions move from a member to an eligible one with at least two fewer
// until no such move remains.
func assignUniform(members []assignMember, topics []assignTopic) map[string]assignment {
	out := make(map[string]assignment, len(members))
	load := make(map[string]int, len(members))
	owner := map[[16]byte]map[int32]string{}
	for _, t := range topics {
		owner[t.id] = map[int32]string{}
	}
	parts := map[[16]byte]int32{}
	for _, t := range topics {
		parts[t.id] = t.partitions
	}
	for _, m := range members {
		out[m.id] = assignment{}
	}
	// 1. Sticky: keep what is still valid and not claimed twice.
	for _, m := range members {
		for _, tid := range m.current.sortedTopics() {
			if !m.subscribed[tid] {
				continue
			}
			for _, p := range m.current[tid] {
				if p < 0 || p >= parts[tid] {
					continue
				}
				if _, taken := owner[tid][p]; taken {
					continue
				}
				owner[tid][p] = m.id
				out[m.id].add(tid, p)
				load[m.id]++
			}
		}
	}
	eligible := func(tid [16]byte) []string {
		var ids []string
		for _, m := range members {
			if m.subscribed[tid] {
				ids = append(ids, m.id)
			}
		}
		return ids
	}
	// Members at most one partition above the fair share keep theirs; the
	// balancing pass below moves the rest.
	// 2. Unassigned partitions, topics with fewer subscribers first.
	order := slices.Clone(topics)
	elig := map[[16]byte][]string{}
	for _, t := range order {
		elig[t.id] = eligible(t.id)
	}
	slices.SortStableFunc(order, func(a, b assignTopic) int { return cmp.Compare(len(elig[a.id]), len(elig[b.id])) })
	for _, t := range order {
		ids := elig[t.id]
		if len(ids) == 0 {
			continue
		}
		for p := int32(0); p < t.partitions; p++ {
			if _, taken := owner[t.id][p]; taken {
				continue
			}
			best := ids[0]
			for _, id := range ids[1:] {
				if load[id] < load[best] {
					best = id
				}
			}
			owner[t.id][p] = best
			out[best].add(t.id, p)
			load[best]++
		}
	}
	// 3. Balance: move a partition from a member to an eligible member
	// with at least two fewer. Each move lowers the sum of squared loads,
	// so the loop ends; the bound is a safety net.
	total := 0
	for _, n := range load {
		total += n
	}
	for moves := 0; moves < total*len(members)+1; moves++ {
		if !balanceOnce(order, elig, owner, out, load) {
			break
		}
	}
	return out
}

// balanceOnce makes one move of assignUniform's balancing pass: from the
// most loaded member that has a partition some much less loaded eligible
// member could take. False when no move is possible.
func balanceOnce(topics []assignTopic, elig map[[16]byte][]string, owner map[[16]byte]map[int32]string, out map[string]assignment, load map[string]int) bool {
	type move struct {
		tid      [16]byte
		p        int32
		from, to string
		gain     int
	}
	var best *move
	for _, t := range topics {
		for p := t.partitions - 1; p >= 0; p-- {
			from, ok := owner[t.id][p]
			if !ok {
				continue
			}
			for _, to := range elig[t.id] {
				gain := load[from] - load[to]
				if gain >= 2 && (best == nil || gain > best.gain) {
					best = &move{t.id, p, from, to, gain}
				}
			}
		}
	}
	if best == nil {
		return false
	}
	out[best.from].remove(best.tid, best.p)
	out[best.to].add(best.tid, best.p)
	owner[best.tid][best.p] = best.to
	load[best.from]--
	load[best.to]++
	return true
}
