// Package retention owns every background loop of the broker: log
// retention and compaction, consumer-group timers, queue lease expiry and
// dead-lettering, TTLs. The decisions live in the domain packages, which
// take the time as an argument; this package only decides when to call
// them, bounds how long they run, and stops them on shutdown.
package retention

import (
	"context"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// Task is one periodic job. Run receives the runner's clock reading; it
// should bound its own work per call (the next tick comes after it returns).
type Task struct {
	Name     string
	Interval time.Duration
	Run      func(now time.Time)
	// Wake, when set, runs the task at once whenever it receives, besides
	// every Interval (work that should not wait for the next tick).
	Wake <-chan struct{}
}

// Runner runs tasks on their intervals, each in its own goroutine, until Stop.
type Runner struct {
	log   zerolog.Logger
	now   func() time.Time
	tasks []Task
	stop  chan struct{}
	wg    sync.WaitGroup
	once  sync.Once
	// ctx is canceled by Stop, for tasks that wait inside a call.
	ctx    context.Context
	cancel context.CancelFunc
}

// New returns a Runner using clock (time.Now when nil).
func New(log zerolog.Logger, clock func() time.Time) *Runner {
	if clock == nil {
		clock = time.Now
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Runner{log: log.With().Str("component", "retention").Logger(), now: clock, stop: make(chan struct{}), ctx: ctx, cancel: cancel}
}

// Add registers a task; call before Start.
func (r *Runner) Add(t Task) { r.tasks = append(r.tasks, t) }

// Start launches every task's loop.
func (r *Runner) Start() {
	for _, t := range r.tasks {
		r.wg.Add(1)
		go r.loop(t)
	}
}

func (r *Runner) loop(t Task) {
	defer r.wg.Done()
	tick := time.NewTicker(t.Interval)
	defer tick.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-tick.C:
			r.runOnce(t)
		case <-t.Wake: // a nil Wake never receives
			r.runOnce(t)
		}
	}
}

// runOnce runs one tick, turning a panic into a log line so that one bad
// task does not stop the others.
func (r *Runner) runOnce(t Task) {
	defer func() {
		if p := recover(); p != nil {
			r.log.Error().Str("task", t.Name).Interface("panic", p).Msg("background task panicked")
		}
	}()
	t.Run(r.now())
}

// Stop ends every loop and waits for running ticks to return.
func (r *Runner) Stop() {
	r.once.Do(func() {
		close(r.stop)
		r.cancel()
	})
	r.wg.Wait()
}
