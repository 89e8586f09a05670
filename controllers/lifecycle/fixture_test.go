package lifecycle

import (
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/inventory"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/xosim"
)

// env is the package's API server, shared by every test (each test uses its own Node names).
var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, testenv.Options{}, &env)) }

// testToken is the simulator's token.
const testToken = "lifecycle-test-token"

// fixture is one test's XO (testenv.Fixture: a simulator with a pool of two hosts, a real
// client and inventory) and the controller built on it.
type fixture struct {
	*testenv.Fixture
	opts Options
	r    *Reconciler
}

type fixtureOptions struct {
	outOfService bool
	// xo configures the simulator, its client and inventory (see testenv.FixtureOptions).
	xo testenv.FixtureOptions
}

func newFixture(t *testing.T, o fixtureOptions) *fixture {
	t.Helper()
	o.xo.Token = testToken
	f := &fixture{Fixture: testenv.NewFixture(t, env, o.xo)}
	f.opts = Options{OutOfServiceTaint: o.outOfService, Workers: 4, XOTimeout: time.Second}
	f.r = f.newReconciler(f.Estate)
	return f
}

// newReconciler returns the controller on estate, with the fixture's options, calling the API
// server directly.
func (f *fixture) newReconciler(estate *inventory.Estate) *Reconciler {
	return New(env.Client, estate, f.Rec, f.clock(), f.opts)
}

// clock is the fixture's fake clock when it has one.
func (f *fixture) clock() clock.PassiveClock {
	if f.Clock != nil {
		return f.Clock
	}
	return clock.RealClock{}
}

// addVM adds a VM to the pool, on Host1, and waits until the inventory holds it.
func (f *fixture) addVM(name, power string) string {
	f.T.Helper()
	return f.AddVM(xosim.VMSpec{NameLabel: name, PowerState: power})
}

// addPoolB adds a second pool, pool-b, with one host, and waits until the inventory trusts it.
func (f *fixture) addPoolB() (pool, host string) {
	f.T.Helper()
	pool = f.X.AddPool(f.T, xosim.PoolSpec{NameLabel: "pool-b"})
	host = f.X.AddHost(f.T, xosim.HostSpec{PoolID: pool, NameLabel: "host-b1"})
	f.WaitInventory("pool B trusted", func(s *inventory.Snapshot) bool { return s.PoolConnected(pool) })
	return pool, host
}

// createNode registers an initialized Node for a VM, as a kubelet with --provider-id would,
// with the given readiness, and removes it at the end of the test.
func (f *fixture) createNode(suffix, vmID string, ready bool, opts ...testenv.NodeOption) *corev1.Node {
	f.T.Helper()
	return f.CreateNode(suffix, vmID, append([]testenv.NodeOption{testenv.WithReady(ready)}, opts...)...)
}

// reconcile runs one Reconcile of the Node.
func (f *fixture) reconcile(name string) ctrl.Result {
	f.T.Helper()
	return testenv.Reconcile(f.Ctx, f.T, f.r, name)
}

// reconcileUntilGone reconciles the Node until it is deleted (the absence of its VM must
// last the settle time first) and reports whether it was within timeout.
func (f *fixture) reconcileUntilGone(name string, timeout time.Duration) bool {
	f.T.Helper()
	return testenv.Poll(timeout, func() bool { f.reconcile(name); return !f.Exists(name) })
}

// waitAbsenceSettled waits until the inventory has seen the VM leave its pool and the absence
// has lasted the settle time.
func (f *fixture) waitAbsenceSettled(vmID string) {
	f.T.Helper()
	f.WaitInventory("the absence of VM "+vmID+" to settle", func(s *inventory.Snapshot) bool {
		wait, ok := s.AbsenceWait(vmID, f.Pool)
		return ok && wait == 0
	})
}

// powerWhilePoolLost has XO lose the fixture's pool, sets the VM's power state meanwhile, and
// reconnects the pool; it returns once the inventory shows the VM back in that state, its pool
// not yet trusted (settling).
func (f *fixture) powerWhilePoolLost(vmID, power string) {
	f.T.Helper()
	if err := f.Sim.DisconnectPool(f.Pool); err != nil {
		f.T.Fatal(err)
	}
	f.WaitInventory("pool dropped", func(s *inventory.Snapshot) bool { return s.VM(vmID) == nil && !s.PoolConnected(f.Pool) })
	if err := f.Sim.SetPowerState(vmID, power); err != nil {
		f.T.Fatal(err)
	}
	if err := f.Sim.ReconnectPool(f.Pool); err != nil {
		f.T.Fatal(err)
	}
	f.WaitInventory("pool back, settling", func(s *inventory.Snapshot) bool {
		v := s.VM(vmID)
		return v != nil && v.PowerState == power && !s.PoolConnected(f.Pool)
	})
}
