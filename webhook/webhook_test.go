package webhook_test

import (
	"context"
	"flag"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/nodeevents"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/webhook"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/inventory"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/xosim"
)

// env is the API server the tests share; it calls the webhook over TLS for every Node CREATE.
var env *testenv.Env

func TestMain(m *testing.M) {
	flag.Parse()
	// Benchmarks and fuzzing (-run '^$') need no API server.
	if f := flag.Lookup("test.run"); f != nil && f.Value.String() == "^$" {
		os.Exit(m.Run())
	}
	os.Exit(testenv.Main(m, testenv.Options{Webhook: true}, &env))
}

// world is one test's XO (one pool, one host), its inventory and the webhook serving it.
type world struct {
	x          *testenv.XO
	pool, host string
	events     *testenv.Recorder
}

// tagPrefix is the prefix under which VM tags may set labels and taints in these tests.
const tagPrefix = "tag.k8s.xenorchestra/"

// serve starts a simulated XO with one pool and one host, its inventory, and the webhook with
// labels and its default settings (Initialize on, as --webhook-initialize) changed by opts,
// over TLS where the API server's webhook configuration points; everything stops when the test
// ends.
func serve(t *testing.T, labels node.LabelOptions, opts ...func(*webhook.NodeDefaulter)) *world {
	t.Helper()
	x := testenv.NewXO(t, testenv.XOOptions{})
	w := &world{x: x, events: &testenv.Recorder{}}
	w.events.FailOnInvalid(t)
	w.pool = x.AddPool(t, xosim.PoolSpec{NameLabel: "dc1-pool-a"})
	w.host = x.AddHost(t, xosim.HostSpec{PoolID: w.pool, NameLabel: "xcp-host-01"})
	x.StartInventory(t, inventory.Options{})
	d := &webhook.NodeDefaulter{Estate: testenv.Estate(x), Labels: labels, Events: nodeevents.New(w.events, "webhook", nil), Initialize: true}
	for _, o := range opts {
		o(d)
	}

	wo := env.WebhookInstallOptions
	srv := ctrlwebhook.NewServer(ctrlwebhook.Options{Host: wo.LocalServingHost, Port: wo.LocalServingPort, CertDir: wo.LocalServingCertDir})
	if err := d.Register(srv); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("webhook server: %v", err)
		}
	})
	testenv.WaitFor(t, 10*time.Second, "the webhook server started", func() error { return srv.StartedChecker()(&http.Request{}) })
	return w
}

// tagLabels lets VM tags set labels and taints under tagPrefix.
var tagLabels = node.LabelOptions{TagLabelPrefixes: []string{tagPrefix}, TagTaintPrefixes: []string{tagPrefix}}

// addVM adds a running VM on the world's host and waits for the inventory to hold it.
func (w *world) addVM(t *testing.T, spec xosim.VMSpec) string {
	t.Helper()
	if spec.PoolID == "" {
		spec.PoolID = w.pool
	}
	if spec.HostID == "" && spec.PowerState == "" {
		spec.HostID = w.host
	}
	id := w.x.AddVM(t, spec)
	w.x.WaitInventory(t, "the inventory holds the VM", func(s *inventory.Snapshot) bool { return s.VM(id) != nil })
	return id
}

// create creates the Node as a kubelet does and returns the object the CREATE answered with.
func create(t *testing.T, n *corev1.Node) *corev1.Node {
	t.Helper()
	if err := env.Client.Create(context.Background(), n); err != nil {
		t.Fatalf("create %s: %v", n.Name, err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), n) })
	return n
}

func (w *world) wantDescribed(t *testing.T, n *corev1.Node, vm string) {
	t.Helper()
	if want := node.FormatProviderID(w.pool, vm); n.Spec.ProviderID != want {
		t.Fatalf("providerID %q, want %q", n.Spec.ProviderID, want)
	}
	want := map[string]string{
		node.LabelRegion:       w.pool,
		node.LabelZone:         w.host,
		node.LabelInstanceType: "2vCPU-1GB",
		node.LabelPoolID:       w.pool,
		node.LabelPoolName:     "dc1-pool-a",
		node.LabelHostID:       w.host,
		node.LabelHostName:     "xcp-host-01",
		corev1.LabelHostname:   n.Name,
	}
	for k, v := range want {
		if n.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, n.Labels[k], v)
		}
	}
	if n.Annotations[node.AnnotationManagedLabels] == "" {
		t.Error("no ownership annotation")
	}
}

