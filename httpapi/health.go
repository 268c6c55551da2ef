package httpapi

import (
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// statusBody is the JSON of a successful probe.
type statusBody struct {
	Status string `json:"status"`
}

// registerHealthRoutes adds the probes and, with a Registry, /metrics.
func (s *Server) registerHealthRoutes() {
	s.mux.HandleFunc("GET /healthz", s.handleHealthz)
	s.mux.HandleFunc("GET /readyz", s.handleReadyz)
	if s.cfg.Registry != nil {
		metrics := promhttp.HandlerFor(s.cfg.Registry, promhttp.HandlerOpts{
			ErrorLog:          promLogger{s},
			ErrorHandling:     promhttp.ContinueOnError,
			Registry:          s.cfg.Registry, // counts its own errors
			Timeout:           s.cfg.WriteTimeout,
			EnableOpenMetrics: false,
		})
		s.mux.Handle("GET /metrics", s.authorized("GET /metrics", promhttp.InstrumentMetricHandler(s.cfg.Registry, metrics)))
	}
}

// handleHealthz answers 200 while the process serves HTTP: liveness.
func (s *Server) handleHealthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, statusBody{Status: "ok"})
}

// handleReadyz answers 200 when the broker takes traffic, else 503 with
// the reason from Config.Ready.
func (s *Server) handleReadyz(w http.ResponseWriter, _ *http.Request) {
	if s.shuttingDown.Load() {
		writeError(w, newNativeError("not_ready", "the broker is shutting down"))
		return
	}
	if s.cfg.Ready != nil {
		if err := s.cfg.Ready(); err != nil {
			writeError(w, newNativeError("not_ready", "%s", err.Error()))
			return
		}
	}
	writeJSON(w, http.StatusOK, statusBody{Status: "ok"})
}

// promLogger sends errors of gathering metrics to the logger.
type promLogger struct{ s *Server }

func (l promLogger) Println(v ...any) {
	l.s.log.Warn().Str("error", fmt.Sprint(v...)).Msg("cannot gather a metric")
}
