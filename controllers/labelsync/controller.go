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
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/controllers/common"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
)

// Name is the controller's name, as --controllers selects it.
const Name = "cloud-node-label-sync"

const (
	// DefaultResyncPeriod is how often every Node is looked at again, as a backstop: XO
	// changes reach the controller through the inventory's change feed within milliseconds.
	DefaultResyncPeriod = 10 * time.Minute
	// conflictRetry is the delay before retrying a patch that lost an optimistic-lock race;
	// the cache catches up within milliseconds.
	conflictRetry = 200 * time.Millisecond
)

// Reconciler is the cloud-node-label-sync controller.
type Reconciler struct {
	d common.Deps
	// ResyncPeriod is the backstop period (see DefaultResyncPeriod); a tenth of it is added
	// at random so that Nodes do not come due all at once.
	ResyncPeriod time.Duration

	// reported holds, per Node (name/uid), the refused labels and conflicts last reported in
	// events, so that a standing refusal is reported once and not at every resync.
	reportedMu sync.Mutex
	reported   map[string]string
}

// New returns the controller with the default period.
func New(d common.Deps) *Reconciler {
	return &Reconciler{d: d, ResyncPeriod: DefaultResyncPeriod, reported: make(map[string]string)}
}

// SetupWithManager registers the controller: it watches Nodes (creation, and changes of labels,
// annotations, taints and providerID; not status) and XO inventory changes.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return common.SetupNodeController(mgr, Name, nodeChanged, r.d.Inventory, r.d.Workers, r)
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

func (r *Reconciler) resync() ctrl.Result {
	p := r.ResyncPeriod
	if p <= 0 {
		p = DefaultResyncPeriod
	}
	return ctrl.Result{RequeueAfter: p + rand.N(p/10+1)}
}

// Reconcile brings one initialized Node's labels and tag taints to what its VM implies, in at
// most one patch.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx).WithValues("node", req.Name)
	var n corev1.Node
	if err := r.d.Client.Get(ctx, req.NamespacedName, &n); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.Name)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get node %s: %w", req.Name, err)
	}
	if !node.IsOurs(n.Spec.ProviderID) || node.HasTaint(n.Spec.Taints, node.TaintUninitialized, "") {
		// Not ours, or not initialized yet: the cloud-node controller describes it first.
		return ctrl.Result{}, nil
	}
	snap := r.d.Inventory.Snapshot()
	res := node.Resolve(snap, &n)
	if res.Outcome != node.OutcomeMatched {
		// Never remove labels for a VM the inventory does not hold.
		logger.V(1).Info("VM not in the inventory; labels left as they are", "outcome", res.Outcome.String())
		return r.resync(), nil
	}
	vm := res.VM
	logger = logger.WithValues("vm", vm.ID, "pool", vm.PoolID)

	desired := node.Desired(vm, snap.Host(vm.Container), snap.Pool(vm.PoolID), n.Labels, r.d.Labels)
	trusted := snap.Complete() && snap.PoolConnected(vm.PoolID)
	if !trusted {
		keepOwned(&n, &desired)
	}
	after := n.DeepCopy()
	changed, conflicts := node.Apply(after, desired)
	r.report(&n, desired.Rejected, conflicts)
	if !changed {
		return r.resync(), nil
	}
	if err := common.Patch(ctx, r.d.Client, &n, after); err != nil {
		if common.IsConflict(err) || apierrors.IsNotFound(err) {
			logger.V(1).Info("Node changed meanwhile; retrying")
			return ctrl.Result{RequeueAfter: conflictRetry}, nil
		}
		return ctrl.Result{}, fmt.Errorf("patch labels of node %s: %w", n.Name, err)
	}
	patches.Inc()
	logger.V(1).Info("Node labels synced", "trusted", trusted)
	r.announce(&n, after)
	return r.resync(), nil
}

// keepOwned adds to desired every owned label and tag taint the Node carries that desired
// lacks, so that applying it removes nothing: used while the inventory cannot be trusted.
func keepOwned(n *corev1.Node, desired *node.DesiredState) {
	for _, k := range node.ManagedKeys(n.Annotations) {
		if _, ok := desired.Labels[k]; ok {
			continue
		}
		if v, ok := n.Labels[k]; ok {
			desired.Labels[k] = v
		}
	}
	want := make(map[string]bool, len(desired.Taints))
	for _, t := range desired.Taints {
		want[node.TaintID(t.Key, t.Effect)] = true
	}
	owned := node.ManagedTaints(n.Annotations)
	for _, t := range n.Spec.Taints {
		id := node.TaintID(t.Key, t.Effect)
		if !want[id] && slices.Contains(owned, id) {
			desired.Taints = append(desired.Taints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
			want[id] = true
		}
	}
}

// announce emits the events and counts the metrics of the label changes a patch made.
func (r *Reconciler) announce(before, after *corev1.Node) {
	changedFrom := func(key string) (string, string, bool) {
		o, n := before.Labels[key], after.Labels[key]
		return o, n, o != "" && n != "" && o != n
	}
	if o, n, ok := changedFrom(node.LabelZone); ok {
		labelChanges.WithLabelValues("zone").Inc()
		r.eventZoneChanged(after, o, n, before.Labels[node.LabelHostName], after.Labels[node.LabelHostName])
	}
	if o, n, ok := changedFrom(node.LabelRegion); ok {
		labelChanges.WithLabelValues("region").Inc()
		r.eventRegionChanged(after, o, n)
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

// report emits LabelRejected and LabelConflict events, and counts them, when the Node's set of
// refusals and conflicts differs from the one last reported.
func (r *Reconciler) report(n *corev1.Node, rejected []node.Rejection, conflicts []string) {
	var b strings.Builder
	for _, rj := range rejected {
		b.WriteString(rj.String())
		b.WriteByte('\n')
	}
	for _, c := range conflicts {
		b.WriteString(c)
		b.WriteByte('\n')
	}
	fp := b.String()
	key := n.Name + "/" + string(n.UID)
	r.reportedMu.Lock()
	prev, seen := r.reported[key]
	if fp == "" {
		delete(r.reported, key)
	} else {
		r.reported[key] = fp
	}
	r.reportedMu.Unlock()
	if fp == "" || (seen && prev == fp) {
		return
	}
	for _, rj := range rejected {
		rejectedTotal.WithLabelValues(string(rj.Reason)).Inc()
		r.eventLabelRejected(n, rj)
	}
	for _, c := range conflicts {
		conflictsTotal.Inc()
		r.eventLabelConflict(n, c)
	}
}

// forget drops what was reported for a deleted Node.
func (r *Reconciler) forget(name string) {
	r.reportedMu.Lock()
	defer r.reportedMu.Unlock()
	for k := range r.reported {
		if strings.HasPrefix(k, name+"/") {
			delete(r.reported, k)
		}
	}
}
