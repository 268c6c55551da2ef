package retention

import (
	"time"

	"github.com/vibemq/broker/txns"
)

// TxnTickInterval is how often transaction timeouts are checked by
// default (Kafka's transaction.abort.timed.out.transaction.cleanup.interval.ms
// is 10s; a second keeps read_committed readers blocked less long).
const TxnTickInterval = time.Second

// TxnsTask aborts transactions open past their timeout.
func TxnsTask(c *txns.Coordinator, interval time.Duration) Task {
	if interval <= 0 {
		interval = TxnTickInterval
	}
	return Task{Name: "transactions", Interval: interval, Run: c.Tick}
}
