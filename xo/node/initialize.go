package node

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
)

// AnnotationInitializedBy records who lifted a Node's uninitialized taint, in the request
// that lifted it: InitializedByWebhook (at CREATE: the Node was born complete) or
// InitializedByController (cloud-node, after registration).
const AnnotationInitializedBy = "node.k8s.xenorchestra/initialized-by"

// Values of AnnotationInitializedBy.
const (
	InitializedByWebhook    = "webhook"
	InitializedByController = "cloud-node"
)

// FieldAddresses names, in Missing's answer, a Node without any IP address.
const FieldAddresses = "status.addresses"

// Missing lists what n still lacks before its uninitialized taint may go, given its VM: the
// providerID; the region and instance-type labels; and, while the VM runs, the zone label and
// an IP address in status.addresses (FieldAddresses). Without an address the API server cannot
// reach the kubelet, and a kubelet started with --cloud-provider=external and no --node-ip
// waits for the cloud to set them, so the Node is not described yet. A VM that does not run
// has neither a host nor guest addresses to give: its Node is described as far as the cloud
// can (upstream's cloud-node lifts the taint then too), and the lifecycle's shutdown taint,
// not this one, keeps Pods off it; label-sync and cloud-node add the zone and the addresses
// when it starts. Labels the VM implies that were refused (a tag, a name that makes no valid
// value) do not hold the taint either.
func Missing(n *corev1.Node, vm *xo.VM) []string {
	var missing []string
	if n.Spec.ProviderID == "" {
		missing = append(missing, "providerID")
	}
	if n.Labels[LabelRegion] == "" {
		missing = append(missing, LabelRegion)
	}
	if n.Labels[LabelInstanceType] == "" {
		missing = append(missing, LabelInstanceType)
	}
	if vm.PowerState != xo.PowerStateRunning {
		return missing
	}
	if n.Labels[LabelZone] == "" {
		missing = append(missing, LabelZone)
	}
	if !hasIP(n.Status.Addresses) {
		missing = append(missing, FieldAddresses)
	}
	return missing
}

// hasIP reports whether addrs holds an InternalIP or ExternalIP that is an IP address.
func hasIP(addrs []corev1.NodeAddress) bool {
	for _, a := range addrs {
		if a.Type != corev1.NodeInternalIP && a.Type != corev1.NodeExternalIP {
			continue
		}
		if _, _, ok := canonicalIP(a.Address); ok {
			return true
		}
	}
	return false
}

// Initialize is the one rule by which the webhook (at CREATE) and cloud-node (later) lift the
// uninitialized taint: when n carries it and Missing(n, vm) is empty, it removes the taint from
// n, in place, records by in AnnotationInitializedBy and reports lifted. Otherwise n is left
// as it is and missing says what holds the taint (nothing when n has no uninitialized taint).
// The caller has described n (Describe, Addresses) before.
func Initialize(n *corev1.Node, vm *xo.VM, by string) (missing []string, lifted bool) {
	if !HasTaint(n.Spec.Taints, TaintUninitialized, "") {
		return nil, false
	}
	if missing = Missing(n, vm); len(missing) > 0 {
		return missing, false
	}
	n.Spec.Taints, _ = WithoutTaint(n.Spec.Taints, TaintUninitialized, "")
	setAnnotation(n, AnnotationInitializedBy, by)
	return nil, true
}
