//go:build bench

package bench_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/test/bench"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/xosim"
)

// benchToken is the simulator's token; it is not a secret.
const benchToken = "bench-token-not-a-secret-0123456789abcdefghij"

// --- the simulated XO ----------------------------------------------------------------------------

// vmInfo is what the benchmark knows of one simulated VM.
type vmInfo struct {
	ID, Name, IP, Pool, Host, SystemUUID string
}

// simXO is the XO simulator served over HTTP with its inventory.
type simXO struct {
	sim   *xosim.Server
	x     *testenv.XO
	url   string
	vms   []vmInfo
	hosts map[string][]string // pool → hosts
	pools []string
}

// simSpec describes a simulated XO.
type simSpec struct {
	// Prefix starts the names of its pools, hosts and VMs ("" for the main simulator), so
	// that Nodes of several simulators have distinct names.
	Prefix string
	// Pools × HostsPerPool hosts, and VMs running VMs spread over them.
	Pools, HostsPerPool, VMs int
	// IPBase is the index of the first VM's address (see vmIP), so that several simulators
	// give distinct addresses.
	IPBase int
}

// newSimXO builds the simulator's pools, hosts and running VMs and serves it on a loopback
// listener (testenv.XO, which can close it to refuse connections).
func newSimXO(t testing.TB, sp simSpec) *simXO {
	t.Helper()
	x := testenv.NewXO(t, testenv.XOOptions{Token: benchToken})
	s := &simXO{sim: x.Sim, x: x, url: x.URL, hosts: map[string][]string{}}
	for p := range sp.Pools {
		pool, err := s.sim.AddPool(xosim.PoolSpec{NameLabel: fmt.Sprintf("%spool-%d", sp.Prefix, p)})
		if err != nil {
			t.Fatal(err)
		}
		s.pools = append(s.pools, pool)
		for h := range sp.HostsPerPool {
			id, err := s.sim.AddHost(xosim.HostSpec{PoolID: pool, NameLabel: fmt.Sprintf("%sxcp-%d-%02d", sp.Prefix, p, h)})
			if err != nil {
				t.Fatal(err)
			}
			s.hosts[pool] = append(s.hosts[pool], id)
		}
	}
	specs := make([]xosim.VMSpec, sp.VMs)
	for i := range sp.VMs {
		pool := s.pools[i%sp.Pools]
		specs[i] = xosim.VMSpec{
			PoolID: pool, HostID: s.hosts[pool][(i/sp.Pools)%sp.HostsPerPool], NameLabel: fmt.Sprintf("%sk8s-node-%05d", sp.Prefix, i),
			CPUs: 4, Memory: 8 * xosim.GiB, IPs: []string{vmIP(sp.IPBase + i)},
			Tags: []string{"k8s.xenorchestra/label:tag.k8s.xenorchestra/env=bench"},
		}
		if i%5 == 0 {
			specs[i].Firmware = "uefi" // a fifth of the guests report the byte-swapped uuid
		}
	}
	ids, err := s.sim.AddVMs(specs)
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		uuid, _ := s.sim.GuestSystemUUID(id)
		s.vms = append(s.vms, vmInfo{ID: id, Name: specs[i].NameLabel, IP: vmIP(sp.IPBase + i), Pool: specs[i].PoolID, Host: specs[i].HostID, SystemUUID: uuid})
	}
	return s
}

// down closes the simulator's event streams and listener: connections are refused.
func (s *simXO) down() {
	s.sim.CloseEventStreams()
	s.x.Close()
}

// inPools returns the VMs of the given pools, in order.
func (s *simXO) inPools(pools ...string) []vmInfo {
	var out []vmInfo
	for _, vm := range s.vms {
		if slices.Contains(pools, vm.Pool) {
			out = append(out, vm)
		}
	}
	return out
}

func vmIP(i int) string { return fmt.Sprintf("10.%d.%d.%d", 100+i/62500, (i/250)%250, i%250+1) }