// wantBornComplete checks the CREATE answered with the Node initialized by the webhook: no
// uninitialized taint, recorded as the webhook's doing.
func wantBornComplete(t *testing.T, n *corev1.Node) {
	t.Helper()
	if node.HasTaint(n.Spec.Taints, node.TaintUninitialized, "") {
		t.Errorf("a completely described Node kept its uninitialized taint: missing %q", node.Missing(n, &xo.VM{PowerState: xo.PowerStateRunning}))
	}
	if got := n.Annotations[node.AnnotationInitializedBy]; got != node.InitializedByWebhook {
		t.Errorf("%s = %q, want %q", node.AnnotationInitializedBy, got, node.InitializedByWebhook)
	}
}

// wantTainted checks the CREATE answered with the uninitialized taint in place, for cloud-node
// to lift.
func wantTainted(t *testing.T, n *corev1.Node) {
	t.Helper()
	if !node.HasTaint(n.Spec.Taints, node.TaintUninitialized, corev1.TaintEffectNoSchedule) {
		t.Error("uninitialized taint lifted")
	}
	if got, ok := n.Annotations[node.AnnotationInitializedBy]; ok {
		t.Errorf("%s = %q on a Node left to cloud-node", node.AnnotationInitializedBy, got)
	}
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

// wantEvent checks the webhook emitted an event about the Node with this reason whose note
// contains text. Default emits it before it answers, hence before the CREATE returns.
func (w *world) wantEvent(t *testing.T, nodeName, reason, text string) {
	t.Helper()
	for _, e := range w.events.Find(nodeName, reason) {
		if strings.Contains(strings.ToLower(e.Note), text) {
			return
		}
	}
	t.Fatalf("no %s event containing %q for %s among %v", reason, text, nodeName, w.events.All(nodeName))
}

func hasAddress(n *corev1.Node, typ corev1.NodeAddressType, a string) bool {
	for _, x := range n.Status.Addresses {
		if x.Type == typ && x.Address == a {
			return true
		}
	}
	return false
}

func TestSystemUUID(t *testing.T) {
	w := serve(t, tagLabels)
	vm := w.addVM(t, xosim.VMSpec{NameLabel: "uuid-vm", CPUs: 2, Memory: xosim.GiB, IPs: []string{"10.1.0.1"}})
	n := create(t, testenv.KubeletNode("node-by-uuid", testenv.WithSystemUUID(vm)))
	w.wantDescribed(t, n, vm)
	if n.Labels[node.LabelVMName] != "uuid-vm" {
		t.Errorf("name label %q", n.Labels[node.LabelVMName])
	}
	// The answer to CREATE is what was stored.
	var stored corev1.Node
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(n), &stored); err != nil {
		t.Fatal(err)
	}
	w.wantDescribed(t, &stored, vm)
	if !hasAddress(&stored, corev1.NodeInternalIP, "10.1.0.1") {
		t.Errorf("addresses %v lack the VM's 10.1.0.1", stored.Status.Addresses)
	}
	// Described completely (the VM's address included): born complete, in the answer and in
	// what was stored.
	wantBornComplete(t, n)
	wantBornComplete(t, &stored)
	// The kubelet's own fields are kept.
	if stored.Status.NodeInfo.KubeletVersion == "" || stored.Labels[corev1.LabelOSStable] != "linux" || len(stored.Status.Conditions) == 0 {
		t.Errorf("kubelet fields lost: %+v", stored)
	}
}

// TestNoAddressKeepsTaint: a VM whose guest reports no address yet, for a kubelet without
// --node-ip, leaves the Node without any IP: described, but not completely, so the taint stays
// for cloud-node to lift once XO knows an address.
func TestNoAddressKeepsTaint(t *testing.T) {
	w := serve(t, tagLabels)
	vm := w.addVM(t, xosim.VMSpec{NameLabel: "no-address", CPUs: 2, Memory: xosim.GiB})
	n := create(t, testenv.KubeletNode("node-no-address", testenv.WithSystemUUID(vm)))
	w.wantDescribed(t, n, vm)
	wantTainted(t, n)

	// The kubelet's --node-ip is an address: the same VM's next Node is born complete.
	n2 := create(t, testenv.KubeletNode("node-no-address-node-ip", testenv.WithSystemUUID(vm), testenv.WithNodeIP("10.1.0.9")))
	wantBornComplete(t, n2)
}

