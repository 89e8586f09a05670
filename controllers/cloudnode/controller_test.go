package cloudnode

import (
	"fmt"
	"maps"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/controllers/common"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/nodeevents"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/inventory"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/xosim"
)

// token is the XO token of the simulator; it must never show in events.
const token = "cloud-node-test-token-6f1c2b7d"

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, testenv.Options{}, &env)) }

// fixture is one test's XO (testenv.Fixture: a simulator with a pool behind a listener that
// can refuse connections, a real client and a real inventory) and a Reconciler calling the
// shared API server.
type fixture struct {
	*testenv.Fixture
	r *Reconciler
}

const (
	poolName = "Pool A"
	hostName = "host-a"
)

func newFixture(t *testing.T, stream bool) *fixture {
	t.Helper()
	return newFixtureWith(t, fixtureOptions(stream))
}

// fixtureOptions are the fixture's settings, with or without the event stream.
func fixtureOptions(stream bool) testenv.FixtureOptions {
	return testenv.FixtureOptions{
		Token:     token,
		PoolName:  poolName,
		HostNames: [2]string{hostName, "host-b"},
		VMMemory:  4 * xosim.GiB,
		Client:    xo.Options{Timeout: 300 * time.Millisecond, ListTimeout: 5 * time.Second, Retries: -1},
		// Relists happen only when a test asks (or, with the event stream, after it subscribes).
		Inventory: inventory.Options{DisableEventStream: !stream, PollPeriod: time.Hour, ResyncPeriod: time.Hour, Log: logr.Discard()},
	}
}

func newFixtureWith(t *testing.T, o testenv.FixtureOptions) *fixture {
	t.Helper()
	tf := testenv.NewFixture(t, env, o)
	f := &fixture{Fixture: tf}
	f.r = f.newReconciler(env.Client, node.LabelOptions{})
	return f
}

// newReconciler returns the controller on the fixture's estate.
func (f *fixture) newReconciler(c client.Client, labels node.LabelOptions) *Reconciler {
	return New(c, f.Estate, f.Rec, clock.RealClock{}, Options{Labels: labels, Workers: 4})
}

// nodeName returns a node name unique in the test run.
func nodeName(t *testing.T) string { return testenv.NodeName(t, "") }

// createNode creates a kubelet-like Node and deletes it when the test ends.
func (f *fixture) createNode(n *corev1.Node) { f.T.Helper(); env.AddNode(f.T, n) }

func (f *fixture) reconcile(name string) ctrl.Result {
	f.T.Helper()
	return testenv.Reconcile(f.Ctx, f.T, f.r, name)
}

func uninitialized(n *corev1.Node) bool {
	return node.HasTaint(n.Spec.Taints, node.TaintUninitialized, "")
}

// wantLabels are the labels of a Node on a running VM of the fixture's pool and host.
func (f *fixture) wantLabels(vmName string) map[string]string {
	return map[string]string{
		node.LabelRegion:       f.Pool,
		node.LabelZone:         f.Host1,
		node.LabelInstanceType: "2vCPU-4GB",
		node.LabelPoolID:       f.Pool,
		node.LabelPoolName:     "Pool-A",
		node.LabelHostID:       f.Host1,
		node.LabelHostName:     hostName,
		node.LabelVMName:       vmName,
	}
}

// checkInitialized asserts the final state of an initialized Node.
func checkInitialized(t *testing.T, n *corev1.Node, providerID string, labels map[string]string, addrs []corev1.NodeAddress) {
	t.Helper()
	if uninitialized(n) {
		t.Errorf("node %s still has the uninitialized taint", n.Name)
	}
	if n.Spec.ProviderID != providerID {
		t.Errorf("providerID = %q, want %q", n.Spec.ProviderID, providerID)
	}
	for k, v := range labels {
		if got, ok := n.Labels[k]; !ok || got != v {
			t.Errorf("label %s = %q (present %v), want %q", k, got, ok, v)
		}
	}
	checkKubeletLabels(t, n)
	if addrs != nil && !node.AddressesEqual(n.Status.Addresses, addrs) {
		t.Errorf("addresses = %v, want %v", n.Status.Addresses, addrs)
	}
	if by := n.Annotations[node.AnnotationInitializedBy]; by != node.InitializedByController {
		t.Errorf("%s = %q, want %q", node.AnnotationInitializedBy, by, node.InitializedByController)
	}
}

// checkKubeletLabels asserts that the labels the kubelet set are still there.
func checkKubeletLabels(t *testing.T, n *corev1.Node) {
	t.Helper()
	for _, k := range []string{corev1.LabelHostname, corev1.LabelOSStable, corev1.LabelArchStable} {
		if n.Labels[k] == "" {
			t.Errorf("kubelet label %s removed", k)
		}
	}
}

