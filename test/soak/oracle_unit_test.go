package soak_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
)

// TestOracle checks the oracle itself on made-up Node changes: a soak whose oracle cannot see
// a violation proves nothing.
func TestOracle(t *testing.T) {
	const vm, other, pool, host = "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222",
		"33333333-3333-4333-8333-333333333333", "44444444-4444-4444-8444-444444444444"
	st := vmState{exists: true, pool: pool, poolName: "p", host: host, hostName: "h", power: "Running", name: "vm-a",
		instType: "2vCPU-2GB", tagLabels: map[string]string{"tag.k8s.xenorchestra/team": "db"}}
	newOracleWith := func() *oracle {
		o := newOracle(time.Second)
		o.record(vm, st, true)
		created := testenv.KubeletNode("n1", testenv.WithSystemUUID(vm), testenv.WithLabels(map[string]string{foreignLabelKey: "initial"}))
		created.Spec.Taints = append(created.Spec.Taints, corev1.Taint{Key: foreignTaintKey, Value: "infra", Effect: corev1.TaintEffectNoSchedule})
		o.nodes["n1"] = &nodeRec{name: "n1", vm: vm, kind: kindUUID, created: created, exists: true, byTest: map[string]bool{},
			foreign: map[string]map[string]time.Time{foreignLabelKey: {"initial": {}}}}
		return o
	}
	// initialized returns the Node as the controller should leave it.
	initialized := func(o *oracle, mut func(*corev1.Node)) (old, n *corev1.Node) {
		old = o.nodes["n1"].created.DeepCopy()
		n = old.DeepCopy()
		n.Spec.ProviderID = node.FormatProviderID(pool, vm)
		for k, v := range map[string]string{node.LabelRegion: pool, node.LabelPoolID: pool, node.LabelPoolName: "p", node.LabelZone: host,
			node.LabelHostID: host, node.LabelHostName: "h", node.LabelVMName: "vm-a", node.LabelInstanceType: "2vCPU-2GB", "tag.k8s.xenorchestra/team": "db"} {
			n.Labels[k] = v
		}
		n.Spec.Taints = n.Spec.Taints[1:] // the uninitialized taint is first
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}}
		if mut != nil {
			mut(n)
		}
		return old, n
	}
	for _, tc := range []struct {
		name string
		mut  func(*corev1.Node)
		want string // "" none; else the start of the violation
	}{
		{"right", nil, ""},
		{"a name the VM never had", func(n *corev1.Node) { n.Labels[node.LabelVMName] = "vm-b" }, "Node n1: label vm.k8s.xenorchestra/name_label"},
		{"a tag label the VM has not", func(n *corev1.Node) { n.Labels["tag.k8s.xenorchestra/tier"] = "t1" }, "Node n1: label tag.k8s.xenorchestra/tier"},
		{"untainted without providerID", func(n *corev1.Node) { n.Spec.ProviderID = "" }, "Node n1: uninitialized taint lifted without providerID"},
		{"untainted without zone", func(n *corev1.Node) { delete(n.Labels, node.LabelZone) }, "Node n1: uninitialized taint lifted without topology.kubernetes.io/zone"},
		{"untainted without an address", func(n *corev1.Node) {
			n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "n1"}}
		}, "Node n1: uninitialized taint lifted without an IP address (the VM ran throughout)"},
		{"another VM", func(n *corev1.Node) { n.Spec.ProviderID = node.FormatProviderID(pool, other) }, "Node n1 (registered by VM"},
		{"foreign label touched", func(n *corev1.Node) { n.Labels[foreignLabelKey] = "x" }, "Node n1: foreign label"},
		{"foreign taint removed", func(n *corev1.Node) { n.Spec.Taints = nil }, "Node n1: foreign taint"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newOracleWith()
			old, n := initialized(o, tc.mut)
			o.observe(old, n)
			switch {
			case tc.want == "" && len(o.viol) > 0:
				t.Errorf("violation %q", o.viol[0].What)
			case tc.want != "" && (len(o.viol) == 0 || !strings.HasPrefix(o.viol[0].What, tc.want)):
				t.Errorf("violations %+v, want one starting %q", o.viol, tc.want)
			}
		})
	}

	// A renamed VM: the old name stays allowed for the window, then not.
	o := newOracleWith()
	renamed := st
	renamed.name = "vm-a-r1"
	o.record(vm, renamed, true)
	old, n := initialized(o, nil)
	o.observe(old, n)
	if len(o.viol) != 0 {
		t.Errorf("the old name within the window: %v", o.viol[0].What)
	}
	o.hist[vm][1].at = time.Now().Add(-2 * time.Second)
	o.hist[vm][1].visibleAt = o.hist[vm][1].at
	o.observe(old, n)
	if len(o.viol) == 0 {
		t.Error("the old name past the window: no violation")
	}
	// Hidden (its pool away): the old name stays allowed until the change shows.
	o = newOracleWith()
	o.record(vm, renamed, false)
	o.hist[vm][1].at = time.Now().Add(-time.Minute)
	o.observe(old, n)
	if len(o.viol) != 0 {
		t.Errorf("the name XO still shows: %v", o.viol[0].What)
	}

	// (1) a Node deleted while its VM exists; not when the test deleted it.
	o = newOracleWith()
	_, n = initialized(o, nil)
	n.UID = "u1"
	o.nodes["n1"].uid = "u1"
	o.deleted(n, false, func(string, *corev1.Node) bool { return true })
	if len(o.viol) == 0 || o.viol[0].Invariant != 1 {
		t.Errorf("deletion with the VM there: %+v", o.viol)
	}
	o = newOracleWith()
	o.nodes["n1"].byTest["u1"] = true
	o.deleted(n, false, func(string, *corev1.Node) bool { return true })
	if len(o.viol) != 0 {
		t.Errorf("the test's own deletion: %+v", o.viol)
	}
}

