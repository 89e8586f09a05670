//go:build bench

package bench_test

import (
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/test/bench"
)

// The estates phase (issue #10): several XO servers, one of them down, and a pool scope, each
// server a simulator of its own.
const (
	// estatePools and estateHosts shape each server of the two-server estate.
	estatePools = 2
	estateHosts = 4
	// scopeHosts is the number of hosts per pool of the scoped server; scopePools the number
	// of its pools in scope.
	scopeHosts = 2
	scopePools = 2
	// outageWatched is the number of NotReady Nodes watched on the down server, and again on
	// the pool XO drops.
	outageWatched = 20
)

// namedSim is a simulator with the name the controller's config gives its server.
type namedSim struct {
	name string
	x    *simXO
}

// estates runs the estates benchmarks with their own simulators, then leaves no Node behind.
func (h *harness) estates() {
	e := &bench.Estates{Servers: 2, VMsPerServer: *flagEstateVMs, PoolsPerServer: estatePools, HostsPerPool: estateHosts}
	h.res.Estates = e
	h.stopController()
	h.t.Logf("building two simulated XO servers with %d VMs each and one with %d VMs in %d pools", *flagEstateVMs, *flagScopeVMs, *flagScopePools)
	a := newSimXO(h.t, simSpec{Prefix: "a-", Pools: estatePools, HostsPerPool: estateHosts, VMs: *flagEstateVMs, IPBase: 100_000})
	b := newSimXO(h.t, simSpec{Prefix: "b-", Pools: estatePools, HostsPerPool: estateHosts, VMs: *flagEstateVMs, IPBase: 200_000})
	c := newSimXO(h.t, simSpec{Prefix: "c-", Pools: *flagScopePools, HostsPerPool: scopeHosts, VMs: *flagScopeVMs, IPBase: 300_000})
	xa, xb := namedSim{"xo-a", a}, namedSim{"xo-b", b}
	h.run("estates: two XO servers", func() { h.splitEstate(e, xa, xb) })
	// On the same controller, with the Nodes split left.
	h.run("estates: one XO server down", func() { h.outage(e, xa, xb, *flagEstateNodes/2) })
	h.run("estates: pool scope", func() { h.scope(e, namedSim{"xo-c", c}) })
	h.stopController()
	if err := h.deleteAllNodes(h.ctx); err != nil {
		h.fail("estates: %v", err)
	}
	h.note(fmt.Sprintf("Estates: every server is a simulator of its own on its own loopback port, listed in the config's `clusters:` with a `name` (the `server` label of the controller's metrics). Steady-state windows last %.0f s with `inventory.resyncPeriod: %.0f s`; the XO requests and bytes are each simulator's own counters. A server is down when its listener is closed (testenv.XO.Close: connections refused) after its event streams are cut.", h.estateWindow().Seconds(), steadyResync.Seconds()))
}

// clusters returns the config's clusters list for sims, without a pool scope.
func clusters(sims ...namedSim) []clusterConfig {
	var out []clusterConfig
	for _, s := range sims {
		out = append(out, clusterConfig{Name: s.name, URL: s.x.url})
	}
	return out
}

// startEstate starts a fresh controller on a cluster without Nodes, with the webhook on
// (checked with a probe Node of probe), and waits until it is quiet.
func (h *harness) startEstate(cfg controllerConfig, probe vmInfo) *controller {
	h.stopController()
	if err := h.deleteAllNodes(h.ctx); err != nil {
		h.t.Fatal(err)
	}
	c := h.restartController(controllerOpts{Webhook: true, Config: cfg})
	if err := h.setWebhook(h.ctx, true, probe); err != nil {
		h.t.Fatal(err)
	}
	if _, err := c.settle(h.ctx, time.Minute); err != nil {
		h.t.Log(err)
	}
	return c
}

