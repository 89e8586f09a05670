package testenv

import (
	"context"
	"fmt"
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Main is the body of a TestMain whose tests share one API server: it starts the control
// plane with o, sets *env, runs the tests, stops the control plane and returns the exit code.
//
//	func TestMain(m *testing.M) { os.Exit(testenv.Main(m, testenv.Options{}, &env)) }
func Main(m *testing.M, o Options, env **Env) int {
	e, err := Start(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "envtest:", err)
		return 1
	}
	*env = e
	defer func() {
		if err := e.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop envtest:", err)
		}
	}()
	return m.Run()
}

// StartTest starts a control plane for one test and stops it when the test ends.
func StartTest(t testing.TB, o Options) *Env {
	t.Helper()
	env, err := Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop envtest: %v", err)
		}
	})
	return env
}

// NewManager returns a Manager on cfg for a test: no metrics or health listener, logs to the
// test, and controller names may repeat (several managers in one test binary register the
// same controller).
func NewManager(t testing.TB, cfg *rest.Config) manager.Manager {
	t.Helper()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Logger:                 testLogger(t),
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return mgr
}

// RunManager starts mgr until ctx or the test ends; the test fails if mgr stops with an error.
func RunManager(ctx context.Context, t testing.TB, mgr manager.Manager) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
}

// Reconcile runs one Reconcile of the object named name (a Node) and fails the test on error.
func Reconcile(ctx context.Context, t testing.TB, r reconcile.Reconciler, name string) reconcile.Result {
	t.Helper()
	res, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
	if err != nil {
		t.Fatalf("reconcile %s: %v", name, err)
	}
	return res
}
