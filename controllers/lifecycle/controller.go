// Package lifecycle is the cloud-node-lifecycle controller: it deletes a Node whose VM is
// confirmed gone from Xen Orchestra, taints a NotReady Node whose VM is not running with
// node.cloudprovider.kubernetes.io/shutdown:NoSchedule, and, when enabled, a NotReady Node whose
// VM is halted with node.kubernetes.io/out-of-service=nodeshutdown:NoExecute. A taint is added
// on a NotReady Node only on a power state a current inventory shows (the VM's pool up), and
// lifted only once that pool is also settled: never on the last copy of a VM XO cannot see now.
//
// It follows k8s.io/cloud-provider's node-lifecycle controller, with one deliberate difference:
// XO forgets every VM of a pool it lost the connection to and then answers "no such VM" for
// each, and on reconnection reports the pool connected before its VMs are loaded, so a 404
// alone proves nothing. A Node is deleted only when, for every pool the VM may be in (the one
// its providerID names, the one in its pool_id label, the one the inventory saw it leave from:
// a VM can move to another pool while its providerID keeps the first), an XO server with a
// current inventory has the pool connected and settled (see inventory.Snapshot.PoolConnected),
// the VM has been absent from it for the settle time, a direct read of that server answers "no
// such VM", and it confirms, by a direct read of the pool and of its servers, that it still
// holds the pool. Other servers and other pools play no part: a server that is down delays
// nothing here. Any error or doubt leaves the Node in place.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// Name is the controller's name, as --controllers selects it.
const Name = "cloud-node-lifecycle"

// OutOfServiceValue is the value of the out-of-service taint, as Kubernetes documents it for
// a node that was shut down.
const OutOfServiceValue = "nodeshutdown"

const (
	// DefaultResyncPeriod is how often every Node is looked at again, as a backstop for a
	// missed Ready transition or XO change. It stays below the inventory's staleness limit.
	DefaultResyncPeriod = time.Minute
	// DefaultXOTimeout bounds the direct XO reads that confirm a VM is gone.
	DefaultXOTimeout = 10 * time.Second
)

// Options are the controller's settings. Zero values take the defaults.
type Options struct {
	// OutOfServiceTaint enables the out-of-service taint on NotReady Nodes of halted VMs.
	OutOfServiceTaint bool
	// Ignore selects the Nodes to leave alone.
	Ignore node.Ignorer
	// Workers is the number of Nodes reconciled at once.
	Workers int
	// ResyncPeriod is the backstop period (see DefaultResyncPeriod).
	ResyncPeriod time.Duration
	// XOTimeout bounds each direct XO read (see DefaultXOTimeout).
	XOTimeout time.Duration
}

// withDefaults returns o with the defaults in place of zero values: New's options, and those
// of a Decide called on its own (explain).
func (o Options) withDefaults() Options {
	if o.ResyncPeriod <= 0 {
		o.ResyncPeriod = DefaultResyncPeriod
	}
	if o.XOTimeout <= 0 {
		o.XOTimeout = DefaultXOTimeout
	}
	return o
}

// Reconciler is the cloud-node-lifecycle controller.
type Reconciler struct {
	client client.Client
	estate *inventory.Estate
	events *nodeevents.Recorder
	clock  clock.PassiveClock
	opts   Options
	// retries spaces the looks at a Node whose deletion was refused, up to the resync period,
	// and after a failed write.
	retries *common.Retries
	// written keeps it from writing from a cache that has not seen its last write.
	written common.OwnWrites
}

// New returns the controller. clk times its events and the out-of-service taint.
func New(c client.Client, estate *inventory.Estate, recorder events.EventRecorder, clk clock.PassiveClock, o Options) *Reconciler {
	o = o.withDefaults()
	return &Reconciler{client: c, estate: estate, events: nodeevents.New(recorder, Name, clk), clock: clk, opts: o,
		retries: common.NewRetries(common.NotYetBase, o.ResyncPeriod)}
}

// SetupWithManager registers the controller: it watches Nodes (creation, and changes of
// readiness, providerID, taints and its ownership annotation) and XO inventory changes.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return common.SetupNodeController(mgr, common.NodeController{
		Name: Name, Wants: r.wants, Predicate: nodeChanged, Estate: r.estate, Workers: r.opts.Workers, Resync: r.opts.ResyncPeriod,
	}, r)
}

