package lifecycle

import (
	"cmp"
	"context"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/controllers/common"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/inventory"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/xosim"
)

// env is the package's API server, shared by every test (each test uses its own Node names).
var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, testenv.Options{}, &env)) }

// testToken is the simulator's token.
const testToken = "lifecycle-test-token"

// fixture is one test's XO (testenv.XO: a simulator behind a listener that can refuse
// connections, a real xo.Client, a real inventory with the event stream) and the controller's
// dependencies.
type fixture struct {
	t    *testing.T
	ctx  context.Context
	x    *testenv.XO
	sim  *xosim.Server
	xo   *xo.Client
	inv  *inventory.Inventory
	rec  *testenv.Recorder
	deps common.Deps
	r    *Reconciler

	pool, host1, host2 string
}

type fixtureOptions struct {
	outOfService bool
	// idleTimeout is the inventory's StreamIdleTimeout (default 700ms: a stalled stream is
	// noticed quickly).
	idleTimeout time.Duration
}

func newFixture(t *testing.T, o fixtureOptions) *fixture {
	t.Helper()
	x := testenv.NewXO(t, testenv.XOOptions{
		Token: testToken, PingInterval: 100 * time.Millisecond,
		Client: xo.Options{Timeout: 500 * time.Millisecond, ListTimeout: 2 * time.Second, RetryWait: 10 * time.Millisecond},
	})
	f := &fixture{t: t, ctx: t.Context(), x: x, sim: x.Sim, xo: x.Client, rec: &testenv.Recorder{}}
	f.pool = x.AddPool(t, xosim.PoolSpec{NameLabel: "pool-a"})
	f.host1 = x.AddHost(t, xosim.HostSpec{PoolID: f.pool, NameLabel: "host-1"})
	f.host2 = x.AddHost(t, xosim.HostSpec{PoolID: f.pool, NameLabel: "host-2"})
	f.inv = x.StartInventory(t, inventory.Options{
		PollPeriod:        time.Second,
		StreamIdleTimeout: cmp.Or(o.idleTimeout, 700*time.Millisecond),
	})
	f.deps = common.Deps{
		Client:            env.Client,
		Inventory:         f.inv,
		XO:                f.xo,
		Recorder:          f.rec,
		Clock:             clock.RealClock{},
		Workers:           4,
		OutOfServiceTaint: o.outOfService,
	}
	f.r = New(f.deps)
	f.r.XOTimeout = time.Second
	return f
}

// refuse closes XO's listener: connections are refused until the returned function listens
// again on the same address.
func (f *fixture) refuse() (restore func()) {
	f.x.Close()
	return func() { f.x.Reopen(f.t) }
}

// addVM adds a VM to the pool, on host1, and waits until the inventory holds it.
func (f *fixture) addVM(name, power string) string {
	f.t.Helper()
	id := f.x.AddVM(f.t, xosim.VMSpec{PoolID: f.pool, HostID: f.host1, NameLabel: name, PowerState: power, CPUs: 2, Memory: 2 * xosim.GiB})
	f.waitInventory("VM "+name+" in the inventory", func(s *inventory.Snapshot) bool { return s.VM(id) != nil })
	return id
}

// waitInventory polls the inventory until cond holds.
func (f *fixture) waitInventory(what string, cond func(*inventory.Snapshot) bool) {
	f.t.Helper()
	f.x.WaitInventory(f.t, what, cond)
}

// createNode registers an initialized Node for a VM, as a kubelet with --provider-id would,
// with the given readiness, and removes it at the end of the test.
func (f *fixture) createNode(suffix, vmID string, ready bool, opts ...testenv.NodeOption) *corev1.Node {
	f.t.Helper()
	all := append([]testenv.NodeOption{
		testenv.WithProviderID(node.FormatProviderID(f.pool, vmID)),
		testenv.WithSystemUUID(vmID),
		testenv.Initialized(),
		testenv.WithReady(ready),
	}, opts...)
	n := testenv.KubeletNode(testenv.NodeName(f.t, suffix), all...)
	env.AddNode(f.t, n)
	return n
}

// setReady writes the Node's Ready condition through the status subresource.
func (f *fixture) setReady(name string, ready bool) {
	f.t.Helper()
	if err := testenv.SetReady(f.ctx, env.Client, name, ready); err != nil {
		f.t.Fatal(err)
	}
}

// get reads a Node from the API server; it fails the test when the Node is missing.
func (f *fixture) get(name string) *corev1.Node { f.t.Helper(); return env.Node(f.t, name) }

// exists reports whether the Node is still there.
func (f *fixture) exists(name string) bool { f.t.Helper(); return env.NodeExists(f.t, name) }

// reconcile runs one Reconcile of the Node.
func (f *fixture) reconcile(name string) ctrl.Result {
	f.t.Helper()
	return testenv.Reconcile(f.ctx, f.t, f.r, name)
}

// hasTaint reports whether the stored Node has the taint (key and effect).
func (f *fixture) hasTaint(name, key string, effect corev1.TaintEffect) bool {
	f.t.Helper()
	return node.HasTaint(f.get(name).Spec.Taints, key, effect)
}
