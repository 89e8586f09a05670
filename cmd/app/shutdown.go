package app

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
)

// gracefulStop turns the end of the command's context (the first SIGTERM or SIGINT) into a
// graceful stop: the replica stops being Ready at once, keeps serving the webhook and running
// the controllers for delay, and only then ends the manager's context (which releases the
// Lease, LeaderElectionReleaseOnCancel). The API server learns that a replica is gone from
// the Service's endpoints, which are updated asynchronously after the pod starts terminating;
// an admission it still routes to a replica that has stopped fails, and with failurePolicy
// Ignore the Node is admitted unlabelled. A second signal exits at once
// (ctrl.SetupSignalHandler).
type gracefulStop struct {
	delay time.Duration
	clock clock.WithTicker
	log   logr.Logger
	// stopping is set when the command's context ends.
	stopping atomic.Bool
}

// newGracefulStop returns a gracefulStop of delay on clk (nil: the real clock).
func newGracefulStop(delay time.Duration, clk clock.WithTicker, log logr.Logger) *gracefulStop {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &gracefulStop{delay: delay, clock: clk, log: log}
}

// ReadyCheck is a healthz checker: it fails from the moment termination is requested.
func (g *gracefulStop) ReadyCheck(*http.Request) error {
	if g.stopping.Load() {
		return errors.New("shutting down: serving on until the shutdown delay ends, so that no admission is routed to a stopped replica")
	}
	return nil
}

// context returns the manager's context: it has parent's values, and ends g.delay after parent
// ends, or when cancel is called.
func (g *gracefulStop) context(parent context.Context) (ctx context.Context, cancel context.CancelFunc) {
	ctx, cancel = context.WithCancel(context.WithoutCancel(parent))
	go func() {
		select {
		case <-ctx.Done():
			return
		case <-parent.Done():
		}
		g.stopping.Store(true)
		g.log.Info("Termination requested; not ready, serving on for the shutdown delay", "delay", g.delay.String())
		if g.delay > 0 {
			t := g.clock.NewTimer(g.delay)
			defer t.Stop()
			select {
			case <-ctx.Done():
				return
			case <-t.C():
			}
		}
		g.log.Info("Shutdown delay over; stopping")
		cancel()
	}()
	return ctx, cancel
}