// checkUntouched asserts that a Node the controller must not initialize still is as created:
// not deleted, tainted, without providerID, its labels intact.
func checkUntouched(t *testing.T, before, after *corev1.Node) {
	t.Helper()
	if !uninitialized(after) {
		t.Errorf("node %s lost the uninitialized taint", after.Name)
	}
	if after.Spec.ProviderID != before.Spec.ProviderID {
		t.Errorf("providerID = %q, want %q", after.Spec.ProviderID, before.Spec.ProviderID)
	}
	for k, v := range before.Labels {
		if after.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, after.Labels[k], v)
		}
	}
	checkKubeletLabels(t, after)
}

func addrs(name string, internal ...string) []corev1.NodeAddress {
	var out []corev1.NodeAddress
	for _, ip := range internal {
		out = append(out, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	return append(out, corev1.NodeAddress{Type: corev1.NodeHostName, Address: name})
}

func TestInitialize(t *testing.T) {
	for _, tc := range []struct {
		name string
		// vm is the VM's spec; the fixture fills pool, host, CPUs and memory.
		vm xosim.VMSpec
		// node builds the kubelet's Node for the VM.
		node func(f *fixture, name, vmID string) *corev1.Node
		// wantAddrs are the Node's final addresses (nil: no addresses).
		wantAddrs func(name string) []corev1.NodeAddress
		// noZone: the VM is not running, no zone is expected.
		noZone bool
		method string
	}{{
		name: "system uuid",
		vm:   xosim.VMSpec{IPs: []string{"10.0.0.5"}},
		node: func(_ *fixture, name, vmID string) *corev1.Node {
			return testenv.KubeletNode(name, testenv.WithSystemUUID(strings.ToUpper(vmID)))
		},
		wantAddrs: func(name string) []corev1.NodeAddress { return addrs(name, "10.0.0.5") },
		method:    "system_uuid",
	}, {
		name: "byte-swapped system uuid of a UEFI guest",
		vm:   xosim.VMSpec{IPs: []string{"10.0.0.6", "fd00::6"}, Firmware: "uefi"},
		node: func(f *fixture, name, vmID string) *corev1.Node {
			guest, _ := f.Sim.GuestSystemUUID(vmID)
			if guest == vmID {
				f.T.Fatalf("the simulator's UEFI guest reports the raw uuid")
			}
			return testenv.KubeletNode(name, testenv.WithSystemUUID(guest))
		},
		wantAddrs: func(name string) []corev1.NodeAddress { return addrs(name, "10.0.0.6", "fd00::6") },
		method:    "system_uuid_swapped",
	}, {
		name: "name of a PVH guest without SMBIOS",
		vm:   xosim.VMSpec{IPs: []string{"10.0.0.7"}, VirtualizationMode: "pvh"},
		node: func(_ *fixture, name, _ string) *corev1.Node {
			return testenv.KubeletNode(name)
		},
		wantAddrs: func(name string) []corev1.NodeAddress { return addrs(name, "10.0.0.7") },
		method:    "name",
	}, {
		name: "kubelet --node-ip wins over guest addresses",
		vm:   xosim.VMSpec{IPs: []string{"10.0.0.8"}},
		node: func(_ *fixture, name, vmID string) *corev1.Node {
			return testenv.KubeletNode(name, testenv.WithSystemUUID(vmID), testenv.WithNodeIP("192.168.1.8"))
		},
		wantAddrs: func(name string) []corev1.NodeAddress { return addrs(name, "192.168.1.8") },
		method:    "system_uuid",
	}, {
		name: "kubelet --provider-id",
		vm:   xosim.VMSpec{IPs: []string{"10.0.0.9"}},
		node: func(f *fixture, name, vmID string) *corev1.Node {
			return testenv.KubeletNode(name, testenv.WithProviderID(node.FormatProviderID(f.Pool, vmID)))
		},
		wantAddrs: func(name string) []corev1.NodeAddress { return addrs(name, "10.0.0.9") },
		method:    "provider_id",
	}, {
		// XO shows no guest address of a halted VM: the kubelet's --node-ip is the Node's.
		name: "halted VM: no zone required",
		vm:   xosim.VMSpec{PowerState: xo.PowerStateHalted, IPs: []string{"10.0.0.10"}},
		node: func(_ *fixture, name, vmID string) *corev1.Node {
			return testenv.KubeletNode(name, testenv.WithSystemUUID(vmID), testenv.WithNodeIP("192.168.1.10"))
		},
		wantAddrs: func(name string) []corev1.NodeAddress { return addrs(name, "192.168.1.10") },
		noZone:    true,
		method:    "system_uuid",
	}, {
		// Nor any address without --node-ip: a VM that does not run has none to give.
		name: "halted VM: no address required",
		vm:   xosim.VMSpec{PowerState: xo.PowerStateHalted, IPs: []string{"10.0.0.11"}},
		node: func(_ *fixture, name, vmID string) *corev1.Node {
			return testenv.KubeletNode(name, testenv.WithSystemUUID(vmID))
		},
		wantAddrs: func(string) []corev1.NodeAddress { return []corev1.NodeAddress{} },
		noZone:    true,
		method:    "system_uuid",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, false)
			name := nodeName(t)
			spec := tc.vm
			spec.NameLabel = name
			vmID := f.AddVM(spec)
			n := tc.node(f, name, vmID)
			f.createNode(n)
			initializedBefore := testutil.ToFloat64(initializationsTotal.WithLabelValues(resultInitialized, node.InitializedByController))

			if res := f.reconcile(name); res.RequeueAfter != 0 {
				t.Errorf("RequeueAfter = %s after initialization, want 0", res.RequeueAfter)
			}

			got := f.Get(name)
			want := f.wantLabels(name)
			var wantAddrs []corev1.NodeAddress
			if tc.wantAddrs != nil {
				wantAddrs = tc.wantAddrs(name)
			}
			if tc.noZone {
				delete(want, node.LabelZone)
				delete(want, node.LabelHostID)
				delete(want, node.LabelHostName)
				if z, ok := got.Labels[node.LabelZone]; ok {
					t.Errorf("zone label %q set for a halted VM", z)
				}
			}
			checkInitialized(t, got, node.FormatProviderID(f.Pool, vmID), want, wantAddrs)
			if ev := f.Rec.Find(name, ReasonNodeInitialized); len(ev) != 1 || ev[0].Type != corev1.EventTypeNormal || !strings.Contains(ev[0].Note, tc.method) {
				t.Errorf("NodeInitialized events = %+v, want one naming %s", ev, tc.method)
			}
			if d := testutil.ToFloat64(initializationsTotal.WithLabelValues(resultInitialized, node.InitializedByController)) - initializedBefore; d != 1 {
				t.Errorf("initialized counter grew by %v, want 1", d)
			}

			// A second pass changes nothing and says nothing more.
			rv := got.ResourceVersion
			f.reconcile(name)
			if again := f.Get(name); again.ResourceVersion != rv {
				t.Errorf("second reconcile wrote the node: resourceVersion %s → %s", rv, again.ResourceVersion)
			}
			if ev := f.Rec.Find(name, ReasonNodeInitialized); len(ev) != 1 {
				t.Errorf("NodeInitialized emitted %d times, want once", len(ev))
			}
		})
	}
}

