package nodeevents

import corev1 "k8s.io/api/core/v1"

// Reasons more than one component emits (the webhook and the controllers). Each component's
// own reasons are in its events.go.
const (
	// ReasonVMNotResolved (Warning): no single VM could be tied to the Node.
	ReasonVMNotResolved = "VMNotResolved"
	// ReasonLabelRejected (Warning): a label or taint the VM implies was not set as such.
	ReasonLabelRejected = "LabelRejected"
	// ReasonLabelConflict (Warning): a VM tag asks for a label or taint someone else set with
	// another value on a key the controller does not own; it was left alone.
	ReasonLabelConflict = "LabelConflict"
)

// LabelRejected reports, as a Warning, a label or taint the VM implies that was not set (what
// says which and why).
func (r *Recorder) LabelRejected(n *corev1.Node, action, what string) bool {
	return r.Warning(n, ReasonLabelRejected, action, "%s", what)
}

// LabelConflict reports, as a Warning, a VM tag asking for the label or taint key (a label key
// or a taint id) that someone else set to another value.
func (r *Recorder) LabelConflict(n *corev1.Node, action, key string) bool {
	return r.Warning(n, ReasonLabelConflict, action,
		"a VM tag asks for %q, which someone else set to another value: left alone", key)
}
