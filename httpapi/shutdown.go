package httpapi

import (
	"context"
	"net"
	"sync"
)

// Shutdown of the HTTP listener (DESIGN.md "HTTP shutdown"). The broker
// closes the store after Server.Shutdown returned, so Shutdown keeps one
// invariant: when it returns, no handler runs (a handler may hold a store
// iterator; one used after the store closed reads freed memory). To return
// promptly it ends what would otherwise wait: tails and long polls end on
// Server.stopping, a tail blocked in a write to a client that reads
// nothing has its connection closed, and when the grace ends every
// connection is closed; then it waits for the handlers to return.

// inflight counts the handlers running (ServeHTTP calls).
type inflight struct {
	mu sync.Mutex
	n  int
	// idle is closed when n drops to 0; nil while nobody waits.
	idle chan struct{}
}

func (f *inflight) add() {
	f.mu.Lock()
	f.n++
	f.mu.Unlock()
}

func (f *inflight) done() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n--; f.n == 0 && f.idle != nil {
		close(f.idle)
		f.idle = nil
	}
}

// running is the number of handlers running.
func (f *inflight) running() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

// wait returns once no handler runs.
func (f *inflight) wait() {
	f.mu.Lock()
	if f.n == 0 {
		f.mu.Unlock()
		return
	}
	if f.idle == nil {
		f.idle = make(chan struct{})
	}
	idle := f.idle
	f.mu.Unlock()
	<-idle
}

// connKey is the request context key of the request's connection.
type connKey struct{}

// connContext is http.Server.ConnContext: it keeps the connection in the
// request's context, so that shutdown can close a tail's connection.
func connContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// stop begins the shutdown of the handlers: tails and long polls see
// Server.stopping and end, and a tail blocked in a write has its
// connection closed. Later tails end at once. Safe to call more than once.
func (s *Server) stop() {
	s.stopOnce.Do(func() { close(s.stopping) })
	s.tails.Lock()
	defer s.tails.Unlock()
	s.tails.stopped = true
	for t := range s.tails.set {
		t.stop()
	}
}

// addTail registers a tail for stop; false when the server is stopping
// (the tail must end).
func (s *Server) addTail(t *sseWriter) bool {
	s.tails.Lock()
	defer s.tails.Unlock()
	if s.tails.stopped {
		return false
	}
	if s.tails.set == nil {
		s.tails.set = map[*sseWriter]struct{}{}
	}
	s.tails.set[t] = struct{}{}
	return true
}

func (s *Server) removeTail(t *sseWriter) {
	s.tails.Lock()
	defer s.tails.Unlock()
	delete(s.tails.set, t)
}
