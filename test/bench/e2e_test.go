//go:build bench

package bench_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/test/bench"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/xosim"
)

var (
	flagOut      = flag.String("bench.out", "", "Write the results as JSON to this file.")
	flagQuick    = flag.Bool("bench.quick", false, "Quick mode: shorter steady-state windows and fewer reaction samples.")
	flagChurn    = flag.Duration("bench.churn", 10*time.Minute, "Length of the churn run (0 skips it).")
	flagSizes    = flag.String("bench.sizes", "100,500,1000,5000", "Burst sizes, ascending; the last is the cluster for reactions, memory and churn.")
	flagSteady   = flag.String("bench.steady-sizes", "100,1000,5000", "Node counts at which steady-state load and memory are measured (each must be a burst size).")
	flagVMs      = flag.Int("bench.vms", 10000, "VMs in the simulated XO.")
	flagPools    = flag.Int("bench.pools", 4, "Pools in the simulated XO.")
	flagHosts    = flag.Int("bench.hosts", 8, "Hosts per pool.")
	flagCreators = flag.Int("bench.creators", 64, "Goroutines creating Nodes at once in a burst.")
	flagBinary   = flag.String("bench.binary", "", "The controller binary; empty builds ./cmd/xenorchestra-cloud-controller-manager.")
	flagCommand  = flag.String("bench.command", "make bench", "The command that reproduces the run, for the report.")
	flagPhases   = flag.String("bench.phases", "steady,reactions,churn,estates,large", "Phases to run besides the bursts: steady, reactions, churn, estates, large.")
	flagSettle   = flag.Duration("bench.settle", 30*time.Second, "inventory.settleTime of every run of the controller (the default is 30s).")
	flagWindow   = flag.Duration("bench.window", 0, "Steady-state windows; 0: 1 resync period and 5 s (quick), 5 periods and 1 s (steady phase) or 2 periods and 5 s (estates).")
	flagSamples  = flag.Int("bench.samples", 0, "Reaction samples per change and mode; 0: 10 (quick) or 20.")
	flagModes    = flag.String("bench.webhook-modes", "off,on", "Webhook modes of the bursts; the later phases need \"on\".")
	// flagCtrlArgs and flagCtrlEnv are for investigations (e.g. "--kube-api-qps=5000" or
	// "GOMEMLIMIT=64MiB"); the report notes them.
	flagCtrlArgs = flag.String("bench.controller-args", "", "Extra flags of the controller, space-separated.")
	flagCtrlEnv  = flag.String("bench.controller-env", "", "Extra environment variables of the controller, space-separated NAME=value.")
	// flagProfiles runs the controller with --profiling and saves its heap profile at the end of
	// each memory reading, for `go tool pprof`.
	flagProfiles = flag.String("bench.profile-dir", "", "Save the controller's heap profile of each memory reading, and CPU profiles of the controller and the API server over the first 20 s of each burst, in this folder.")

	// The estates phase (issue #10) has simulators of its own.
	flagEstateVMs   = flag.Int("bench.estate-vms", 5000, "Estates: VMs of each of the two XO servers.")
	flagEstateNodes = flag.Int("bench.estate-nodes", 1000, "Estates: Nodes split across the two XO servers.")
	flagOutageNodes = flag.Int("bench.outage-nodes", 500, "Estates: Nodes of one XO server created while the other is down.")
	flagScopeVMs    = flag.Int("bench.scope-vms", 10000, "Estates: VMs of the XO server with a pool scope.")
	flagScopePools  = flag.Int("bench.scope-pools", 20, "Estates: pools of the XO server with a pool scope, 2 of them in scope.")

	// The large-XO phase (issue #13).
	flagLargeVMs    = flag.Int("bench.large-vms", 100_000, "Large XO: VMs of the simulated XO (in 20 pools of 10 hosts).")
	flagLargeNodes  = flag.Int("bench.large-nodes", 1000, "Large XO: Nodes, VMs of the 2 pools in scope.")
	flagLargeBurst  = flag.Int("bench.large-burst", 500, "Large XO: Nodes of the burst, of the large-nodes.")
	flagLargeEvents = flag.Int("bench.large-events", 5000, "Large XO: VM changes made at once, on VMs of the scope that are not Nodes.")
)

const (
	// steadyResync is the shortest inventory.resyncPeriod the config accepts.
	steadyResync = 30 * time.Second
	// relistPoll is inventory.pollPeriod in the relist-only mode.
	relistPoll = 2 * time.Second
	// upstreamPeriod is the period of the upstream XO CCM's node-status and label-sync loops.
	upstreamPeriod = 5 * time.Minute
	burstTimeout   = 5 * time.Minute
	sampleTimeout  = time.Minute
)

// harness holds what every phase shares: the control plane, the simulated XO, the Node watch,
// the controller running now, and the results.
type harness struct {
	t          *testing.T
	ctx        context.Context
	dir        string
	env        *testenv.Env
	c          client.Client
	cs         kubernetes.Interface
	kubeconfig string
	binary     string
	xo         *simXO
	watch      *nodeWatch
	webhookCfg *admissionregistrationv1.MutatingWebhookConfiguration
	res        *bench.Results
	ctrl       *controller
	// used counts the VMs (from the start of the list) whose Nodes a reaction sample consumed.
	used int
}