// TestInitializeWebhookPreset: the webhook described the Node at creation; the controller only
// lifts the taint, leaving everything else as it is.
func TestInitializeWebhookPreset(t *testing.T) {
	f := newFixture(t, false)
	name := nodeName(t)
	vmID := f.AddVM(xosim.VMSpec{NameLabel: name, IPs: []string{"10.0.1.5"}, Tags: []string{"k8s.xenorchestra/label:example.com/tier=web"}})
	labels := node.LabelOptions{TagLabelPrefixes: []string{"example.com/"}}
	f.r = f.newReconciler(env.Client, labels)
	n := testenv.KubeletNode(name, testenv.WithSystemUUID(vmID))
	// What the webhook does, with the same shared functions.
	view := f.Estate.View()
	vm := view.VM(vmID)
	node.Describe(view, n, vm, labels)
	n.Status.Addresses = node.Addresses(n, vm, node.AddressOptions{})
	f.createNode(n)
	before := f.Get(name)

	f.reconcile(name)

	got := f.Get(name)
	if uninitialized(got) {
		t.Fatal("taint not removed")
	}
	if got.Spec.ProviderID != before.Spec.ProviderID {
		t.Errorf("providerID changed: %q → %q", before.Spec.ProviderID, got.Spec.ProviderID)
	}
	// Only who lifted the taint is recorded.
	wantAnnotations := maps.Clone(before.Annotations)
	wantAnnotations[node.AnnotationInitializedBy] = node.InitializedByController
	if !maps.Equal(got.Labels, before.Labels) || !maps.Equal(got.Annotations, wantAnnotations) {
		t.Errorf("labels or annotations changed:\n before %v %v\n after  %v %v", before.Labels, before.Annotations, got.Labels, got.Annotations)
	}
	if got.Labels["example.com/tier"] != "web" {
		t.Errorf("tag label missing: %v", got.Labels)
	}
	if !node.AddressesEqual(got.Status.Addresses, before.Status.Addresses) {
		t.Errorf("addresses changed: %v → %v", before.Status.Addresses, got.Status.Addresses)
	}
}

// TestLegacyProviderIDKept: a providerID is only set when empty; the legacy scheme resolves.
func TestLegacyProviderIDKept(t *testing.T) {
	f := newFixture(t, false)
	name := nodeName(t)
	vmID := f.AddVM(xosim.VMSpec{NameLabel: name, IPs: []string{"10.0.2.5"}})
	legacy := "xeorchestra://" + f.Pool + "/" + vmID
	f.createNode(testenv.KubeletNode(name, testenv.WithProviderID(legacy)))

	f.reconcile(name)

	checkInitialized(t, f.Get(name), legacy, f.wantLabels(name), addrs(name, "10.0.2.5"))
}

