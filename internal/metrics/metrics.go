// Package metrics is the one way the broker registers its Prometheus
// collectors: a nil registerer means metrics are off, and a second
// component of the same kind on one registry (tests build several) does
// not panic.
package metrics

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers each collector with reg. A nil reg registers nothing.
// A collector equal to one already registered
// (prometheus.AlreadyRegisteredError) is skipped: the first one's series
// stay on the registry. Any other error (a name registered with other
// labels or help) is a programming error and panics.
func Register(reg prometheus.Registerer, collectors ...prometheus.Collector) {
	for _, c := range collectors {
		RegisterOrExisting(reg, c)
	}
}

// RegisterOrExisting registers c and returns it, or returns the equal
// collector already registered when it has c's type, so that a second
// instance counts into the same series. A nil reg returns c. It panics as
// Register does.
func RegisterOrExisting[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if reg == nil {
		return c
	}
	err := reg.Register(c)
	if err == nil {
		return c
	}
	var already prometheus.AlreadyRegisteredError
	if errors.As(err, &already) {
		if existing, ok := already.ExistingCollector.(C); ok {
			return existing
		}
		return c
	}
	panic(fmt.Sprintf("metrics: cannot register a collector: %v", err))
}
