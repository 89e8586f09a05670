package testenv

import (
	"cmp"
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/inventory"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/xosim"
)

// FixtureOptions configures NewFixture. Zero values take the defaults.
type FixtureOptions struct {
	// Token is the simulator's token; default DefaultXOToken.
	Token string
	// Name names the XO server in the inventory (metrics, logs); default "xo".
	Name string
	// PoolName names the pool; default "pool-a". HostNames name its two hosts; default
	// "host-1" and "host-2".
	PoolName  string
	HostNames [2]string
	// PoolID and HostIDs are the uuids of the pool and its hosts; random when empty. Two
	// fixtures with the same ones are two XO servers connected to the same pool.
	PoolID  string
	HostIDs [2]string
	// Client configures the XO client; default a 500 ms request timeout, a 2 s listing
	// timeout and a 10 ms first retry wait, so that faults are noticed quickly.
	Client xo.Options
	// Inventory configures the inventory; default a 1 s poll period and a 700 ms stream idle
	// timeout (a stalled stream is noticed quickly), and the settle time of StartInventory.
	Inventory inventory.Options
	// FakeClock runs the inventory on a fake clock (Fixture.Clock) that only the test moves:
	// settle times then pass when the test says so, never while it is looking.
	FakeClock bool
	// VMMemory is the memory AddVM gives a VM that sets none; default 2 GiB.
	VMMemory int64
}

// Fixture is the XO side of a Node controller test on a shared API server: one simulated XO
// server (a real listener that can refuse connections, a real client) with one pool of two
// hosts, its inventory running with the event stream, the Estate of that server, and an
// event recorder. The controller suites build their reconcilers on it; several fixtures make
// an estate of several XO servers.
type Fixture struct {
	T   testing.TB
	Ctx context.Context
	Env *Env
	// X is the simulated XO; Sim, Client and Inventory are X's.
	X         *XO
	Sim       *xosim.Server
	Client    *xo.Client
	Inventory *inventory.Inventory
	// Estate holds this server only.
	Estate *inventory.Estate
	Rec    *Recorder
	// Clock is the inventory's clock with FixtureOptions.FakeClock, else nil.
	Clock *clocktesting.FakeClock
	// SettleTime is the inventory's settle time.
	SettleTime time.Duration

	Pool, Host1, Host2 string
	vmMemory           int64
}

// NewFixture starts a simulator with one pool and two hosts and an inventory on it, and waits
// until the inventory has listed it and trusts the pool.
func NewFixture(t testing.TB, env *Env, o FixtureOptions) *Fixture {
	t.Helper()
	co := o.Client
	co.Timeout = cmp.Or(co.Timeout, 500*time.Millisecond)
	co.ListTimeout = cmp.Or(co.ListTimeout, 2*time.Second)
	co.RetryWait = cmp.Or(co.RetryWait, 10*time.Millisecond)
	x := NewXO(t, XOOptions{Token: o.Token, PingInterval: 100 * time.Millisecond, Client: co})
	f := &Fixture{
		T: t, Ctx: t.Context(), Env: env, X: x, Sim: x.Sim, Client: x.Client, Rec: &Recorder{},
		vmMemory: cmp.Or(o.VMMemory, 2*xosim.GiB),
	}
	f.Rec.FailOnInvalid(t)
	f.Pool = x.AddPool(t, xosim.PoolSpec{ID: o.PoolID, NameLabel: cmp.Or(o.PoolName, "pool-a")})
	f.Host1 = x.AddHost(t, xosim.HostSpec{ID: o.HostIDs[0], PoolID: f.Pool, NameLabel: cmp.Or(o.HostNames[0], "host-1")})
	f.Host2 = x.AddHost(t, xosim.HostSpec{ID: o.HostIDs[1], PoolID: f.Pool, NameLabel: cmp.Or(o.HostNames[1], "host-2")})

	inv := o.Inventory
	inv.Name = cmp.Or(inv.Name, o.Name)
	inv.PollPeriod = cmp.Or(inv.PollPeriod, time.Second)
	inv.StreamIdleTimeout = cmp.Or(inv.StreamIdleTimeout, 700*time.Millisecond)
	inv.SettleTime = cmp.Or(inv.SettleTime, TestSettleTime)
	f.SettleTime = inv.SettleTime
	if o.FakeClock {
		f.Clock = clocktesting.NewFakeClock(time.Now())
		inv.Clock = f.Clock
		f.Inventory = x.startOnFakeClock(t, f.Clock, inv)
	} else {
		f.Inventory = x.StartInventory(t, inv)
	}
	f.Estate = Estate(x)
	return f
}

// startOnFakeClock is StartInventory on a fake clock: while StartInventory waits for the
// first listing and for the pools to be trusted, the clock moves on by the settle time every
// few milliseconds.
func (x *XO) startOnFakeClock(t testing.TB, clk *clocktesting.FakeClock, o inventory.Options) *inventory.Inventory {
	t.Helper()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				clk.Step(o.SettleTime)
			}
		}
	}()
	defer func() { close(stop); <-done }()
	return x.StartInventory(t, o)
}

// Settle makes the inventory trust the given pools, which XO reports connected: a listing
// sees them connected now (if none did before), the fake clock moves on by exactly the settle
// time, and a full listing follows. The pools are trusted from the fake clock's new time on.
func (f *Fixture) Settle(pools ...string) {
	f.T.Helper()
	f.Relist()
	f.Step(f.SettleTime)
	f.Relist()
	s := f.Inventory.Snapshot()
	for _, p := range pools {
		if !s.PoolConnected(p) {
			f.T.Fatalf("pool %s not trusted after the settle time and a listing", p)
		}
	}
}

