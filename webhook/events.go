package webhook

// Event reasons and actions of the webhook.
const (
	// ReasonVMNotResolved: the Node was admitted without XO data.
	ReasonVMNotResolved = "VMNotResolved"
	// ReasonLabelRejected: a label or taint the VM implies could not be set.
	ReasonLabelRejected = "LabelRejected"

	// ActionAdmit is the action of every webhook event.
	ActionAdmit = "Admit"
)