// wants selects the Nodes of this provider that are not ignored.
func (r *Reconciler) wants(n *corev1.Node) bool {
	return node.IsOurs(n.Spec.ProviderID) && !r.opts.Ignore.Ignored(n)
}

// nodeChanged lets through the Node changes the controller acts on; kubelet heartbeats and
// other status updates are not among them.
var nodeChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*corev1.Node)
		n, ok2 := e.ObjectNew.(*corev1.Node)
		if !ok1 || !ok2 {
			return true
		}
		return common.IsReady(o) != common.IsReady(n) ||
			o.Spec.ProviderID != n.Spec.ProviderID ||
			!slices.EqualFunc(o.Spec.Taints, n.Spec.Taints, func(a, b corev1.Taint) bool { return a.MatchTaint(&b) && a.Value == b.Value }) ||
			o.Annotations[node.AnnotationOutOfService] != n.Annotations[node.AnnotationOutOfService]
	},
}

// done forgets the Node's failures; the periodic look (common.ResyncSource) comes back to it.
func (r *Reconciler) done(name string) ctrl.Result {
	r.retries.Forget(name)
	return ctrl.Result{}
}

// Reconcile brings one Node's shutdown and out-of-service taints in line with its VM's power
// state and readiness, and deletes the Node when it is NotReady and its VM is confirmed gone.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx) // with the Node's name (common.SetupNodeController)
	n, opened, err := common.OpenNode(ctx, r.client, req.Name, r.wants, &r.written, r.retries)
	if n == nil {
		return opened, err
	}
	d, err := Decide(ctx, r.estate, n, r.opts)
	if err != nil {
		logger.V(1).Info("Malformed providerID; Node left alone", "error", err.Error())
		return ctrl.Result{}, nil
	}
	logger = logger.WithValues("vm", d.VMID, "pool", d.PoolID)
	ctx = log.IntoContext(ctx, logger)

	if !d.Gone {
		if d.Taints.empty() {
			return r.done(n.Name), nil
		}
		if err := r.applyTaints(ctx, n, d.VM, d.Taints); err != nil {
			return r.retries.HandleWriteError(ctx, n.Name, err)
		}
		return r.done(n.Name), nil
	}
	switch {
	case d.Refusal == RefusedSettling:
		deletionsRefused.WithLabelValues(d.Refusal).Inc()
		logger.V(1).Info("Node's VM missing from XO; waiting for its absence to settle", "wait", d.Wait)
		return ctrl.Result{RequeueAfter: d.Wait}, nil
	case d.Refusal != "":
		deletionsRefused.WithLabelValues(d.Refusal).Inc()
		logger.Info("Node's VM missing from XO but not confirmed gone; Node kept", "reason", d.Refusal, "detail", d.Why)
		r.eventVMGoneUnconfirmed(n, d.VMID, d.Why)
		return ctrl.Result{RequeueAfter: r.retries.NotYet(n.Name)}, nil
	}
	return r.delete(ctx, n, d.VMID)
}

// Decision is what the controller does with a Node now (Decide).
type Decision struct {
	// PoolID and VMID are the pool and VM the Node names: its providerID's, the pool from its
	// labels when the providerID has none.
	PoolID, VMID string
	// VM is the Node's VM as the controller judges it: the copy a current XO server shows when
	// one does, else the inventory's; nil when the inventory does not have it.
	VM *xo.VM
	// Taints are the taint changes, when the VM is known or the Node is Ready.
	Taints TaintPlan
	// Gone is set for a NotReady Node whose VM the inventory does not have: the Node is deleted
	// when Refusal is "" (the VM is confirmed gone), else kept for Refusal (a reason of
	// xenorchestra_lifecycle_node_deletions_refused_total) which Why says in a sentence; with
	// RefusedSettling, Wait is how much longer the VM's absence must last.
	Gone         bool
	Refusal, Why string
	Wait         time.Duration
}

