// Package cloudnode is the cloud-node controller: it finishes the initialization of Nodes
// created by kubelets running with --cloud-provider=external (providerID, labels, tag taints,
// addresses), removes their node.cloudprovider.kubernetes.io/uninitialized taint last, once
// every required field is set, and keeps status.addresses of every XO Node current.
//
// It follows k8s.io/cloud-provider's node controller: only Nodes carrying the uninitialized
// taint are initialized, the providerID is only ever set when empty, and on any doubt (VM
// unknown or ambiguous, XO unreachable, inventory incomplete) the taint stays and the Node is
// retried with backoff. The taint goes by node.Initialize, the rule the webhook also applies at
// CREATE: a Node the webhook described completely is born without the taint, and cloud-node
// only counts it (bornComplete) and keeps its addresses current.
package cloudnode

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/controllers/common"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/nodeevents"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/inventory"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
)

// Name is the controller's name, as selected with --controllers.
const Name = "cloud-node"

// notYetMax is the longest wait before looking again at a Node that cannot be initialized yet
// (common.Retries).
const notYetMax = 5 * time.Minute

// Options are the controller's settings.
type Options struct {
	// Labels are the topology sources and the tag prefixes.
	Labels node.LabelOptions
	// Addresses classifies the VM's addresses.
	Addresses node.AddressOptions
	// Ignore selects the Nodes to leave alone.
	Ignore node.Ignorer
	// Workers is the number of Nodes reconciled at once.
	Workers int
}

// Reconciler reconciles Nodes for the cloud-node controller.
type Reconciler struct {
	client   client.Client
	estate   *inventory.Estate
	recorder eventRecorder
	clock    clock.PassiveClock
	opts     Options

	// retries spaces the looks at a Node that cannot be initialized yet, and after a failed
	// write.
	retries *common.Retries
	// written keeps it from writing from a cache that has not seen its last write.
	written common.OwnWrites
}

// New returns the cloud-node Reconciler. clk times its events and its initialization durations.
func New(c client.Client, estate *inventory.Estate, recorder events.EventRecorder, clk clock.PassiveClock, o Options) *Reconciler {
	return &Reconciler{
		client: c, estate: estate, recorder: eventRecorder{nodeevents.New(recorder, Name, clk)}, clock: clk, opts: o,
		retries: common.NewRetries(common.NotYetBase, notYetMax),
	}
}

// SetupWithManager registers the controller: it watches Nodes and the XO inventory's changes
// (common.ChangeSource). The Node field indexes (common.SetupIndexes) must be registered on
// the manager first.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return common.SetupNodeController(mgr, common.NodeController{
		Name: Name, Wants: r.wants, Predicate: relevantChange(), Estate: r.estate, Workers: r.opts.Workers,
		Created: r.bornComplete,
	}, r)
}

// bornComplete counts, with its NodeInitialized event, a Node created initialized: the webhook
// described it completely and lifted its uninitialized taint at CREATE
// (node.InitializedByWebhook), so cloud-node writes nothing to it, but the initialization
// metric and the Node's events still tell how every Node was initialized.
func (r *Reconciler) bornComplete(n *corev1.Node) {
	if n.Annotations[node.AnnotationInitializedBy] != node.InitializedByWebhook ||
		node.HasTaint(n.Spec.Taints, node.TaintUninitialized, "") || !r.wants(n) {
		return
	}
	countInitialized(node.InitializedByWebhook, 0)
	r.recorder.bornComplete(n)
}

// wants selects the Nodes to initialize (uninitialized, without another provider's
// providerID) and the Nodes of this provider whose addresses it keeps; never ignored ones.
func (r *Reconciler) wants(n *corev1.Node) bool {
	pid := n.Spec.ProviderID
	uninitialized := node.HasTaint(n.Spec.Taints, node.TaintUninitialized, "")
	return !r.opts.Ignore.Ignored(n) && (node.IsOurs(pid) || pid == "" && uninitialized)
}

// relevantChange drops the Node updates this controller has nothing to do about: on an
// initialized Node, kubelet status heartbeats (conditions, capacity) and label changes change
// nothing it computes. Every update of an uninitialized Node passes.
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
	n, opened, err := common.OpenNode(ctx, r.client, req.Name, r.wants, &r.written, r.retries)
	if n == nil {
		return opened, err
	}
	logger := log.FromContext(ctx) // with the Node's name (common.SetupNodeController)
	uninitialized := node.HasTaint(n.Spec.Taints, node.TaintUninitialized, "")
	if !r.estate.HasSynced() {
		// The first listing of XO has not completed: nothing can be resolved yet. The listing's
		// changes enqueue the Node again as soon as it lands.
		if uninitialized {
			countAttempt(resultNotSynced)
		}
		logger.V(1).Info("Waiting for the XO inventory to sync")
		return ctrl.Result{RequeueAfter: r.retries.NotYet(n.Name)}, nil
	}
	if uninitialized {
		return r.initialize(ctx, n, logger)
	}
	return r.syncAddresses(ctx, n, logger)
}

