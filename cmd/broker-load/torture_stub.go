package main

import (
	"context"
	"time"
)

func runHTTPPhase(ctx context.Context, env *tortureEnv, p *PhaseReport, d time.Duration) error {
	return errPhaseSkipped
}
func runDiskPhase(ctx context.Context, env *tortureEnv, p *PhaseReport, d time.Duration) error {
	return errPhaseSkipped
}
