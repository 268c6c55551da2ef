package main

// shareQueues is the queue engine as share groups use it
// (groups.ShareQueues, groups/share_queue.go): groups and queues do not
// import each other, so the conversion of their types and errors lives
// here, where both are wired.

import (
	"errors"
	"fmt"
	"time"

	"github.com/vibemq/broker/groups"
	"github.com/vibemq/broker/queues"
)

type shareQueues struct{ e *queues.Engine }

var _ groups.ShareQueues = shareQueues{}

func (s shareQueues) Acquire(queue string, req groups.QueueAcquire, now time.Time) ([]groups.QueueLease, func() error, error) {
	got, wait, err := s.e.ShareAcquire(queue, queues.ShareAcquireRequest{Owner: req.Owner, Partitions: req.Partitions,
		MaxMessages: req.MaxRecords, MaxBytes: int64(req.MaxBytes), Lock: req.Lock}, now)
	if err != nil {
		return nil, nil, shareQueueError(err)
	}
	out := make([]groups.QueueLease, len(got))
	for i, l := range got {
		out[i] = groups.QueueLease{Partition: l.Partition, Offset: l.Offset, DeliveryCount: int16(min(l.Deliveries, 32767))}
	}
	return out, func() error { return shareQueueError(wait()) }, nil
}

// shareOutcomes are the queue outcomes of the acknowledgement types: a
// GAP names an offset without a record, which a queue never delivers, so
// it is a reject.
var shareOutcomes = map[int8]queues.ShareOutcome{
	groups.AckAccept:  queues.ShareAccept,
	groups.AckRelease: queues.ShareRelease,
	groups.AckReject:  queues.ShareReject,
	groups.AckGap:     queues.ShareReject,
	groups.AckRenew:   queues.ShareRenew,
}

func (s shareQueues) Settle(queue string, req groups.QueueSettle, now time.Time) (func() error, error) {
	items := make([]queues.ShareSettle, len(req.Acks))
	for i, a := range req.Acks {
		o, ok := shareOutcomes[a.Type]
		if !ok {
			return nil, fmt.Errorf("%w: acknowledge type %d", groups.ErrInvalidRequest, a.Type)
		}
		items[i] = queues.ShareSettle{Partition: a.Partition, Offset: a.Offset, Outcome: o}
	}
	wait, err := s.e.ShareSettle(queue, queues.ShareSettleRequest{Owner: req.Owner, Items: items, Lock: req.Lock, Reason: req.Reason}, now)
	if err != nil {
		return nil, shareQueueError(err)
	}
	return func() error { return shareQueueError(wait()) }, nil
}

func (s shareQueues) Release(queue, owner string, now time.Time) (func() error, error) {
	wait, err := s.e.ShareReleaseOwner(queue, owner, now)
	if err != nil {
		return nil, shareQueueError(err)
	}
	return func() error { return shareQueueError(wait()) }, nil
}

func (s shareQueues) Pending(queue string) ([]groups.QueuePending, error) {
	ps, err := s.e.SharePending(queue)
	if err != nil {
		return nil, shareQueueError(err)
	}
	out := make([]groups.QueuePending, len(ps))
	for i, p := range ps {
		out[i] = groups.QueuePending{Partition: p.Partition, Start: p.Start, Pending: p.Pending, Leased: p.Leased}
	}
	return out, nil
}

// shareQueueError maps a queue's error to the share groups' errors.
func shareQueueError(err error) error {
	if err == nil {
		return nil
	}
	var qe *queues.Error
	if errors.Is(err, queues.ErrStorage) || !errors.As(err, &qe) {
		return fmt.Errorf("%w: %w", groups.ErrShareStorage, err)
	}
	switch qe.Code {
	case queues.CodeNotInflight:
		return fmt.Errorf("%w: %s", groups.ErrInvalidRecordState, qe.Message)
	case queues.CodeQueueNotFound, queues.CodeQueueDeleted:
		return fmt.Errorf("%w: %s", groups.ErrUnknownTopicID, qe.Message)
	case queues.CodeShuttingDown:
		return fmt.Errorf("%w: %s", groups.ErrCoordinatorNotAvailable, qe.Message)
	}
	return fmt.Errorf("%w: %s", groups.ErrInvalidRequest, qe.Message)
}