// addVM adds a running VM for the churn run and returns it.
func (s *simXO) addVM(i int) (vmInfo, error) {
	pool := s.pools[i%len(s.pools)]
	host := s.hosts[pool][i%len(s.hosts[pool])]
	name := fmt.Sprintf("churn-%06d", i)
	ip := fmt.Sprintf("10.200.%d.%d", (i/250)%250, i%250+1)
	id, err := s.sim.AddVM(xosim.VMSpec{PoolID: pool, HostID: host, NameLabel: name, CPUs: 2, Memory: 4 * xosim.GiB, IPs: []string{ip}})
	if err != nil {
		return vmInfo{}, err
	}
	uuid, _ := s.sim.GuestSystemUUID(id)
	return vmInfo{ID: id, Name: name, IP: ip, Pool: pool, Host: host, SystemUUID: uuid}, nil
}

// otherHost returns a host of the VM's pool other than the one it runs on.
func (s *simXO) otherHost(vmID string, k int) string {
	spec, _ := s.sim.VM(vmID)
	hs := s.hosts[spec.PoolID]
	for j := range hs {
		if h := hs[(k+j)%len(hs)]; h != spec.HostID {
			return h
		}
	}
	return spec.HostID
}

// requests sums the simulator's request counters.
func (s *simXO) requests() map[string]int64 {
	out := map[string]int64{}
	for k, v := range s.sim.RequestCounts() {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

// bytes sums the response bytes of every route whose "METHOD /path" key keep accepts.
func (s *simXO) bytes(keep func(string) bool) int64 {
	var n int64
	for k := range s.sim.RequestCounts() {
		if !keep(k) {
			continue
		}
		method, path, _ := strings.Cut(k, " ")
		n += s.sim.BytesWritten(method, path)
	}
	return n
}

// kubeletNode is the Node a kubelet with --cloud-provider=external and --node-ip registers for vm.
func kubeletNode(vm vmInfo) *corev1.Node {
	return testenv.KubeletNode(vm.Name, testenv.WithSystemUUID(vm.SystemUUID), testenv.WithNodeIP(vm.IP))
}

// --- the controller subprocess -------------------------------------------------------------------

// controllerConfig is the controller's config file content.
type controllerConfig struct {
	// Clusters are the XO servers; none: the single-server form with the main simulator.
	Clusters     []clusterConfig
	ResyncPeriod time.Duration
	PollPeriod   time.Duration
}

// clusterConfig is one entry of the config's clusters list.
type clusterConfig struct {
	Name, URL string
	// Pools is the server's pool scope (pool names or uuids); empty: every pool.
	Pools []string
}

// yaml writes the config file: every run sets inventory.settleTime explicitly.
func (cc controllerConfig) yaml(mainURL string) string {
	var b strings.Builder
	if len(cc.Clusters) == 0 {
		fmt.Fprintf(&b, "url: %s\ntoken: %q\n", mainURL, benchToken)
	} else {
		b.WriteString("clusters:\n")
		for _, c := range cc.Clusters {
			fmt.Fprintf(&b, "  - name: %s\n    url: %s\n    token: %q\n", c.Name, c.URL, benchToken)
			if len(c.Pools) > 0 {
				fmt.Fprintf(&b, "    pools: [%s]\n", strings.Join(c.Pools, ", "))
			}
		}
	}
	fmt.Fprintf(&b, "inventory:\n  settleTime: %s\n", *flagSettle)
	if cc.ResyncPeriod > 0 {
		fmt.Fprintf(&b, "  resyncPeriod: %s\n", cc.ResyncPeriod)
	}
	if cc.PollPeriod > 0 {
		fmt.Fprintf(&b, "  pollPeriod: %s\n", cc.PollPeriod)
	}
	return b.String()
}

// controller is the real binary running as a subprocess.
type controller struct {
	cmd     *exec.Cmd
	log     string
	metrics string
	// debug is the base URL of the pprof handlers (served with --profiling).
	debug   string
	done    chan error
	started time.Time
	ready   time.Duration
}

// controllerOpts are what changes between runs of the controller.
type controllerOpts struct {
	Webhook bool
	Config  controllerConfig
}

// startController starts the binary and waits until /readyz answers OK.
func (h *harness) startController(ctx context.Context, o controllerOpts) (*controller, error) {
	dir, err := os.MkdirTemp(h.dir, "controller-")
	if err != nil {
		return nil, err
	}
	cfgFile := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgFile, []byte(o.Config.yaml(h.xo.url)), 0o600); err != nil {
		return nil, err
	}
	probe, err := freeAddr()
	if err != nil {
		return nil, err
	}
	metrics, err := freeAddr()
	if err != nil {
		return nil, err
	}
	wo := h.env.WebhookInstallOptions
	args := []string{
		"--config=" + cfgFile,
		"--leader-elect=false",
		// Plain HTTP: the scrapes measure the controller, not the endpoint's TokenReviews (the
		// endpoint's authentication is tested in cmd/app and test/e2e).
		"--metrics-bind-address=" + metrics, "--metrics-insecure-http",
		"--health-probe-bind-address=" + probe,
		fmt.Sprintf("--webhook=%t", o.Webhook),
		"--webhook-host=" + wo.LocalServingHost,
		fmt.Sprintf("--webhook-port=%d", wo.LocalServingPort),
		"--webhook-cert-dir=" + wo.LocalServingCertDir,
	}
	if *flagProfiles != "" {
		args = append(args, "--profiling")
	}
	args = append(args, strings.Fields(*flagCtrlArgs)...)
	logFile, err := os.Create(filepath.Join(dir, "controller.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(h.binary, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+h.kubeconfig)
	cmd.Env = append(cmd.Env, strings.Fields(*flagCtrlEnv)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	c := &controller{cmd: cmd, log: logFile.Name(), metrics: "http://" + metrics + "/metrics", debug: "http://" + metrics + "/debug/pprof/", done: make(chan error, 1), started: time.Now()}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", h.binary, err)
	}
	go func() { c.done <- cmd.Wait(); logFile.Close() }()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		select {
		case err := <-c.done:
			c.done <- err
			return nil, fmt.Errorf("controller exited before ready: %v\n%s", err, tail(c.log))
		default:
		}
		if resp, err := http.Get("http://" + probe + "/readyz"); err == nil { //nolint:gosec // loopback probe
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				c.ready = time.Since(c.started)
				return c, nil
			}
		}
		if time.Now().After(deadline) {
			c.stop()
			return nil, fmt.Errorf("controller not ready after 2 minutes\n%s", tail(c.log))
		}
		select {
		case <-ctx.Done():
			c.stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// pid returns the controller's process id.
func (c *controller) pid() int { return c.cmd.Process.Pid }

// stop ends the controller with SIGTERM (SIGKILL after 15 s) and waits for it.
func (c *controller) stop() {
	if c == nil {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(15 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// cpuProfiles saves, in the background, CPU profiles of the controller (it runs with
// --profiling) and of the API server over the next 20 s, as cpu-{controller,apiserver}-<what>.pb.gz.
func (h *harness) cpuProfiles(c *controller, what string) {
	save := func(name string, get func() ([]byte, error)) {
		b, err := get()
		if err == nil {
			err = os.WriteFile(filepath.Join(*flagProfiles, fmt.Sprintf("cpu-%s-%s.pb.gz", name, what)), b, 0o644)
		}
		if err != nil {
			h.t.Logf("CPU profile of the %s: %v", name, err)
		}
	}
	go save("apiserver", func() ([]byte, error) {
		return h.cs.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").Param("seconds", "20").Timeout(time.Minute).DoRaw(h.ctx)
	})
	go save("controller", func() ([]byte, error) {
		resp, err := http.Get(c.debug + "profile?seconds=20") //nolint:gosec // loopback
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		return io.ReadAll(resp.Body)
	})
}

// saveHeapProfile writes the controller's heap profile (it runs with --profiling) to path.
func (c *controller) saveHeapProfile(path string) error {
	resp, err := http.Get(c.debug + "heap?gc=1") //nolint:gosec // loopback
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("heap profile: %s", resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// scrape reads the controller's metrics.
func (c *controller) scrape() ([]bench.Sample, error) {
	resp, err := http.Get(c.metrics) //nolint:gosec // loopback
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return bench.ParseMetrics(resp.Body)
}

// settle waits until every controller's queue is empty and no worker is busy, three readings
// in a row, and returns how long that took.
func (c *controller) settle(ctx context.Context, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	quiet := 0
	for time.Since(start) < timeout {
		m, err := c.scrape()
		if err == nil && bench.Sum(m, "workqueue_depth", nil) == 0 && bench.Sum(m, "controller_runtime_active_workers", nil) == 0 {
			quiet++
			if quiet == 3 {
				return time.Since(start), nil
			}
		} else {
			quiet = 0
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return time.Since(start), fmt.Errorf("controller still busy after %s", timeout)
}

// await polls the controller's metrics until cond holds.
func (c *controller) await(ctx context.Context, timeout time.Duration, cond func([]bench.Sample) bool) error {
	deadline := time.Now().Add(timeout)
	for {
		if m, err := c.scrape(); err == nil && cond(m) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("condition not met after %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// awaitTrusted waits until the controller trusts every pool it has listed
// (xenorchestra_inventory_pools: none settling, some trusted). After a start, a pool is
// trusted once it has been connected for the settle time and listed after that; until then
// no absence counts and no Node is deleted.
func (c *controller) awaitTrusted(ctx context.Context, timeout time.Duration) error {
	err := c.await(ctx, timeout, func(m []bench.Sample) bool {
		return bench.Sum(m, "xenorchestra_inventory_pools", map[string]string{"state": "settling"}) == 0 &&
			bench.Sum(m, "xenorchestra_inventory_pools", map[string]string{"state": "trusted"}) > 0
	})
	if err != nil {
		return fmt.Errorf("pools not trusted: %w", err)
	}
	return nil
}

// memory reads the controller's resident set and Go figures.
func (c *controller) memory() (bench.Memory, error) {
	var m bench.Memory
	pm, err := bench.ProcMemory(c.pid())
	if err != nil {
		return m, err
	}
	m.RSS, m.HWM, m.RSSFile = pm.RSS, pm.HWM, pm.File
	if s, err := c.scrape(); err == nil {
		m.HeapInuse = int64(bench.Sum(s, "go_memstats_heap_inuse_bytes", nil))
		m.Goroutines = int(bench.Sum(s, "go_goroutines", nil))
	}
	return m, nil
}

// goMemory describes the Go runtime's memory outside the heap in use, for the log: what the
// resident set holds besides the binary and the live heap.
func (c *controller) goMemory() string {
	s, err := c.scrape()
	if err != nil {
		return err.Error()
	}
	mib := func(names ...string) float64 {
		var v float64
		for _, n := range names {
			v += bench.Sum(s, n, nil)
		}
		return v / (1 << 20)
	}
	return fmt.Sprintf("%.0f collections since start; heap in use %.1f MiB, of which allocated %.1f; heap idle kept %.1f MiB; stacks %.1f MiB; runtime metadata %.1f MiB",
		bench.Sum(s, "go_gc_duration_seconds_count", nil),
		mib("go_memstats_heap_inuse_bytes"), mib("go_memstats_heap_alloc_bytes"),
		mib("go_memstats_heap_idle_bytes")-mib("go_memstats_heap_released_bytes"), mib("go_memstats_stack_inuse_bytes"),
		mib("go_memstats_mspan_inuse_bytes", "go_memstats_mcache_inuse_bytes", "go_memstats_buck_hash_sys_bytes", "go_memstats_gc_sys_bytes", "go_memstats_other_sys_bytes"))
}

// scrapeEvery is how often sampleMemory reads the controller's metrics: Prometheus' usual
// scrape interval. Each scrape makes the controller allocate (encoding, compression), and
// scraping at every 2-s reading made it collect every 2 to 3 s when it had nothing else to do,
// which kept memory resident that a production process would have returned.
const scrapeEvery = 15 * time.Second

// sampleMemory reads the controller's resident set every 2 s and its Go figures every
// scrapeEvery for span, or until ctx ends.
func (c *controller) sampleMemory(ctx context.Context, span time.Duration) []bench.Memory {
	var mems []bench.Memory
	var last bench.Memory
	var scraped time.Time
	end := time.Now().Add(span)
	for time.Now().Before(end) {
		if time.Since(scraped) >= scrapeEvery {
			if m, err := c.memory(); err == nil {
				last, scraped = m, time.Now()
				mems = append(mems, m)
			}
		} else if pm, err := bench.ProcMemory(c.pid()); err == nil {
			m := last
			m.RSS, m.HWM, m.RSSFile = pm.RSS, pm.HWM, pm.File
			mems = append(mems, m)
		}
		select {
		case <-time.After(min(2*time.Second, time.Until(end))):
		case <-ctx.Done():
			return mems
		}
	}
	return mems
}

func tail(file string) string {
	data, _ := os.ReadFile(file)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return strings.Join(lines, "\n")
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// --- watching Nodes ------------------------------------------------------------------------------

// nodeWatch follows every Node through one watch and records when each became initialized or
// was deleted, counts modifications, and wakes up waiters.
type nodeWatch struct {
	mu        sync.Mutex
	nodes     map[string]*corev1.Node
	initAt    map[string]time.Time
	deletedAt map[string]time.Time
	changes   int64
	samples   []string
	waiters   map[string][]*waiter
	initCh    chan struct{}
}

type waiter struct {
	pred func(n *corev1.Node) bool
	ch   chan time.Time
}

// initialized reports a Node as the benchmark counts it initialized: the uninitialized taint
// gone, the providerID and the region, zone and instance-type labels set.
func initialized(n *corev1.Node) bool {
	return n != nil && !node.HasTaint(n.Spec.Taints, node.TaintUninitialized, "") && n.Spec.ProviderID != "" &&
		n.Labels[node.LabelRegion] != "" && n.Labels[node.LabelZone] != "" && n.Labels[node.LabelInstanceType] != ""
}

func startNodeWatch(ctx context.Context, t testing.TB, cs kubernetes.Interface) *nodeWatch {
	t.Helper()
	list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w := &nodeWatch{
		nodes: map[string]*corev1.Node{}, initAt: map[string]time.Time{}, deletedAt: map[string]time.Time{},
		waiters: map[string][]*waiter{}, initCh: make(chan struct{}, 1),
	}
	for i := range list.Items {
		w.nodes[list.Items[i].Name] = &list.Items[i]
	}
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return cs.CoreV1().Nodes().Watch(ctx, o)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer rw.Stop()
		for ev := range rw.ResultChan() {
			w.handle(ev, time.Now())
		}
	}()
	return w
}

func (w *nodeWatch) handle(ev watch.Event, now time.Time) {
	n, ok := ev.Object.(*corev1.Node)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	old := w.nodes[n.Name]
	switch ev.Type {
	case watch.Deleted:
		delete(w.nodes, n.Name)
		w.deletedAt[n.Name] = now
		w.wake(n.Name, nil, now)
		return
	case watch.Modified:
		w.changes++
		if len(w.samples) < 5 {
			w.samples = append(w.samples, n.Name+": "+describeChange(old, n))
		}
	case watch.Added:
	default:
		return
	}
	w.nodes[n.Name] = n
	if _, done := w.initAt[n.Name]; !done && initialized(n) {
		w.initAt[n.Name] = now
		select {
		case w.initCh <- struct{}{}:
		default:
		}
	}
	w.wake(n.Name, n, now)
}

// wake completes the waiters on name whose predicate n (nil: deleted) satisfies. w.mu is held.
func (w *nodeWatch) wake(name string, n *corev1.Node, now time.Time) {
	ws := w.waiters[name]
	kept := ws[:0]
	for _, x := range ws {
		if x.pred(n) {
			x.ch <- now
			continue
		}
		kept = append(kept, x)
	}
	w.waiters[name] = kept
	if len(kept) == 0 {
		delete(w.waiters, name)
	}
}

// register returns a channel that receives the time at which the Node named name (nil once it
// is deleted) first satisfies pred from now on, or already does.
func (w *nodeWatch) register(name string, pred func(*corev1.Node) bool) chan time.Time {
	ch := make(chan time.Time, 1)
	w.mu.Lock()
	defer w.mu.Unlock()
	if pred(w.nodes[name]) {
		ch <- time.Now()
		return ch
	}
	w.waiters[name] = append(w.waiters[name], &waiter{pred: pred, ch: ch})
	return ch
}

func (w *nodeWatch) unregister(name string, ch chan time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ws := w.waiters[name]
	for i, x := range ws {
		if x.ch == ch {
			w.waiters[name] = append(ws[:i:i], ws[i+1:]...)
			break
		}
	}
}

// await waits on a channel from register.
func await(ctx context.Context, ch chan time.Time, timeout time.Duration) (time.Time, bool) {
	select {
	case t := <-ch:
		return t, true
	case <-time.After(timeout):
		return time.Time{}, false
	case <-ctx.Done():
		return time.Time{}, false
	}
}

// initTime returns when the Node was first seen initialized.
func (w *nodeWatch) initTime(name string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t, ok := w.initAt[name]
	return t, ok
}

// initCount counts the names seen initialized.
func (w *nodeWatch) initCount(names []string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, name := range names {
		if _, ok := w.initAt[name]; ok {
			n++
		}
	}
	return n
}

// get returns the Node as last seen.
func (w *nodeWatch) get(name string) *corev1.Node {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.nodes[name]
}

// count returns the number of Nodes.
func (w *nodeWatch) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.nodes)
}

// resetChanges starts a new count of modifications.
func (w *nodeWatch) resetChanges() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.changes, w.samples = 0, nil
}

// changeCount returns the modifications since resetChanges, with samples.
func (w *nodeWatch) changeCount() (int64, []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.changes, append([]string(nil), w.samples...)
}

// forget drops the records of deleted Nodes (before a new burst reuses their names).
func (w *nodeWatch) forget() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for name := range w.initAt {
		if w.nodes[name] == nil {
			delete(w.initAt, name)
		}
	}
	w.deletedAt = map[string]time.Time{}
}

// describeChange names the parts of a Node that changed.
func describeChange(old, n *corev1.Node) string {
	if old == nil {
		return "unknown before"
	}
	var parts []string
	diff := func(what string, a, b any) {
		if fmt.Sprint(a) != fmt.Sprint(b) {
			parts = append(parts, what)
		}
	}
	diff("labels", old.Labels, n.Labels)
	diff("annotations", old.Annotations, n.Annotations)
	diff("taints", old.Spec.Taints, n.Spec.Taints)
	diff("providerID", old.Spec.ProviderID, n.Spec.ProviderID)
	diff("addresses", old.Status.Addresses, n.Status.Addresses)
	diff("conditions", old.Status.Conditions, n.Status.Conditions)
	if len(parts) == 0 {
		parts = append(parts, "resourceVersion only")
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// --- the API server ----------------------------------------------------------------------------

// apiMetrics reads the API server's metrics.
func (h *harness) apiMetrics(ctx context.Context) ([]bench.Sample, error) {
	raw, err := h.cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("read apiserver metrics: %w", err)
	}
	return bench.ParseMetrics(bytes.NewReader(raw))
}

// apiRequests reads the API server's request counters for nodes and events. (Leases are left
// out: the API server renews its own identity lease every 10 s.)
func (h *harness) apiRequests(ctx context.Context) (map[string]int64, error) {
	s, err := h.apiMetrics(ctx)
	if err != nil {
		return nil, err
	}
	return bench.APIRequests(s, "nodes", "events"), nil
}

// cpuTimes returns the CPU time used so far by the controller, kube-apiserver, etcd and this
// process (the simulator, the Node creators and the watch).
func (h *harness) cpuTimes(c *controller) map[string]time.Duration {
	out := map[string]time.Duration{}
	if st, err := bench.ReadProcStat(os.Getpid()); err == nil {
		out["bench"] = st.CPU
	}
	if c != nil {
		if st, err := bench.ReadProcStat(c.pid()); err == nil {
			out["controller"] = st.CPU
		}
	}
	if kids, err := bench.Children(os.Getpid()); err == nil {
		for _, name := range []string{"kube-apiserver", "etcd"} {
			for _, st := range kids[name] {
				out[name] += st.CPU
			}
		}
	}
	return out
}

func cpuDelta(before, after map[string]time.Duration) map[string]time.Duration {
	out := map[string]time.Duration{}
	for k, v := range after {
		out[k] = v - before[k]
	}
	return out
}

// deleteAllNodes deletes every Node and waits until the watch has seen them go.
func (h *harness) deleteAllNodes(ctx context.Context) error {
	if err := h.c.DeleteAllOf(ctx, &corev1.Node{}); err != nil {
		return fmt.Errorf("delete nodes: %w", err)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for h.watch.count() > 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("%d Nodes still there 3 minutes after their deletion", h.watch.count())
		}
		time.Sleep(100 * time.Millisecond)
	}
	h.watch.forget()
	return nil
}

// setWebhook registers or removes the MutatingWebhookConfiguration envtest installed, then
// checks with a probe Node, for a VM the running controller knows, that the API server calls
// the webhook (or not).
func (h *harness) setWebhook(ctx context.Context, on bool, probe vmInfo) error {
	name := h.webhookCfg.Name
	var cur admissionregistrationv1.MutatingWebhookConfiguration
	err := h.c.Get(ctx, client.ObjectKey{Name: name}, &cur)
	switch {
	case on && apierrors.IsNotFound(err):
		cfg := h.webhookCfg.DeepCopy()
		cfg.ResourceVersion, cfg.UID = "", ""
		if err := h.c.Create(ctx, cfg); err != nil {
			return fmt.Errorf("register webhook: %w", err)
		}
	case !on && err == nil:
		if err := h.c.Delete(ctx, &cur); err != nil {
			return fmt.Errorf("remove webhook: %w", err)
		}
	case err != nil && !apierrors.IsNotFound(err):
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		n := kubeletNode(probe)
		if err := h.c.Create(ctx, n); err != nil {
			return fmt.Errorf("create probe node: %w", err)
		}
		labelled := n.Spec.ProviderID != ""
		if err := h.c.Delete(ctx, n); err != nil {
			return fmt.Errorf("delete probe node: %w", err)
		}
		for h.watch.get(probe.Name) != nil {
			time.Sleep(20 * time.Millisecond)
		}
		if labelled == on {
			h.watch.forget()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the API server still %s the webhook after 30 s", map[bool]string{true: "does not call", false: "calls"}[on])
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// setReady plays the kubelet (or the node lifecycle controller) reporting readiness.
func (h *harness) setReady(ctx context.Context, name string, ready bool) error {
	var n corev1.Node
	if err := h.c.Get(ctx, client.ObjectKey{Name: name}, &n); err != nil {
		return err
	}
	before := n.DeepCopy()
	testenv.WithReady(ready)(&n)
	return h.c.Status().Patch(ctx, &n, client.MergeFrom(before))
}

// --- misc ----------------------------------------------------------------------------------------

// httpGet reads a URL of the simulator with the token, the way the upstream SDK does (whole
// objects, no field selection).
func httpGet(ctx context.Context, hc *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.AddCookie(&http.Cookie{Name: "authenticationToken", Value: benchToken})
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return errors.New(resp.Status)
	}
	return nil
}
