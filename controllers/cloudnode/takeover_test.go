package cloudnode

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/controllers/common"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/controllers/labelsync"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/controllers/lifecycle"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/xosim"
)

// TestTakeoverFromUpstreamV110 starts the controllers (cloud-node, cloud-node-lifecycle,
// cloud-node-label-sync, no webhook) in one manager on a cluster of Nodes exactly as the
// upstream XO CCM v1.1.0 leaves them, beside fresh kubelet Nodes, and counts the writes the
// API server receives for each Node until everything is quiet:
//
//   - upstream's usual shape (--node-ip equal to mainIpAddress: InternalIP and ExternalIP of
//     the same address): only ownership and labels change, one write, ExternalIP kept;
//   - upstream's v1.0 shape (--node-ip not mainIpAddress): the same;
//   - without --node-ip (upstream gave no InternalIP): the addresses gain the InternalIP, at
//     most two writes, ExternalIP kept;
//   - fresh kubelet Nodes: initialized in at most two writes (addresses, then the rest).
//
// No request may be answered 409 Conflict. Measured before this test (three runs, the code of
// commit 2821b25): 165 to 186 writes for the 65 Nodes, up to 6 on one, 45 to 66 answered 409,
// the ExternalIP removed from the 20 Nodes of the usual shape; with that ExternalIP kept but
// the address patch not waiting for the label patch, 130 to 160 writes, 30 to 60 answered 409.
func TestTakeoverFromUpstreamV110(t *testing.T) {
	const (
		sameIP  = 20 // --node-ip = mainIpAddress
		otherIP = 10 // --node-ip, another address of the VM
		noIP    = 30 // no --node-ip
		fresh   = 5  // kubelet Nodes, uninitialized
	)
	f := newFixture(t, true)
	var counter testenv.RequestCounter
	cfg := counter.Config(env.Config)
	// A status patch takes 100 ms to reach the API server, as on a busy machine: long enough
	// for label-sync's patch of the same Node, enqueued by the same XO change, to land first.
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodPatch && strings.HasSuffix(req.URL.Path, "/status") {
				select {
				case <-time.After(100 * time.Millisecond):
				case <-req.Context().Done():
				}
			}
			return rt.RoundTrip(req)
		})
	})
	mgr := testenv.NewManager(t, cfg)
	if err := common.SetupIndexes(f.Ctx, mgr); err != nil {
		t.Fatal(err)
	}
	// As cmd/app wires them, with its default of 64 workers per controller: every Node is
	// reconciled by every controller at once.
	const workers = 64
	c := mgr.GetClient()
	for _, r := range []interface{ SetupWithManager(ctrl.Manager) error }{
		New(c, f.Estate, f.Rec, clock.RealClock{}, Options{Workers: workers}),
		lifecycle.New(c, f.Estate, f.Rec, clock.RealClock{}, lifecycle.Options{Workers: workers}),
		labelsync.New(c, f.Estate, f.Rec, labelsync.Options{Workers: workers}),
	} {
		if err := r.SetupWithManager(mgr); err != nil {
			t.Fatal(err)
		}
	}

	type want struct {
		addrs     []corev1.NodeAddress
		maxWrites int
		upstream  bool
	}
	wants := map[string]want{}
	// The VMs reach XO after the manager started, all at once, as the first listing of XO
	// reaches a controller that starts on a cluster full of Nodes: every Node is then enqueued
	// by the inventory's changes in every controller at the same moment.
	var vms []xosim.VMSpec
	upstream := func(i, subnet int, kind string, nodeIP func(mainIP, otherIP string) string, final func(name, mainIP, otherIP string) []corev1.NodeAddress, maxWrites int) {
		name := testenv.NodeName(t, fmt.Sprintf("%s-%02d", kind, i))
		mainIP, second := fmt.Sprintf("10.%d.0.%d", subnet, i+10), fmt.Sprintf("192.0.%d.%d", subnet, i+10)
		vm := uuid.NewString()
		vms = append(vms, xosim.VMSpec{ID: vm, NameLabel: name, IPs: []string{mainIP, second}})
		n := testenv.KubeletNode(name, testenv.KubeletStatus(), testenv.UpstreamInitialized(testenv.UpstreamVM{
			PoolID: f.Pool, PoolName: "Pool-A", HostID: f.Host1, HostName: hostName, VMID: vm, VMName: name,
			InstanceType: "2vCPU-4GB", MainIP: mainIP, NodeIP: nodeIP(mainIP, second),
		}))
		f.createNode(n)
		wants[name] = want{addrs: final(name, mainIP, second), maxWrites: maxWrites, upstream: true}
	}
	for i := range sameIP {
		upstream(i, 1, "same", func(m, _ string) string { return m }, func(name, m, _ string) []corev1.NodeAddress {
			return []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: m}, {Type: corev1.NodeExternalIP, Address: m}, {Type: corev1.NodeHostName, Address: name}}
		}, 1)
	}
	for i := range otherIP {
		upstream(i, 2, "other", func(_, o string) string { return o }, func(name, m, o string) []corev1.NodeAddress {
			return []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: o}, {Type: corev1.NodeExternalIP, Address: m}, {Type: corev1.NodeHostName, Address: name}}
		}, 1)
	}
	for i := range noIP {
		upstream(i, 3, "none", func(string, string) string { return "" }, func(name, m, o string) []corev1.NodeAddress {
			return []corev1.NodeAddress{{Type: corev1.NodeExternalIP, Address: m},
				{Type: corev1.NodeInternalIP, Address: m}, {Type: corev1.NodeInternalIP, Address: o}, {Type: corev1.NodeHostName, Address: name}}
		}, 2)
	}
	for i := range fresh {
		name := testenv.NodeName(t, fmt.Sprintf("fresh-%02d", i))
		ip := fmt.Sprintf("10.99.0.%d", i+10)
		vm := uuid.NewString()
		vms = append(vms, xosim.VMSpec{ID: vm, NameLabel: name, IPs: []string{ip}})
		f.createNode(testenv.KubeletNode(name, testenv.KubeletStatus(), testenv.WithSystemUUID(vm)))
		wants[name] = want{addrs: addrs(name, ip), maxWrites: 2}
	}
	names := slices.Sorted(maps.Keys(wants))
	testenv.RunManager(f.Ctx, t, mgr)
	if !mgr.GetCache().WaitForCacheSync(f.Ctx) {
		t.Fatal("the manager's cache did not sync")
	}
	start := time.Now()
	for _, vm := range vms {
		f.AddVMQuietly(vm)
	}
	done := func(name string) bool {
		n := f.Get(name)
		return !uninitialized(n) && n.Annotations[node.AnnotationManagedLabels] != ""
	}
	testenv.Eventually(t, 60*time.Second, "every Node taken over or initialized", func() bool {
		return !slices.ContainsFunc(names, func(n string) bool { return !done(n) })
	})
	elapsed := time.Since(start)
	// Then quiet: no write for a second (a late conflict retry or an address write would land
	// within it: the retries wait at most a few hundred milliseconds).
	last, since := -1, time.Now()
	testenv.Eventually(t, 30*time.Second, "no Node write for a second", func() bool {
		total := 0
		for _, n := range names {
			total += counter.NodeWrites(n)
		}
		if total != last {
			last, since = total, time.Now()
		}
		return time.Since(since) > time.Second
	})

	total, most, lost := 0, 0, 0
	for _, name := range names {
		w, n := counter.NodeWrites(name), f.Get(name)
		total += w
		most = max(most, w)
		if w > wants[name].maxWrites {
			t.Errorf("Node %s written %d times, want at most %d", name, w, wants[name].maxWrites)
		}
		if !node.AddressesEqual(n.Status.Addresses, wants[name].addrs) {
			t.Errorf("Node %s addresses %v, want %v", name, n.Status.Addresses, wants[name].addrs)
		}
		if wants[name].upstream && !slices.ContainsFunc(n.Status.Addresses, func(a corev1.NodeAddress) bool { return a.Type == corev1.NodeExternalIP }) {
			lost++
		}
		checkTakenOver(t, n, f, wants[name].upstream)
	}
	t.Logf("takeover of %d upstream Nodes (%d --node-ip = mainIpAddress, %d another --node-ip, %d without) and %d fresh ones: %d Node writes (%.2f per Node, at most %d on one), %d answered 409, %d ExternalIPs lost; every Node described %s after its VM reached XO",
		sameIP+otherIP+noIP, sameIP, otherIP, noIP, fresh, total, float64(total)/float64(len(names)), most, counter.Conflicts(), lost, elapsed.Round(time.Millisecond))
	if c := counter.Conflicts(); c != 0 {
		t.Errorf("%d requests answered 409 Conflict, want 0", c)
	}
	if lost != 0 {
		t.Errorf("%d upstream Nodes lost their ExternalIP", lost)
	}
}

