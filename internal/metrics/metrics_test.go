package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestRegister(t *testing.T) {
	Register(nil, prometheus.NewCounter(prometheus.CounterOpts{Name: "x_total", Help: "x"})) // metrics off: no panic

	reg := prometheus.NewRegistry()
	first := prometheus.NewCounter(prometheus.CounterOpts{Name: "a_total", Help: "a"})
	Register(reg, first)
	// A second component of the same kind on the same registry.
	second := prometheus.NewCounter(prometheus.CounterOpts{Name: "a_total", Help: "a"})
	Register(reg, second)
	if got := RegisterOrExisting(reg, second); got != first {
		t.Errorf("RegisterOrExisting returned %v, want the registered collector", got)
	}

	defer func() {
		if recover() == nil {
			t.Error("a clashing registration did not panic")
		}
	}()
	Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{Name: "a_total", Help: "other help"}))
}
