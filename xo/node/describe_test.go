package node

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
)

// topologyIndex holds one running VM on hostA in poolA, with the given host and pool names.
func topologyIndex(hostName, poolName string) (*testIndex, *xo.VM) {
	vm := runningVM()
	idx := newTestIndex(vm)
	idx.hosts[hostA] = &xo.Host{ID: hostA, NameLabel: hostName, PoolID: poolA}
	idx.pools[poolA] = &xo.Pool{ID: poolA, NameLabel: poolName}
	idx.regions = map[string]string{poolA: "paris"}
	return idx, vm
}

func TestTopologyByName(t *testing.T) {
	tests := []struct {
		name             string
		opts             LabelOptions
		region, zone     string
		rejectedDuplicat bool
	}{
		{"uuids by default", LabelOptions{}, poolA, hostA, false},
		{"names", LabelOptions{Region: RegionPoolName, Zone: ZoneHostName}, "dc1-pool-A", "xcp-host-01", false},
		{"server region", LabelOptions{Region: RegionServer}, "paris", hostA, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			idx, vm := topologyIndex("xcp-host-01", "dc1 pool A")
			d := Desired(idx, vm, nil, tt.opts)
			if d.Labels[LabelRegion] != tt.region || d.Labels[LabelZone] != tt.zone {
				t.Fatalf("region, zone = %q, %q; want %q, %q", d.Labels[LabelRegion], d.Labels[LabelZone], tt.region, tt.zone)
			}
			if d.Labels[LabelPoolID] != poolA || d.Labels[LabelHostID] != hostA {
				t.Fatal("the pool_id and host_id labels stay uuids whatever the topology source")
			}
		})
	}
}

// TestTopologyDuplicateNamesNeverMerge: two hosts (pools) with one name would be one failure
// domain if the name were the zone (region): the uuid is written and the collision reported.
func TestTopologyDuplicateNamesNeverMerge(t *testing.T) {
	idx, vm := topologyIndex("rack-1", "prod")
	idx.hosts[hostB] = &xo.Host{ID: hostB, NameLabel: "rack-1", PoolID: poolA}
	idx.pools[poolB] = &xo.Pool{ID: poolB, NameLabel: "prod"}
	d := Desired(idx, vm, nil, LabelOptions{Region: RegionPoolName, Zone: ZoneHostName})
	if d.Labels[LabelZone] != hostA || d.Labels[LabelRegion] != poolA {
		t.Fatalf("zone, region = %q, %q; want the uuids", d.Labels[LabelZone], d.Labels[LabelRegion])
	}
	dups := 0
	for _, r := range d.Rejected {
		if r.Reason == ReasonDuplicateName {
			dups++
		}
	}
	if dups != 2 {
		t.Fatalf("rejections = %v, want one duplicate_name for the zone and one for the region", d.Rejected)
	}
}

// TestTopologyHaltedKeepsZoneName: a halted VM's zone stays what it was, also as a name.
func TestTopologyHaltedKeepsZoneName(t *testing.T) {
	idx, vm := topologyIndex("xcp-host-01", "dc1")
	vm.PowerState, vm.Container = xo.PowerStateHalted, poolA
	d := Desired(idx, vm, map[string]string{LabelZone: "xcp-host-01", LabelHostID: hostA}, LabelOptions{Zone: ZoneHostName})
	if d.Labels[LabelZone] != "xcp-host-01" {
		t.Fatalf("zone = %q, want the kept host name", d.Labels[LabelZone])
	}
}

func TestResolveDistrustsNamesOfRemovedVMs(t *testing.T) {
	vm := testVM(vmUUID, "worker-1", "10.0.0.1")
	idx := newTestIndex(vm)
	if r := Resolve(idx, testNode("worker-1")); r.Outcome != OutcomeMatched {
		t.Fatalf("baseline: %v", r)
	}
	idx.removed = map[string]bool{"worker-1": true, "10.0.0.1": true}
	if r := Resolve(idx, testNode("worker-1")); r.Outcome != OutcomeIncomplete {
		t.Fatalf("name match with a twin that just left = %v, want incomplete", r)
	}
	if r := Resolve(idx, testNode("other", withAddress(corev1.NodeInternalIP, "10.0.0.1"))); r.Outcome != OutcomeIncomplete {
		t.Fatalf("address match with a twin that just left = %v, want incomplete", r)
	}
	if r := Resolve(idx, testNode("x", withSystemUUID(vmUUID))); r.Outcome != OutcomeMatched {
		t.Fatalf("a uuid match does not depend on it: %v", r)
	}
}

