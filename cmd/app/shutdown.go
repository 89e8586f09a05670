package app

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
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
	// late counts the admissions received since then, lastLate holds the time of the last
	// (UnixNano): the evidence, logged when the delay ends, that the delay was long enough.
	late, lastLate atomic.Int64
}

// lateMargin: an admission received less than this before the end of the delay means the
// API server was still routing here, and the next one may have found the replica stopped.
const lateMargin = time.Second

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

// observe wraps the webhook's handler: it counts the admissions that arrive once termination
// has been requested.
func (g *gracefulStop) observe(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.stopping.Load() {
			g.late.Add(1)
			g.lastLate.Store(g.clock.Now().UnixNano())
		}
		h.ServeHTTP(w, r)
	})
}

// delayOver logs the end of the delay begun at start, with the admissions received during it:
// a warning when one arrived within lateMargin of the end.
func (g *gracefulStop) delayOver(start time.Time) {
	n := g.late.Load()
	if n == 0 {
		g.log.Info("Shutdown delay over; stopping", "admissionsDuringDelay", 0)
		return
	}
	last := time.Unix(0, g.lastLate.Load()).Sub(start)
	if g.delay-last < lateMargin {
		g.log.Info("WARNING: admissions were still arriving at the end of the shutdown delay: the API server had not stopped routing them here, and those that follow find the replica stopped (admitted unlabelled with failurePolicy Ignore); raise --shutdown-delay (the chart's shutdownDelay)",
			"admissionsDuringDelay", n, "lastAfter", last.Round(time.Millisecond).String(), "delay", g.delay.String())
	} else {
		g.log.Info("Shutdown delay over; stopping", "admissionsDuringDelay", n, "lastAfter", last.Round(time.Millisecond).String())
	}
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
		start := g.clock.Now()
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
		g.delayOver(start)
		cancel()
	}()
	return ctx, cancel
}

// observedServer is the webhook server with every handler wrapped by gracefulStop.observe.
type observedServer struct {
	ctrlwebhook.Server
	stop *gracefulStop
}

// Register registers hook, observed, at path.
func (s observedServer) Register(path string, hook http.Handler) {
	s.Server.Register(path, s.stop.observe(hook))
}