// TestInitializeOff: with --webhook-initialize=false the webhook describes a Node completely
// and leaves the taint to cloud-node.
func TestInitializeOff(t *testing.T) {
	w := serve(t, tagLabels, func(d *webhook.NodeDefaulter) { d.Initialize = false })
	vm := w.addVM(t, xosim.VMSpec{NameLabel: "left-to-cloud-node", CPUs: 2, Memory: xosim.GiB, IPs: []string{"10.1.0.2"}})
	n := create(t, testenv.KubeletNode("node-initialize-off", testenv.WithSystemUUID(vm)))
	w.wantDescribed(t, n, vm)
	if !hasAddress(n, corev1.NodeInternalIP, "10.1.0.2") {
		t.Errorf("addresses %v", n.Status.Addresses)
	}
	wantTainted(t, n)
}

func TestSystemUUIDSwapped(t *testing.T) {
	w := serve(t, tagLabels)
	vm := w.addVM(t, xosim.VMSpec{NameLabel: "uefi-vm", CPUs: 2, Memory: xosim.GiB, Firmware: "uefi"})
	guest, _ := w.x.Sim.GuestSystemUUID(vm)
	if guest == vm {
		t.Fatal("simulator UEFI guest reports the raw uuid")
	}
	n := create(t, testenv.KubeletNode("node-uefi", testenv.WithSystemUUID(strings.ToUpper(guest))))
	w.wantDescribed(t, n, vm)
}

func TestNameMatch(t *testing.T) {
	w := serve(t, tagLabels)
	vm := w.addVM(t, xosim.VMSpec{NameLabel: "node-by-name", CPUs: 2, Memory: xosim.GiB, VirtualizationMode: "pvh"})
	n := create(t, testenv.KubeletNode("node-by-name"))
	w.wantDescribed(t, n, vm)
}

func TestAddressMatch(t *testing.T) {
	w := serve(t, tagLabels)
	vm := w.addVM(t, xosim.VMSpec{NameLabel: "some-other-name", CPUs: 2, Memory: xosim.GiB, IPs: []string{"10.1.0.77"}})
	n := create(t, testenv.KubeletNode("node-by-address", testenv.WithNodeIP("10.1.0.77")))
	w.wantDescribed(t, n, vm)
	if !hasAddress(n, corev1.NodeInternalIP, "10.1.0.77") {
		t.Errorf("addresses %v", n.Status.Addresses)
	}
	wantBornComplete(t, n)
}

func TestTopologyByName(t *testing.T) {
	w := serve(t, node.LabelOptions{Region: node.RegionPoolName, Zone: node.ZoneHostName})
	vm := w.addVM(t, xosim.VMSpec{NameLabel: "named-topology", CPUs: 2, Memory: xosim.GiB})
	n := create(t, testenv.KubeletNode("node-named-topology", testenv.WithSystemUUID(vm)))
	if n.Labels[node.LabelRegion] != "dc1-pool-a" || n.Labels[node.LabelZone] != "xcp-host-01" {
		t.Fatalf("region %q zone %q, want the pool and host names", n.Labels[node.LabelRegion], n.Labels[node.LabelZone])
	}
	if n.Labels[node.LabelPoolID] != w.pool || n.Labels[node.LabelHostID] != w.host {
		t.Errorf("pool and host ids: %v", n.Labels)
	}
}

func TestAmbiguousNameUnchanged(t *testing.T) {
	w := serve(t, tagLabels)
	w.addVM(t, xosim.VMSpec{NameLabel: "twin"})
	w.addVM(t, xosim.VMSpec{NameLabel: "twin"})
	n := create(t, testenv.KubeletNode("twin"))
	wantUnchanged(t, n)
	w.wantEvent(t, "twin", nodeevents.ReasonVMNotResolved, "ambiguous")
}

func TestUnknownVMUnchanged(t *testing.T) {
	w := serve(t, tagLabels)
	n := create(t, testenv.KubeletNode("node-unknown", testenv.WithSystemUUID("11111111-2222-4333-8444-555555555555")))
	wantUnchanged(t, n)
	w.wantEvent(t, "node-unknown", nodeevents.ReasonVMNotResolved, "")
}

// stalledVM adds a VM while the inventory's event stream is held back, so that the inventory
// lacks it until the test ends.
func (w *world) stalledVM(t *testing.T, name string) string {
	t.Helper()
	stall := w.x.Sim.InjectFault(xosim.Fault{Kind: xosim.FaultStall, PathPrefix: "/rest/v0/events"})
	t.Cleanup(func() { w.x.Sim.RemoveFault(stall) })
	vm := w.x.AddVM(t, xosim.VMSpec{PoolID: w.pool, HostID: w.host, NameLabel: name, CPUs: 2, Memory: xosim.GiB})
	if w.x.Inventory.Snapshot().VM(vm) != nil {
		t.Fatal("the inventory has the VM although the event stream is stalled")
	}
	return vm
}