func TestDescribe(t *testing.T) {
	idx, vm := topologyIndex("xcp-host-01", "dc1")
	vm.Tags = []string{TagLabelPrefix + "tag.k8s.xenorchestra/tier=web"}
	opts := LabelOptions{TagLabelPrefixes: []string{"tag.k8s.xenorchestra/"}}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	d := Describe(idx, n, vm, opts)
	if !d.Changed || n.Spec.ProviderID != FormatProviderID(poolA, vm.ID) || n.Labels["tag.k8s.xenorchestra/tier"] != "web" || n.Labels[LabelZone] != hostA {
		t.Fatalf("described node = %+v, %+v", n.Spec, n.Labels)
	}
	if d := Describe(idx, n, vm, opts); d.Changed {
		t.Fatal("describing an up-to-date Node must change nothing")
	}

	// The tag goes while the VM's pool is not settled: the owned label stays.
	vm.Tags = nil
	idx.connected[poolA] = false
	if d := Describe(idx, n, vm, opts); d.Changed || n.Labels["tag.k8s.xenorchestra/tier"] != "web" {
		t.Fatal("a VM of an unsettled pool must not have an owned label removed")
	}
	// Another pool missing (the inventory incomplete) does not hold the VM's own labels back.
	idx.connected[poolA], idx.incomplete = true, true
	if d := Describe(idx, n, vm, opts); !d.Changed || n.Labels["tag.k8s.xenorchestra/tier"] != "" {
		t.Fatal("the owned label whose tag is gone must go once the VM's pool is settled")
	}
	// A providerID is never changed.
	n.Spec.ProviderID = "xenorchestra://" + poolB + "/" + vm.ID
	Describe(idx, n, vm, opts)
	if n.Spec.ProviderID != "xenorchestra://"+poolB+"/"+vm.ID {
		t.Fatal("Describe changed a providerID")
	}
}

func TestIgnorer(t *testing.T) {
	none, err := NewIgnorer("")
	if err != nil {
		t.Fatal(err)
	}
	sel, err := NewIgnorer("node-role.kubernetes.io/metal,zone notin (a)")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewIgnorer("a=b=c"); err == nil {
		t.Fatal("a bad selector must be an error")
	}
	xoNode := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"zone": "a"}}}
	metal := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"node-role.kubernetes.io/metal": ""}}}
	labelled := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{LabelIgnore: "true"}}}
	switch {
	case none.Ignored(xoNode), none.Ignored(metal), sel.Ignored(xoNode):
		t.Fatal("a Node was ignored without reason")
	case !none.Ignored(labelled), !sel.Ignored(labelled), !sel.Ignored(metal):
		t.Fatal("a Node to ignore was not")
	}
}

// TestBetaLabelsKeptTrue: the beta labels the upstream CCM set follow their GA labels after a
// migration; a Node without them does not get them.
func TestBetaLabelsKeptTrue(t *testing.T) {
	idx, vm := topologyIndex("h", "p")
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{
		"failure-domain.beta.kubernetes.io/zone": "old-host", "beta.kubernetes.io/instance-type": "1vCPU-1GB",
	}}}
	Describe(idx, n, vm, LabelOptions{})
	if n.Labels["failure-domain.beta.kubernetes.io/zone"] != hostA || n.Labels["beta.kubernetes.io/instance-type"] != n.Labels[LabelInstanceType] {
		t.Fatalf("beta labels not kept true: %v", n.Labels)
	}
	if _, ok := n.Labels["failure-domain.beta.kubernetes.io/region"]; ok {
		t.Fatal("a beta label the Node did not have was added")
	}
}
