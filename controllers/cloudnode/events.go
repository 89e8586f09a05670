package cloudnode

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/nodeevents"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
)

// Event reasons of the cloud-node controller; it also emits nodeevents.ReasonVMNotResolved,
// ReasonLabelRejected and ReasonLabelConflict.
const (
	// ReasonNodeInitialized: every required field is set and the uninitialized taint is gone,
	// lifted by cloud-node or, at CREATE, by the webhook.
	ReasonNodeInitialized = "NodeInitialized"
	// ReasonXOUnavailable: XO could not answer (error, timeout, refused, token rejected,
	// truncated listing); the taint stays.
	ReasonXOUnavailable = "XOUnavailable"
	// ReasonInitializationIncomplete: the VM is known but a required field (region, instance
	// type, zone of a running VM, an IP address) cannot be computed yet; the taint stays.
	ReasonInitializationIncomplete = "InitializationIncomplete"
	// ReasonAddressesUpdated: status.addresses of an initialized Node changed with its VM.
	ReasonAddressesUpdated = "AddressesUpdated"
)

// Event actions.
const (
	ActionInitialize      = "Initialize"
	ActionUpdateAddresses = "UpdateAddresses"
)

// eventRecorder emits the controller's events, one method per reason, through the policy every
// component shares (nodeevents: identical events once an hour, a budget for Normal ones).
type eventRecorder struct{ r *nodeevents.Recorder }

func (e eventRecorder) nodeInitialized(n *corev1.Node, vm *xo.VM, m node.Method) {
	e.r.Normal(n, ReasonNodeInitialized, ActionInitialize,
		"initialized from VM %s (pool %s), matched by %s", vm.ID, vm.PoolID, m.String())
}

func (e eventRecorder) bornComplete(n *corev1.Node) {
	pool, vm, _ := node.ParseProviderID(n.Spec.ProviderID)
	e.r.Normal(n, ReasonNodeInitialized, ActionInitialize,
		"initialized at creation by the webhook from VM %s (pool %s)", vm, pool)
}

func (e eventRecorder) vmNotResolved(n *corev1.Node, why string) {
	e.r.Warning(n, nodeevents.ReasonVMNotResolved, ActionInitialize,
		"node stays uninitialized, retrying: %s", why)
}

func (e eventRecorder) xoUnavailable(n *corev1.Node, err error) {
	e.r.Warning(n, ReasonXOUnavailable, ActionInitialize,
		"node stays uninitialized, retrying: %v", err)
}

func (e eventRecorder) labelRejected(n *corev1.Node, what string) {
	e.r.LabelRejected(n, ActionInitialize, what)
}

func (e eventRecorder) labelConflict(n *corev1.Node, key string) {
	e.r.LabelConflict(n, ActionInitialize, key)
}

func (e eventRecorder) initializationIncomplete(n *corev1.Node, missing []string) {
	var hint string
	if slices.Contains(missing, node.FieldAddresses) {
		hint = " (no IP address: XO reports none for the VM, whose guest agent may not run yet, and the kubelet gave no --node-ip)"
	}
	e.r.Warning(n, ReasonInitializationIncomplete, ActionInitialize,
		"node stays uninitialized, retrying: missing %s%s", strings.Join(missing, ", "), hint)
}

func (e eventRecorder) addressesUpdated(n *corev1.Node, vm *xo.VM) {
	e.r.Normal(n, ReasonAddressesUpdated, ActionUpdateAddresses,
		"addresses updated from VM %s", vm.ID)
}