// TestOracleLateDeletion: a Node deletable for longer than the bound with no fault meanwhile is
// a violation; with a fault in the window it is not.
func TestOracleLateDeletion(t *testing.T) {
	const vm = "11111111-1111-4111-8111-111111111111"
	for _, tc := range []struct {
		withFault bool
		kind      string
	}{{false, kindUUID}, {true, kindUUID}, {false, kindForeign}, {false, kindIgnored}} {
		withFault := tc.withFault || tc.kind != kindUUID // the cases that must not be reported
		o := newOracle(time.Second)
		o.record(vm, vmState{exists: true, pool: "p"}, true)
		o.record(vm, vmState{}, true)
		long := time.Now().Add(-time.Minute)
		o.hist[vm][1].at, o.hist[vm][1].visibleAt = long, long
		n := testenv.KubeletNode("n1", testenv.WithReady(false))
		n.UID = "u1"
		o.nodes["n1"] = &nodeRec{name: "n1", vm: vm, uid: "u1", kind: tc.kind, exists: true, lastSeen: n, notReadySince: long, providerSeenAt: long}
		if tc.withFault {
			o.faultOn("xo")
		}
		o.checkLate(10 * time.Second)
		if got := len(o.viol) > 0; got == withFault {
			t.Errorf("%+v: violations %+v", tc, o.viol)
		}
	}
}

// TestCheckGrowth: becoming leader is no growth; a leader whose goroutines triple is.
func TestCheckGrowth(t *testing.T) {
	for _, tc := range []struct {
		name    string
		samples []sample
		want    bool
	}{
		{"follower, then leader", []sample{{at: 0, goroutines: 90}, {at: time.Minute, goroutines: 340, leading: true}, {at: 4 * time.Minute, goroutines: 345, leading: true}}, false},
		{"a leader growing", []sample{{at: 0, goroutines: 340, leading: true}, {at: 3 * time.Minute, goroutines: 1100, leading: true}}, true},
		{"RSS tripled", []sample{{at: 0, rss: 40 << 20}, {at: 3 * time.Minute, rss: 200 << 20}}, true},
		{"too short to tell", []sample{{at: 0, goroutines: 90}, {at: time.Minute, goroutines: 900}}, false},
	} {
		r := &runner{o: newOracle(time.Second)}
		for _, s := range tc.samples {
			s.replica, s.start = "replica-a", 1
			r.samples = append(r.samples, s)
		}
		r.checkGrowth()
		if got := len(r.o.viol) > 0; got != tc.want {
			t.Errorf("%s: violation %v, want %v (%+v)", tc.name, got, tc.want, r.o.viol)
		}
	}
}