// Decide returns what the controller does with the Node now, by the rules of this package: its
// taint changes, or for a NotReady Node whose VM is missing from the inventory, whether it is
// deleted and if not why, after the direct XO reads that confirm a VM gone (bounded by
// o.XOTimeout). It writes nothing: the reconciler acts on it, and `explain` tells it. It fails
// only on a malformed providerID (the Node is then left alone).
func Decide(ctx context.Context, estate *inventory.Estate, n *corev1.Node, o Options) (Decision, error) {
	poolID, vmID, err := node.ParseProviderID(n.Spec.ProviderID)
	if err != nil {
		return Decision{}, err
	}
	if poolID == "" {
		poolID = poolFromLabels(n)
	}
	o = o.withDefaults()
	d := Decision{PoolID: poolID, VMID: vmID}
	view := estate.View()
	res := node.Resolve(view, n)
	ready := common.IsReady(n)

	var current, trusted bool
	if res.Outcome == node.OutcomeMatched {
		d.VM = res.VM
		if c, settled := view.CurrentVM(d.VM.ID); c != nil {
			d.VM, current, trusted = c, true, settled
		}
	}
	if !MayBeGone(n, res) {
		d.Taints = planTaints(n, d.VM, ready, current, trusted, o.OutOfServiceTaint)
		return d, nil
	}
	// NotReady, and the VM is not in the inventory: is it gone?
	d.Gone = true
	d.Refusal, d.Why, d.Wait = confirmGone(ctx, estate, n, view, poolID, vmID, o.XOTimeout)
	return d, nil
}

// MayBeGone reports whether the controller looks at n as a deletion candidate (Decide's Gone):
// n has a well-formed providerID of this provider, is NotReady (a Ready Node is never deleted,
// as in k8s.io/cloud-provider), and res, node.Resolve's answer for n, has no VM. Decide then
// deletes it once its VM is confirmed gone, or says why not; other Nodes get taint changes only.
// The Node count by state (controllers/nodestates) calls these Nodes deletion_pending.
func MayBeGone(n *corev1.Node, res node.Result) bool {
	return node.IsOurs(n.Spec.ProviderID) && res.Outcome != node.OutcomeInvalid && res.Outcome != node.OutcomeMatched && !common.IsReady(n)
}

// poolFromLabels returns the pool uuid recorded in the Node's labels, for a providerID without
// a pool part; "" when there is none that is a uuid.
func poolFromLabels(n *corev1.Node) string {
	for _, k := range []string{node.LabelPoolID, node.LabelRegion} {
		if id, ok := node.NormalizeUUID(n.Labels[k]); ok {
			return id
		}
	}
	return ""
}

// Reasons for refusing a deletion: the reason label of the refusals metric.
const (
	refusedNotSynced        = "inventory_not_synced"
	refusedPoolUnknown      = "pool_unknown"
	refusedPoolDisconnected = "pool_disconnected"
	refusedIncomplete       = "inventory_incomplete"
	refusedVMExists         = "vm_exists"
	refusedXOErrorPrefix    = "xo_"
)

// RefusedSettling is the refusal of a deletion while the VM's absence has not lasted the
// settle time yet: expected, and no event.
const RefusedSettling = "absence_settling"

// refusalReasons lists every reason, to pre-register the metric's series.
var refusalReasons = []string{
	refusedNotSynced, refusedPoolUnknown, refusedPoolDisconnected, refusedIncomplete, RefusedSettling, refusedVMExists,
	refusedXOErrorPrefix + "not_found", refusedXOErrorPrefix + "unauthorized", refusedXOErrorPrefix + "forbidden",
	refusedXOErrorPrefix + "server_error", refusedXOErrorPrefix + "bad_response", refusedXOErrorPrefix + "unavailable",
	refusedXOErrorPrefix + "unknown", refusedNodeChanged,
}

// xoReason turns an XO error into a refusal reason.
func xoReason(err error) string {
	var e *xo.Error
	if errors.As(err, &e) {
		return refusedXOErrorPrefix + e.Kind.String()
	}
	return refusedXOErrorPrefix + "unknown"
}

