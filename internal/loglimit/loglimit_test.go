package loglimit

import (
	"testing"
	"time"
)

// TestLimiter: one message per kind per Interval; the next one allowed
// reports how many were suppressed in between; kinds are independent.
func TestLimiter(t *testing.T) {
	var l Limiter
	now := time.Unix(1000, 0)
	if ok, n := l.Allow("a", now); !ok || n != 0 {
		t.Fatalf("first: %v %d", ok, n)
	}
	for range 3 {
		if ok, _ := l.Allow("a", now.Add(time.Second)); ok {
			t.Fatal("allowed within the interval")
		}
	}
	if ok, _ := l.Allow("b", now.Add(time.Second)); !ok {
		t.Fatal("another kind was suppressed")
	}
	if ok, n := l.Allow("a", now.Add(Interval)); !ok || n != 3 {
		t.Fatalf("after the interval: %v %d, want true 3", ok, n)
	}
}
