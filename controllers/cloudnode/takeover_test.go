package cloudnode

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
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
// No write may be refused: none answered 409 Conflict, none answered 422 (an address patch
// whose lock on the addresses failed, common.PatchAddresses). The label patch and the address
// patch of a Node without --node-ip land in either order; the Nodes whose writes break the
// budget or were refused are logged with their writes. Measured before this test (three runs,
// the code of commit 2821b25): 165 to 186 writes for the 65 Nodes, up to 6 on one, 45 to 66
// answered 409, the ExternalIP removed from the 20 Nodes of the usual shape; with that
// ExternalIP kept but a resourceVersion lock on the address patch, 130 to 160 writes, 30 to 60
// answered 409; with that patch waiting (10 s at most) for the label patch, 100 writes and no
// 409 on an idle machine, up to 135 writes and 35 answered 409 under load (make test).
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
	// A patch takes 0 to 300 ms to reach the API server, as on a busy machine: label-sync's
	// patch of a Node and cloud-node's address patch, sent for the same XO change, land in
	// either order, also while the other is on its way.
	var writes writeLog
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodPatch {
				select {
				case <-time.After(rand.N(300 * time.Millisecond)):
				case <-req.Context().Done():
				}
			}
			return writes.roundTrip(rt, req)
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
		labelsync.New(c, f.Estate, f.Rec, clock.RealClock{}, labelsync.Options{Workers: workers}),
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
	upstream := func(i, subnet int, kind string, nodeIP func(mainIP, otherIP string) string, final func(name, mainIP, otherIP string) []corev1.NodeAddress, maxWrites int) string {
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
		return name
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
	var noIPNames []string
	for i := range noIP {
		noIPNames = append(noIPNames, upstream(i, 3, "none", func(string, string) string { return "" }, func(name, m, o string) []corev1.NodeAddress {
			return []corev1.NodeAddress{{Type: corev1.NodeExternalIP, Address: m},
				{Type: corev1.NodeInternalIP, Address: m}, {Type: corev1.NodeInternalIP, Address: o}, {Type: corev1.NodeHostName, Address: name}}
		}, 2))
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
	t.Logf("takeover of %d upstream Nodes (%d --node-ip = mainIpAddress, %d another --node-ip, %d without) and %d fresh ones: %d Node writes (%.2f per Node, at most %d on one), %d answered 409, %d refused (409 or 422), %d ExternalIPs lost; the address patch landed first on %d of the Nodes without --node-ip; every Node described %s after its VM reached XO",
		sameIP+otherIP+noIP, sameIP, otherIP, noIP, fresh, total, float64(total)/float64(len(names)), most, counter.Conflicts(), writes.refused(names...), lost,
		writes.addressesFirst(noIPNames), elapsed.Round(time.Millisecond))
	if c := counter.Conflicts(); c != 0 {
		t.Errorf("%d requests answered 409 Conflict, want 0", c)
	}
	if r := writes.refused(names...); r != 0 {
		t.Errorf("%d Node writes refused (409 or 422), want 0", r)
	}
	for _, name := range names {
		if counter.NodeWrites(name) > wants[name].maxWrites || writes.refused(name) > 0 {
			t.Logf("writes of Node %s:\n%s", name, writes.of(name))
		}
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

// writeLog records, per Node, the writes sent for it.
type writeLog struct {
	mu     sync.Mutex
	start  time.Time
	writes map[string][]write
}

// write is one write of a Node: when it was sent and answered (since the log's first write),
// the subresource, the kind of patch with the resourceVersion a merge patch carried (none: no
// resourceVersion lock) and what it set, and the answer's status code (0: no answer).
type write struct {
	sent, answered time.Duration
	method, sub    string
	what           string
	code           int
}

func (w write) String() string {
	return fmt.Sprintf("  +%s %s %s %s → %d at +%s", w.sent.Round(time.Millisecond), w.method, cmp.Or(w.sub, "-"), w.what, w.code, w.answered.Round(time.Millisecond))
}

// refused reports a write answered 409 Conflict, or 422 (a JSON patch's failed test).
func (w write) refused() bool {
	return w.code == http.StatusConflict || w.code == http.StatusUnprocessableEntity
}

func (l *writeLog) roundTrip(rt http.RoundTripper, req *http.Request) (*http.Response, error) {
	name, ok := strings.CutPrefix(req.URL.Path, "/api/v1/nodes/")
	if !ok || req.Method == http.MethodGet {
		return rt.RoundTrip(req)
	}
	w := write{method: req.Method}
	name, w.sub, _ = strings.Cut(name, "/")
	if req.Body != nil {
		body, _ := io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(body))
		w.what = describePatch(req.Header.Get("Content-Type"), body)
	}
	l.mu.Lock()
	if l.start.IsZero() {
		l.start = time.Now()
	}
	w.sent = time.Since(l.start)
	l.mu.Unlock()
	resp, err := rt.RoundTrip(req)
	if err == nil {
		w.code = resp.StatusCode
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	w.answered = time.Since(l.start)
	if l.writes == nil {
		l.writes = map[string][]write{}
	}
	l.writes[name] = append(l.writes[name], w)
	return resp, err
}

// describePatch summarizes a patch: a merge patch's resourceVersion and the fields it sets, a
// JSON patch's operations.
func describePatch(contentType string, body []byte) string {
	if strings.HasPrefix(contentType, "application/json-patch") {
		var ops []struct{ Op, Path string }
		_ = json.Unmarshal(body, &ops)
		var out []string
		for _, o := range ops {
			out = append(out, o.Op+" "+o.Path)
		}
		return "json-patch [" + strings.Join(out, ", ") + "]"
	}
	var sent struct {
		Metadata struct {
			ResourceVersion string         `json:"resourceVersion"`
			Labels          map[string]any `json:"labels"`
			Annotations     map[string]any `json:"annotations"`
		} `json:"metadata"`
		Spec   map[string]any `json:"spec"`
		Status map[string]any `json:"status"`
	}
	_ = json.Unmarshal(body, &sent)
	var fields []string
	for k, m := range map[string]map[string]any{"labels": sent.Metadata.Labels, "annotations": sent.Metadata.Annotations, "spec": sent.Spec, "status": sent.Status} {
		if len(m) > 0 {
			fields = append(fields, fmt.Sprintf("%s(%d)", k, len(m)))
		}
	}
	slices.Sort(fields)
	return fmt.Sprintf("merge-patch rv=%q %s", sent.Metadata.ResourceVersion, strings.Join(fields, ","))
}

// of returns the writes of Node name, one a line.
func (l *writeLog) of(name string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, w := range l.writes[name] {
		out = append(out, w.String())
	}
	return strings.Join(out, "\n")
}

// refused returns how many writes of the Nodes named were answered 409 or 422.
func (l *writeLog) refused(names ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, name := range names {
		for _, w := range l.writes[name] {
			if w.refused() {
				n++
			}
		}
	}
	return n
}

// addressesFirst returns how many of the Nodes named had their addresses patched before their
// metadata: the status patch answered before the Node's first patch was.
func (l *writeLog) addressesFirst(names []string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, name := range names {
		ws := l.writes[name]
		status := slices.IndexFunc(ws, func(w write) bool { return w.sub == "status" && w.code == http.StatusOK })
		meta := slices.IndexFunc(ws, func(w write) bool { return w.sub == "" && w.code == http.StatusOK })
		if status >= 0 && meta >= 0 && ws[status].answered < ws[meta].answered {
			n++
		}
	}
	return n
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