// syncAddresses keeps status.addresses of an initialized XO Node current, from the inventory
// only. A VM the inventory does not hold leaves the addresses alone: the Node is enqueued again
// when the VM changes.
//
// The address patch locks the addresses only (common.PatchAddresses), so it does not wait for
// nor conflict with the label patch cloud-node-label-sync sends the same Node for the same XO
// change (taking over Nodes from the upstream XO CCM, every one of them): the two land in
// either order.
func (r *Reconciler) syncAddresses(ctx context.Context, n *corev1.Node, logger logr.Logger) (ctrl.Result, error) {
	res := node.Resolve(r.estate.View(), n)
	if res.Outcome != node.OutcomeMatched {
		logger.V(1).Info("VM not in the XO inventory; addresses left alone", "outcome", res.Outcome.String())
		return ctrl.Result{}, nil
	}
	_, changed, err := r.patchAddresses(ctx, n, res.VM)
	if err != nil {
		return r.apiError(ctx, n, err, "")
	}
	r.retries.Forget(n.Name)
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
	want := node.Addresses(n, vm, r.opts.Addresses)
	if len(want) == 0 || node.AddressesEqual(n.Status.Addresses, want) {
		return n, false, nil
	}
	after := n.DeepCopy()
	after.Status.Addresses = want
	if err := r.written.PatchAddresses(ctx, r.client, n, after); err != nil {
		addressUpdatesTotal.WithLabelValues(resultOf(err)).Inc()
		return n, false, fmt.Errorf("patch addresses of node %s: %w", n.Name, err)
	}
	addressUpdatesTotal.WithLabelValues(resultUpdated).Inc()
	return after, true, nil
}

// initialize resolves the VM of an uninitialized Node, sets what is missing and removes the
// uninitialized taint when, and only when, every required field is set.
func (r *Reconciler) initialize(ctx context.Context, n *corev1.Node, logger logr.Logger) (ctrl.Result, error) {
	res, view, err := r.estate.Find(ctx, n)
	vm := res.VM
	if vm == nil {
		switch {
		case err != nil:
			return r.xoError(n, logger, err)
		case res.Outcome == node.OutcomeIncomplete && r.estate.LastError() != nil:
			return r.xoError(n, logger, fmt.Errorf("the XO inventory is not current: %w", r.estate.LastError()))
		}
		return r.notResolved(n, logger, res.String())
	}
	if vm.ID == "" || vm.PoolID == "" {
		return r.notResolved(n, logger, "XO did not report the VM's uuid and pool")
	}
	logger = logger.WithValues("vm", vm.ID, "pool", vm.PoolID)
	ctx = log.IntoContext(ctx, logger)

	// Addresses first, through the status subresource, so the taint never goes before them.
	cur, _, err := r.patchAddresses(ctx, n, vm)
	if err != nil {
		return r.apiError(ctx, n, err, resultAPIError)
	}

	after := cur.DeepCopy()
	desc := node.Describe(view, after, vm, r.opts.Labels)
	// Last: everything else is already in this patch or on the Node.
	missing, lifted := node.Initialize(after, vm, node.InitializedByController)
	if desc.Changed || lifted {
		if err := r.written.Patch(ctx, r.client, cur, after); err != nil {
			return r.apiError(ctx, n, fmt.Errorf("patch node %s: %w", n.Name, err), resultAPIError)
		}
		for _, rej := range desc.Rejected {
			labelRejectionsTotal.WithLabelValues(rej.Kind, string(rej.Reason)).Inc()
			r.recorder.labelRejected(after, rej.String())
		}
		for _, k := range desc.Conflicts {
			labelRejectionsTotal.WithLabelValues(kindOf(k), reasonSetBySomeoneElse).Inc()
			r.recorder.labelConflict(after, k)
		}
	}

	if len(missing) > 0 {
		countAttempt(resultIncomplete)
		r.recorder.initializationIncomplete(after, missing)
		logger.Info("Node not initialized: required fields missing", "missing", strings.Join(missing, ","))
		return ctrl.Result{RequeueAfter: r.retries.NotYet(n.Name)}, nil
	}
	r.retries.Forget(n.Name)
	var took time.Duration
	if !n.CreationTimestamp.IsZero() {
		took = r.clock.Since(n.CreationTimestamp.Time)
	}
	countInitialized(node.InitializedByController, took)
	r.recorder.nodeInitialized(after, vm, res.Method)
	logger.Info("Node initialized", "method", res.Method.String())
	return ctrl.Result{}, nil
}

// kindOf tells a taint id (<key>:<Effect>) from a label key, which cannot hold a colon.
func kindOf(k string) string {
	if strings.Contains(k, ":") {
		return node.KindTaint
	}
	return node.KindLabel
}

// notResolved keeps the taint, says why, and retries with backoff.
func (r *Reconciler) notResolved(n *corev1.Node, logger logr.Logger, why string) (ctrl.Result, error) {
	countAttempt(resultNotResolved)
	r.recorder.vmNotResolved(n, why)
	after := r.retries.NotYet(n.Name)
	logger.Info("VM not resolved; Node stays uninitialized", "reason", why, "retryIn", after)
	return ctrl.Result{RequeueAfter: after}, nil
}

// xoError keeps the taint, says why, and retries with backoff.
func (r *Reconciler) xoError(n *corev1.Node, logger logr.Logger, err error) (ctrl.Result, error) {
	countAttempt(resultXOError)
	r.recorder.xoUnavailable(n, err)
	after := r.retries.NotYet(n.Name)
	logger.Error(err, "XO unavailable; Node stays uninitialized", "retryIn", after)
	return ctrl.Result{RequeueAfter: after}, nil
}

// apiError handles a failed write as common.Retries does. result, when set, is counted as an
// initialization result (a conflict as one; a Node deleted meanwhile as none).
func (r *Reconciler) apiError(ctx context.Context, n *corev1.Node, err error, result string) (ctrl.Result, error) {
	switch {
	case result == "", apierrors.IsNotFound(err):
	case apierrors.IsConflict(err):
		countAttempt(resultConflict)
	default:
		countAttempt(result)
	}
	return r.retries.HandleWriteError(ctx, n.Name, err)
}

// resultOf is the metric result of a failed write.
func resultOf(err error) string {
	if apierrors.IsConflict(err) {
		return resultConflict
	}
	return resultAPIError
}