// confirmGone returns "" when the VM is confirmed gone from XO, else the reason (a metric label
// value) and a sentence saying why not; with RefusedSettling, wait is how much longer the
// absence must last. Every pool the VM may be in (poolsOf) must vouch for its absence: XO drops
// the VMs of a pool it lost, so after a move to another pool the pool the providerID names
// proves nothing alone. The inventory checks come first: they cost nothing, and XO is only
// asked once they all pass, and only the servers that serve those pools.
// timeout bounds each direct read.
func confirmGone(ctx context.Context, estate *inventory.Estate, n *corev1.Node, view *inventory.View, poolID, vmID string, timeout time.Duration) (reason, why string, wait time.Duration) {
	if !estate.HasSynced() {
		return refusedNotSynced, "the XO inventory has not been listed yet", 0
	}
	if poolID == "" {
		return refusedPoolUnknown, "the Node names no pool (providerID without a pool, no pool label)", 0
	}
	// The servers to ask, each with the pools it vouches for.
	type server struct {
		snap  *inventory.Snapshot
		pools []string
	}
	var servers []*server
	for _, pool := range poolsOf(n, view, poolID, vmID) {
		snap := view.ForPool(pool)
		if snap == nil {
			why := fmt.Sprintf("no XO server holds a current, settled connection to pool %s (disconnected, reconnecting, out of scope, or XO cannot be listed): XO forgets the VMs of a pool it cannot reach", pool)
			if pool != poolID {
				why = fmt.Sprintf("the VM may be in pool %s (the Node's pool_id label, or the pool XO last had it in), not only in the providerID's pool %s, and ", pool, poolID) + why
			}
			if err := estate.LastError(); err != nil {
				why += ": " + err.Error()
			}
			return refusedPoolDisconnected, why, 0
		}
		w, ok := snap.AbsenceWait(vmID, pool)
		if !ok {
			return refusedVMExists, "the XO inventory has the VM", 0
		}
		wait = max(wait, w)
		if i := slices.IndexFunc(servers, func(s *server) bool { return s.snap == snap }); i >= 0 {
			servers[i].pools = append(servers[i].pools, pool)
		} else {
			servers = append(servers, &server{snap: snap, pools: []string{pool}})
		}
	}
	// A VM can leave its pool for one the server cannot see at the moment (XO moved it, then
	// lost that pool; or it was moved with XAPI): its own pool, connected, shows it absent and
	// XO answers "no such VM" as for a destroyed VM. Only an inventory that holds every pool
	// that counts (Snapshot.Complete: the scope's, or those of every enabled server entry)
	// vouches that the VM is nowhere. A disabled entry does not count: an administrator told XO
	// to forget that pool and the VMs in it (docs/troubleshooting.md).
	for _, s := range servers {
		if !s.snap.Complete() {
			return refusedIncomplete, "the XO server does not hold every pool of its scope (or of its enabled server entries) connected and settled: the VM may have moved to a pool it cannot see now", 0
		}
	}
	if wait > 0 {
		return RefusedSettling, "the VM left the XO inventory less than the settle time ago", wait
	}
	for _, s := range servers {
		if reason, why := confirmGoneOn(ctx, view.ReaderFor(s.snap), s.pools, vmID, timeout); reason != "" {
			return reason, why, 0
		}
	}
	return "", "", 0
}

// poolsOf returns the pools the Node's VM may be in, poolID (the providerID's, else the labels')
// first: a providerID never changes, while a VM can move to another pool. Also the pool in the
// Node's pool_id label (cloud-node-label-sync moves it with the VM, and it outlives this
// process) and the pools the inventory saw the VM leave from (inventory.View.LastPools).
func poolsOf(n *corev1.Node, view *inventory.View, poolID, vmID string) []string {
	pools := []string{poolID}
	add := func(id string) {
		if id = strings.ToLower(id); id != "" && !slices.Contains(pools, id) {
			pools = append(pools, id)
		}
	}
	if id, ok := node.NormalizeUUID(n.Labels[node.LabelPoolID]); ok {
		add(id)
	}
	for _, id := range view.LastPools(vmID) {
		add(id)
	}
	return pools
}