func TestVMNotYetInInventory(t *testing.T) {
	// A VM created after the last listing, before its event reached the inventory: one
	// direct read finds it.
	w := serve(t, tagLabels)
	vm := w.stalledVM(t, "brand-new")
	n := create(t, testenv.KubeletNode("node-brand-new", testenv.WithSystemUUID(vm)))
	w.wantDescribed(t, n, vm)
	if got := w.x.Sim.RequestCount(http.MethodGet, "/rest/v0/vms/"+vm); got != 1 {
		t.Errorf("%d direct reads of the VM, want 1", got)
	}
}

func TestIgnoredUnchanged(t *testing.T) {
	// The VM is missing from the inventory, so that describing the Node would cost a direct
	// read (see TestVMNotYetInInventory): an ignored Node costs none.
	w := serve(t, tagLabels)
	vm := w.stalledVM(t, "ignored-vm")
	w.x.Sim.ResetCounters()
	n := create(t, testenv.KubeletNode("node-ignored", testenv.WithSystemUUID(vm),
		testenv.WithLabels(map[string]string{node.LabelIgnore: "true"})))
	wantUnchanged(t, n)
	if got := w.x.Sim.RequestCount(http.MethodGet, "/rest/v0/vms/"+vm); got != 0 {
		t.Errorf("%d direct reads of the VM of an ignored Node", got)
	}
	if all := w.events.All("node-ignored"); len(all) > 0 {
		t.Errorf("events about an ignored Node: %v", all)
	}
}

func TestPresetProviderID(t *testing.T) {
	w := serve(t, tagLabels)
	vm := w.addVM(t, xosim.VMSpec{NameLabel: "preset", CPUs: 2, Memory: xosim.GiB})
	pid := "xenorchestra://" + w.pool + "/" + vm
	n := create(t, testenv.KubeletNode("node-preset", testenv.WithProviderID(pid)))
	w.wantDescribed(t, n, vm)
}

func TestForeignProviderID(t *testing.T) {
	w := serve(t, tagLabels)
	// A VM of the same name, with an address: it would describe the Node completely.
	w.addVM(t, xosim.VMSpec{NameLabel: "node-aws", CPUs: 2, Memory: xosim.GiB, IPs: []string{"10.1.0.3"}})
	n := create(t, testenv.KubeletNode("node-aws", testenv.WithProviderID("aws:///eu-west-1a/i-0123456789abcdef0")))
	if n.Spec.ProviderID != "aws:///eu-west-1a/i-0123456789abcdef0" || n.Labels[node.LabelRegion] != "" {
		t.Fatalf("foreign node changed: %q %v", n.Spec.ProviderID, n.Labels)
	}
	wantTainted(t, n)
}

func TestInvalidNameSanitized(t *testing.T) {
	w := serve(t, tagLabels)
	vm := w.addVM(t, xosim.VMSpec{NameLabel: "web server #1 (prod) ☃ " + strings.Repeat("x", 80), CPUs: 2, Memory: xosim.GiB})
	n := create(t, testenv.KubeletNode("node-odd-name", testenv.WithSystemUUID(vm)))
	w.wantDescribed(t, n, vm)
	v := n.Labels[node.LabelVMName]
	if len(v) > 63 || strings.ContainsAny(v, " #()☃") || !strings.HasPrefix(v, "web-server-1-prod") {
		t.Fatalf("name label %q not sanitized", v)
	}
	vm2 := w.addVM(t, xosim.VMSpec{NameLabel: "☃☃☃", CPUs: 2, Memory: xosim.GiB})
	n2 := create(t, testenv.KubeletNode("node-unlabelable", testenv.WithSystemUUID(vm2)))
	if _, ok := n2.Labels[node.LabelVMName]; ok || n2.Spec.ProviderID == "" {
		t.Fatalf("unsanitizable name: labels %v providerID %q", n2.Labels, n2.Spec.ProviderID)
	}
	w.wantEvent(t, "node-unlabelable", nodeevents.ReasonLabelRejected, "")
}

