package node

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
)

// Description reports what Describe did to a Node.
type Description struct {
	// Changed is true when the providerID, a label, a tag taint or an ownership annotation
	// changed.
	Changed bool
	// Rejected lists the labels and taints the VM implies that were not set as such.
	Rejected []Rejection
	// Conflicts lists the label keys and taint ids (<key>:<Effect>) left alone because someone
	// else set them.
	Conflicts []string
}

// Describe sets on n, in place, what its VM implies: the providerID when it is empty, and the
// labels and tag taints of Desired with the ownership rules of Apply. While idx cannot vouch
// for the VM's data (its pool is not connected and settled on a current XO server), it adds and
// updates but removes nothing it owns. Other pools and servers play no part: the VM's own data
// decides what it implies. It never touches the uninitialized taint or
// the status: addresses are Addresses' job. The webhook, cloud-node and label-sync all
// describe a Node through it.
func Describe(idx Index, n *corev1.Node, vm *xo.VM, opts LabelOptions) Description {
	var d Description
	if n.Spec.ProviderID == "" && vm.PoolID != "" && vm.ID != "" {
		n.Spec.ProviderID = FormatProviderID(vm.PoolID, vm.ID)
		d.Changed = true
	}
	desired := Desired(idx, vm, n.Labels, opts)
	if !idx.PoolConnected(vm.PoolID) {
		keepOwned(n, &desired)
	}
	changed, conflicts := Apply(n, desired)
	d.Changed = d.Changed || changed
	d.Rejected, d.Conflicts = desired.Rejected, conflicts
	return d
}

// keepOwned adds to desired every owned label and tag taint the Node carries that desired
// lacks, so that applying it removes nothing.
func keepOwned(n *corev1.Node, desired *DesiredState) {
	for _, k := range ManagedKeys(n.Annotations) {
		if _, ok := desired.Labels[k]; ok {
			continue
		}
		if v, ok := n.Labels[k]; ok {
			desired.Labels[k] = v
		}
	}
	want := make(map[string]bool, len(desired.Taints))
	for _, t := range desired.Taints {
		want[TaintID(t.Key, t.Effect)] = true
	}
	owned := ManagedTaints(n.Annotations)
	for _, t := range n.Spec.Taints {
		id := TaintID(t.Key, t.Effect)
		if !want[id] && slices.Contains(owned, id) {
			desired.Taints = append(desired.Taints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
			want[id] = true
		}
	}
}