// confirmGoneOn asks one XO server directly: it must answer "no such VM", still hold each of
// the pools, and list a connected, enabled server entry for each, within timeout.
func confirmGoneOn(ctx context.Context, xoc inventory.Reader, pools []string, vmID string, timeout time.Duration) (reason, why string) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	vm, err := xoc.GetVM(ctx, vmID)
	switch {
	case err == nil && vm != nil:
		return refusedVMExists, "XO still has the VM (the inventory lags behind, or the VM left the scope)"
	case err == nil:
		return refusedXOErrorPrefix + "unknown", "XO answered the VM read without a VM"
	case !xo.IsNotFound(err):
		return xoReason(err), "cannot read the VM from XO: " + err.Error()
	}
	for _, pool := range pools {
		if _, err := xoc.GetPool(ctx, pool); err != nil {
			return xoReason(err), fmt.Sprintf("cannot read pool %s from XO: %v", pool, err)
		}
	}
	connected := map[string]bool{}
	err = xoc.ListServers(ctx, func(s *xo.Server) {
		if s.IsEnabled() && s.Status == xo.ServerConnected {
			connected[strings.ToLower(s.PoolID)] = true
		}
	})
	if err != nil {
		return xoReason(err), "cannot list XO's pool connections: " + err.Error()
	}
	for _, pool := range pools {
		if !connected[pool] {
			return refusedPoolDisconnected, fmt.Sprintf("XO lists no connected server for pool %s", pool)
		}
	}
	return "", ""
}

// delete deletes a Node whose VM is confirmed gone. The preconditions make the API server refuse
// if the Node was replaced (another UID) or changed (it may have become Ready) since it was read.
func (r *Reconciler) delete(ctx context.Context, n *corev1.Node, vmID string) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	r.eventDeletingNode(n, vmID)
	uid, rv := n.UID, n.ResourceVersion
	if err := r.client.Delete(ctx, n, client.Preconditions{UID: &uid, ResourceVersion: &rv}); err != nil {
		if apierrors.IsConflict(err) {
			deletionsRefused.WithLabelValues(refusedNodeChanged).Inc()
			logger.Info("Node changed while its deletion was decided; looking again")
		}
		return r.retries.HandleWriteError(ctx, n.Name, fmt.Errorf("delete node %s: %w", n.Name, err))
	}
	r.done(n.Name)
	deletions.Inc()
	logger.Info("Node deleted: its VM is gone from XO")
	r.eventDeletedNode(n, vmID)
	return ctrl.Result{}, nil
}

// refusedNodeChanged: the Node changed between the decision and the delete.
const refusedNodeChanged = "node_changed"

// TaintPlan is what the controller changes on a Node's taints.
type TaintPlan struct {
	AddShutdown, RemoveShutdown bool
	AddOutOfService             bool
	RemoveOutOfService          bool
	// Own and Disown set or clear AnnotationOutOfService.
	Own, Disown bool
}

func (p TaintPlan) empty() bool { return p == TaintPlan{} }

// planTaints computes the taint changes for a Node:
//
//   - Ready: the shutdown taint goes (as k8s.io/cloud-provider does), and so does an
//     out-of-service taint this controller put.
//   - NotReady and the VM not Running (Halted, Suspended, Paused): the shutdown taint is set;
//     if the VM is Halted and outOfService is enabled, the out-of-service taint too, unless the
//     Node has one already (then it is someone else's and stays theirs).
//   - NotReady and the VM Running: the shutdown taint and an owned out-of-service taint go, but
//     only when trusted (the VM's pool connected and settled).
//
// While NotReady, the VM's power state counts only when current (a server with a current
// inventory shows the VM in a pool it has up, see inventory.View.CurrentVM): otherwise nothing
// is added and nothing lifted. A Halted copy from a stale inventory may be a VM started since,
// and out-of-service on a running machine force-detaches its volumes; no taint is the answer
// when XO cannot show the VM now.
//
// vm is the VM from the inventory (nil when absent: then only readiness may lift taints).
func planTaints(n *corev1.Node, vm *xo.VM, ready, current, trusted, outOfService bool) TaintPlan {
	var p TaintPlan
	hasShutdown := node.HasTaint(n.Spec.Taints, node.TaintShutdown, corev1.TaintEffectNoSchedule)
	hasOOS := node.HasTaint(n.Spec.Taints, node.TaintOutOfService, corev1.TaintEffectNoExecute)
	anyOOS := node.HasTaint(n.Spec.Taints, node.TaintOutOfService, "")
	_, owned := n.Annotations[node.AnnotationOutOfService]

	lift := func() {
		p.RemoveShutdown = hasShutdown
		p.RemoveOutOfService = owned && hasOOS
		p.Disown = owned
	}
	switch {
	case ready:
		lift()
		return p
	case vm == nil, !current:
		return p
	}
	switch vm.PowerState {
	case xo.PowerStateRunning:
		if trusted {
			lift()
		}
	case xo.PowerStateHalted, xo.PowerStateSuspended, xo.PowerStatePaused:
		p.AddShutdown = !hasShutdown
		wantOOS := outOfService && vm.PowerState == xo.PowerStateHalted
		switch {
		case wantOOS && !anyOOS:
			p.AddOutOfService, p.Own = true, !owned
		case owned && !anyOOS && !wantOOS:
			// Our taint was lifted by someone else and is no longer wanted: forget it.
			p.Disown = true
		}
	}
	return p
}