// checkTakenOver asserts the labels and ownership of a Node after the takeover: the labels the
// VM implies, upstream's beta labels kept equal to their GA twins and owned, original_* labels
// recorded from upstream's, the kubelet's labels untouched and not owned.
func checkTakenOver(t *testing.T, n *corev1.Node, f *fixture, upstream bool) {
	t.Helper()
	want := f.wantLabels(n.Labels[node.LabelVMName])
	want[node.LabelOriginalHostID], want[node.LabelOriginalPoolID] = f.Host1, f.Pool
	beta := map[string]string{
		corev1.LabelFailureDomainBetaRegion: f.Pool, corev1.LabelFailureDomainBetaZone: f.Host1, corev1.LabelInstanceType: "2vCPU-4GB",
	}
	if upstream {
		maps.Copy(want, beta)
	} else {
		for k := range beta {
			if v, ok := n.Labels[k]; ok {
				t.Errorf("Node %s: beta label %s=%s added", n.Name, k, v)
			}
		}
	}
	for k, v := range want {
		if n.Labels[k] != v {
			t.Errorf("Node %s label %s = %q, want %q", n.Name, k, n.Labels[k], v)
		}
	}
	checkKubeletLabels(t, n)
	owned := node.ManagedKeys(n.Annotations)
	for k := range want {
		if !slices.Contains(owned, k) {
			t.Errorf("Node %s: label %s not recorded as owned (%v)", n.Name, k, owned)
		}
	}
	for _, k := range []string{corev1.LabelHostname, corev1.LabelOSStable, corev1.LabelArchStable} {
		if slices.Contains(owned, k) {
			t.Errorf("Node %s: the kubelet's label %s recorded as owned", n.Name, k)
		}
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
