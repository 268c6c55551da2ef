package groups

// Administrative views of consumer groups (KIP-848): ConsumerGroupDescribe.

import (
	"slices"
)

// TopicPartitionsDescription is a topic of a member's assignment, by ID and
// by name ("" when the topic no longer exists).
type TopicPartitionsDescription struct {
	TopicID    [16]byte
	Topic      string
	Partitions []int32
}

// ConsumerMemberDescription is one member of a ConsumerGroupDescribe result.
type ConsumerMemberDescription struct {
	MemberID             string
	InstanceID           *string
	RackID               *string
	MemberEpoch          int32
	ClientID             string
	ClientHost           string
	SubscribedTopicNames []string
	SubscribedTopicRegex *string
	Assignment           []TopicPartitionsDescription
	TargetAssignment     []TopicPartitionsDescription
	// Classic: a member of the classic protocol (JoinGroup) inside the
	// consumer group (consumer_classic.go).
	Classic bool
}

// ConsumerGroupDescription is one group of a ConsumerGroupDescribe result.
type ConsumerGroupDescription struct {
	Group           string
	Err             error
	State           string
	Epoch           int32
	AssignmentEpoch int32
	Assignor        string
	Members         []ConsumerMemberDescription
}

// DescribeConsumerGroups describes each named consumer group. A group that
// does not exist, or is a classic group, is ErrGroupIDNotFound, as Kafka
// answers.
func (c *Coordinator) DescribeConsumerGroups(names []string) []ConsumerGroupDescription {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]ConsumerGroupDescription, 0, len(names))
	for _, name := range names {
		g := c.mu.groups[name]
		switch {
		case g == nil:
			out = append(out, ConsumerGroupDescription{Group: name, Err: ErrGroupIDNotFound, State: StateDead.String()})
			continue
		case g.cg == nil:
			out = append(out, ConsumerGroupDescription{Group: name, Err: errNotConsumerGroup(name), State: StateDead.String()})
			continue
		}
		cg := g.cg
		d := ConsumerGroupDescription{Group: name, State: cg.state(), Epoch: cg.groupEpoch, AssignmentEpoch: cg.assignmentEpoch, Assignor: cg.preferredAssignor()}
		for _, m := range cg.sortedMembers() {
			d.Members = append(d.Members, ConsumerMemberDescription{
				MemberID: m.id, InstanceID: m.instanceID, RackID: m.rackID, MemberEpoch: m.epoch,
				ClientID: m.clientID, ClientHost: m.clientHost,
				SubscribedTopicNames: nonNilStrings(m.topicNames), SubscribedTopicRegex: m.regex,
				Assignment:       c.describeAssignment(m.assigned),
				TargetAssignment: c.describeAssignment(cg.target[m.id]),
				Classic:          m.classic != nil,
			})
		}
		out = append(out, d)
	}
	return out
}

func errNotConsumerGroup(name string) error {
	return &notConsumerGroupError{name}
}

type notConsumerGroupError struct{ group string }

func (e *notConsumerGroupError) Error() string {
	return "groups: group " + e.group + " is not a consumer group"
}
func (e *notConsumerGroupError) Unwrap() error { return ErrGroupIDNotFound }

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (cg *consumerGroup) sortedMembers() []*consumerMember {
	out := make([]*consumerMember, 0, len(cg.members))
	for _, m := range cg.members {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b *consumerMember) int {
		switch {
		case a.id < b.id:
			return -1
		case a.id > b.id:
			return 1
		}
		return 0
	})
	return out
}

func (c *Coordinator) describeAssignment(a assignment) []TopicPartitionsDescription {
	out := make([]TopicPartitionsDescription, 0, len(a))
	for _, t := range a.sortedTopics() {
		d := TopicPartitionsDescription{TopicID: t, Partitions: slices.Clone(a[t])}
		if tp, ok := c.tm.TopicByID(t); ok {
			d.Topic = tp.Name
		}
		out = append(out, d)
	}
	return out
}