func TestAmbiguousNameKeepsTaint(t *testing.T) {
	f := newFixture(t, false)
	name := nodeName(t)
	f.AddVM(xosim.VMSpec{NameLabel: name, VirtualizationMode: "pv", IPs: []string{"10.0.3.5"}})
	f.AddVM(xosim.VMSpec{NameLabel: name, VirtualizationMode: "pv", IPs: []string{"10.0.3.6"}})
	f.createNode(testenv.KubeletNode(name))
	before := f.Get(name)

	res := f.reconcile(name)

	if res.RequeueAfter <= 0 {
		t.Errorf("RequeueAfter = %s, want a retry", res.RequeueAfter)
	}
	after := f.Get(name)
	checkUntouched(t, before, after)
	if _, ok := after.Labels[node.LabelRegion]; ok {
		t.Errorf("region label set on an unresolved node")
	}
	ev := f.Rec.Find(name, nodeevents.ReasonVMNotResolved)
	if len(ev) != 1 || ev[0].Type != corev1.EventTypeWarning || !strings.Contains(ev[0].Note, "ambiguous") {
		t.Errorf("VMNotResolved events = %+v, want one Warning saying ambiguous", ev)
	}
	// The backoff grows while the VM stays ambiguous.
	if res2 := f.reconcile(name); res2.RequeueAfter <= res.RequeueAfter {
		t.Errorf("second RequeueAfter = %s, want more than %s", res2.RequeueAfter, res.RequeueAfter)
	}
}

// TestRequiredFieldMissing: a VM whose vCPU count XO does not report gets its providerID and
// labels, but keeps the taint: the instance type is required.
func TestRequiredFieldMissing(t *testing.T) {
	f := newFixture(t, false)
	name := nodeName(t)
	vmID := f.AddVM(xosim.VMSpec{NameLabel: name, IPs: []string{"10.0.4.5"}, Extra: map[string]any{"CPUs": map[string]any{"max": 0, "number": 0}}})
	f.createNode(testenv.KubeletNode(name, testenv.WithSystemUUID(vmID)))

	if res := f.reconcile(name); res.RequeueAfter <= 0 {
		t.Errorf("RequeueAfter = %s, want a retry", res.RequeueAfter)
	}

	got := f.Get(name)
	if !uninitialized(got) {
		t.Error("taint removed although the instance type is unknown")
	}
	if got.Spec.ProviderID != node.FormatProviderID(f.Pool, vmID) || got.Labels[node.LabelRegion] != f.Pool || got.Labels[node.LabelZone] != f.Host1 {
		t.Errorf("providerID %q, labels %v: want what is known set", got.Spec.ProviderID, got.Labels)
	}
	if _, ok := got.Labels[node.LabelInstanceType]; ok {
		t.Errorf("instance type label set")
	}
	if ev := f.Rec.Find(name, ReasonInitializationIncomplete); len(ev) != 1 || !strings.Contains(ev[0].Note, node.LabelInstanceType) {
		t.Errorf("InitializationIncomplete events = %+v", ev)
	}

	// Once XO reports the vCPUs, the node is initialized.
	if err := f.Sim.UpdateVM(vmID, func(s *xosim.VMSpec) { s.Extra = nil; s.CPUs = 2 }); err != nil {
		t.Fatal(err)
	}
	f.WaitInventory("the inventory to catch up", func(s *inventory.Snapshot) bool { return node.InstanceType(s.VM(vmID)) != "" })
	f.reconcile(name)
	checkInitialized(t, f.Get(name), node.FormatProviderID(f.Pool, vmID), f.wantLabels(name), addrs(name, "10.0.4.5"))
}

// TestNoAddressKeepsTaint: a VM whose guest reports no address, for a kubelet without
// --node-ip, leaves the Node without any IP: providerID and labels are set, the taint stays
// with a Warning that says why, and the Node is initialized once XO reports an address.
func TestNoAddressKeepsTaint(t *testing.T) {
	f := newFixture(t, false)
	name := nodeName(t)
	vmID := f.AddVM(xosim.VMSpec{NameLabel: name})
	f.createNode(testenv.KubeletNode(name, testenv.WithSystemUUID(vmID)))

	if res := f.reconcile(name); res.RequeueAfter <= 0 {
		t.Errorf("RequeueAfter = %s, want a retry", res.RequeueAfter)
	}
	got := f.Get(name)
	if !uninitialized(got) || len(got.Status.Addresses) != 0 {
		t.Fatalf("taint removed or addresses set without an address: %v %v", got.Spec.Taints, got.Status.Addresses)
	}
	if got.Spec.ProviderID != node.FormatProviderID(f.Pool, vmID) || got.Labels[node.LabelRegion] != f.Pool {
		t.Errorf("providerID %q, labels %v: want what is known set", got.Spec.ProviderID, got.Labels)
	}
	if ev := f.Rec.Find(name, ReasonInitializationIncomplete); len(ev) != 1 || !strings.Contains(ev[0].Note, node.FieldAddresses) || !strings.Contains(ev[0].Note, "--node-ip") {
		t.Errorf("InitializationIncomplete events = %+v, want one naming %s and the fix", ev, node.FieldAddresses)
	}

	if err := f.Sim.SetAddresses(vmID, map[string]string{"0/ipv4/0": "10.0.4.9"}); err != nil {
		t.Fatal(err)
	}
	f.WaitInventory("the inventory to catch up", func(s *inventory.Snapshot) bool { return len(s.VM(vmID).Addresses) > 0 })
	f.reconcile(name)
	checkInitialized(t, f.Get(name), node.FormatProviderID(f.Pool, vmID), f.wantLabels(name), addrs(name, "10.0.4.9"))
}

