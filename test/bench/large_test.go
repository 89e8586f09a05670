//go:build bench

package bench_test

import (
	"fmt"
	"time"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/test/bench"
)

// The large-XO phase (issue #13): an XO with many VMs of which a few are Nodes, all of them in
// two of its pools.
const (
	largePools  = 20
	largeHosts  = 10
	largeScoped = 2
)

// large runs the large-XO benchmarks on a simulator of its own, with the inventory scoped to
// the Nodes' pools and without a scope, then leaves no Node behind.
func (h *harness) large() {
	l := &bench.Large{Pools: largePools, HostsPerPool: largeHosts, VMs: *flagLargeVMs}
	h.res.Large = l
	h.stopController()
	start := time.Now()
	x := newSimXO(h.t, simSpec{Prefix: "l-", Pools: largePools, HostsPerPool: largeHosts, VMs: *flagLargeVMs, IPBase: 400_000})
	h.t.Logf("large XO: simulator with %d VMs in %d pools of %d hosts built in %s", *flagLargeVMs, largePools, largeHosts, time.Since(start).Round(time.Millisecond))
	inScope := x.inPools(x.pools[:largeScoped]...)
	if len(inScope) < *flagLargeNodes+*flagLargeEvents+1 {
		h.fail("large XO: %d VMs in the %d pools of the scope, want %d Nodes, %d to change and a probe", len(inScope), largeScoped, *flagLargeNodes, *flagLargeEvents)
		return
	}
	nodes, others := inScope[:*flagLargeNodes], inScope[*flagLargeNodes:]
	var names []string
	for _, p := range x.pools[:largeScoped] {
		spec, _ := x.sim.Pool(p)
		names = append(names, spec.NameLabel)
	}
	s := namedSim{"xo-large", x}
	for _, scoped := range []bool{true, false} {
		h.run(fmt.Sprintf("large XO, scope %t", scoped), func() {
			l.Runs = append(l.Runs, h.largeRun(s, names, nodes, others, scoped))
		})
	}
	h.stopController()
	if err := h.deleteAllNodes(h.ctx); err != nil {
		h.fail("large XO: %v", err)
	}
	h.note(fmt.Sprintf("Large XO: one simulator with %d VMs in %d pools of %d hosts; the Nodes are VMs of %d of the pools, the scope (`clusters[].pools`) names those. Each configuration starts on a cluster without Nodes: a burst of %d Nodes (admission p99 from the API server's `apiserver_admission_webhook_admission_duration_seconds` buckets), the other Nodes created, the XO load over a steady-state window with `inventory.resyncPeriod: %.0f s`, then the memory of a restarted controller with the default configuration and the scope, read as in \"Memory\". Events: tags added to %d VMs of the scope that are not Nodes, one simulator call each as fast as it takes them, with the controllers running; applied = changes the inventory published (`xenorchestra_inventory_changes_total{kind=\"vm\"}`).",
		*flagLargeVMs, largePools, largeHosts, largeScoped, *flagLargeBurst, steadyResync.Seconds(), *flagLargeEvents))
}

// largeRun measures one configuration of the large-XO phase: the burst, the XO load and relist
// time at steady state, the event throughput, and the memory at rest.
func (h *harness) largeRun(s namedSim, scope []string, nodes, others []vmInfo, scoped bool) bench.LargeRun {
	ctx := h.ctx
	what := fmt.Sprintf("large XO (scope %t)", scoped)
	cl := clusterConfig{Name: s.name, URL: s.x.url}
	run := bench.LargeRun{ScopeVMs: len(s.x.vms), Nodes: len(nodes)}
	if scoped {
		cl.Pools, run.ScopePools, run.ScopeVMs = scope, len(scope), len(nodes)+len(others)
	}
	probe := others[len(others)-1]
	c := h.startEstate(controllerConfig{Clusters: []clusterConfig{cl}, ResyncPeriod: steadyResync}, probe)
	burst := min(*flagLargeBurst, len(nodes))
	run.Burst = h.measureBurst(c, fmt.Sprintf("%s: %d Nodes", what, burst), nodes[:burst], true, s.x)
	if err := h.createNodes(nodes[burst:]); err != nil {
		h.fail("%s: %v", what, err)
		return run
	}
	if err := c.awaitTrusted(ctx, 3*time.Minute); err != nil {
		h.fail("%s: %v", what, err)
	}
	if _, err := c.settle(ctx, 3*time.Minute); err != nil {
		h.fail("%s: %v", what, err)
	}

	before, err := c.scrape()
	if err != nil {
		h.fail("%s: %v", what, err)
		return run
	}
	loads, _ := h.serverLoad(c, len(nodes), s)
	after, err := c.scrape()
	if err != nil || len(loads) == 0 {
		h.fail("%s: no steady-state reading (%v)", what, err)
		return run
	}
	run.Load = loads[0]
	server := map[string]string{"server": s.name}
	if m, _, ok := bench.MeanDelta(before, after, "xenorchestra_inventory_relist_duration_seconds", server); ok {
		run.RelistMean = seconds(m)
	}
	run.HeldVMs = int64(bench.Sum(after, "xenorchestra_inventory_objects", map[string]string{"server": s.name, "collection": "vms"}))
	if run.HeldVMs != int64(run.ScopeVMs) {
		h.fail("%s: the inventory holds %d VMs, want %d", what, run.HeldVMs, run.ScopeVMs)
	}

	// Event throughput: one tag added to each of the VMs, as fast as the simulator takes them.
	changed := others[:min(*flagLargeEvents, len(others)-1)]
	vmChanges := map[string]string{"server": s.name, "kind": "vm"}
	base := bench.Sum(after, "xenorchestra_inventory_changes_total", vmChanges)
	t0 := time.Now()
	for i, vm := range changed {
		if err := s.x.sim.AddTag(vm.ID, fmt.Sprintf("bench-%t-%d", scoped, i)); err != nil {
			h.fail("%s: %v", what, err)
			return run
		}
	}
	run.Events, run.SimTook = len(changed), time.Since(t0)
	deadline := t0.Add(2 * time.Minute)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if m, err := c.scrape(); err == nil {
			run.Applied = int64(bench.Sum(m, "xenorchestra_inventory_changes_total", vmChanges) - base)
			run.AppliedAfter = time.Since(t0)
			if run.Applied >= int64(run.Events) {
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	h.t.Logf("%s: %d VMs held; relist mean %s, %.0f bytes per relist; %d VM changes made in %s (%.0f/s), %d applied after %s (%.0f/s)",
		what, run.HeldVMs, run.RelistMean.Round(time.Millisecond), run.Load.BytesPerRelist(), run.Events, run.SimTook.Round(time.Millisecond),
		float64(run.Events)/run.SimTook.Seconds(), run.Applied, run.AppliedAfter.Round(time.Millisecond), float64(run.Applied)/run.AppliedAfter.Seconds())
	if run.Applied < int64(run.Events) {
		h.fail("%s: %d of %d VM changes applied after %s", what, run.Applied, run.Events, run.AppliedAfter)
	}

	// Memory at rest, the default configuration with the same scope.
	c = h.restartController(controllerOpts{Webhook: true, Config: controllerConfig{Clusters: []clusterConfig{cl}}})
	if m, ok := h.quietMemory(c, what+", memory", fmt.Sprintf("large-scope-%t", scoped)); ok {
		m.Nodes, m.VMs = len(nodes), len(s.x.vms)
		run.Memory = m
	}
	return run
}
