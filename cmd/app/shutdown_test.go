package app

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
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

// TestGracefulStopReportsLateAdmissions: the admissions received during the delay are
// counted, and one received within lateMargin of its end is warned about.
func TestGracefulStopReportsLateAdmissions(t *testing.T) {
	for _, tc := range []struct {
		name     string
		arrivals []time.Duration // after the signal
		want     string
	}{
		{"none", nil, `"msg"="Shutdown delay over; stopping" "admissionsDuringDelay"=0`},
		{"early", []time.Duration{100 * time.Millisecond, time.Second}, `"msg"="Shutdown delay over; stopping" "admissionsDuringDelay"=2 "lastAfter"="1s"`},
		{"late", []time.Duration{time.Second, 4500 * time.Millisecond}, `"msg"="WARNING: admissions were still arriving at the end of the shutdown delay`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log, lines := recordingLogger(0)
			clk := clocktesting.NewFakeClock(time.Now())
			g := newGracefulStop(5*time.Second, clk, log)
			h := g.observe(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			parent, signal := context.WithCancel(context.Background())
			ctx, cancel := g.context(parent)
			defer cancel()
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/", nil)) // before: not counted
			signal()
			testenv.Eventually(t, 5*time.Second, "the delay's timer", clk.HasWaiters)
			elapsed := time.Duration(0)
			for _, at := range tc.arrivals {
				clk.Step(at - elapsed)
				elapsed = at
				h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/", nil))
			}
			clk.Step(5*time.Second - elapsed)
			<-ctx.Done()
			all := lines()
			last := all[len(all)-1]
			if !strings.Contains(last, tc.want) {
				t.Errorf("last line %s\nwant it to contain %s", last, tc.want)
			}
		})
	}
}