// splitEstate: Nodes split across two XO servers, created at once; then each server's XO load
// at steady state with those Nodes and with a tenth of them, and the controller's memory.
func (h *harness) splitEstate(e *bench.Estates, a, b namedSim) {
	n := *flagEstateNodes
	if n/2 > len(a.x.vms) || n/2 > len(b.x.vms) {
		h.fail("estates: %d Nodes need %d VMs per server", n, n/2)
		return
	}
	vms := make([]vmInfo, 0, n)
	for i := range n {
		vms = append(vms, [2]*simXO{a.x, b.x}[i%2].vms[i/2])
	}
	cl := clusters(a, b)
	c := h.startEstate(controllerConfig{Clusters: cl}, a.x.vms[len(a.x.vms)-1])
	bu := h.measureBurst(c, fmt.Sprintf("estates: %d Nodes split across two XO servers", n), vms, true, a.x, b.x)
	e.Split = &bu

	c = h.restartController(controllerOpts{Webhook: true, Config: controllerConfig{Clusters: cl, ResyncPeriod: steadyResync}})
	if _, err := c.settle(h.ctx, 3*time.Minute); err != nil {
		h.fail("estates: %v", err)
	}
	loads, mem := h.serverLoad(c, n, a, b)
	mem.Nodes, mem.VMs = n, len(a.x.vms)+len(b.x.vms)
	e.SplitLoad, e.SplitMemory = loads, &mem

	// Fewer Nodes: a tenth of them, on both servers.
	keep := max(n/10, 2)
	var gone []string
	for _, vm := range vms[keep:] {
		gone = append(gone, vm.Name)
	}
	if err := h.deleteNodes(gone); err != nil {
		h.fail("estates: %v", err)
		return
	}
	if _, err := c.settle(h.ctx, time.Minute); err != nil {
		h.t.Log(err)
	}
	loads, _ = h.serverLoad(c, keep, a, b)
	e.SplitLoad = append(e.SplitLoad, loads...)
}

// estateWindow is the length of the estates' steady-state windows: one resync period (two in
// the full run) and a margin for the relist's own time.
func (h *harness) estateWindow() time.Duration {
	if *flagWindow > 0 {
		return *flagWindow
	}
	if *flagQuick {
		return steadyResync + 5*time.Second
	}
	return 2*steadyResync + 5*time.Second
}

