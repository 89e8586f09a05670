package lifecycle

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/controllers/common"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/inventory"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/xosim"
)

// env is the package's API server, shared by every test (each test uses its own Node names).
var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	env, err = testenv.Start(testenv.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "envtest:", err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop envtest:", err)
		}
	}()
	return m.Run()
}

// testToken is the simulator's token.
const testToken = "lifecycle-test-token"

// fixture is one test's XO: a simulator behind a real HTTP listener (which a test can close and
// reopen on the same address to refuse connections), a real xo.Client, a real inventory with
// the event stream, and the controller's dependencies.
type fixture struct {
	t    *testing.T
	ctx  context.Context
	sim  *xosim.Server
	addr string
	xo   *xo.Client
	inv  *inventory.Inventory
	rec  *recorder
	deps common.Deps
	r    *Reconciler

	pool, host1, host2 string

	mu  sync.Mutex
	srv *http.Server
}

type fixtureOptions struct {
	outOfService bool
	// idleTimeout is the inventory's StreamIdleTimeout (default 700ms: a stalled stream is
	// noticed quickly).
	idleTimeout time.Duration
}

func newFixture(t *testing.T, o fixtureOptions) *fixture {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f := &fixture{t: t, ctx: ctx, rec: &recorder{}}
	f.sim = xosim.New(xosim.Options{Tokens: []string{testToken}, PingInterval: 100 * time.Millisecond})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr = l.Addr().String()
	f.serve(l)

	f.xo, err = xo.New(xo.Options{URL: "http://" + f.addr, Token: testToken, Timeout: 500 * time.Millisecond, ListTimeout: 2 * time.Second, RetryWait: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	f.pool = must(f.sim.AddPool(xosim.PoolSpec{NameLabel: "pool-a"}))
	f.host1 = must(f.sim.AddHost(xosim.HostSpec{PoolID: f.pool, NameLabel: "host-1"}))
	f.host2 = must(f.sim.AddHost(xosim.HostSpec{PoolID: f.pool, NameLabel: "host-2"}))

	f.inv = inventory.New(f.xo, inventory.Options{
		PollPeriod:        time.Second,
		StreamIdleTimeout: cmp.Or(o.idleTimeout, 700*time.Millisecond),
		Log:               testr.New(t),
	})
	done := make(chan struct{})
	go func() { defer close(done); _ = f.inv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		f.mu.Lock()
		_ = f.srv.Close()
		f.mu.Unlock()
	})
	select {
	case <-f.inv.Synced():
	case <-time.After(10 * time.Second):
		t.Fatal("inventory did not sync")
	}
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

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// serve serves the simulator on l.
func (f *fixture) serve(l net.Listener) {
	srv := &http.Server{Handler: f.sim, ReadHeaderTimeout: 5 * time.Second}
	f.mu.Lock()
	f.srv = srv
	f.mu.Unlock()
	go func() { _ = srv.Serve(l) }()
}

// refuse closes the listener: connections to XO are refused until the returned function
// listens again on the same address.
func (f *fixture) refuse() (restore func()) {
	f.mu.Lock()
	_ = f.srv.Close()
	f.mu.Unlock()
	return func() {
		var l net.Listener
		var err error
		for i := 0; i < 50; i++ {
			if l, err = net.Listen("tcp", f.addr); err == nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil {
			f.t.Fatalf("listen again on %s: %v", f.addr, err)
		}
		f.serve(l)
	}
}

// addVM adds a VM to the pool, on host1, and waits until the inventory holds it.
func (f *fixture) addVM(name, power string) string {
	f.t.Helper()
	id := must(f.sim.AddVM(xosim.VMSpec{PoolID: f.pool, HostID: f.host1, NameLabel: name, PowerState: power, CPUs: 2, Memory: 2 * xosim.GiB}))
	f.waitInventory("VM "+name+" in the inventory", func(s *inventory.Snapshot) bool { return s.VM(id) != nil })
	return id
}

// waitInventory polls the inventory until cond holds.
func (f *fixture) waitInventory(what string, cond func(*inventory.Snapshot) bool) {
	f.t.Helper()
	if !poll(5*time.Second, func() bool { return cond(f.inv.Snapshot()) }) {
		f.t.Fatalf("timed out waiting for %s", what)
	}
}

// poll calls cond every 10ms until it holds or the timeout passes.
func poll(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// nodeName returns a Node name unique to the test.
var nodeSeq atomic.Int64

func nodeName(t *testing.T, suffix string) string {
	base := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(base) > 40 {
		base = base[:40]
	}
	return fmt.Sprintf("%s-%s-%d", strings.Trim(base, "-"), suffix, nodeSeq.Add(1))
}

// createNode registers an initialized Node for a VM, as a kubelet with --provider-id would,
// with the given readiness, and removes it at the end of the test.
func (f *fixture) createNode(suffix, vmID string, ready bool, opts ...testenv.NodeOption) *corev1.Node {
	f.t.Helper()
	name := nodeName(f.t, suffix)
	all := append([]testenv.NodeOption{
		testenv.WithProviderID(node.FormatProviderID(f.pool, vmID)),
		testenv.WithSystemUUID(vmID),
		testenv.Initialized(),
		testenv.WithReady(ready),
	}, opts...)
	n := testenv.KubeletNode(name, all...)
	if err := testenv.CreateNode(f.ctx, env.Client, n); err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), &corev1.Node{ObjectMeta: n.ObjectMeta})
	})
	return n
}

