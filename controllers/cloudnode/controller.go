// Package cloudnode is the cloud-node controller: it finishes the initialization of Nodes
// created by kubelets running with --cloud-provider=external (providerID, labels, tag taints,
// addresses), removes their node.cloudprovider.kubernetes.io/uninitialized taint last, once
// every required field is set, and keeps status.addresses of every XO Node current.
//
// It follows k8s.io/cloud-provider's node controller: only Nodes carrying the uninitialized
// taint are initialized, the providerID is only ever set when empty, and on any doubt (VM
// unknown or ambiguous, XO unreachable, inventory incomplete) the taint stays and the Node is
// retried with backoff.
package cloudnode

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/controllers/common"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/inventory"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
)

// Name is the controller's name, as selected with --controllers.
const Name = "cloud-node"

const (
	// defaultWorkers applies when Deps.Workers is not set: a burst of new Nodes is mostly API
	// round trips, which parallelize well.
	defaultWorkers = 8
	// lookupTimeout bounds the direct XO read for a VM missing from the inventory, so that a
	// stalled XO cannot hold a worker for the client's whole retry budget.
	lookupTimeout = 3 * time.Second
	// Backoff of a Node that cannot be initialized yet (VM unknown, XO failing): 1 s doubling
	// to 5 min. An inventory change concerning the Node wakes it up earlier.
	backoffBase = time.Second
	backoffMax  = 5 * time.Minute
	// Backoff after an optimistic-lock conflict: the Node changed under us, retry at once.
	conflictBase = 10 * time.Millisecond
	conflictMax  = 10 * time.Second
)

// Reconciler reconciles Nodes for the cloud-node controller.
type Reconciler struct {
	client    client.Client
	inv       *inventory.Inventory
	xo        common.XO
	recorder  eventRecorder
	clock     clock.PassiveClock
	labels    node.LabelOptions
	addresses node.AddressOptions
	workers   int

	// backoff spaces the retries of a Node that cannot be initialized yet.
	backoff workqueue.TypedRateLimiter[string]
	// retry spaces the retries after conflicts.
	retry workqueue.TypedRateLimiter[string]
	// lookupTimeout bounds one direct XO read.
	lookupTimeout time.Duration
}

// New returns the cloud-node Reconciler.
func New(d common.Deps) *Reconciler {
	clk := d.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	workers := d.Workers
	if workers <= 0 {
		workers = defaultWorkers
	}
	return &Reconciler{
		client:        d.Client,
		inv:           d.Inventory,
		xo:            d.XO,
		recorder:      eventRecorder{d.Recorder},
		clock:         clk,
		labels:        d.Labels,
		addresses:     d.Addresses,
		workers:       workers,
		backoff:       workqueue.NewTypedItemExponentialFailureRateLimiter[string](backoffBase, backoffMax),
		retry:         workqueue.NewTypedItemExponentialFailureRateLimiter[string](conflictBase, conflictMax),
		lookupTimeout: lookupTimeout,
	}
}

// SetupWithManager registers the controller: it watches Nodes and the XO inventory's changes
// (common.ChangeSource). The Node field indexes (common.SetupIndexes) must be registered on
// the manager first.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.client == nil {
		r.client = mgr.GetClient()
	}
	if r.inv == nil {
		return errors.New("cloud-node: no XO inventory")
	}
	return common.SetupNodeController(mgr, Name, relevantChange(), r.inv, r.workers, r)
}

// relevantChange drops the Node updates this controller has nothing to do about: on an
// initialized Node, kubelet status heartbeats (conditions, capacity) change nothing it
// computes. Every update of an uninitialized Node passes.
func relevantChange() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, ok1 := e.ObjectOld.(*corev1.Node)
			n, ok2 := e.ObjectNew.(*corev1.Node)
			if !ok1 || !ok2 {
				return true
			}
			return node.HasTaint(n.Spec.Taints, node.TaintUninitialized, "") ||
				o.Spec.ProviderID != n.Spec.ProviderID ||
				node.HasTaint(o.Spec.Taints, node.TaintUninitialized, "") ||
				!node.AddressesEqual(o.Status.Addresses, n.Status.Addresses) ||
				o.Annotations[node.AnnotationProvidedNodeIP] != n.Annotations[node.AnnotationProvidedNodeIP]
		},
	}
}