func TestForeignProviderIDUntouched(t *testing.T) {
	f := newFixture(t, false)
	for _, tc := range []struct {
		name string
		opts []testenv.NodeOption
	}{
		{"uninitialized", nil},
		{"initialized", []testenv.NodeOption{testenv.Initialized(), testenv.WithNodeIP("172.16.0.9")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := nodeName(t)
			vmID := f.AddVM(xosim.VMSpec{NameLabel: name, IPs: []string{"10.0.5.5"}})
			opts := append([]testenv.NodeOption{testenv.WithSystemUUID(vmID), testenv.WithProviderID("aws:///eu-west-1a/i-0123456789abcdef0")}, tc.opts...)
			f.createNode(testenv.KubeletNode(name, opts...))
			before := f.Get(name)

			if res := f.reconcile(name); res.RequeueAfter != 0 {
				t.Errorf("RequeueAfter = %s for a foreign node", res.RequeueAfter)
			}

			after := f.Get(name)
			if after.ResourceVersion != before.ResourceVersion {
				t.Errorf("foreign node written: %+v", after)
			}
			if ev := f.Rec.All(name); len(ev) != 0 {
				t.Errorf("events about a foreign node: %+v", ev)
			}
		})
	}
}

func TestAddressesFollowGuestIP(t *testing.T) {
	f := newFixture(t, false)
	name := nodeName(t)
	vmID := f.AddVM(xosim.VMSpec{NameLabel: name, IPs: []string{"10.0.6.5"}})
	f.createNode(testenv.KubeletNode(name, testenv.WithSystemUUID(vmID)))
	f.reconcile(name)
	checkInitialized(t, f.Get(name), node.FormatProviderID(f.Pool, vmID), nil, addrs(name, "10.0.6.5"))

	if err := f.Sim.SetAddresses(vmID, map[string]string{"0/ipv4/0": "10.0.6.99", "0/ipv6/0": "fd00::99"}); err != nil {
		t.Fatal(err)
	}
	f.WaitInventory("the inventory to catch up", func(s *inventory.Snapshot) bool { return len(s.VMsByAddress("10.0.6.99")) == 1 })
	f.reconcile(name)

	got := f.Get(name)
	if want := addrs(name, "10.0.6.99", "fd00::99"); !node.AddressesEqual(got.Status.Addresses, want) {
		t.Errorf("addresses = %v, want %v", got.Status.Addresses, want)
	}
	if ev := f.Rec.Find(name, ReasonAddressesUpdated); len(ev) != 1 {
		t.Errorf("AddressesUpdated events = %+v, want one", ev)
	}
	if uninitialized(got) {
		t.Error("taint came back")
	}
}

// faultCase drives one XO fault: inject it, then clear it.
type faultCase struct {
	inject func(f *fixture)
	clear  func(f *fixture)
	// reason is the event expected while the fault lasts.
	reason string
}

// runFault checks, for one fault: a Node arriving for a VM the inventory does not know yet
// keeps its taint and labels and is not deleted; an initialized Node keeps its labels and
// addresses; once the fault clears, the new Node is initialized.
func runFault(t *testing.T, fc faultCase) {
	f := newFixture(t, false)
	f.r.retries = common.NewRetries(time.Millisecond, 10*time.Millisecond)

	oldName := nodeName(t)
	oldVM := f.AddVM(xosim.VMSpec{NameLabel: oldName, IPs: []string{"10.0.7.5"}})
	f.createNode(testenv.KubeletNode(oldName, testenv.WithSystemUUID(oldVM)))
	f.reconcile(oldName)
	oldBefore := f.Get(oldName)
	checkInitialized(t, oldBefore, node.FormatProviderID(f.Pool, oldVM), f.wantLabels(oldName), addrs(oldName, "10.0.7.5"))

	fc.inject(f)
	name := nodeName(t)
	vmID := f.AddVMQuietly(xosim.VMSpec{NameLabel: name, IPs: []string{"10.0.7.6"}})
	// The change to the old VM cannot be seen while XO fails.
	if err := f.Sim.SetAddresses(oldVM, map[string]string{"0/ipv4/0": "10.0.7.50"}); err != nil {
		t.Fatal(err)
	}
	f.createNode(testenv.KubeletNode(name, testenv.WithSystemUUID(vmID)))
	before := f.Get(name)

	for range 3 {
		if res := f.reconcile(name); res.RequeueAfter <= 0 {
			t.Errorf("RequeueAfter = %s during the fault, want a retry", res.RequeueAfter)
		}
		f.reconcile(oldName)
	}

	checkUntouched(t, before, f.Get(name))
	if ev := f.Rec.Find(name, fc.reason); len(ev) == 0 || ev[0].Type != corev1.EventTypeWarning {
		t.Errorf("%s events = %+v, want Warnings", fc.reason, f.Rec.All(name))
	}
	for _, e := range f.Rec.All(name) {
		if strings.Contains(e.Note, token) {
			t.Errorf("event leaks the token: %q", e.Note)
		}
	}
	oldAfter := f.Get(oldName)
	if uninitialized(oldAfter) || fmt.Sprint(oldAfter.Labels) != fmt.Sprint(oldBefore.Labels) ||
		!node.AddressesEqual(oldAfter.Status.Addresses, oldBefore.Status.Addresses) {
		t.Errorf("initialized node changed during the fault:\n before %v %v\n after  %v %v",
			oldBefore.Labels, oldBefore.Status.Addresses, oldAfter.Labels, oldAfter.Status.Addresses)
	}

	fc.clear(f)
	testenv.Eventually(t, 10*time.Second, "the node to be initialized after the fault", func() bool {
		f.reconcile(name)
		return !uninitialized(f.Get(name))
	})
	checkInitialized(t, f.Get(name), node.FormatProviderID(f.Pool, vmID), f.wantLabels(name), addrs(name, "10.0.7.6"))

	// And the inventory recovers too: the old node's new address arrives.
	f.WaitInventory("the inventory to catch up", func(s *inventory.Snapshot) bool { return len(s.VMsByAddress("10.0.7.50")) == 1 })
	f.reconcile(oldName)
	if got := f.Get(oldName); !node.AddressesEqual(got.Status.Addresses, addrs(oldName, "10.0.7.50")) {
		t.Errorf("old node addresses = %v after recovery", got.Status.Addresses)
	}
}