// TestEndToEnd runs every end-to-end benchmark against one control plane and one simulated XO
// and writes the figures to -bench.out.
func TestEndToEnd(t *testing.T) {
	ctrl.SetLogger(zap.New(zap.Level(zapcore.ErrorLevel)))
	h := newHarness(t)
	sizes := parseSizes(t, *flagSizes)
	steady := parseSizes(t, *flagSteady)
	phases := strings.Split(*flagPhases, ",")

	modes := strings.Split(*flagModes, ",")
	for i, n := range sizes {
		for _, m := range modes {
			h.run(fmt.Sprintf("burst %d webhook %s", n, m), func() { h.burst(n, m == "on") })
		}
		if slices.Contains(steady, n) && slices.Contains(phases, "steady") {
			h.run(fmt.Sprintf("memory %d", n), func() { h.memory(n) })
			h.run(fmt.Sprintf("steady %d", n), func() { h.steady(n) })
			h.run(fmt.Sprintf("upstream-style %d", n), func() { h.upstream(n) })
		}
		if i < len(sizes)-1 {
			h.stopController()
			if err := h.deleteAllNodes(h.ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	n := sizes[len(sizes)-1]
	if slices.Contains(phases, "reactions") {
		h.run("reactions, event stream", func() { h.reactions(n, bench.ModeEvents) })
		h.run("reactions, relist only", func() { h.reactions(n, bench.ModeRelist) })
	}
	if slices.Contains(phases, "churn") && *flagChurn > 0 {
		h.run("churn", func() { h.churn(n, *flagChurn) })
	}
	if slices.Contains(phases, "estates") {
		h.estates()
	}
	if slices.Contains(phases, "large") {
		h.large()
	}
	h.stopController()
}

func newHarness(t *testing.T) *harness {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h := &harness{t: t, ctx: ctx, dir: t.TempDir()}
	load, _ := bench.LoadAvg()
	h.res = &bench.Results{
		Quick: *flagQuick, Command: *flagCommand, Started: time.Now(), Creators: *flagCreators,
		Pools: *flagPools, Hosts: *flagPools * *flagHosts, VMs: *flagVMs, SettleTime: *flagSettle,
		Machine: bench.Machine{
			CPUs: runtime.NumCPU(), CPUModel: bench.CPUModel(), GoVersion: runtime.Version(),
			OS: runtime.GOOS + "/" + runtime.GOARCH, Kernel: bench.Kernel(), LoadStart: load,
		},
	}
	t.Cleanup(h.finish)

	var err error
	if h.binary = *flagBinary; h.binary == "" {
		t.Log("building the controller binary")
		if h.binary, err = testenv.BuildCommand(h.dir); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("building the simulated XO: %d pools, %d hosts each, %d VMs", *flagPools, *flagHosts, *flagVMs)
	h.xo = newSimXO(t, simSpec{Pools: *flagPools, HostsPerPool: *flagHosts, VMs: *flagVMs})

	t.Log("starting etcd and kube-apiserver")
	h.env, err = testenv.Start(testenv.Options{Webhook: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		h.stopController()
		cancel() // the Node watch first
		_ = h.env.Stop()
	})
	h.c = h.env.Client
	if h.cs, err = kubernetes.NewForConfig(h.env.Config); err != nil {
		t.Fatal(err)
	}
	h.kubeconfig = h.dir + "/kubeconfig"
	if err := os.WriteFile(h.kubeconfig, h.env.KubeConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	var cfgs admissionregistrationv1.MutatingWebhookConfigurationList
	if err := h.c.List(ctx, &cfgs); err != nil || len(cfgs.Items) != 1 {
		t.Fatalf("want the one webhook configuration envtest installs: %v (%d)", err, len(cfgs.Items))
	}
	h.webhookCfg = &cfgs.Items[0]
	h.watch = startNodeWatch(ctx, t, h.cs)
	if *flagCtrlArgs != "" || *flagCtrlEnv != "" {
		h.note(fmt.Sprintf("**Not the defaults**: the controller ran with extra flags `%s` and environment `%s`.", *flagCtrlArgs, *flagCtrlEnv))
	}
	h.note("The controller is the real binary (`go build ./cmd/xenorchestra-cloud-controller-manager`) run as a subprocess with its default flags except `--leader-elect=false`, talking to a real kube-apiserver and etcd and to the XO simulator (`xo/xosim`) over HTTP on loopback; the API server calls its webhook over TLS. Everything shares the machine.")
	h.note("Nodes are created as kubelets with `--cloud-provider=external --node-ip` create them (`internal/testenv.KubeletNode`: uninitialized taint, `status.nodeInfo.systemUUID` of the VM — byte-swapped for the fifth of the VMs that are UEFI guests — and the provided-node-ip annotation). They do not send heartbeats afterwards.")
	return h
}

// run runs one phase, recording a failure without stopping the others.
func (h *harness) run(name string, fn func()) {
	if h.ctx.Err() != nil {
		return
	}
	load, _ := bench.LoadAvg()
	h.t.Logf("=== %s (load average %.2f)", name, load[0])
	start := time.Now()
	fn()
	h.t.Logf("--- %s done in %s", name, time.Since(start).Round(time.Second))
}

func (h *harness) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	h.res.Errors = append(h.res.Errors, msg)
	h.t.Error(msg)
}

func (h *harness) note(s string) { h.res.Notes = append(h.res.Notes, s) }

func (h *harness) finish() {
	h.res.Finished = time.Now()
	h.res.Machine.LoadEnd, _ = bench.LoadAvg()
	if *flagOut == "" {
		return
	}
	data, err := json.MarshalIndent(h.res, "", "  ")
	if err == nil {
		err = os.WriteFile(*flagOut, data, 0o644)
	}
	if err != nil {
		h.t.Errorf("write results: %v", err)
	}
}

func (h *harness) restartController(o controllerOpts) *controller {
	h.stopController()
	c, err := h.startController(h.ctx, o)
	if err != nil {
		h.t.Fatal(err)
	}
	h.ctrl = c
	return c
}

func (h *harness) stopController() {
	if h.ctrl != nil {
		h.ctrl.stop()
		h.ctrl = nil
	}
}

// --- bursts --------------------------------------------------------------------------------------

// burst creates n Nodes at once and measures their initialization.
func (h *harness) burst(n int, webhook bool) {
	ctx := h.ctx
	h.stopController()
	if err := h.deleteAllNodes(ctx); err != nil {
		h.t.Fatal(err)
	}
	c := h.restartController(controllerOpts{Webhook: webhook})
	if err := h.setWebhook(ctx, webhook, h.xo.vms[len(h.xo.vms)-1]); err != nil {
		h.t.Fatal(err)
	}
	if _, err := c.settle(ctx, time.Minute); err != nil {
		h.t.Log(err)
	}
	b := h.measureBurst(c, fmt.Sprintf("burst of %d Nodes (webhook %t)", n, webhook), h.xo.vms[:n], webhook, h.xo)
	h.res.Bursts = append(h.res.Bursts, b)
}

// measureBurst creates the Nodes of vms at once, as their kubelets would, with c running, and
// measures their initialization. The XO requests counted are those of sims.
func (h *harness) measureBurst(c *controller, what string, vms []vmInfo, webhook bool, sims ...*simXO) bench.Burst {
	ctx := h.ctx
	n := len(vms)
	load, _ := bench.LoadAvg()
	names := make([]string, n)
	for i, vm := range vms {
		names[i] = vm.Name
	}
	for _, x := range sims {
		x.sim.ResetCounters()
	}
	apiBefore, err := h.apiMetrics(ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	ctrlBefore, _ := c.scrape()
	cpuBefore := h.cpuTimes(c)
	if *flagProfiles != "" {
		h.cpuProfiles(c, fmt.Sprintf("%d-webhook-%t", n, webhook))
	}

	sent := make([]time.Time, n)
	took := make([]time.Duration, n)
	var labelled, born atomic.Int64
	var createErrs atomic.Int64
	jobs := make(chan int, n)
	for i := range n {
		jobs <- i
	}
	close(jobs)
	var wg sync.WaitGroup
	start := time.Now()
	for range *flagCreators {
		wg.Go(func() {
			for i := range jobs {
				nd := kubeletNode(vms[i])
				sent[i] = time.Now()
				err := h.c.Create(ctx, nd)
				took[i] = time.Since(sent[i])
				switch {
				case err != nil:
					if createErrs.Add(1) <= 3 {
						h.t.Errorf("create node %s: %v", nd.Name, err)
					}
				case nd.Spec.ProviderID != "" && nd.Labels[node.LabelZone] != "":
					labelled.Add(1)
					if !node.HasTaint(nd.Spec.Taints, node.TaintUninitialized, "") {
						born.Add(1)
					}
				}
			}
		})
	}
	deadline := time.After(burstTimeout)
	tick := time.NewTicker(50 * time.Millisecond)
	done := 0
wait:
	for done < n {
		select {
		case <-h.watch.initCh:
		case <-tick.C:
		case <-deadline:
			break wait
		case <-ctx.Done():
			break wait
		}
		done = h.watch.initCount(names)
	}
	tick.Stop()
	wg.Wait()

	b := bench.Burst{Nodes: n, Webhook: webhook, Creators: *flagCreators, Initialized: done, Load: load[0],
		LabelledAtCreate: int(labelled.Load()), BornComplete: int(born.Load()), ControllerStartup: c.ready}
	var last time.Time
	for i, name := range names {
		if at, ok := h.watch.initTime(name); ok {
			b.Latencies = append(b.Latencies, at.Sub(sent[i]))
			if at.After(last) {
				last = at
			}
		}
	}
	b.Total = last.Sub(start)
	for i := range n {
		b.CreatesDone = max(b.CreatesDone, sent[i].Add(took[i]).Sub(start))
	}
	b.P50, b.P99, b.Max = bench.Percentile(b.Latencies, 0.5), bench.Percentile(b.Latencies, 0.99), bench.Percentile(b.Latencies, 1)
	b.CreateP50, b.CreateP99 = bench.Percentile(took, 0.5), bench.Percentile(took, 0.99)
	b.XORequests = map[string]int64{}
	for _, x := range sims {
		for k, v := range x.requests() {
			b.XORequests[k] += v
		}
	}
	// The writes and conflicts the burst causes include those after the last Node is
	// initialized (an event, a label the webhook left to the controller): wait until the
	// controller is quiet.
	if _, err := c.settle(ctx, 30*time.Second); err != nil {
		h.t.Logf("%s: %v", what, err)
	}
	b.CPU = cpuDelta(cpuBefore, h.cpuTimes(c))
	if apiAfter, err := h.apiMetrics(ctx); err == nil {
		b.APIRequests = bench.Delta(bench.APIRequests(apiBefore, "nodes", "events"), bench.APIRequests(apiAfter, "nodes", "events"))
		b.Conflicts = bench.Delta(bench.APIResponses(apiBefore, "409"), bench.APIResponses(apiAfter, "409"))
		if m, _, ok := bench.MeanDelta(apiBefore, apiAfter, "apiserver_admission_webhook_admission_duration_seconds", map[string]string{"operation": "CREATE"}); ok {
			b.AdmissionMean = seconds(m)
		}
		if q, ok := bench.QuantileDelta(apiBefore, apiAfter, "apiserver_admission_webhook_admission_duration_seconds", map[string]string{"operation": "CREATE"}, 0.99); ok {
			b.AdmissionP99 = seconds(q)
		}
		if m, _, ok := bench.MeanDelta(apiBefore, apiAfter, "apiserver_request_duration_seconds", map[string]string{"verb": "POST", "resource": "nodes"}); ok {
			b.CreateServerMean = seconds(m)
		}
		b.FailOpen = int64(bench.Sum(apiAfter, "apiserver_admission_webhook_fail_open_count", nil) - bench.Sum(apiBefore, "apiserver_admission_webhook_fail_open_count", nil))
	} else {
		h.fail("%s: %v", what, err)
	}
	if ctrlAfter, err := c.scrape(); err == nil {
		// Which of the controller's writes met a 409 (the API server's count includes every
		// client): its conflict counters since the controller started, in the log.
		for _, smp := range ctrlAfter {
			if smp.Labels["result"] == "conflict" && smp.Value > 0 {
				h.t.Logf("%s: controller conflicts %s %v: %v", what, smp.Name, smp.Labels, smp.Value)
			}
		}
		if m, _, ok := bench.MeanDelta(ctrlBefore, ctrlAfter, "controller_runtime_webhook_latency_seconds", nil); ok {
			b.WebhookServerMean = seconds(m)
		}
	}
	if pm, err := bench.ProcMemory(c.pid()); err == nil {
		b.ControllerPeakRSS = pm.HWM
	}
	h.t.Logf("%s: %d initialized, total %s (CREATEs done after %s), p50 %s, p99 %s, max %s; CREATE p50 %s p99 %s (API server mean %s, of which webhook call %s (p99 %s), webhook server %s; %d failed open); labelled at CREATE %d, born complete %d; XO %v; 409s %v; CPU %v",
		what, done, b.Total.Round(time.Millisecond), b.CreatesDone.Round(time.Millisecond), b.P50.Round(time.Millisecond), b.P99.Round(time.Millisecond), b.Max.Round(time.Millisecond),
		b.CreateP50.Round(time.Millisecond), b.CreateP99.Round(time.Millisecond), b.CreateServerMean.Round(time.Microsecond), b.AdmissionMean.Round(time.Microsecond), b.AdmissionP99.Round(time.Microsecond), b.WebhookServerMean.Round(time.Microsecond), b.FailOpen,
		b.LabelledAtCreate, b.BornComplete, b.XORequests, b.Conflicts, b.CPU)
	if b.FailOpen > 0 {
		h.fail("%s: %d webhook calls failed open (the Nodes were admitted without the webhook)", what, b.FailOpen)
	}
	if done < n {
		h.fail("%s: only %d initialized within %s\n%s", what, done, burstTimeout, tail(c.log))
	}
	if createErrs.Load() > 0 {
		h.fail("%s: %d CREATEs failed", what, createErrs.Load())
	}
	return b
}

// --- steady state --------------------------------------------------------------------------------

// steady measures XO requests, relist bytes and API writes with n initialized Nodes and
// nothing changing, with the shortest resync period, and the controller's memory.
func (h *harness) steady(n int) {
	ctx := h.ctx
	h.stopController()
	before, err := h.apiRequests(ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	c := h.restartController(controllerOpts{Webhook: true, Config: controllerConfig{ResyncPeriod: steadyResync}})
	if took, err := c.settle(ctx, 3*time.Minute); err != nil {
		h.fail("steady %d: %v", n, err)
	} else {
		h.t.Logf("controller looked at every Node and went quiet %s after ready", took.Round(time.Millisecond))
	}
	afterStart, err := h.apiRequests(ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	window := *flagWindow
	if window == 0 {
		window = 5*steadyResync + time.Second
		if *flagQuick {
			// One relist, and a margin for the relist's own time (the period runs from the
			// end of one relist to the start of the next).
			window = steadyResync + 5*time.Second
		}
	}
	h.xo.sim.ResetCounters()
	h.watch.resetChanges()
	// Read the resident set while it relists every steadyResync: the highest reading is what a
	// memory limit must allow.
	var rssMax int64
	end := time.Now().Add(window)
	for time.Now().Before(end) {
		if pm, err := bench.ProcMemory(c.pid()); err == nil {
			rssMax = max(rssMax, pm.RSS)
		}
		select {
		case <-time.After(min(time.Second, time.Until(end))):
		case <-ctx.Done():
			return
		}
	}
	for i := range h.res.Memory {
		if h.res.Memory[i].Nodes == n {
			h.res.Memory[i].RSSRelisting = rssMax
		}
	}
	after, err := h.apiRequests(ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	reqs := h.xo.requests()
	changes, samples := h.watch.changeCount()
	lists := []string{"GET /rest/v0/vms", "GET /rest/v0/hosts", "GET /rest/v0/pools", "GET /rest/v0/servers"}
	s := bench.Steady{
		Nodes: n, Window: window, ResyncPeriod: steadyResync, Relists: reqs["GET /rest/v0/vms"], XORequests: reqs,
		ListBytes:   h.xo.bytes(func(k string) bool { return slices.Contains(lists, k) }),
		NodeChanges: changes, NodeChangeSamples: samples,
		APIWrites:     bench.Writes(bench.Delta(afterStart, after)),
		StartupWrites: bench.Writes(bench.Delta(before, afterStart)),
	}
	h.res.Steady = append(h.res.Steady, s)
	h.t.Logf("steady %d Nodes over %s: %d relists, XO %v (%.1f req/min, %.0f bytes per relist); %d Node changes %v; API writes %v; writes at start-up %v",
		n, window, s.Relists, reqs, s.RequestsPerMinute(), s.BytesPerRelist(), changes, samples, s.APIWrites, s.StartupWrites)
	if s.Relists == 0 {
		h.fail("steady %d: no relist in %s with resyncPeriod %s", n, window, steadyResync)
	}
	if changes != 0 || len(s.APIWrites) != 0 {
		h.fail("steady %d: the controller wrote while nothing changed: %d Node changes (%v), writes %v", n, changes, samples, s.APIWrites)
	}
	if len(h.res.Steady) == 1 {
		h.note(fmt.Sprintf("Steady state: the controller is restarted with `inventory.resyncPeriod: %s` (the shortest the config accepts), allowed to look at every Node once (the writes it makes then are reported separately), then XO requests are counted by the simulator over the window and API writes by a watch on Nodes (every resourceVersion change) and by the API server's `apiserver_request_total`. Per minute at the default period = requests per relist ÷ 10 min.", steadyResync))
	}
}

// memory reads the resident set of a controller with the default configuration and n Nodes,
// every 2 s for a while after it has looked at every Node: median and highest reading.
func (h *harness) memory(n int) {
	c := h.restartController(controllerOpts{Webhook: true})
	m, ok := h.quietMemory(c, fmt.Sprintf("memory %d", n), fmt.Sprint(n))
	if !ok {
		return
	}
	m.Nodes, m.VMs = n, len(h.xo.vms)
	h.res.Memory = append(h.res.Memory, m)
}

// quietMemory waits until c's pools are trusted and it went quiet, then reads its memory
// every 2 s for a while (30 s quick, else 1 min): the median and highest readings. what names
// the phase in failures, profile the heap profiles' files (-bench.profile-dir).
func (h *harness) quietMemory(c *controller, what, profile string) (bench.Memory, bool) {
	ctx := h.ctx
	// Quiet means after the pools are trusted (inventory.settleTime after start): that wakes
	// every Node once more.
	if err := c.awaitTrusted(ctx, 3*time.Minute); err != nil {
		h.fail("%s: %v", what, err)
	}
	if _, err := c.settle(ctx, 3*time.Minute); err != nil {
		h.fail("%s: %v", what, err)
	}
	span := time.Minute
	if *flagQuick {
		span = 30 * time.Second
	}
	h.t.Logf("%s: first reading: %s", what, c.goMemory())
	if *flagProfiles != "" {
		// With the profile of the last reading, what the controller allocates while quiet.
		if err := c.saveHeapProfile(filepath.Join(*flagProfiles, "heap-"+profile+"-quiet.pb.gz")); err != nil {
			h.fail("%s: %v", what, err)
		}
	}
	mems := c.sampleMemory(ctx, span)
	if ctx.Err() != nil {
		return bench.Memory{}, false
	}
	if len(mems) == 0 {
		h.fail("%s: no reading", what)
		return bench.Memory{}, false
	}
	if *flagProfiles != "" {
		if err := c.saveHeapProfile(filepath.Join(*flagProfiles, "heap-"+profile+".pb.gz")); err != nil {
			h.fail("%s: %v", what, err)
		}
	}
	m := bench.MedianMemory(mems)
	h.t.Logf("%s (%d readings): RSS median %.1f MiB (binary %.1f), max %.1f MiB, peak %.1f MiB, heap %.1f MiB, %d goroutines; last reading: %s",
		what, m.Readings, float64(m.RSS)/(1<<20), float64(m.RSSFile)/(1<<20), float64(m.RSSMax)/(1<<20), float64(m.HWM)/(1<<20), float64(m.HeapInuse)/(1<<20), m.Goroutines, c.goMemory())
	return m, true
}

// upstream simulates the existing cloud controllers' XO access: one lookup of the VM, its host
// and its pool per Node per sync, in both of the upstream XO CCM's loops.
func (h *harness) upstream(n int) {
	ctx := h.ctx
	h.stopController() // its relists must not be counted
	h.xo.sim.ResetCounters()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	defer hc.CloseIdleConnections()
	jobs := make(chan vmInfo)
	var errs atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range 8 {
		wg.Go(func() {
			for vm := range jobs {
				for _, path := range []string{"/vms/" + vm.ID, "/hosts/" + vm.Host, "/pools/" + vm.Pool} {
					if err := httpGet(ctx, hc, h.xo.url+xosim.BasePath+path); err != nil {
						errs.Add(1)
					}
				}
			}
		})
	}
	// Two loops (node status and label sync), each over every Node.
	for range 2 {
		for _, vm := range h.xo.vms[:n] {
			jobs <- vm
		}
	}
	close(jobs)
	wg.Wait()
	u := bench.Upstream{Nodes: n, Elapsed: time.Since(start), Period: upstreamPeriod}
	for _, v := range h.xo.requests() {
		u.Requests += v
	}
	u.Bytes = h.xo.bytes(func(string) bool { return true })
	h.res.Upstream = append(h.res.Upstream, u)
	h.t.Logf("upstream-style sync of %d Nodes: %d requests, %d bytes in %s", n, u.Requests, u.Bytes, u.Elapsed.Round(time.Millisecond))
	if errs.Load() > 0 {
		h.fail("upstream-style sync: %d requests failed", errs.Load())
	}
	if len(h.res.Upstream) == 1 {
		h.note("Upstream-style load: for every Node, `GET /rest/v0/vms/<id>`, `/hosts/<id>`, `/pools/<id>` (whole objects, as the upstream SDK reads them) in the node-status loop and again in the label-sync loop, 8 at a time, against the same simulator; the simulator counts the requests and bytes of one such 5-minute period.")
	}
}

// --- reactions -----------------------------------------------------------------------------------

// reactions measures the time from a change in XO to the Node reflecting it.
func (h *harness) reactions(n int, mode string) {
	ctx := h.ctx
	samples := *flagSamples
	if samples == 0 {
		samples = 20
		if *flagQuick {
			samples = 10
		}
	}
	opts := controllerOpts{Webhook: true}
	if mode == bench.ModeRelist {
		opts.Config.PollPeriod = relistPoll
		// A JSON 404 that is not XO's "no such object" is what an XO without the events route
		// answers as far as the client can tell: it reports ErrNoEventStream and the inventory
		// relists every pollPeriod.
		id := h.xo.sim.InjectFault(xosim.Fault{Kind: xosim.FaultStatus, Method: http.MethodGet, PathPrefix: xosim.BasePath + "/events", Status: http.StatusNotFound})
		defer h.xo.sim.RemoveFault(id)
		h.note(fmt.Sprintf("Relist only: the controller runs with `inventory.pollPeriod: %s` and the simulator answers `GET /rest/v0/events` with 404 `{\"error\":\"not found\"}` (a fault rule), which the XO client reports as `xo.ErrNoEventStream`, as for an XO without the event stream; the inventory then relists every pollPeriod. Checked through the controller's `xenorchestra_event_stream_up` metric (0).", relistPoll))
	}
	h.xo.sim.ResetCounters()
	c := h.restartController(opts)
	if _, err := c.settle(ctx, 3*time.Minute); err != nil {
		h.t.Log(err)
	}
	if m, err := c.scrape(); err == nil {
		up := bench.Sum(m, "xenorchestra_event_stream_up", nil)
		if (mode == bench.ModeRelist) != (up == 0) {
			h.fail("reactions (%s): xenorchestra_event_stream_up = %g", mode, up)
		}
	}

	type change struct {
		kind string
		// setup readies the Node (the clock is not running yet) and returns what the Node
		// shows once it reflects the change, and the change itself.
		setup func(vm vmInfo, k int) (want func(*corev1.Node) bool, act func() error, err error)
	}
	notReady := func(vm vmInfo) error {
		if err := h.setReady(ctx, vm.Name, false); err != nil {
			return err
		}
		// Let the controllers see the NotReady Node first, so the clock measures the reaction
		// to the XO change alone.
		time.Sleep(500 * time.Millisecond)
		return nil
	}
	// Deletion comes last: it needs the controller to trust the VMs' pools, which it does
	// only once they have been connected for the settle time since it started; the other
	// changes are measured meanwhile.
	changes := []change{
		{bench.ReactionHalted, func(vm vmInfo, _ int) (func(*corev1.Node) bool, func() error, error) {
			return func(nd *corev1.Node) bool {
					return nd != nil && node.HasTaint(nd.Spec.Taints, node.TaintShutdown, corev1.TaintEffectNoSchedule)
				},
				func() error { return h.xo.sim.SetPowerState(vm.ID, xo.PowerStateHalted) }, notReady(vm)
		}},
		{bench.ReactionMigrated, func(vm vmInfo, k int) (func(*corev1.Node) bool, func() error, error) {
			host := h.xo.otherHost(vm.ID, k)
			return func(nd *corev1.Node) bool { return nd != nil && nd.Labels[node.LabelZone] == host },
				func() error { return h.xo.sim.Migrate(vm.ID, host) }, nil
		}},
		{bench.ReactionDeleted, func(vm vmInfo, _ int) (func(*corev1.Node) bool, func() error, error) {
			return func(nd *corev1.Node) bool { return nd == nil },
				func() error { return h.xo.sim.RemoveVM(vm.ID) }, notReady(vm)
		}},
	}
	type pending struct {
		name  string
		start time.Time
		wait  chan time.Time
	}
	for _, ch := range changes {
		r := bench.Reaction{Kind: ch.kind, Mode: mode, Nodes: h.watch.count()}
		timeout := sampleTimeout
		// A deletion waits the settle time by design: its samples overlap, each change made
		// without waiting for the previous Node's deletion, so that the waits run together.
		overlap := ch.kind == bench.ReactionDeleted
		if overlap {
			r.Settle = *flagSettle
			timeout += *flagSettle
			if err := c.awaitTrusted(ctx, *flagSettle+time.Minute); err != nil {
				h.fail("reactions (%s): %v", mode, err)
			}
		}
		var waits []pending
		collect := func(p pending) {
			if at, ok := await(ctx, p.wait, max(timeout-time.Since(p.start), time.Millisecond)); ok {
				r.Samples = append(r.Samples, at.Sub(p.start))
			} else {
				h.watch.unregister(p.name, p.wait)
				r.Failed++
			}
		}
		for k := range samples {
			if h.used >= n {
				h.fail("reactions: out of Nodes")
				return
			}
			vm := h.xo.vms[h.used]
			h.used++
			if !initialized(h.watch.get(vm.Name)) {
				h.fail("reactions: Node %s not initialized", vm.Name)
				continue
			}
			want, act, err := ch.setup(vm, k)
			if err != nil {
				h.fail("reactions: %s on %s: %v", ch.kind, vm.Name, err)
				continue
			}
			wait := h.watch.register(vm.Name, want)
			start := time.Now()
			if err := act(); err != nil {
				h.watch.unregister(vm.Name, wait)
				h.fail("reactions: %s on %s: %v", ch.kind, vm.Name, err)
				continue
			}
			if p := (pending{vm.Name, start, wait}); overlap {
				waits = append(waits, p)
			} else {
				collect(p)
			}
			time.Sleep(200 * time.Millisecond)
		}
		for _, p := range waits {
			collect(p)
		}
		h.res.Reactions = append(h.res.Reactions, r)
		h.t.Logf("%s (%s, %d Nodes): %d samples, min %s, p50 %s, max %s, %d timed out", ch.kind, mode, r.Nodes, len(r.Samples),
			bench.Percentile(r.Samples, 0.01).Round(time.Millisecond), bench.Percentile(r.Samples, 0.5).Round(time.Millisecond),
			bench.Percentile(r.Samples, 1).Round(time.Millisecond), r.Failed)
		if r.Failed > 0 {
			h.fail("%s (%s): %d of %d samples timed out after %s", ch.kind, mode, r.Failed, samples, timeout)
		}
		if overlap && len(r.Samples) > 0 && slices.Min(r.Samples) < r.Settle {
			h.fail("%s (%s): a Node deleted %s after its VM, before the settle time of %s", ch.kind, mode, slices.Min(r.Samples).Round(time.Millisecond), r.Settle)
		}
	}
	if mode == bench.ModeRelist {
		reqs := h.xo.requests()
		h.t.Logf("relist-only phase XO requests: %v", reqs)
	}
}

// --- churn ---------------------------------------------------------------------------------------

// churn creates VMs (and their Nodes), migrates VMs and deletes VMs (their Nodes NotReady
// first) continuously for d, sampling the controller's memory.
func (h *harness) churn(n int, d time.Duration) {
	ctx := h.ctx
	c := h.restartController(controllerOpts{Webhook: true})
	if _, err := c.settle(ctx, 3*time.Minute); err != nil {
		h.t.Log(err)
	}
	// Deletions are part of the churn: wait until the controller trusts the pools.
	if err := c.awaitTrusted(ctx, *flagSettle+time.Minute); err != nil {
		h.fail("churn: %v", err)
	}
	ch := &bench.Churn{Duration: d, Nodes: h.watch.count()}
	_, _, vms := h.xo.sim.Counts()
	ch.VMs = vms
	interval := max(2*time.Second, d/60)
	// The first sample waits out a warm-up: right after start-up the resident set still holds
	// the garbage of the initial listings, which the runtime returns to the system gradually.
	warmup := max(interval, d/10)
	ch.Interval, ch.Warmup = interval, warmup

	sampleDone := make(chan struct{})
	var samplesMu sync.Mutex
	start := time.Now()
	go func() {
		defer close(sampleDone)
		select {
		case <-time.After(warmup):
		case <-ctx.Done():
			return
		}
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			if m, err := c.memory(); err == nil {
				samplesMu.Lock()
				ch.Samples = append(ch.Samples, bench.MemSample{At: time.Since(start), RSS: m.RSS, HeapInuse: m.HeapInuse, Goroutines: m.Goroutines})
				samplesMu.Unlock()
			}
			if time.Since(start) >= d {
				return
			}
			select {
			case <-t.C:
			case <-ctx.Done():
				return
			}
		}
	}()

	type churnNode struct {
		vm      vmInfo
		sent    time.Time
		removed time.Time
	}
	var mu sync.Mutex
	var live, gone []*churnNode
	migrated := map[string]string{} // VM → Node name
	base := h.xo.vms[h.used:n]
	var wg sync.WaitGroup
	var errs atomic.Int64
	rng := rand.New(rand.NewPCG(1, 2))
	tick := time.NewTicker(200 * time.Millisecond)
	for k := 0; time.Since(start) < d; k++ {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
		// Create a VM and, as its kubelet would, its Node.
		vm, err := h.xo.addVM(k)
		if err != nil {
			h.fail("churn: add VM: %v", err)
			break
		}
		cn := &churnNode{vm: vm}
		mu.Lock()
		live = append(live, cn)
		mu.Unlock()
		ch.Created++
		wg.Go(func() {
			nd := kubeletNode(vm)
			mu.Lock()
			cn.sent = time.Now()
			mu.Unlock()
			if err := h.c.Create(ctx, nd); err != nil {
				errs.Add(1)
			}
		})
		// Migrate a VM of an existing Node within its pool.
		b := base[rng.IntN(len(base))]
		if err := h.xo.sim.Migrate(b.ID, h.xo.otherHost(b.ID, k)); err == nil {
			migrated[b.ID] = b.Name
			ch.Migrated++
		}
		// Delete the oldest initialized churn VM once 20 are alive: its Node goes NotReady, the
		// VM goes away, the controller must delete the Node.
		mu.Lock()
		if len(live) > 20 {
			if x := live[0]; initialized(h.watch.get(x.vm.Name)) {
				live = live[1:]
				gone = append(gone, x)
				ch.Deleted++
				wg.Go(func() {
					if err := h.setReady(ctx, x.vm.Name, false); err != nil {
						errs.Add(1)
					}
					mu.Lock()
					x.removed = time.Now()
					mu.Unlock()
					if err := h.xo.sim.RemoveVM(x.vm.ID); err != nil {
						errs.Add(1)
					}
				})
			}
		}
		mu.Unlock()
	}
	tick.Stop()
	wg.Wait()
	<-sampleDone
	if errs.Load() > 0 {
		h.fail("churn: %d operations failed", errs.Load())
	}

	// Everything settles: live Nodes initialized, deleted VMs' Nodes gone, zones current.
	settled := func() []string {
		var bad []string
		for _, x := range live {
			if !initialized(h.watch.get(x.vm.Name)) {
				bad = append(bad, x.vm.Name+" (not initialized)")
			}
		}
		for _, x := range gone {
			if h.watch.get(x.vm.Name) != nil {
				bad = append(bad, x.vm.Name+" (VM deleted, Node kept)")
			}
		}
		for id, name := range migrated {
			spec, _ := h.xo.sim.VM(id)
			if nd := h.watch.get(name); nd == nil || nd.Labels[node.LabelZone] != spec.HostID {
				bad = append(bad, name+" (zone not the VM's host)")
			}
		}
		return bad
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		bad := settled()
		if len(bad) == 0 || time.Now().After(deadline) {
			ch.Unsettled = bad
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	var inits, dels []time.Duration
	for _, x := range append(slices.Clone(live), gone...) {
		if at, ok := h.watch.initTime(x.vm.Name); ok && !x.sent.IsZero() {
			inits = append(inits, at.Sub(x.sent))
		}
	}
	h.watch.mu.Lock()
	for _, x := range gone {
		if at, ok := h.watch.deletedAt[x.vm.Name]; ok && !x.removed.IsZero() {
			dels = append(dels, at.Sub(x.removed))
		}
	}
	h.watch.mu.Unlock()
	ch.InitP50, ch.InitP99 = bench.Percentile(inits, 0.5), bench.Percentile(inits, 0.99)
	ch.DeleteP50, ch.DeleteP99 = bench.Percentile(dels, 0.5), bench.Percentile(dels, 0.99)
	h.res.Churn = ch
	delta, slope := ch.RSSGrowth()
	h.t.Logf("churn over %s: %d created, %d migrated, %d deleted; init p50 %s p99 %s; delete p50 %s p99 %s; RSS %+d bytes (%.2f MiB/min); unsettled %v",
		d, ch.Created, ch.Migrated, ch.Deleted, ch.InitP50, ch.InitP99, ch.DeleteP50, ch.DeleteP99, delta, slope/(1<<20), ch.Unsettled)
	if len(ch.Unsettled) > 0 {
		h.fail("churn: %d Nodes not in their expected state 2 minutes after the run: %v", len(ch.Unsettled), head(ch.Unsettled, 10))
	}
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func head(s []string, n int) []string { return s[:min(n, len(s))] }

func parseSizes(t *testing.T, s string) []int {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 || n >= *flagVMs {
			t.Fatalf("bad size %q (want 1 to %d)", f, *flagVMs-1)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		t.Fatal("no sizes")
	}
	return out
}
