// Package freeaddr hands out loopback addresses for tests that start
// brokers on real ports.
package freeaddr

import (
	"errors"
	"net"
	"sync"
	"testing"
)

// handedOut holds every address Addr returned: the kernel may give a
// port just closed to the next bind(0), so two calls in a row (a broker's
// Kafka and HTTP ports) or two parallel tests could otherwise get the
// same one.
var handedOut sync.Map

// Addr returns a 127.0.0.1 address that was free a moment ago and that no
// earlier call of this process returned. Another process may still take
// it before the caller binds it.
func Addr() (string, error) {
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		addr := l.Addr().String()
		_ = l.Close()
		if _, dup := handedOut.LoadOrStore(addr, true); !dup {
			return addr, nil
		}
	}
	return "", errors.New("freeaddr: no port that was not handed out before in 100 tries")
}

// T is Addr for a test: it fails the test when no address is found.
func T(t testing.TB) string {
	t.Helper()
	addr, err := Addr()
	if err != nil {
		t.Fatalf("a free address: %v", err)
	}
	return addr
}
