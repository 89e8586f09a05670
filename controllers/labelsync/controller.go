// Package labelsync is the cloud-node-label-sync controller: it keeps the labels (and the
// tag-derived taints) a VM implies true on its initialized Node after live migration (zone and
// host labels), resize (instance type), rename (VM name label), pool renames and VM tag edits.
//
// It computes the labels with the same function the webhook and the cloud-node controller use
// (node.Desired) and applies them with the same ownership rules (node.Apply): it removes only
// keys it owns and never changes a label someone else set on a key it does not own. A VM
// missing from the inventory changes nothing, and while the inventory cannot be trusted (a
// pool disconnected, XO unreachable, a stale listing) labels may be updated but none removed.
package labelsync

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/controllers/common"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/nodeevents"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/inventory"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
)

// Name is the controller's name, as --controllers selects it.
const Name = "cloud-node-label-sync"

const (
	// DefaultResyncPeriod is how often every Node is looked at again, as a backstop: XO
	// changes reach the controller through the inventory's change feed within milliseconds.
	DefaultResyncPeriod = 10 * time.Minute
)

// Options are the controller's settings. Zero values take the defaults.
type Options struct {
	// Labels are the topology sources and the tag prefixes.
	Labels node.LabelOptions
	// Ignore selects the Nodes to leave alone.
	Ignore node.Ignorer
	// Workers is the number of Nodes reconciled at once.
	Workers int
	// ResyncPeriod is the backstop period (see DefaultResyncPeriod).
	ResyncPeriod time.Duration
}

// Reconciler is the cloud-node-label-sync controller.
type Reconciler struct {
	client client.Client
	estate *inventory.Estate
	events *nodeevents.Recorder
	opts   Options
	// retries spaces the looks at a Node after a failed write (a VM missing from the inventory
	// is not retried: its arrival is an inventory change).
	retries *common.Retries
	// written keeps it from writing from a cache that has not seen its last write.
	written common.OwnWrites
}

// New returns the controller. clk times its events.
func New(c client.Client, estate *inventory.Estate, recorder events.EventRecorder, clk clock.PassiveClock, o Options) *Reconciler {
	if o.ResyncPeriod <= 0 {
		o.ResyncPeriod = DefaultResyncPeriod
	}
	return &Reconciler{client: c, estate: estate, events: nodeevents.New(recorder, Name, clk), opts: o, retries: common.NewRetries(common.NotYetBase, o.ResyncPeriod)}
}

// SetupWithManager registers the controller: it watches Nodes (creation, and changes of labels,
// annotations, taints and providerID; not status) and XO inventory changes.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return common.SetupNodeController(mgr, common.NodeController{
		Name: Name, Wants: r.wants, Predicate: nodeChanged, Estate: r.estate, Workers: r.opts.Workers, Resync: r.opts.ResyncPeriod,
	}, r)
}

// wants selects the initialized Nodes of this provider that are not ignored: the cloud-node
// controller describes a Node first.
func (r *Reconciler) wants(n *corev1.Node) bool {
	return node.IsOurs(n.Spec.ProviderID) && !node.HasTaint(n.Spec.Taints, node.TaintUninitialized, "") && !r.opts.Ignore.Ignored(n)
}

// nodeChanged lets through the Node changes that may call for a label patch.
var nodeChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*corev1.Node)
		n, ok2 := e.ObjectNew.(*corev1.Node)
		if !ok1 || !ok2 {
			return true
		}
		return o.Spec.ProviderID != n.Spec.ProviderID ||
			!maps.Equal(o.Labels, n.Labels) ||
			!maps.Equal(o.Annotations, n.Annotations) ||
			!slices.EqualFunc(o.Spec.Taints, n.Spec.Taints, func(a, b corev1.Taint) bool { return a.MatchTaint(&b) && a.Value == b.Value })
	},
}

// Reconcile brings one initialized Node's labels and tag taints to what its VM implies, in at
// most one patch. A VM missing from the inventory changes nothing; while the inventory cannot
// vouch for the VM, labels may be added or updated but none removed (node.Describe).
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx) // with the Node's name (common.SetupNodeController)
	n, opened, err := common.OpenNode(ctx, r.client, req.Name, r.wants, &r.written, r.retries)
	if n == nil {
		return opened, err
	}
	view := r.estate.View()
	res := node.Resolve(view, n)
	if res.Outcome != node.OutcomeMatched {
		logger.V(1).Info("VM not in the inventory; labels left as they are", "outcome", res.Outcome.String())
		return ctrl.Result{}, nil
	}
	vm := res.VM
	logger = logger.WithValues("vm", vm.ID, "pool", vm.PoolID)

	after := n.DeepCopy()
	desc := node.Describe(view, after, vm, r.opts.Labels)
	r.report(n, desc)
	if !desc.Changed {
		return ctrl.Result{}, nil
	}
	if err := r.written.Patch(ctx, r.client, n, after); err != nil {
		return r.retries.HandleWriteError(ctx, n.Name, fmt.Errorf("patch labels of node %s: %w", n.Name, err))
	}
	r.retries.Forget(n.Name)
	patches.Inc()
	logger.V(1).Info("Node labels synced")
	r.announce(n, after)
	return ctrl.Result{}, nil
}

// announce emits the events and counts the metrics of the label changes a patch made. A move
// is told by the host and pool uuids, so that renaming a host or switching the topology labels
// to names is not reported as a migration.
func (r *Reconciler) announce(before, after *corev1.Node) {
	changedFrom := func(key string) (string, string, bool) {
		o, n := before.Labels[key], after.Labels[key]
		return o, n, o != "" && n != "" && o != n
	}
	if _, _, ok := changedFrom(node.LabelHostID); ok {
		labelChanges.WithLabelValues("zone").Inc()
		r.eventZoneChanged(after, before.Labels[node.LabelZone], after.Labels[node.LabelZone], before.Labels[node.LabelHostName], after.Labels[node.LabelHostName])
	}
	if _, _, ok := changedFrom(node.LabelPoolID); ok {
		labelChanges.WithLabelValues("region").Inc()
		r.eventRegionChanged(after, before.Labels[node.LabelRegion], after.Labels[node.LabelRegion])
	}
	if o, n, ok := changedFrom(node.LabelInstanceType); ok {
		labelChanges.WithLabelValues("instance_type").Inc()
		r.eventInstanceTypeChanged(after, o, n)
	}
	if o, n, ok := changedFrom(node.LabelVMName); ok {
		labelChanges.WithLabelValues("name").Inc()
		r.eventRenamed(after, o, n)
	}
}

// report emits a LabelRejected event for each label or taint the VM implies that was not set,
// and a LabelConflict event for each left alone because someone else set it, each counted when
// its event is emitted: once, then again hourly while it stands (nodeevents), not at every
// resync.
func (r *Reconciler) report(n *corev1.Node, d node.Description) {
	for _, rj := range d.Rejected {
		if r.eventLabelRejected(n, rj) {
			rejectedTotal.WithLabelValues(string(rj.Reason)).Inc()
		}
	}
	for _, c := range d.Conflicts {
		if r.eventLabelConflict(n, c) {
			conflictsTotal.Inc()
		}
	}
}