// serverLoad counts each server's XO requests and the Node changes and writes over a window
// with nodes Nodes and nothing changing, and reads the controller's memory every 2 s.
func (h *harness) serverLoad(c *controller, nodes int, sims ...namedSim) ([]bench.Steady, bench.Memory) {
	ctx := h.ctx
	window := h.estateWindow()
	before, err := h.apiRequests(ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	for _, s := range sims {
		s.x.sim.ResetCounters()
	}
	h.watch.resetChanges()
	mems := c.sampleMemory(ctx, window)
	if ctx.Err() != nil {
		return nil, bench.Memory{}
	}
	after, err := h.apiRequests(ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	changes, samples := h.watch.changeCount()
	writes := bench.Writes(bench.Delta(before, after))
	lists := []string{"GET /rest/v0/vms", "GET /rest/v0/hosts", "GET /rest/v0/pools", "GET /rest/v0/servers"}
	var out []bench.Steady
	for _, s := range sims {
		reqs := s.x.requests()
		st := bench.Steady{
			Server: s.name, Nodes: nodes, Window: window, ResyncPeriod: steadyResync, Relists: reqs["GET /rest/v0/vms"], XORequests: reqs,
			ListBytes:   s.x.bytes(func(k string) bool { return slices.Contains(lists, k) }),
			NodeChanges: changes, NodeChangeSamples: samples, APIWrites: writes,
		}
		out = append(out, st)
		h.t.Logf("estates: server %s with %d Nodes over %s: %d relists, XO %v (%.1f requests, %.0f bytes per relist); %d Node changes %v; API writes %v",
			s.name, nodes, window, st.Relists, reqs, st.RequestsPerRelist(), st.BytesPerRelist(), changes, samples, writes)
		if st.Relists == 0 {
			h.fail("estates: server %s: no relist in %s with resyncPeriod %s", s.name, window, steadyResync)
		}
	}
	if changes != 0 || len(writes) != 0 {
		h.fail("estates: the controller wrote while nothing changed (%d Nodes): %d Node changes (%v), writes %v", nodes, changes, samples, writes)
	}
	if len(mems) == 0 {
		h.fail("estates: no memory reading")
		return out, bench.Memory{}
	}
	return out, bench.MedianMemory(mems)
}

// outage, on the controller of splitEstate (its Nodes left): NotReady Nodes on server b and
// on one pool of server a; b goes down; a burst of Nodes of a's other pool; then XO drops
// that pool of a. None of the NotReady Nodes may go. used is the number of VMs of each server
// that already have (or had) a Node.
func (h *harness) outage(e *bench.Estates, a, b namedSim, used int) {
	ctx := h.ctx
	n := *flagOutageNodes
	fresh := func(x *simXO, pool string) []vmInfo {
		var out []vmInfo
		for _, vm := range x.vms[min(used, len(x.vms)):] {
			if vm.Pool == pool {
				out = append(out, vm)
			}
		}
		return out
	}
	healthy, dropped, down := fresh(a.x, a.x.pools[0]), fresh(a.x, a.x.pools[1]), b.x.vms[min(used, len(b.x.vms)):]
	k := min(outageWatched, len(dropped), len(down))
	if n > len(healthy) {
		h.fail("estates: %d Nodes need %d VMs without a Node in the first pool of server %s, it has %d", n, n, a.name, len(healthy))
		return
	}
	c := h.ctrl
	if c == nil {
		c = h.startEstate(controllerConfig{Clusters: clusters(a, b), ResyncPeriod: steadyResync}, healthy[len(healthy)-1])
	}
	watched := slices.Concat(down[:k], dropped[:k])
	if err := h.createNodes(watched); err != nil {
		h.fail("estates: %v", err)
		return
	}
	for _, vm := range watched {
		if err := h.setReady(ctx, vm.Name, false); err != nil {
			h.fail("estates: %v", err)
			return
		}
	}
	// XO's word counts only for pools the controller trusts: make sure it does, so that
	// keeping the Nodes is its decision, not a start-up wait.
	if err := c.awaitTrusted(ctx, *flagSettle+time.Minute); err != nil {
		h.fail("estates: %v", err)
	}
	// Let the controller see the Nodes NotReady (with their VMs there) before the outage.
	time.Sleep(time.Second)

	b.x.down()
	if err := c.await(ctx, 30*time.Second, func(m []bench.Sample) bool {
		return bench.Sum(m, "xenorchestra_event_stream_up", map[string]string{"server": b.name}) == 0
	}); err != nil {
		h.fail("estates: server %s down: %v", b.name, err)
	}
	// This controller relists every resync period: start right after a relist of a, so that
	// none falls in the burst, as with the default period of 10 minutes.
	relists := a.x.sim.RequestCount("GET", "/rest/v0/vms")
	deadline := time.Now().Add(steadyResync + 10*time.Second)
	for a.x.sim.RequestCount("GET", "/rest/v0/vms") == relists && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second)
	o := &bench.Outage{Healthy: a.name, Down: b.name, DownNodes: k, DroppedNodes: k}
	o.Burst = h.measureBurst(c, fmt.Sprintf("estates: %d Nodes of server %s while %s is down", n, a.name, b.name), healthy[:n], true, a.x)

	if err := a.x.sim.DisconnectPool(a.x.pools[1]); err != nil {
		h.fail("estates: drop pool: %v", err)
	}
	droppedAt := time.Now()
	select {
	case <-time.After(*flagSettle + 10*time.Second):
	case <-ctx.Done():
		return
	}
	o.Watched = time.Since(droppedAt)
	for _, vm := range watched {
		if h.watch.get(vm.Name) == nil {
			o.Deleted = append(o.Deleted, vm.Name)
		}
	}
	e.Outage = o
	h.t.Logf("estates: %d of %d NotReady Nodes deleted within %s of XO dropping their pool or their server going down: %v",
		len(o.Deleted), len(watched), o.Watched.Round(time.Second), o.Deleted)
	if len(o.Deleted) > 0 {
		h.fail("estates: NotReady Nodes deleted while their XO server was down or XO dropped their pool: %v\n%s", o.Deleted, tail(c.log))
	}
	h.stopController()
}

// scope: one XO server with many pools; the controller with a scope of two of them, a burst of
// the Nodes of their VMs, then its XO load and memory; the same without the scope.
func (h *harness) scope(e *bench.Estates, x namedSim) {
	if len(x.x.pools) < scopePools {
		h.fail("estates: a scope of %d pools needs as many", scopePools)
		return
	}
	var names []string
	for p := range scopePools {
		spec, _ := x.x.sim.Pool(x.x.pools[p])
		names = append(names, spec.NameLabel)
	}
	vms := x.x.inPools(x.x.pools[:scopePools]...)
	for i, scoped := range []bool{true, false} {
		cl := clusterConfig{Name: x.name, URL: x.x.url}
		run := bench.ScopeRun{Pools: len(x.x.pools), VMs: len(x.x.vms), ScopeVMs: len(x.x.vms), Nodes: len(vms)}
		if scoped {
			cl.Pools, run.ScopePools, run.ScopeVMs = names, scopePools, len(vms)
		}
		cfg := controllerConfig{Clusters: []clusterConfig{cl}, ResyncPeriod: steadyResync}
		var c *controller
		if i == 0 {
			c = h.startEstate(cfg, vms[len(vms)-1])
			bu := h.measureBurst(c, fmt.Sprintf("estates: %d Nodes of a scope of %d pools out of %d", len(vms), scopePools, len(x.x.pools)), vms, true, x.x)
			run.Burst = &bu
		} else {
			c = h.restartController(controllerOpts{Webhook: true, Config: cfg})
			if _, err := c.settle(h.ctx, 3*time.Minute); err != nil {
				h.fail("estates: %v", err)
			}
		}
		loads, mem := h.serverLoad(c, len(vms), x)
		if len(loads) == 0 {
			return
		}
		mem.Nodes, mem.VMs = len(vms), len(x.x.vms)
		run.Load, run.Memory = loads[0], mem
		if m, err := c.scrape(); err == nil {
			run.HeldVMs = int64(bench.Sum(m, "xenorchestra_inventory_objects", map[string]string{"server": x.name, "collection": "vms"}))
		}
		e.Scope = append(e.Scope, run)
		h.t.Logf("estates: scope of %d pools: %d VMs held; RSS median %.1f MiB, max %.1f MiB; %.0f bytes per relist",
			run.ScopePools, run.HeldVMs, float64(mem.RSS)/(1<<20), float64(mem.RSSMax)/(1<<20), run.Load.BytesPerRelist())
		if run.HeldVMs != int64(run.ScopeVMs) {
			h.fail("estates: the inventory holds %d VMs, want the %d of its scope", run.HeldVMs, run.ScopeVMs)
		}
	}
}

// createNodes creates the Nodes of vms and waits until they are initialized.
func (h *harness) createNodes(vms []vmInfo) error {
	if err := parallel(vms, func(vm vmInfo) error { return h.c.Create(h.ctx, kubeletNode(vm)) }); err != nil {
		return fmt.Errorf("create nodes: %w", err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for _, vm := range vms {
		for !initialized(h.watch.get(vm.Name)) {
			if time.Now().After(deadline) {
				return fmt.Errorf("node %s not initialized after 2 minutes", vm.Name)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

// deleteNodes deletes the Nodes named names and waits until the watch has seen them go.
func (h *harness) deleteNodes(names []string) error {
	if err := parallel(names, func(name string) error {
		return h.c.Delete(h.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}})
	}); err != nil {
		return fmt.Errorf("delete nodes: %w", err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for _, name := range names {
		for h.watch.get(name) != nil {
			if time.Now().After(deadline) {
				return fmt.Errorf("node %s still there 2 minutes after its deletion", name)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	h.watch.forget()
	return nil
}

// parallel runs fn for every item, 16 at a time, and returns the first error.
func parallel[T any](items []T, fn func(T) error) error {
	jobs := make(chan T)
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for item := range jobs {
				if err := fn(item); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	for _, item := range items {
		jobs <- item
	}
	close(jobs)
	wg.Wait()
	return first
}
