package app_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/cmd/app"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/xosim"
)

// TestTakeoverFromUpstream starts the whole controller (its three controllers at once) on 50
// Nodes as the upstream XO CCM left them, and counts its writes until every controller has
// reconciled every Node and the queues are empty: at most one write per Node, no 409 Conflict
// (the controllers must not race each other on one Node), and upstream's ExternalIP (the VM's
// mainIpAddress) kept, as docs/migration.md says. Measured before this test: 150 writes, 50 of
// them answered 409, and every ExternalIP removed.
//
// Not parallel: it reads controller-runtime's process-wide metrics, which another test's manager
// would add to (Go runs it before the parallel tests of the package).
func TestTakeoverFromUpstream(t *testing.T) {
	const nodes = 50
	x := testenv.NewXO(t, testenv.XOOptions{Token: token})
	pool := x.AddPool(t, xosim.PoolSpec{NameLabel: "pool-a"})
	host := x.AddHost(t, xosim.HostSpec{PoolID: pool, NameLabel: "host-a"})
	env := testenv.StartTest(t, testenv.Options{})
	ctx := context.Background()

	names := make([]string, nodes)
	for i := range nodes {
		name := fmt.Sprintf("takeover-%02d", i)
		internal, external := fmt.Sprintf("10.0.0.%d", i+10), fmt.Sprintf("192.0.2.%d", i+10)
		vm := x.AddVM(t, xosim.VMSpec{PoolID: pool, HostID: host, NameLabel: name, CPUs: 2, Memory: xosim.GiB, IPs: []string{external}})
		// What upstream v1.0 leaves on a Node it initialized (docs/migration.md): providerID,
		// GA and beta topology and instance-type labels (region = pool uuid, zone = host uuid),
		// its XO labels, InternalIP from --node-ip, ExternalIP = mainIpAddress, no taint.
		n := testenv.KubeletNode(name, testenv.WithSystemUUID(vm), testenv.Initialized(),
			testenv.WithProviderID(node.FormatProviderID(pool, vm)),
			testenv.WithNodeIP(internal),
			testenv.WithLabels(map[string]string{
				corev1.LabelTopologyRegion: pool, corev1.LabelFailureDomainBetaRegion: pool,
				corev1.LabelTopologyZone: host, corev1.LabelFailureDomainBetaZone: host,
				corev1.LabelInstanceTypeStable: "2vCPU-1GB", corev1.LabelInstanceType: "2vCPU-1GB",
				node.LabelPoolID: pool, node.LabelPoolName: "pool-a", node.LabelHostID: host, node.LabelHostName: "host-a",
				node.LabelVMName: name,
			}))
		n.Status.Addresses = []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: internal},
			{Type: corev1.NodeExternalIP, Address: external},
			{Type: corev1.NodeHostName, Address: name},
		}
		env.AddNode(t, n)
		names[i] = name
	}

	// A pool is trusted for absence and uniqueness after the settle time; counting stops after
	// it, so that what the controllers do once the pool is trusted is counted too.
	const settle = time.Second
	cfgFile := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfgFile, fmt.Appendf(nil, "url: %s\ntoken: %s\ninventory:\n  settleTime: %s\n", x.URL, token, settle), 0o600); err != nil {
		t.Fatal(err)
	}
	o := app.NewOptions()
	o.ConfigFile, o.Webhook, o.LeaderElect, o.MetricsBindAddress, o.HealthProbeBindAddress = cfgFile, false, false, "0", "0"
	var counter testenv.RequestCounter
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- app.Run(runCtx, o, counter.Config(env.Config), func(string) string { return "" }) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	// Every controller has reconciled every Node, and nothing is queued or in flight.
	testenv.Eventually(t, 60*time.Second, "every Node reconciled by the three controllers, queues empty, pool settled", func() bool {
		if time.Since(start) < settle+2*time.Second {
			return false
		}
		for _, c := range app.AllControllers {
			// Reconciled without error: "success", or "requeue_after" for the periodic re-check.
			done := testenv.MetricValue(t, "controller_runtime_reconcile_total", map[string]string{"controller": c, "result": "success"}) +
				testenv.MetricValue(t, "controller_runtime_reconcile_total", map[string]string{"controller": c, "result": "requeue_after"})
			if done < nodes ||
				testenv.MetricValue(t, "workqueue_depth", map[string]string{"name": c}) != 0 ||
				testenv.MetricValue(t, "controller_runtime_active_workers", map[string]string{"controller": c}) != 0 {
				return false
			}
		}
		return true
	})
	elapsed := time.Since(start)
	total, most := 0, 0
	for _, name := range names {
		w := counter.NodeWrites(name)
		total += w
		most = max(most, w)
		n := env.Node(t, name)
		var external string
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeExternalIP {
				external = a.Address
			}
		}
		if external == "" {
			t.Errorf("Node %s lost upstream's ExternalIP: %v", name, n.Status.Addresses)
		}
	}
	t.Logf("takeover of %d Nodes: %d Node writes (at most %d on one Node), %d answered 409, all reconciled and quiet after %s (settle time %s)",
		nodes, total, most, counter.Conflicts(), elapsed.Round(time.Millisecond), settle)
	if most > 1 {
		t.Errorf("a Node was written %d times, want at most 1", most)
	}
	if c := counter.Conflicts(); c != 0 {
		t.Errorf("%d requests answered 409 Conflict, want 0", c)
	}
}
