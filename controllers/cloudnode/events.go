package cloudnode

import (
	"strings"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
)

// Event reasons of the cloud-node controller; it also emits node.ReasonVMNotResolved,
// node.ReasonLabelRejected and node.ReasonLabelConflict.
const (
	// ReasonNodeInitialized: every required field is set and the uninitialized taint is gone.
	ReasonNodeInitialized = "NodeInitialized"
	// ReasonXOUnavailable: XO could not answer (error, timeout, refused, token rejected,
	// truncated listing); the taint stays.
	ReasonXOUnavailable = "XOUnavailable"
	// ReasonInitializationIncomplete: the VM is known but a required field (region, instance
	// type, zone of a running VM) cannot be computed yet; the taint stays.
	ReasonInitializationIncomplete = "InitializationIncomplete"
	// ReasonAddressesUpdated: status.addresses of an initialized Node changed with its VM.
	ReasonAddressesUpdated = "AddressesUpdated"
)

// Event actions.
const (
	ActionInitialize      = "Initialize"
	ActionUpdateAddresses = "UpdateAddresses"
)

// Budget of Normal events: a burst of normalEventBurst, then normalEventRate per second.
// Warning events (why a Node is not initialized) are never held back.
//
// Why: every Event is an API server write, as costly as the Node patch it reports. In a burst of
// thousands of Nodes, one NodeInitialized per Node doubled the API server's writes and made the
// burst 15 to 40 % slower (make bench, 5,000 Nodes: 23 and 25 s without, 28 and 41 s with),
// while saying what the Nodes themselves show. A few Nodes at a time, as clusters usually grow,
// still get one each; the rest are counted in xenorchestra_cloud_node_events_suppressed_total.
const (
	normalEventBurst = 100
	normalEventRate  = 10
)

// eventRecorder emits the controller's events, one method per reason. A nil recorder emits
// nothing.
type eventRecorder struct {
	r      events.EventRecorder
	normal *rate.Limiter
}

func newEventRecorder(r events.EventRecorder) eventRecorder {
	return eventRecorder{r: r, normal: rate.NewLimiter(normalEventRate, normalEventBurst)}
}

func (e eventRecorder) emit(n *corev1.Node, typ, reason, action, note string, args ...any) {
	if e.r == nil || n == nil {
		return
	}
	if typ == corev1.EventTypeNormal && !e.normal.Allow() {
		eventsSuppressedTotal.WithLabelValues(reason).Inc()
		return
	}
	e.r.Eventf(n, nil, typ, reason, action, note, args...)
}

func (e eventRecorder) nodeInitialized(n *corev1.Node, vm *xo.VM, m node.Method) {
	e.emit(n, corev1.EventTypeNormal, ReasonNodeInitialized, ActionInitialize,
		"initialized from VM %s (pool %s), matched by %s", vm.ID, vm.PoolID, m.String())
}

func (e eventRecorder) vmNotResolved(n *corev1.Node, why string) {
	e.emit(n, corev1.EventTypeWarning, node.ReasonVMNotResolved, ActionInitialize,
		"node stays uninitialized, retrying: %s", why)
}

func (e eventRecorder) xoUnavailable(n *corev1.Node, err error) {
	e.emit(n, corev1.EventTypeWarning, ReasonXOUnavailable, ActionInitialize,
		"node stays uninitialized, retrying: %v", err)
}

func (e eventRecorder) labelRejected(n *corev1.Node, what string) {
	e.emit(n, corev1.EventTypeWarning, node.ReasonLabelRejected, ActionInitialize, "%s", what)
}

func (e eventRecorder) labelConflict(n *corev1.Node, key string) {
	e.emit(n, corev1.EventTypeWarning, node.ReasonLabelConflict, ActionInitialize, "%s", node.LabelConflictMessage(key))
}

func (e eventRecorder) initializationIncomplete(n *corev1.Node, missing []string) {
	e.emit(n, corev1.EventTypeWarning, ReasonInitializationIncomplete, ActionInitialize,
		"node stays uninitialized, retrying: missing %s", strings.Join(missing, ", "))
}

func (e eventRecorder) addressesUpdated(n *corev1.Node, vm *xo.VM) {
	e.emit(n, corev1.EventTypeNormal, ReasonAddressesUpdated, ActionUpdateAddresses,
		"addresses updated from VM %s", vm.ID)
}