// TestDryRunEmitsNoEvent: a dry-run CREATE (kubectl create --dry-run=server) is described
// like any other, its answer the Node a real CREATE would store (born complete here), but the
// webhook declares sideEffects None, so it emits no event and counts no admission, and nothing
// is stored: no taint is lifted anywhere. The same Node created for real does emit.
func TestDryRunEmitsNoEvent(t *testing.T) {
	w := serve(t, tagLabels)
	vm := w.addVM(t, xosim.VMSpec{NameLabel: "dry", CPUs: 2, Memory: xosim.GiB, IPs: []string{"10.1.0.4"}, Tags: []string{
		"k8s.xenorchestra/label:node-role.kubernetes.io/control-plane=",
	}})
	n := testenv.KubeletNode("node-dry", testenv.WithSystemUUID(vm))
	admissions := testenv.MetricValue(t, "xenorchestra_webhook_admissions_total", nil)
	initialized := testenv.MetricValue(t, "xenorchestra_webhook_admissions_total", map[string]string{"result": "initialized"})
	if err := env.Client.Create(context.Background(), n, client.DryRunAll); err != nil {
		t.Fatal(err)
	}
	if d := testenv.MetricValue(t, "xenorchestra_webhook_admissions_total", nil) - admissions; d != 0 {
		t.Errorf("a dry run counted %v admissions, want none", d)
	}
	w.wantDescribed(t, n, vm)
	wantBornComplete(t, n)
	if ev := w.events.All("node-dry"); len(ev) != 0 {
		t.Fatalf("a dry run emitted events: %v", ev)
	}
	if env.NodeExists(t, "node-dry") {
		t.Fatal("a dry run stored the Node")
	}
	create(t, testenv.KubeletNode("node-dry", testenv.WithSystemUUID(vm)))
	w.wantEvent(t, "node-dry", nodeevents.ReasonLabelRejected, "node-role.kubernetes.io/control-plane")
	if d := testenv.MetricValue(t, "xenorchestra_webhook_admissions_total", map[string]string{"result": "initialized"}) - initialized; d != 1 {
		t.Errorf("the real CREATE counted %v admissions, want one", d)
	}
}

func TestTagLabelsAndRefusedKeys(t *testing.T) {
	w := serve(t, tagLabels)
	vm := w.addVM(t, xosim.VMSpec{NameLabel: "tagged", CPUs: 2, Memory: xosim.GiB, Tags: []string{
		"k8s.xenorchestra/label:" + tagPrefix + "env=prod",
		"k8s.xenorchestra/label:node-role.kubernetes.io/control-plane=",
		"k8s.xenorchestra/taint:" + tagPrefix + "dedicated=db:NoSchedule",
	}})
	n := create(t, testenv.KubeletNode("node-tagged", testenv.WithSystemUUID(vm)))
	if n.Labels[tagPrefix+"env"] != "prod" {
		t.Errorf("tag label missing: %v", n.Labels)
	}
	if _, ok := n.Labels["node-role.kubernetes.io/control-plane"]; ok {
		t.Error("a tag set a reserved label")
	}
	if !node.HasTaint(n.Spec.Taints, tagPrefix+"dedicated", corev1.TaintEffectNoSchedule) {
		t.Errorf("tag taint missing: %v", n.Spec.Taints)
	}
	w.wantEvent(t, "node-tagged", nodeevents.ReasonLabelRejected, "node-role.kubernetes.io/control-plane")
}

func TestXOUnreachable(t *testing.T) {
	// XO hangs: the one direct read is cut at the Estate's lookup timeout, the Node is
	// admitted unchanged, well inside the webhook's timeout.
	w := serve(t, tagLabels)
	id := w.x.Sim.InjectFault(xosim.Fault{Kind: xosim.FaultLatency, Latency: 10 * time.Second, PathPrefix: "/rest/v0/vms/"})
	defer w.x.Sim.RemoveFault(id)
	start := time.Now()
	n := create(t, testenv.KubeletNode("node-xo-down", testenv.WithSystemUUID("22222222-3333-4444-8555-666666666666")))
	if d := time.Since(start); d > inventory.DefaultLookupTimeout+2*time.Second {
		t.Fatalf("CREATE took %s", d)
	}
	wantUnchanged(t, n)
	w.wantEvent(t, "node-xo-down", nodeevents.ReasonVMNotResolved, "")
}

func TestWebhookDown(t *testing.T) {
	// No webhook server: the API server admits the Node unchanged (failurePolicy Ignore).
	n := create(t, testenv.KubeletNode("node-webhook-down"))
	wantUnchanged(t, n)
}