// failingRelist asserts that XO cannot be listed while the fault lasts.
func failingRelist(f *fixture) {
	f.T.Helper()
	if err := f.Inventory.Relist(f.Ctx); err == nil {
		f.T.Fatal("relist succeeded during the fault")
	}
}

func TestFaultServerError(t *testing.T) {
	var id xosim.FaultID
	runFault(t, faultCase{
		inject: func(f *fixture) {
			id = f.Sim.InjectFault(xosim.Fault{Kind: xosim.FaultStatus, Status: http.StatusInternalServerError, PathPrefix: xosim.BasePath})
			failingRelist(f)
		},
		clear:  func(f *fixture) { f.Sim.RemoveFault(id) },
		reason: ReasonXOUnavailable,
	})
}

func TestFaultTimeout(t *testing.T) {
	var id xosim.FaultID
	runFault(t, faultCase{
		inject: func(f *fixture) {
			id = f.Sim.InjectFault(xosim.Fault{Kind: xosim.FaultLatency, Latency: 2 * time.Second, PathPrefix: xosim.BasePath})
			failingRelist(f)
		},
		clear:  func(f *fixture) { f.Sim.RemoveFault(id) },
		reason: ReasonXOUnavailable,
	})
}

func TestFaultConnectionRefused(t *testing.T) {
	runFault(t, faultCase{
		inject: func(f *fixture) {
			f.X.Close()
			failingRelist(f)
		},
		clear:  func(f *fixture) { f.X.Reopen(f.T) },
		reason: ReasonXOUnavailable,
	})
}

func TestFaultUnauthorized(t *testing.T) {
	runFault(t, faultCase{
		inject: func(f *fixture) {
			f.Sim.RevokeToken(token)
			failingRelist(f)
		},
		clear:  func(f *fixture) { f.Sim.AddToken(token) },
		reason: ReasonXOUnavailable,
	})
}

func TestFaultTruncatedListing(t *testing.T) {
	var id xosim.FaultID
	runFault(t, faultCase{
		inject: func(f *fixture) {
			id = f.Sim.InjectFault(xosim.Fault{Kind: xosim.FaultTruncate, Lines: 1, PathPrefix: xosim.BasePath + "/vms"})
			failingRelist(f)
		},
		clear:  func(f *fixture) { f.Sim.RemoveFault(id) },
		reason: ReasonXOUnavailable,
	})
}

// TestFaultPoolDisconnected: XO lost the pool, so it answers "no such VM" for a VM that
// exists. That is no proof of anything: the taint stays.
func TestFaultPoolDisconnected(t *testing.T) {
	runFault(t, faultCase{
		inject: func(f *fixture) {
			if err := f.Sim.DisconnectPool(f.Pool); err != nil {
				f.T.Fatal(err)
			}
			f.WaitInventory("the inventory to catch up", func(s *inventory.Snapshot) bool { return !s.PoolConnected(f.Pool) })
		},
		clear: func(f *fixture) {
			if err := f.Sim.ReconnectPool(f.Pool); err != nil {
				f.T.Fatal(err)
			}
			f.WaitInventory("the inventory to catch up", func(s *inventory.Snapshot) bool { return s.PoolConnected(f.Pool) })
		},
		reason: nodeevents.ReasonVMNotResolved,
	})
}

