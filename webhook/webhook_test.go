package webhook_test

import (
	"context"
	"flag"
	"fmt"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/webhook"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/inventory"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/xosim"
)

const token = "webhook-test-token-0123456789abcdefghijklmnop"

// suite is shared by the tests: one API server, one simulator, one webhook server.
var suite struct {
	env   *testenv.Env
	sim   *xosim.Server
	xo    *xo.Client
	inv   *inventory.Inventory
	pool  string
	host  string
	stop  context.CancelFunc
	done  chan struct{}
	ready chan struct{}
}

func TestMain(m *testing.M) {
	flag.Parse()
	// Benchmarks and fuzzing (-run '^$') need no API server.
	if f := flag.Lookup("test.run"); f != nil && f.Value.String() == "^$" {
		os.Exit(m.Run())
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithCancel(context.Background())
	sim := xosim.New(xosim.Options{Tokens: []string{token}})
	srv := httptest.NewServer(sim)
	// The inventory's event stream must end before the server can close.
	defer srv.Close()
	defer cancel()
	suite.sim = sim
	var err error
	if suite.pool, err = sim.AddPool(xosim.PoolSpec{NameLabel: "dc1-pool-a"}); err != nil {
		panic(err)
	}
	if suite.host, err = sim.AddHost(xosim.HostSpec{PoolID: suite.pool, NameLabel: "xcp-host-01"}); err != nil {
		panic(err)
	}
	if suite.xo, err = xo.New(xo.Options{URL: srv.URL, Token: token, Timeout: 2 * time.Second, RetryWait: 10 * time.Millisecond}); err != nil {
		panic(err)
	}
	suite.inv = inventory.New(suite.xo, inventory.Options{Log: logr.Discard()})
	go func() { _ = suite.inv.Start(ctx) }()
	<-suite.inv.Synced()

	env, err := testenv.Start(testenv.Options{Webhook: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	suite.env = env
	if err := startWebhook(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stopWebhook()
	return m.Run()
}

// startWebhook runs a manager serving only the webhook, over TLS, where the API server's
// webhook configuration points.
func startWebhook() error {
	wo := suite.env.WebhookInstallOptions
	mgr, err := ctrl.NewManager(suite.env.Config, ctrl.Options{
		Scheme:  scheme.Scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		WebhookServer: ctrlwebhook.NewServer(ctrlwebhook.Options{
			Host: wo.LocalServingHost, Port: wo.LocalServingPort, CertDir: wo.LocalServingCertDir,
		}),
	})
	if err != nil {
		return err
	}
	d := &webhook.NodeDefaulter{
		Inventory: suite.inv, XO: suite.xo, LookupTimeout: 500 * time.Millisecond,
		Labels:   node.LabelOptions{TagLabelPrefixes: []string{"tag.k8s.xenorchestra/"}, TagTaintPrefixes: []string{"tag.k8s.xenorchestra/"}},
		Recorder: mgr.GetEventRecorder("xenorchestra-node-webhook"),
	}
	if err := d.SetupWithManager(mgr); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	suite.stop, suite.done = cancel, make(chan struct{})
	go func() { defer close(suite.done); _ = mgr.Start(ctx) }()
	checker := mgr.GetWebhookServer().StartedChecker()
	for deadline := time.Now().Add(10 * time.Second); checker(nil) != nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("webhook server not started")
		}
	}
	return nil
}

func stopWebhook() {
	suite.stop()
	<-suite.done
}

// addVM adds a running VM and waits for the inventory to hold it.
func addVM(t *testing.T, spec xosim.VMSpec) string {
	t.Helper()
	if spec.PoolID == "" {
		spec.PoolID = suite.pool
	}
	if spec.HostID == "" && spec.PowerState == "" {
		spec.HostID = suite.host
	}
	id, err := suite.sim.AddVM(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := suite.inv.Relist(context.Background()); err != nil {
		t.Fatal(err)
	}
	return id
}

// create creates the Node as a kubelet does and returns the object the CREATE answered with.
func create(t *testing.T, n *corev1.Node) *corev1.Node {
	t.Helper()
	if err := suite.env.Client.Create(context.Background(), n); err != nil {
		t.Fatalf("create %s: %v", n.Name, err)
	}
	t.Cleanup(func() { _ = suite.env.Client.Delete(context.Background(), n) })
	return n
}

func wantDescribed(t *testing.T, n *corev1.Node, vm string) {
	t.Helper()
	if want := node.FormatProviderID(suite.pool, vm); n.Spec.ProviderID != want {
		t.Fatalf("providerID %q, want %q", n.Spec.ProviderID, want)
	}
	want := map[string]string{
		node.LabelRegion:       suite.pool,
		node.LabelZone:         suite.host,
		node.LabelInstanceType: "2vCPU-1GB",
		node.LabelPoolID:       suite.pool,
		node.LabelPoolName:     "dc1-pool-a",
		node.LabelHostID:       suite.host,
		node.LabelHostName:     "xcp-host-01",
		corev1.LabelHostname:   n.Name,
	}
	for k, v := range want {
		if n.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, n.Labels[k], v)
		}
	}
	if !node.HasTaint(n.Spec.Taints, node.TaintUninitialized, corev1.TaintEffectNoSchedule) {
		t.Error("the webhook removed the uninitialized taint: that is the controller's job")
	}
	if n.Annotations[node.AnnotationManagedLabels] == "" {
		t.Error("no ownership annotation")
	}
}

func TestSystemUUID(t *testing.T) {
	vm := addVM(t, xosim.VMSpec{NameLabel: "uuid-vm", CPUs: 2, Memory: xosim.GiB, IPs: []string{"10.1.0.1"}})
	n := create(t, testenv.KubeletNode("node-by-uuid", testenv.WithSystemUUID(vm)))
	wantDescribed(t, n, vm)
	if n.Labels[node.LabelVMName] != "uuid-vm" {
		t.Errorf("name label %q", n.Labels[node.LabelVMName])
	}
	// The answer to CREATE is what was stored.
	var stored corev1.Node
	if err := suite.env.Client.Get(context.Background(), client.ObjectKeyFromObject(n), &stored); err != nil {
		t.Fatal(err)
	}
	wantDescribed(t, &stored, vm)
	if !hasAddress(&stored, corev1.NodeInternalIP, "10.1.0.1") {
		t.Errorf("addresses %v lack the VM's 10.1.0.1", stored.Status.Addresses)
	}
}

func hasAddress(n *corev1.Node, typ corev1.NodeAddressType, a string) bool {
	for _, x := range n.Status.Addresses {
		if x.Type == typ && x.Address == a {
			return true
		}
	}
	return false
}

func TestSystemUUIDSwapped(t *testing.T) {
	vm := addVM(t, xosim.VMSpec{NameLabel: "uefi-vm", CPUs: 2, Memory: xosim.GiB, Firmware: "uefi"})
	guest, _ := suite.sim.GuestSystemUUID(vm)
	if guest == vm {
		t.Fatal("simulator UEFI guest reports the raw uuid")
	}
	n := create(t, testenv.KubeletNode("node-uefi", testenv.WithSystemUUID(strings.ToUpper(guest))))
	wantDescribed(t, n, vm)
}

func TestNameMatch(t *testing.T) {
	vm := addVM(t, xosim.VMSpec{NameLabel: "node-by-name", CPUs: 2, Memory: xosim.GiB, VirtualizationMode: "pvh"})
	n := create(t, testenv.KubeletNode("node-by-name"))
	wantDescribed(t, n, vm)
}

func TestAddressMatch(t *testing.T) {
	vm := addVM(t, xosim.VMSpec{NameLabel: "some-other-name", CPUs: 2, Memory: xosim.GiB, IPs: []string{"10.1.0.77"}})
	n := create(t, testenv.KubeletNode("node-by-address", testenv.WithNodeIP("10.1.0.77")))
	wantDescribed(t, n, vm)
	if !hasAddress(n, corev1.NodeInternalIP, "10.1.0.77") {
		t.Errorf("addresses %v", n.Status.Addresses)
	}
}

func TestAmbiguousNameUnchanged(t *testing.T) {
	addVM(t, xosim.VMSpec{NameLabel: "twin"})
	addVM(t, xosim.VMSpec{NameLabel: "twin"})
	n := create(t, testenv.KubeletNode("twin"))
	wantUnchanged(t, n)
	waitEvent(t, "twin", webhook.ReasonVMNotResolved, "ambiguous")
}

func wantUnchanged(t *testing.T, n *corev1.Node) {
	t.Helper()
	if n.Spec.ProviderID != "" || n.Labels[node.LabelRegion] != "" || n.Annotations[node.AnnotationManagedLabels] != "" {
		t.Fatalf("node %s changed: providerID %q labels %v", n.Name, n.Spec.ProviderID, n.Labels)
	}
	if !node.HasTaint(n.Spec.Taints, node.TaintUninitialized, corev1.TaintEffectNoSchedule) {
		t.Fatal("uninitialized taint lost")
	}
}

// waitEvent waits for an event about the Node with this reason whose note contains text.
func waitEvent(t *testing.T, nodeName, reason, text string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var list eventsv1.EventList
		if err := suite.env.Client.List(context.Background(), &list); err != nil {
			t.Fatal(err)
		}
		for _, e := range list.Items {
			if e.Regarding.Name == nodeName && e.Reason == reason && strings.Contains(strings.ToLower(e.Note), text) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s event containing %q for %s among %d events", reason, text, nodeName, len(list.Items))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestUnknownVMUnchanged(t *testing.T) {
	n := create(t, testenv.KubeletNode("node-unknown", testenv.WithSystemUUID("11111111-2222-4333-8444-555555555555")))
	wantUnchanged(t, n)
	waitEvent(t, "node-unknown", webhook.ReasonVMNotResolved, "")
}

func TestVMNotYetInInventory(t *testing.T) {
	// A VM created after the last listing, before its event reached the inventory (the event
	// stream is held back): one direct read finds it.
	stall := suite.sim.InjectFault(xosim.Fault{Kind: xosim.FaultStall, PathPrefix: "/rest/v0/events"})
	defer suite.sim.RemoveFault(stall)
	vm, err := suite.sim.AddVM(xosim.VMSpec{PoolID: suite.pool, HostID: suite.host, NameLabel: "brand-new", CPUs: 2, Memory: xosim.GiB})
	if err != nil {
		t.Fatal(err)
	}
	if suite.inv.Snapshot().VM(vm) != nil {
		t.Fatal("the inventory has the VM although the event stream is stalled")
	}
	n := create(t, testenv.KubeletNode("node-brand-new", testenv.WithSystemUUID(vm)))
	if n.Spec.ProviderID != node.FormatProviderID(suite.pool, vm) {
		t.Fatalf("providerID %q", n.Spec.ProviderID)
	}
}

func TestPresetProviderID(t *testing.T) {
	vm := addVM(t, xosim.VMSpec{NameLabel: "preset", CPUs: 2, Memory: xosim.GiB})
	pid := "xenorchestra://" + suite.pool + "/" + vm
	n := create(t, testenv.KubeletNode("node-preset", testenv.WithProviderID(pid)))
	wantDescribed(t, n, vm)
}

func TestForeignProviderID(t *testing.T) {
	addVM(t, xosim.VMSpec{NameLabel: "node-aws"})
	n := create(t, testenv.KubeletNode("node-aws", testenv.WithProviderID("aws:///eu-west-1a/i-0123456789abcdef0")))
	if n.Spec.ProviderID != "aws:///eu-west-1a/i-0123456789abcdef0" || n.Labels[node.LabelRegion] != "" {
		t.Fatalf("foreign node changed: %q %v", n.Spec.ProviderID, n.Labels)
	}
}

func TestInvalidNameSanitized(t *testing.T) {
	vm := addVM(t, xosim.VMSpec{NameLabel: "web server #1 (prod) ☃ " + strings.Repeat("x", 80), CPUs: 2, Memory: xosim.GiB})
	n := create(t, testenv.KubeletNode("node-odd-name", testenv.WithSystemUUID(vm)))
	wantDescribed(t, n, vm)
	v := n.Labels[node.LabelVMName]
	if len(v) > 63 || strings.ContainsAny(v, " #()☃") || !strings.HasPrefix(v, "web-server-1-prod") {
		t.Fatalf("name label %q not sanitized", v)
	}
	vm2 := addVM(t, xosim.VMSpec{NameLabel: "☃☃☃", CPUs: 2, Memory: xosim.GiB})
	n2 := create(t, testenv.KubeletNode("node-unlabelable", testenv.WithSystemUUID(vm2)))
	if _, ok := n2.Labels[node.LabelVMName]; ok || n2.Spec.ProviderID == "" {
		t.Fatalf("unsanitizable name: labels %v providerID %q", n2.Labels, n2.Spec.ProviderID)
	}
	waitEvent(t, "node-unlabelable", webhook.ReasonLabelRejected, "")
}

func TestTagLabelsAndRefusedKeys(t *testing.T) {
	vm := addVM(t, xosim.VMSpec{NameLabel: "tagged", CPUs: 2, Memory: xosim.GiB, Tags: []string{
		"k8s.xenorchestra/label:tag.k8s.xenorchestra/env=prod",
		"k8s.xenorchestra/label:node-role.kubernetes.io/control-plane=",
		"k8s.xenorchestra/taint:tag.k8s.xenorchestra/dedicated=db:NoSchedule",
	}})
	n := create(t, testenv.KubeletNode("node-tagged", testenv.WithSystemUUID(vm)))
	if n.Labels["tag.k8s.xenorchestra/env"] != "prod" {
		t.Errorf("tag label missing: %v", n.Labels)
	}
	if _, ok := n.Labels["node-role.kubernetes.io/control-plane"]; ok {
		t.Error("a tag set a reserved label")
	}
	if !node.HasTaint(n.Spec.Taints, "tag.k8s.xenorchestra/dedicated", corev1.TaintEffectNoSchedule) {
		t.Errorf("tag taint missing: %v", n.Spec.Taints)
	}
}

func TestXOUnreachable(t *testing.T) {
	// XO hangs: the one direct read is cut at the lookup timeout, the Node is admitted
	// unchanged, well inside the webhook's timeout.
	id := suite.sim.InjectFault(xosim.Fault{Kind: xosim.FaultLatency, Latency: 10 * time.Second, PathPrefix: "/rest/v0/vms/"})
	defer suite.sim.RemoveFault(id)
	start := time.Now()
	n := create(t, testenv.KubeletNode("node-xo-down", testenv.WithSystemUUID("22222222-3333-4444-8555-666666666666")))
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("CREATE took %s", d)
	}
	wantUnchanged(t, n)
}

// TestWebhookDown must stay last: it stops the webhook server and starts it again.
func TestWebhookDown(t *testing.T) {
	stopWebhook()
	defer func() {
		if err := startWebhook(); err != nil {
			t.Fatal(err)
		}
	}()
	n := create(t, testenv.KubeletNode("node-webhook-down"))
	wantUnchanged(t, n)
}
