// Command demo runs the whole controller on an embedded default: a local control plane (etcd
// and kube-apiserver), the XO simulator serving hack/demo-inventory.yaml, and the controller
// with its webhook served over TLS and called by the API server. It registers Nodes the way
// kubelets with --cloud-provider=external do, shows them initialized, then shows a live
// migration, a VM shutdown, a VM deletion and a pool that XO loses, reflected on the Nodes.
//
//	go run ./hack/demo        (or: make demo)
package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/yaml"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/cmd/app"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/xosim"
)

const token = "demo-token-not-a-secret-0123456789abcdefghij"

// cloudTaintPrefix is the prefix of the taints a cloud controller manages.
const cloudTaintPrefix = "node.cloudprovider.kubernetes.io/"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func step(format string, args ...any) {
	fmt.Printf("\n\033[1m==> "+format+"\033[0m\n", args...)
}

func run(ctx context.Context) error {
	// Errors only: the demo prints its own story.
	ctrl.SetLogger(zap.New(zap.Level(zapcore.ErrorLevel)))
	root := testenv.RepoRoot()

	step("Preparing etcd and kube-apiserver (the first run builds them from source: several minutes)")
	tb := exec.CommandContext(ctx, "bash", filepath.Join(root, "hack", "testbin.sh"), "etcd", "kube-apiserver")
	tb.Stderr = os.Stderr
	out, err := tb.Output()
	if err != nil {
		return fmt.Errorf("hack/testbin.sh: %w", err)
	}
	bin := strings.TrimSpace(string(out))
	if err := os.Setenv("KUBEBUILDER_ASSETS", bin); err != nil {
		return err
	}

	step("Starting the XO simulator with hack/demo-inventory.yaml")
	sim := xosim.New(xosim.Options{Tokens: []string{token}})
	data, err := os.ReadFile(filepath.Join(root, "hack", "demo-inventory.yaml"))
	if err != nil {
		return err
	}
	if data, err = yaml.YAMLToJSON(data); err != nil {
		return err
	}
	if err := sim.LoadInventory(data); err != nil {
		return err
	}
	xoSrv := httptest.NewServer(sim)
	defer xoSrv.Close()
	defer sim.CloseEventStreams()
	xoc, err := xo.New(xo.Options{URL: xoSrv.URL, Token: token})
	if err != nil {
		return err
	}
	vms := map[string]*xo.VM{}
	if err := xoc.ListVMs(ctx, "", func(v *xo.VM) { vms[v.NameLabel] = v }); err != nil {
		return err
	}
	fmt.Printf("XO at %s: %d VMs\n", xoSrv.URL, len(vms))

	step("Starting etcd and kube-apiserver, with the Node webhook registered (failurePolicy Ignore)")
	env, err := testenv.Start(testenv.Options{Webhook: true})
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()

	step("Starting xenorchestra-cloud-controller-manager (webhook over TLS + cloud-node, cloud-node-lifecycle, cloud-node-label-sync)")
	probe, err := testenv.FreeLoopbackAddr()
	if err != nil {
		return err
	}
	o := app.NewOptions()
	wo := env.WebhookInstallOptions
	o.WebhookHost, o.WebhookPort, o.WebhookCertDir = wo.LocalServingHost, wo.LocalServingPort, wo.LocalServingCertDir
	o.LeaderElect = false
	o.MetricsBindAddress = "0"
	o.HealthProbeBindAddress = probe
	// A settle time of 3 s instead of the default 30 s, so that the deletion scene is short: a
	// VM must be absent that long, from a pool connected that long, before its Node goes.
	dir, err := os.MkdirTemp("", "xo-ccm-demo")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	o.ConfigFile = filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(o.ConfigFile, fmt.Appendf(nil, "url: %s\ntoken: %s\ninventory: {settleTime: 3s}\n", xoSrv.URL, token), 0o600); err != nil {
		return err
	}
	mgrCtx, stopMgr := context.WithCancel(ctx)
	defer stopMgr()
	mgrDone := make(chan error, 1)
	go func() {
		mgrDone <- app.Run(mgrCtx, o, env.Config, func(string) string { return "" })
	}()
	if err := waitReady(ctx, "http://"+probe+"/readyz", mgrDone); err != nil {
		return err
	}
	fmt.Println("ready: inventory synced, webhook serving")

	step("Registering Nodes the way kubelets with --cloud-provider=external do (uninitialized taint, systemUUID)")
	c := env.Client
	var names []string
	for name, vm := range vms {
		if !strings.HasPrefix(name, "k8s-") {
			continue
		}
		names = append(names, name)
		uuid, _ := sim.GuestSystemUUID(vm.ID)
		// A halted VM's kubelet does not report: its Node registers NotReady.
		ready := vm.PowerState == xo.PowerStateRunning
		n := testenv.KubeletNode(name, testenv.WithSystemUUID(uuid), testenv.WithNodeIP(vm.MainIPAddress), testenv.WithReady(ready))
		start := time.Now()
		if err := c.Create(ctx, n); err != nil {
			return err
		}
		born := "uninitialized taint left to cloud-node"
		if n.Annotations[node.AnnotationInitializedBy] == node.InitializedByWebhook {
			born = "born complete: no uninitialized taint"
		}
		fmt.Printf("  %-14s created in %-8s providerID in the CREATE answer: %s (%s)\n", name, time.Since(start).Round(time.Millisecond), n.Spec.ProviderID, born)
	}
	sort.Strings(names)
	if err := waitFor(ctx, "every Node initialized (uninitialized taint removed)", func() (bool, error) {
		for _, name := range names {
			var n corev1.Node
			if err := c.Get(ctx, types.NamespacedName{Name: name}, &n); err != nil {
				return false, err
			}
			if node.HasTaint(n.Spec.Taints, node.TaintUninitialized, "") {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		return err
	}
	if err := printNodes(ctx, c); err != nil {
		return err
	}

	step("Live migration: k8s-worker-1 moves to xcp-a-02 in XO")
	var hostA2 string
	_ = xoc.ListHosts(ctx, "", func(h *xo.Host) {
		if h.NameLabel == "xcp-a-02" {
			hostA2 = h.ID
		}
	})
	start := time.Now()
	if err := sim.Migrate(vms["k8s-worker-1"].ID, hostA2); err != nil {
		return err
	}
	if err := waitLabel(ctx, c, "k8s-worker-1", node.LabelZone, hostA2); err != nil {
		return err
	}
	fmt.Printf("zone label updated %s after the migration\n", time.Since(start).Round(time.Millisecond))

	step("Shutdown: k8s-worker-2 is halted in XO and its kubelet stops reporting (NotReady)")
	if err := sim.SetPowerState(vms["k8s-worker-2"].ID, xo.PowerStateHalted); err != nil {
		return err
	}
	if err := testenv.SetReady(ctx, c, "k8s-worker-2", false); err != nil {
		return err
	}
	if err := waitFor(ctx, "the shutdown taint on k8s-worker-2", func() (bool, error) {
		var n corev1.Node
		err := c.Get(ctx, types.NamespacedName{Name: "k8s-worker-2"}, &n)
		return err == nil && node.HasTaint(n.Spec.Taints, node.TaintShutdown, corev1.TaintEffectNoSchedule) && n.Labels[node.LabelZone] != "", err
	}); err != nil {
		return err
	}
	fmt.Println("k8s-worker-2 tainted node.cloudprovider.kubernetes.io/shutdown:NoSchedule; its zone label kept (never the pool uuid)")

	step("Deletion: k8s-worker-3 is deleted in XO and its Node is NotReady (the Node goes once the VM has been absent for the settle time, 3 s here, 30 s by default)")
	if err := testenv.SetReady(ctx, c, "k8s-worker-3", false); err != nil {
		return err
	}
	if err := sim.RemoveVM(vms["k8s-worker-3"].ID); err != nil {
		return err
	}
	if err := waitFor(ctx, "the Node k8s-worker-3 deleted", func() (bool, error) {
		var n corev1.Node
		err := c.Get(ctx, types.NamespacedName{Name: "k8s-worker-3"}, &n)
		return client.IgnoreNotFound(err) == nil && err != nil, client.IgnoreNotFound(err)
	}); err != nil {
		return err
	}

	step("XO loses pool dc2-pool-b (it then answers 'no such VM' for all its VMs); its Nodes go NotReady")
	pool := vms["k8s-worker-4"].PoolID
	if err := sim.DisconnectPool(pool); err != nil {
		return err
	}
	var inPool []string
	for _, name := range names {
		if vms[name].PoolID == pool {
			inPool = append(inPool, name)
			if err := testenv.SetReady(ctx, c, name, false); err != nil {
				return err
			}
		}
	}
	time.Sleep(5 * time.Second)
	var kept int
	for _, name := range inPool {
		var n corev1.Node
		if c.Get(ctx, types.NamespacedName{Name: name}, &n) == nil {
			kept++
		}
	}
	fmt.Printf("after 5 s: %d of %d Nodes of the lost pool kept (the upstream controller deletes them all)\n", kept, len(inPool))
	if kept != len(inPool) {
		return fmt.Errorf("%d Nodes of the lost pool deleted", len(inPool)-kept)
	}
	if err := printNodes(ctx, c); err != nil {
		return err
	}

	step("Done; stopping everything")
	stopMgr()
	if err := <-mgrDone; err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// printNodes prints the Nodes as two tables, the columns `kubectl get node` would show with the
// topology labels, then providerID, XO host and the cloud provider's taints (node.kubernetes.io/
// not-ready and the like are the node lifecycle controller's, which the demo does not run). It
// reads them with the demo's client, so the demo needs no kubectl binary.
func printNodes(ctx context.Context, c client.Client) error {
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	sort.Slice(nodes.Items, func(i, j int) bool { return nodes.Items[i].Name < nodes.Items[j].Name })
	w := tabwriter.NewWriter(os.Stdout, 0, 8, 3, ' ', 0)
	_, _ = fmt.Fprintln(w, "NAME\tSTATUS\tREGION\tZONE\tINSTANCE-TYPE")
	for _, n := range nodes.Items {
		_, _ = fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", n.Name, readiness(&n), n.Labels[node.LabelRegion], n.Labels[node.LabelZone], n.Labels[node.LabelInstanceType])
	}
	_, _ = fmt.Fprintln(w)
	_, _ = fmt.Fprintln(w, "NAME\tPROVIDER-ID\tHOST\tCLOUD TAINTS")
	for _, n := range nodes.Items {
		var taints []string
		for _, t := range n.Spec.Taints {
			if strings.HasPrefix(t.Key, cloudTaintPrefix) {
				taints = append(taints, t.Key+":"+string(t.Effect))
			}
		}
		_, _ = fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", n.Name, n.Spec.ProviderID, n.Labels[node.LabelHostName], strings.Join(taints, ","))
	}
	return w.Flush()
}

// readiness is the STATUS column of `kubectl get node`, without its scheduling part.
func readiness(n *corev1.Node) string {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			if cond.Status == corev1.ConditionTrue {
				return "Ready"
			}
			return "NotReady"
		}
	}
	return "Unknown"
}

func waitReady(ctx context.Context, url string, done <-chan error) error {
	return waitFor(ctx, "the controller ready", func() (bool, error) {
		select {
		case err := <-done:
			return false, fmt.Errorf("controller stopped: %w", err)
		default:
		}
		resp, err := http.Get(url) //nolint:gosec // loopback probe
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

func waitFor(ctx context.Context, what string, cond func() (bool, error)) error {
	start := time.Now()
	last := time.Now()
	fmt.Printf("waiting for %s ...\n", what)
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			fmt.Printf("  done in %s\n", time.Since(start).Round(time.Millisecond))
			return nil
		}
		if time.Since(last) > 5*time.Second {
			fmt.Printf("  still waiting (%s)\n", time.Since(start).Round(time.Second))
			last = time.Now()
		}
		if time.Since(start) > 2*time.Minute {
			return fmt.Errorf("timed out waiting for %s", what)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func waitLabel(ctx context.Context, c client.Client, name, key, value string) error {
	return waitFor(ctx, fmt.Sprintf("%s=%s on %s", key, value, name), func() (bool, error) {
		var n corev1.Node
		err := c.Get(ctx, types.NamespacedName{Name: name}, &n)
		return err == nil && n.Labels[key] == value, err
	})
}