// Reconcile initializes an uninitialized Node and keeps the addresses of an XO Node current.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var n corev1.Node
	if err := r.client.Get(ctx, req.NamespacedName, &n); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.Name)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get node %s: %w", req.Name, err)
	}
	logger := log.FromContext(ctx).WithValues("node", n.Name)
	uninitialized := node.HasTaint(n.Spec.Taints, node.TaintUninitialized, "")
	pid := n.Spec.ProviderID
	switch {
	case !n.DeletionTimestamp.IsZero(),
		// Another provider's Node: never ours to touch.
		pid != "" && !node.IsOurs(pid),
		// Initialized without a providerID: not a Node of this provider.
		pid == "" && !uninitialized:
		r.forget(n.Name)
		return ctrl.Result{}, nil
	}
	if r.inv == nil || !r.inv.HasSynced() {
		// The first listing of XO has not completed: nothing can be resolved yet. The listing's
		// changes enqueue the Node again as soon as it lands.
		if uninitialized {
			initializationsTotal.WithLabelValues(resultNotSynced).Inc()
		}
		logger.V(1).Info("Waiting for the XO inventory to sync")
		return ctrl.Result{RequeueAfter: r.backoff.When(n.Name)}, nil
	}
	if uninitialized {
		return r.initialize(ctx, &n, logger)
	}
	return r.syncAddresses(ctx, &n, logger)
}

// forget drops the retry state of a Node.
func (r *Reconciler) forget(name string) {
	r.backoff.Forget(name)
	r.retry.Forget(name)
}

// syncAddresses keeps status.addresses of an initialized XO Node current, from the inventory
// only. A VM the inventory does not hold leaves the addresses alone: the Node is enqueued again
// when the VM changes.
func (r *Reconciler) syncAddresses(ctx context.Context, n *corev1.Node, logger logr.Logger) (ctrl.Result, error) {
	res := node.Resolve(r.inv.Snapshot(), n)
	resolutionsTotal.WithLabelValues(res.Method.String(), res.Outcome.String()).Inc()
	if res.Outcome != node.OutcomeMatched {
		logger.V(1).Info("VM not in the XO inventory; addresses left alone", "outcome", res.Outcome.String())
		return ctrl.Result{}, nil
	}
	_, changed, err := r.patchAddresses(ctx, n, res.VM)
	if err != nil {
		return r.apiError(n, logger, err, "")
	}
	r.forget(n.Name)
	if changed {
		r.recorder.addressesUpdated(n, res.VM)
		logger.V(1).Info("Node addresses updated", "vm", res.VM.ID, "pool", res.VM.PoolID)
	}
	return ctrl.Result{}, nil
}

// patchAddresses writes the addresses the VM implies through the status subresource when they
// differ from the Node's. It returns the Node as the API server answered (n itself when nothing
// was written) and whether it wrote.
func (r *Reconciler) patchAddresses(ctx context.Context, n *corev1.Node, vm *xo.VM) (*corev1.Node, bool, error) {
	want := node.Addresses(n, vm, r.addresses)
	if len(want) == 0 || node.AddressesEqual(n.Status.Addresses, want) {
		return n, false, nil
	}
	after := n.DeepCopy()
	after.Status.Addresses = want
	if err := common.PatchStatus(ctx, r.client, n, after); err != nil {
		addressUpdatesTotal.WithLabelValues(resultOf(err)).Inc()
		return n, false, fmt.Errorf("patch addresses of node %s: %w", n.Name, err)
	}
	addressUpdatesTotal.WithLabelValues(resultUpdated).Inc()
	return after, true, nil
}