// setReady writes the Node's Ready condition through the status subresource.
func (f *fixture) setReady(name string, ready bool) {
	f.t.Helper()
	n := f.get(name)
	before := n.DeepCopy()
	testenv.WithReady(ready)(n)
	if err := env.Client.Status().Patch(f.ctx, n, client.MergeFrom(before)); err != nil {
		f.t.Fatal(err)
	}
}

// get reads a Node from the API server; it fails the test when the Node is missing.
func (f *fixture) get(name string) *corev1.Node {
	f.t.Helper()
	n, err := f.lookup(name)
	if err != nil {
		f.t.Fatalf("get node %s: %v", name, err)
	}
	return n
}

func (f *fixture) lookup(name string) (*corev1.Node, error) {
	var n corev1.Node
	if err := env.Client.Get(f.ctx, types.NamespacedName{Name: name}, &n); err != nil {
		return nil, err
	}
	return &n, nil
}

// exists reports whether the Node is still there.
func (f *fixture) exists(name string) bool {
	f.t.Helper()
	_, err := f.lookup(name)
	if err != nil && !apierrors.IsNotFound(err) {
		f.t.Fatal(err)
	}
	return err == nil
}

// reconcile runs one Reconcile of the Node.
func (f *fixture) reconcile(name string) ctrl.Result {
	f.t.Helper()
	res, err := f.r.Reconcile(f.ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: name}})
	if err != nil {
		f.t.Fatalf("reconcile %s: %v", name, err)
	}
	return res
}

// hasTaint reports whether the stored Node has the taint (key and effect).
func (f *fixture) hasTaint(name, key string, effect corev1.TaintEffect) bool {
	f.t.Helper()
	return node.HasTaint(f.get(name).Spec.Taints, key, effect)
}

// recorder is an events.EventRecorder that keeps every event.
type recorder struct {
	mu     sync.Mutex
	events []recorded
}

type recorded struct {
	node, uid, eventType, reason, note string
}

var _ events.EventRecorder = &recorder{}

func (r *recorder) Eventf(regarding runtime.Object, _ runtime.Object, eventtype, reason, _, note string, args ...any) {
	e := recorded{eventType: eventtype, reason: reason, note: fmt.Sprintf(note, args...)}
	if n, ok := regarding.(*corev1.Node); ok {
		e.node, e.uid = n.Name, string(n.UID)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

// find returns the events with this reason about this Node.
func (r *recorder) find(nodeName, reason string) []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []recorded
	for _, e := range r.events {
		if e.node == nodeName && e.reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// testrLogger returns a logger writing to the test's log.
func testrLogger(t *testing.T) logr.Logger { return testr.New(t) }

// controllerConfig lets several managers in one test binary register the same controller name.
func controllerConfig() config.Controller {
	return config.Controller{SkipNameValidation: ptr.To(true)}
}

// counterValue reads a counter.
func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}
