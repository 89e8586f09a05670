package app

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
)

// TestGracefulStop: when the command's context ends, readiness fails at once while the
// manager's context lives on for the delay, then ends.
func TestGracefulStop(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	g := newGracefulStop(5*time.Second, clk, logr.Discard())
	parent, signal := context.WithCancel(context.Background())
	ctx, cancel := g.context(parent)
	defer cancel()
	if err := g.ReadyCheck(nil); err != nil {
		t.Fatalf("not ready before any signal: %v", err)
	}
	signal()
	testenv.Eventually(t, 5*time.Second, "not ready after the signal", func() bool { return g.ReadyCheck(nil) != nil })
	testenv.Eventually(t, 5*time.Second, "the delay's timer", clk.HasWaiters)
	clk.Step(5*time.Second - time.Millisecond)
	if ctx.Err() != nil {
		t.Fatal("the manager's context ended before the delay")
	}
	clk.Step(time.Millisecond)
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the manager's context did not end with the delay")
	}
}

// TestGracefulStopWithoutDelay: with a delay of 0 the manager's context ends with the
// command's, without a timer.
func TestGracefulStopWithoutDelay(t *testing.T) {
	g := newGracefulStop(0, clocktesting.NewFakeClock(time.Now()), logr.Discard())
	parent, signal := context.WithCancel(context.Background())
	ctx, cancel := g.context(parent)
	defer cancel()
	signal()
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the manager's context did not end at once with --shutdown-delay=0")
	}
	if g.ReadyCheck(nil) == nil {
		t.Fatal("ready after the signal")
	}
}