// applyTaints patches the Node with the plan, then emits the events and counts the metrics.
func (r *Reconciler) applyTaints(ctx context.Context, n *corev1.Node, vm *xo.VM, p TaintPlan) error {
	after := n.DeepCopy()
	var added, removed []corev1.Taint
	if p.AddShutdown {
		t := shutdownTaint()
		after.Spec.Taints, _ = node.WithTaint(after.Spec.Taints, t)
		added = append(added, t)
	}
	if p.AddOutOfService {
		t := r.outOfServiceTaint()
		after.Spec.Taints, _ = node.WithTaint(after.Spec.Taints, t)
		added = append(added, t)
	}
	if p.RemoveShutdown {
		after.Spec.Taints, _ = node.WithoutTaint(after.Spec.Taints, node.TaintShutdown, corev1.TaintEffectNoSchedule)
		removed = append(removed, shutdownTaint())
	}
	if p.RemoveOutOfService {
		after.Spec.Taints, _ = node.WithoutTaint(after.Spec.Taints, node.TaintOutOfService, corev1.TaintEffectNoExecute)
		removed = append(removed, corev1.Taint{Key: node.TaintOutOfService, Value: OutOfServiceValue, Effect: corev1.TaintEffectNoExecute})
	}
	if p.Own {
		if after.Annotations == nil {
			after.Annotations = map[string]string{}
		}
		after.Annotations[node.AnnotationOutOfService] = "true"
	}
	if p.Disown {
		delete(after.Annotations, node.AnnotationOutOfService)
	}
	if err := r.written.Patch(ctx, r.client, n, after); err != nil {
		return fmt.Errorf("patch taints of node %s: %w", n.Name, err)
	}
	logger := log.FromContext(ctx)
	for _, t := range added {
		taintsTotal.WithLabelValues(taintName(t.Key), opAdded).Inc()
	}
	for _, t := range removed {
		taintsTotal.WithLabelValues(taintName(t.Key), opRemoved).Inc()
	}
	if len(added) > 0 {
		logger.Info("Node tainted: its VM is not running", "powerState", vm.PowerState, "taints", taintList(added))
		r.eventNodeShutdown(after, vm, added)
	}
	if len(removed) > 0 {
		logger.Info("Node taints lifted: its VM runs again or the Node is Ready", "taints", taintList(removed))
		r.eventNodeRunning(after, vm, removed, common.IsReady(n))
	}
	return nil
}

func shutdownTaint() corev1.Taint {
	return corev1.Taint{Key: node.TaintShutdown, Effect: corev1.TaintEffectNoSchedule}
}

func (r *Reconciler) outOfServiceTaint() corev1.Taint {
	now := metav1.NewTime(r.clock.Now())
	return corev1.Taint{Key: node.TaintOutOfService, Value: OutOfServiceValue, Effect: corev1.TaintEffectNoExecute, TimeAdded: &now}
}

// taintList writes taints as key[=value]:Effect, comma-separated.
func taintList(ts []corev1.Taint) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = t.ToString()
	}
	return strings.Join(parts, ", ")
}