// initialize resolves the VM of an uninitialized Node, sets what is missing and removes the
// uninitialized taint when, and only when, every required field is set.
func (r *Reconciler) initialize(ctx context.Context, n *corev1.Node, logger logr.Logger) (ctrl.Result, error) {
	snap := r.inv.Snapshot()
	res := node.Resolve(snap, n)
	resolutionsTotal.WithLabelValues(res.Method.String(), res.Outcome.String()).Inc()

	vm := res.VM
	method := res.Method
	switch res.Outcome {
	case node.OutcomeMatched:
	case node.OutcomeNotFound, node.OutcomeIncomplete:
		// A VM created seconds ago may not have reached the inventory yet: one direct read
		// by uuid, which does not depend on the inventory being complete.
		found, how, err := r.lookup(ctx, n, logger)
		if err != nil {
			return r.xoError(n, logger, err)
		}
		if found != nil {
			vm, method = found, how
		}
	}
	if vm == nil {
		if res.Outcome == node.OutcomeIncomplete {
			if err := r.inv.LastError(); err != nil {
				return r.xoError(n, logger, fmt.Errorf("the XO inventory is not current: %w", err))
			}
		}
		return r.notResolved(n, logger, res.String())
	}
	if vm.ID == "" || vm.PoolID == "" {
		return r.notResolved(n, logger, "XO did not report the VM's uuid and pool")
	}
	logger = logger.WithValues("vm", vm.ID, "pool", vm.PoolID)

	// Addresses first, through the status subresource, so the taint never goes before them.
	cur, _, err := r.patchAddresses(ctx, n, vm)
	if err != nil {
		return r.apiError(n, logger, err, resultAPIError)
	}

	after := cur.DeepCopy()
	changed := false
	if after.Spec.ProviderID == "" {
		after.Spec.ProviderID = node.FormatProviderID(vm.PoolID, vm.ID)
		changed = true
	}
	desired := node.Desired(vm, snap.Host(vm.Container), snap.Pool(vm.PoolID), cur.Labels, r.labels)
	applied, conflicts := node.Apply(after, desired)
	changed = applied || changed
	missing := missingFields(after, vm)
	if len(missing) == 0 {
		// Last: everything else is already in this patch or on the Node.
		var removed bool
		after.Spec.Taints, removed = node.WithoutTaint(after.Spec.Taints, node.TaintUninitialized, "")
		changed = removed || changed
	}
	if changed {
		if err := common.Patch(ctx, r.client, cur, after); err != nil {
			return r.apiError(n, logger, fmt.Errorf("patch node %s: %w", n.Name, err), resultAPIError)
		}
		for _, rej := range desired.Rejected {
			labelRejectionsTotal.WithLabelValues(rej.Kind, string(rej.Reason)).Inc()
			r.recorder.labelRejected(after, rej.String())
		}
		for _, k := range conflicts {
			// Taints are named <key>:<Effect>; a label key cannot hold a colon.
			kind := node.KindLabel
			if strings.Contains(k, ":") {
				kind = node.KindTaint
			}
			labelRejectionsTotal.WithLabelValues(kind, reasonSetBySomeoneElse).Inc()
			r.recorder.labelRejected(after, fmt.Sprintf("%s %q left alone: set by someone else", kind, k))
		}
	}
	r.retry.Forget(n.Name)

	if len(missing) > 0 {
		initializationsTotal.WithLabelValues(resultIncomplete).Inc()
		r.recorder.initializationIncomplete(after, missing)
		logger.Info("Node not initialized: required fields missing", "missing", strings.Join(missing, ","))
		return ctrl.Result{RequeueAfter: r.backoff.When(n.Name)}, nil
	}
	r.backoff.Forget(n.Name)
	initializationsTotal.WithLabelValues(resultInitialized).Inc()
	if !n.CreationTimestamp.IsZero() {
		initializationDuration.Observe(max(0, r.clock.Since(n.CreationTimestamp.Time).Seconds()))
	}
	r.recorder.nodeInitialized(after, vm, method)
	logger.Info("Node initialized", "method", method.String())
	return ctrl.Result{}, nil
}

