package retention

import (
	"time"

	"github.com/vibemq/broker/groups"
)

// GroupTickInterval is how often the group coordinator's timers are
// checked: it bounds how late a session timeout, a rebalance timeout or
// the initial rebalance delay takes effect.
const GroupTickInterval = 100 * time.Millisecond

// GroupsTask returns the task that runs groups.Coordinator.Tick: member
// session expiry, the join and sync phases' deadlines, and offset
// retention (which the coordinator runs at its own, longer interval).
func GroupsTask(c *groups.Coordinator, interval time.Duration) Task {
	if interval <= 0 {
		interval = GroupTickInterval
	}
	return Task{Name: "groups", Interval: interval, Run: c.Tick}
}
