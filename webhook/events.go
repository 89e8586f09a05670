package webhook

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/nodeevents"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
)

// ActionAdmit is the action of every webhook event. Its reasons are those the controllers
// share (nodeevents.ReasonVMNotResolved: the Node was admitted without XO data;
// ReasonLabelRejected; ReasonLabelConflict).
const ActionAdmit = "Admit"

func (d *NodeDefaulter) eventVMNotResolved(n *corev1.Node, res node.Result) {
	d.Events.Warning(n, nodeevents.ReasonVMNotResolved, ActionAdmit,
		"admitted unchanged, the controller retries: %s", res.String())
}

func (d *NodeDefaulter) eventLabelRejected(n *corev1.Node, r node.Rejection) {
	d.Events.LabelRejected(n, ActionAdmit, r.String())
}

func (d *NodeDefaulter) eventLabelConflict(n *corev1.Node, key string) {
	d.Events.LabelConflict(n, ActionAdmit, key)
}