// missingFields lists the required fields the Node lacks: providerID, region and instance
// type always, zone when the VM is running.
func missingFields(n *corev1.Node, vm *xo.VM) []string {
	var missing []string
	if n.Spec.ProviderID == "" {
		missing = append(missing, "providerID")
	}
	if n.Labels[node.LabelRegion] == "" {
		missing = append(missing, node.LabelRegion)
	}
	if n.Labels[node.LabelInstanceType] == "" {
		missing = append(missing, node.LabelInstanceType)
	}
	if vm.PowerState == xo.PowerStateRunning && n.Labels[node.LabelZone] == "" {
		missing = append(missing, node.LabelZone)
	}
	return missing
}

// lookup reads from XO the VM a Node names by uuid (its providerID, or its systemUUID as-is
// and byte-swapped) when the inventory lacks it, and says which evidence matched. It returns a
// nil VM and no error when XO has no such VM or there is no uuid to try, and an error when XO
// could not answer.
func (r *Reconciler) lookup(ctx context.Context, n *corev1.Node, logger logr.Logger) (*xo.VM, node.Method, error) {
	ids := node.CandidateUUIDs(n)
	if len(ids) == 0 || r.xo == nil {
		return nil, node.MethodNone, nil
	}
	ctx, cancel := context.WithTimeout(ctx, r.lookupTimeout)
	defer cancel()
	for i, id := range ids {
		vm, err := r.xo.GetVM(ctx, id)
		switch {
		case err == nil && vm != nil:
			lookupsTotal.WithLabelValues(resultFound).Inc()
			vm.ID = strings.ToLower(vm.ID)
			switch {
			case n.Spec.ProviderID != "":
				return vm, node.MethodProviderID, nil
			case i == 0:
				return vm, node.MethodSystemUUID, nil
			default:
				return vm, node.MethodSystemUUIDSwapped, nil
			}
		case err == nil, xo.IsNotFound(err):
			// "no such VM": try the next form of the uuid.
		default:
			lookupsTotal.WithLabelValues(resultError).Inc()
			return nil, node.MethodNone, fmt.Errorf("get vm %s: %w", id, err)
		}
	}
	lookupsTotal.WithLabelValues(resultNotFound).Inc()
	logger.V(1).Info("VM not found in XO", "candidates", len(ids))
	return nil, node.MethodNone, nil
}

// notResolved keeps the taint, says why, and retries with backoff.
func (r *Reconciler) notResolved(n *corev1.Node, logger logr.Logger, why string) (ctrl.Result, error) {
	initializationsTotal.WithLabelValues(resultNotResolved).Inc()
	r.recorder.vmNotResolved(n, why)
	after := r.backoff.When(n.Name)
	logger.Info("VM not resolved; Node stays uninitialized", "reason", why, "retryIn", after)
	return ctrl.Result{RequeueAfter: after}, nil
}

// xoError keeps the taint, says why, and retries with backoff.
func (r *Reconciler) xoError(n *corev1.Node, logger logr.Logger, err error) (ctrl.Result, error) {
	initializationsTotal.WithLabelValues(resultXOError).Inc()
	r.recorder.xoUnavailable(n, err)
	after := r.backoff.When(n.Name)
	logger.Error(err, "XO unavailable; Node stays uninitialized", "retryIn", after)
	return ctrl.Result{RequeueAfter: after}, nil
}

// apiError handles a failed write: a conflict or a vanished Node is retried quietly, anything
// else goes back to the workqueue's rate limiter as an error. result, when set, is counted as
// an initialization result.
func (r *Reconciler) apiError(n *corev1.Node, logger logr.Logger, err error, result string) (ctrl.Result, error) {
	switch {
	case apierrors.IsNotFound(err):
		r.forget(n.Name)
		return ctrl.Result{}, nil
	case common.IsConflict(err):
		if result != "" {
			initializationsTotal.WithLabelValues(resultConflict).Inc()
		}
		logger.V(1).Info("Node changed meanwhile; retrying")
		return ctrl.Result{RequeueAfter: r.retry.When(n.Name)}, nil
	}
	if result != "" {
		initializationsTotal.WithLabelValues(result).Inc()
	}
	return ctrl.Result{}, err
}

// resultOf is the metric result of a failed write.
func resultOf(err error) string {
	if common.IsConflict(err) {
		return resultConflict
	}
	return resultAPIError
}
