package node

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
)

func TestInitialize(t *testing.T) {
	uninit := taint(TaintUninitialized, "true", corev1.TaintEffectNoSchedule)
	other := taint("example.com/dedicated", "db", corev1.TaintEffectNoSchedule)
	running := &xo.VM{ID: "vm", PoolID: "pool", PowerState: xo.PowerStateRunning}
	halted := &xo.VM{ID: "vm", PoolID: "pool", PowerState: xo.PowerStateHalted}
	internal := corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.5"}
	external := corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "2001:db8::5"}
	hostname := corev1.NodeAddress{Type: corev1.NodeHostName, Address: "n1"}
	described := func(mut ...func(*corev1.Node)) *corev1.Node {
		n := testNode("n1")
		n.Spec.ProviderID = FormatProviderID("pool", "vm")
		n.Spec.Taints = []corev1.Taint{other, uninit}
		n.Labels = map[string]string{LabelRegion: "pool", LabelZone: "host", LabelInstanceType: "2vCPU-1GB"}
		n.Status.Addresses = []corev1.NodeAddress{internal, hostname}
		for _, m := range mut {
			m(n)
		}
		return n
	}
	for _, tc := range []struct {
		name    string
		node    *corev1.Node
		vm      *xo.VM
		missing []string
	}{
		{"complete", described(), running, nil},
		{"external address only", described(func(n *corev1.Node) { n.Status.Addresses = []corev1.NodeAddress{external} }), running, nil},
		{"halted VM needs no zone", described(func(n *corev1.Node) { delete(n.Labels, LabelZone) }), halted, nil},
		{"halted VM needs no address", described(func(n *corev1.Node) { n.Status.Addresses = nil }), halted, nil},
		{"halted VM still needs its providerID and labels", described(func(n *corev1.Node) {
			n.Spec.ProviderID = ""
			n.Labels = nil
			n.Status.Addresses = nil
		}), halted, []string{"providerID", LabelRegion, LabelInstanceType}},
		{"running VM needs its zone", described(func(n *corev1.Node) { delete(n.Labels, LabelZone) }), running, []string{LabelZone}},
		{"no address", described(func(n *corev1.Node) { n.Status.Addresses = nil }), running, []string{FieldAddresses}},
		{"a hostname is no address", described(func(n *corev1.Node) { n.Status.Addresses = []corev1.NodeAddress{hostname} }), running, []string{FieldAddresses}},
		{"an address that is no IP", described(func(n *corev1.Node) {
			n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "node-1.example"}}
		}), running, []string{FieldAddresses}},
		{"nothing described", func() *corev1.Node {
			n := testNode("n1")
			n.Spec.Taints = []corev1.Taint{uninit, other}
			return n
		}(), running, []string{"providerID", LabelRegion, LabelInstanceType, LabelZone, FieldAddresses}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Missing(tc.node, tc.vm); !slices.Equal(got, tc.missing) {
				t.Fatalf("Missing = %q, want %q", got, tc.missing)
			}
			missing, lifted := Initialize(tc.node, tc.vm, InitializedByWebhook)
			if !slices.Equal(missing, tc.missing) || lifted != (len(tc.missing) == 0) {
				t.Fatalf("Initialize = %q, %v; want %q", missing, lifted, tc.missing)
			}
			if HasTaint(tc.node.Spec.Taints, TaintUninitialized, "") == lifted {
				t.Fatalf("lifted %v, taints %v", lifted, tc.node.Spec.Taints)
			}
			if got := tc.node.Annotations[AnnotationInitializedBy]; (got == InitializedByWebhook) != lifted {
				t.Fatalf("lifted %v, %s = %q", lifted, AnnotationInitializedBy, got)
			}
			if !HasTaint(tc.node.Spec.Taints, other.Key, other.Effect) {
				t.Fatalf("another taint lost: %v", tc.node.Spec.Taints)
			}
		})
	}

	// A Node without the taint (a kubelet without --cloud-provider=external) is not
	// initialized by anyone: nothing to lift, nothing recorded.
	n := described(func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{other} })
	if missing, lifted := Initialize(n, running, InitializedByController); missing != nil || lifted || n.Annotations[AnnotationInitializedBy] != "" {
		t.Fatalf("untainted Node: %q, %v, %v", missing, lifted, n.Annotations)
	}
}
