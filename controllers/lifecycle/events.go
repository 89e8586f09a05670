package lifecycle

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
)

// Event reasons of the controller.
const (
	// ReasonNodeShutdown: the VM is not running; the Node got the shutdown (and perhaps the
	// out-of-service) taint.
	ReasonNodeShutdown = "NodeShutdown"
	// ReasonNodeRunning: the VM runs again (or the Node is Ready); the taints were lifted.
	ReasonNodeRunning = "NodeRunning"
	// ReasonDeletingNode: the VM is confirmed gone; the Node is about to be deleted.
	ReasonDeletingNode = "DeletingNode"
	// ReasonDeletedNode: the Node was deleted.
	ReasonDeletedNode = "DeletedNode"
	// ReasonVMGoneUnconfirmed (Warning): the VM is missing from the inventory, but its absence
	// could not be confirmed; the Node is kept and looked at again later.
	ReasonVMGoneUnconfirmed = "VMGoneUnconfirmed"
)

// Event actions of the controller.
const (
	ActionTaint   = "Taint"
	ActionUntaint = "Untaint"
	ActionDelete  = "Delete"
)

func (r *Reconciler) eventNodeShutdown(n *corev1.Node, vm *xo.VM, added []corev1.Taint) {
	r.events.Normal(n, ReasonNodeShutdown, ActionTaint,
		"VM %s is %s and the Node is not Ready: tainted %s", vm.ID, vm.PowerState, taintList(added))
}

func (r *Reconciler) eventNodeRunning(n *corev1.Node, vm *xo.VM, removed []corev1.Taint, ready bool) {
	why := "the Node is Ready"
	if !ready && vm != nil {
		why = "VM " + vm.ID + " is " + vm.PowerState
	}
	r.events.Normal(n, ReasonNodeRunning, ActionUntaint,
		"%s: lifted %s", why, taintList(removed))
}

func (r *Reconciler) eventDeletingNode(n *corev1.Node, vmID string) {
	r.events.Normal(n, ReasonDeletingNode, ActionDelete,
		"Deleting Node: it is not Ready and XO confirms VM %s is gone from its connected pool", vmID)
}

// eventDeletedNode is emitted on the deleted Node's reference (name and UID), which outlives it.
func (r *Reconciler) eventDeletedNode(n *corev1.Node, vmID string) {
	r.events.Normal(n, ReasonDeletedNode, ActionDelete,
		"Deleted Node: VM %s is gone from XO", vmID)
}

func (r *Reconciler) eventVMGoneUnconfirmed(n *corev1.Node, vmID, why string) {
	r.events.Warning(n, ReasonVMGoneUnconfirmed, ActionDelete,
		"VM %s is missing from the XO inventory but its removal is not confirmed, Node kept: %s", vmID, why)
}