// TestFaultStalledEventStream: the event stream stalls, so a new VM never reaches the
// inventory; the direct read by uuid still initializes its Node.
func TestFaultStalledEventStream(t *testing.T) {
	f := newFixture(t, true)
	id := f.Sim.InjectFault(xosim.Fault{Kind: xosim.FaultStall, PathPrefix: xosim.BasePath + "/events"})
	defer f.Sim.RemoveFault(id)
	name := nodeName(t)
	vmID := f.AddVMQuietly(xosim.VMSpec{NameLabel: name, IPs: []string{"10.0.8.5"}})
	f.createNode(testenv.KubeletNode(name, testenv.WithSystemUUID(vmID)))
	lookups := f.Sim.RequestCount(http.MethodGet, xosim.BasePath+"/vms/"+vmID)

	f.reconcile(name)

	if f.Inventory.Snapshot().VM(vmID) != nil {
		t.Fatal("the VM reached the inventory through a stalled stream")
	}
	if n := f.Sim.RequestCount(http.MethodGet, xosim.BasePath+"/vms/"+vmID) - lookups; n != 1 {
		t.Errorf("%d direct reads of the VM, want 1", n)
	}
	checkInitialized(t, f.Get(name), node.FormatProviderID(f.Pool, vmID), map[string]string{
		node.LabelRegion: f.Pool, node.LabelZone: f.Host1, node.LabelInstanceType: "2vCPU-4GB",
	}, addrs(name, "10.0.8.5"))
}

// TestManagerChangeSource runs the controller in a real manager: a Node whose VM does not
// exist yet keeps its taint; when the VM appears in XO, the event reaches the Node through the
// inventory and the change source, without any relist or retry timer; a later guest IP change
// reaches the initialized Node the same way.
func TestManagerChangeSource(t *testing.T) {
	f := newFixture(t, true)
	mgr := testenv.NewManager(t, env.Config)
	if err := common.SetupIndexes(f.Ctx, mgr); err != nil {
		t.Fatal(err)
	}
	r := f.newReconciler(mgr.GetClient(), node.LabelOptions{})
	// Retries are an hour away: only the change source can bring the Node back in time.
	r.retries = common.NewRetries(time.Hour, time.Hour)
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	testenv.RunManager(f.Ctx, t, mgr)

	name := nodeName(t)
	vmID := "3b0f7d5e-2c1a-4e8b-9f60-7a1d2c3b4e5f"
	f.createNode(testenv.KubeletNode(name, testenv.WithSystemUUID(vmID)))
	testenv.Eventually(t, 10*time.Second, "VMNotResolved", func() bool { return len(f.Rec.Find(name, nodeevents.ReasonVMNotResolved)) > 0 })
	if !uninitialized(f.Get(name)) {
		t.Fatal("taint removed for a VM that does not exist")
	}

	lists := f.Sim.RequestCount(http.MethodGet, xosim.BasePath+"/vms")
	gets := f.Sim.RequestCount(http.MethodGet, xosim.BasePath+"/vms/"+vmID)
	f.AddVMQuietly(xosim.VMSpec{ID: vmID, NameLabel: name, IPs: []string{"10.0.9.5"}})
	testenv.Eventually(t, 10*time.Second, "the node to be initialized", func() bool { return !uninitialized(f.Get(name)) })
	checkInitialized(t, f.Get(name), node.FormatProviderID(f.Pool, vmID), f.wantLabels(name), addrs(name, "10.0.9.5"))
	if n := f.Sim.RequestCount(http.MethodGet, xosim.BasePath+"/vms"); n != lists {
		t.Errorf("%d VM listings during the initialization, want none", n-lists)
	}
	if n := f.Sim.RequestCount(http.MethodGet, xosim.BasePath+"/vms/"+vmID); n != gets {
		t.Errorf("%d direct VM reads once the inventory knew the VM, want none", n-gets)
	}

	if err := f.Sim.SetAddresses(vmID, map[string]string{"0/ipv4/0": "10.0.9.77"}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the new address on the node", func() bool {
		return node.AddressesEqual(f.Get(name).Status.Addresses, addrs(name, "10.0.9.77"))
	})
}

// TestDeletedNode: a Node gone before its reconcile is no error.
func TestDeletedNode(t *testing.T) {
	f := newFixture(t, false)
	res, err := f.r.Reconcile(f.Ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: nodeName(t)}})
	if err != nil || res.RequeueAfter != 0 {
		t.Errorf("Reconcile of a missing node = %+v, %v", res, err)
	}
}

