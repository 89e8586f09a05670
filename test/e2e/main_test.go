// Package e2e_test runs the whole controller end to end: the real binary (or app.Run in
// process) against a real kube-apiserver and etcd (internal/testenv) and the XO simulator
// (xo/xosim), with the webhook served over TLS and called by the API server.
//
// The tests need the control-plane binaries of hack/testbin.sh (make testbin); they build the
// controller binary once, on first use, from ./cmd/xenorchestra-cloud-controller-manager.
//
//	go -C test test ./e2e/
package e2e_test

import (
	"fmt"
	"os"
	"sync"
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
)

// binDir holds the controller binary built for this test run; TestMain removes it.
var binDir string

// inProcessLog receives the logs of managers run in this process (app.Run); a test prints
// its tail when it fails.
var inProcessLog = &testenv.SyncBuffer{}

func TestMain(m *testing.M) {
	// Verbose enough to debug a failure, quiet enough not to drown the test output.
	ctrl.SetLogger(zap.New(zap.WriteTo(inProcessLog), zap.UseDevMode(false)))
	dir, err := os.MkdirTemp("", "xo-ccm-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// ccmBinary builds ./cmd/xenorchestra-cloud-controller-manager once per test run and returns
// its path.
func ccmBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() { buildPath, buildErr = testenv.BuildCommand(binDir) })
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildPath
}
