package webhook

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
)

// Event reasons and actions of the webhook.
const (
	// ReasonVMNotResolved (Warning): the Node was admitted without XO data.
	ReasonVMNotResolved = "VMNotResolved"
	// ReasonLabelRejected (Warning): a label or taint the VM implies could not be set.
	ReasonLabelRejected = "LabelRejected"
	// ReasonLabelConflict (Warning): a VM tag asks for a label or taint someone else set with
	// another value on a key the controller does not own; it was left alone.
	ReasonLabelConflict = "LabelConflict"

	// ActionAdmit is the action of every webhook event.
	ActionAdmit = "Admit"
)

func (d *NodeDefaulter) eventVMNotResolved(n *corev1.Node, res node.Result) {
	d.Recorder.Eventf(n, nil, corev1.EventTypeWarning, ReasonVMNotResolved, ActionAdmit,
		"admitted unchanged, the controller retries: %s", res.String())
}

func (d *NodeDefaulter) eventLabelRejected(n *corev1.Node, r node.Rejection) {
	d.Recorder.Eventf(n, nil, corev1.EventTypeWarning, ReasonLabelRejected, ActionAdmit, "%s", r.String())
}

func (d *NodeDefaulter) eventLabelConflict(n *corev1.Node, key string) {
	d.Recorder.Eventf(n, nil, corev1.EventTypeWarning, ReasonLabelConflict, ActionAdmit,
		"a VM tag asks for %q, which someone else set to another value: left alone", key)
}