// TestNameMatchNotBlockedByOtherPools: a disabled server entry, or a disconnected pool outside
// the scope, does not keep a Node from being matched by its name; a disconnected pool that
// counts (no scope) does, since the VM's twin may be hiding in it.
func TestNameMatchNotBlockedByOtherPools(t *testing.T) {
	for _, tc := range []struct {
		name    string
		scope   []string
		pool    xosim.PoolSpec
		matched bool
	}{
		{"disabled server entry", nil, xosim.PoolSpec{NameLabel: "pool-c", ServerDisabled: true}, true},
		{"disconnected pool outside the scope", []string{poolName}, xosim.PoolSpec{NameLabel: "pool-b", Disconnected: true}, true},
		{"disconnected pool in scope", nil, xosim.PoolSpec{NameLabel: "pool-b", Disconnected: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := fixtureOptions(false)
			o.Inventory.Pools = tc.scope
			f := newFixtureWith(t, o)
			f.X.AddPool(t, tc.pool)
			name := nodeName(t)
			vmID := f.AddVM(xosim.VMSpec{NameLabel: name, VirtualizationMode: "pvh", IPs: []string{"10.0.10.5"}})
			f.createNode(testenv.KubeletNode(name))
			before := f.Get(name)
			f.reconcile(name)

			got := f.Get(name)
			if !tc.matched {
				checkUntouched(t, before, got)
				if ev := f.Rec.Find(name, nodeevents.ReasonVMNotResolved); len(ev) == 0 || !strings.Contains(ev[0].Note, "incomplete") {
					t.Errorf("VMNotResolved events = %+v, want one saying incomplete", ev)
				}
				return
			}
			checkInitialized(t, got, node.FormatProviderID(f.Pool, vmID), f.wantLabels(name), addrs(name, "10.0.10.5"))
			if ev := f.Rec.Find(name, ReasonNodeInitialized); len(ev) != 1 || !strings.Contains(ev[0].Note, "name") {
				t.Errorf("NodeInitialized events = %+v, want one naming the name match", ev)
			}
		})
	}
}

// bornComplete returns the Node of vmID as the webhook answers its kubelet's CREATE when it
// describes it completely: described by the same shared functions, the uninitialized taint
// lifted by node.Initialize.
func (f *fixture) bornComplete(name, vmID string) *corev1.Node {
	f.T.Helper()
	n := testenv.KubeletNode(name, testenv.WithSystemUUID(vmID))
	view := f.Estate.View()
	vm := view.VM(vmID)
	node.Describe(view, n, vm, node.LabelOptions{})
	n.Status.Addresses = node.Addresses(n, vm, node.AddressOptions{})
	if missing, lifted := node.Initialize(n, vm, node.InitializedByWebhook); !lifted {
		f.T.Fatalf("the fixture's VM does not describe its Node completely: missing %q", missing)
	}
	return n
}

// TestBornComplete: a Node the webhook initialized at CREATE costs cloud-node no write; it is
// counted once as initialized by the webhook, with its NodeInitialized event, when cloud-node
// sees it created, and not again for a Node cloud-node finds at its start (a restart or a new
// leader: the previous one counted it).
func TestBornComplete(t *testing.T) {
	f := newFixture(t, true)
	var counter testenv.RequestCounter
	mgr := testenv.NewManager(t, counter.Config(env.Config))
	if err := common.SetupIndexes(f.Ctx, mgr); err != nil {
		t.Fatal(err)
	}
	r := f.newReconciler(mgr.GetClient(), node.LabelOptions{})
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	byWebhook := func() float64 {
		return testutil.ToFloat64(initializationsTotal.WithLabelValues(resultInitialized, node.InitializedByWebhook))
	}
	reconciled := func() float64 {
		return testenv.MetricValue(t, "controller_runtime_reconcile_total", map[string]string{"controller": Name})
	}
	// quiet waits until cloud-node has reconciled more than after Nodes and has nothing queued
	// or in flight.
	quiet := func(what string, after float64) {
		testenv.Eventually(t, 10*time.Second, what, func() bool {
			return reconciled() > after &&
				testenv.MetricValue(t, "workqueue_depth", map[string]string{"name": Name}) == 0 &&
				testenv.MetricValue(t, "controller_runtime_active_workers", map[string]string{"controller": Name}) == 0
		})
	}

	earlier := nodeName(t)
	f.createNode(f.bornComplete(earlier, f.AddVM(xosim.VMSpec{NameLabel: earlier, IPs: []string{"10.0.10.1"}})))
	before, counted := reconciled(), byWebhook()
	testenv.RunManager(f.Ctx, t, mgr)
	quiet("the Node found at start reconciled", before)

	name := nodeName(t)
	vmID := f.AddVM(xosim.VMSpec{NameLabel: name, IPs: []string{"10.0.10.2"}})
	before = reconciled()
	f.createNode(f.bornComplete(name, vmID))
	testenv.Eventually(t, 10*time.Second, "NodeInitialized", func() bool { return len(f.Rec.Find(name, ReasonNodeInitialized)) > 0 })
	quiet("the new Node reconciled", before)

	if ev := f.Rec.Find(name, ReasonNodeInitialized); len(ev) != 1 || !strings.Contains(ev[0].Note, "by the webhook") || !strings.Contains(ev[0].Note, vmID) {
		t.Errorf("NodeInitialized events = %+v, want one saying the webhook initialized it from %s", ev, vmID)
	}
	if ev := f.Rec.Find(earlier, ReasonNodeInitialized); len(ev) != 0 {
		t.Errorf("the Node found at start reported initialized again: %+v", ev)
	}
	if d := byWebhook() - counted; d != 1 {
		t.Errorf("initializations by the webhook grew by %v, want 1", d)
	}
	for _, n := range []string{earlier, name} {
		if w := counter.NodeWrites(n); w != 0 {
			t.Errorf("cloud-node wrote a born-complete Node %d times, want 0", w)
		}
	}
}