// Step moves the fake clock on by d.
func (f *Fixture) Step(d time.Duration) {
	f.T.Helper()
	if f.Clock == nil {
		f.T.Fatal("Step needs FixtureOptions.FakeClock")
	}
	f.Clock.Step(d)
}

// Relist lists XO now, as the inventory's periodic relist would, and fails the test on error.
func (f *Fixture) Relist() {
	f.T.Helper()
	if err := f.Inventory.Relist(f.Ctx); err != nil {
		f.T.Fatal(err)
	}
}

// AddVM adds a VM (pool and host default to the fixture's pool and Host1, with 2 vCPUs and
// FixtureOptions.VMMemory) and waits until the inventory holds it.
func (f *Fixture) AddVM(spec xosim.VMSpec) string {
	f.T.Helper()
	id := f.AddVMQuietly(spec)
	f.WaitInventory("VM "+spec.NameLabel+" in the inventory", func(s *inventory.Snapshot) bool { return s.VM(id) != nil })
	return id
}

// AddVMQuietly is AddVM without waiting for the inventory.
func (f *Fixture) AddVMQuietly(spec xosim.VMSpec) string {
	f.T.Helper()
	spec.PoolID = cmp.Or(spec.PoolID, f.Pool)
	if spec.PoolID == f.Pool {
		spec.HostID = cmp.Or(spec.HostID, f.Host1)
	}
	spec.CPUs = cmp.Or(spec.CPUs, 2)
	spec.Memory = cmp.Or(spec.Memory, f.vmMemory)
	return f.X.AddVM(f.T, spec)
}

// WaitInventory waits up to 5 s until cond holds for the inventory's snapshot; without event
// stream it relists before each look, as the periodic relists would.
func (f *Fixture) WaitInventory(what string, cond func(*inventory.Snapshot) bool) {
	f.T.Helper()
	Eventually(f.T, 5*time.Second, what, func() bool {
		if !f.X.stream {
			f.Relist()
		}
		return cond(f.Inventory.Snapshot())
	})
}

// CreateNode registers an initialized Node (Ready unless opts say otherwise) for a VM of the
// fixture's pool, as a kubelet with --provider-id would, and removes it at the end of the
// test.
func (f *Fixture) CreateNode(suffix, vmID string, opts ...NodeOption) *corev1.Node {
	f.T.Helper()
	all := append([]NodeOption{
		WithProviderID(node.FormatProviderID(f.Pool, vmID)),
		WithSystemUUID(vmID),
		Initialized(),
	}, opts...)
	n := KubeletNode(NodeName(f.T, suffix), all...)
	f.Env.AddNode(f.T, n)
	return n
}

// Get reads a Node from the API server; it fails the test when the Node is missing.
func (f *Fixture) Get(name string) *corev1.Node { f.T.Helper(); return f.Env.Node(f.T, name) }

// Exists reports whether the Node is still there.
func (f *Fixture) Exists(name string) bool { f.T.Helper(); return f.Env.NodeExists(f.T, name) }

// SetReady writes the Node's Ready condition, as the kubelet does.
func (f *Fixture) SetReady(name string, ready bool) {
	f.T.Helper()
	if err := SetReady(f.Ctx, f.Env.Client, name, ready); err != nil {
		f.T.Fatal(err)
	}
}

// HasTaint reports whether the stored Node has the taint (key, and effect unless empty).
func (f *Fixture) HasTaint(name, key string, effect corev1.TaintEffect) bool {
	f.T.Helper()
	return node.HasTaint(f.Get(name).Spec.Taints, key, effect)
}

// Refuse closes XO's listener: connections are refused until the returned function listens
// again on the same address.
func (f *Fixture) Refuse() (restore func()) {
	f.X.Close()
	return func() { f.X.Reopen(f.T) }
}

// RequestCounter counts the requests that the clients built from a rest.Config it wrapped
// send to the API server, by method and path, and the answers 409 Conflict among them.
type RequestCounter struct {
	mu        sync.Mutex
	counts    map[string]int
	conflicts int
}

// Config returns a copy of cfg whose requests c counts.
func (c *RequestCounter) Config(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			c.mu.Lock()
			if c.counts == nil {
				c.counts = map[string]int{}
			}
			c.counts[req.Method+" "+req.URL.Path]++
			c.mu.Unlock()
			resp, err := rt.RoundTrip(req)
			if err == nil && resp.StatusCode == http.StatusConflict {
				c.mu.Lock()
				c.conflicts++
				c.mu.Unlock()
			}
			return resp, err
		})
	})
	return cfg
}

// NodeWrites returns how many writes (any method but GET) were sent for the Node named name,
// its subresources included.
func (c *RequestCounter) NodeWrites(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for k, v := range c.counts {
		method, path, _ := strings.Cut(k, " ")
		if method != http.MethodGet && (path == "/api/v1/nodes/"+name || strings.HasPrefix(path, "/api/v1/nodes/"+name+"/")) {
			n += v
		}
	}
	return n
}

// Requests returns how many requests were sent with this method and path.
func (c *RequestCounter) Requests(method, path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[method+" "+path]
}

// Conflicts returns how many requests were answered 409 Conflict.
func (c *RequestCounter) Conflicts() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.conflicts
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
