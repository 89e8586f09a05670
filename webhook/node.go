// Package webhook is the mutating admission webhook that gives a Node, in the request that
// creates it, its providerID, topology and instance-type labels, XO labels and addresses.
// It never denies a Node: when it cannot resolve the VM it admits the Node unchanged and the
// cloud-node controller finishes the job.
package webhook

import (
	"context"
	"errors"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/inventory"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
)

// Path is where the webhook is served.
const Path = "/mutate-v1-node"

// VMGetter reads one VM from XO; *xo.Client implements it.
type VMGetter interface {
	GetVM(ctx context.Context, id string) (*xo.VM, error)
}

// NodeDefaulter mutates a Node at CREATE. It reads the inventory from memory; only a VM uuid
// missing from the inventory (a VM created seconds ago) costs one bounded XO call.
type NodeDefaulter struct {
	Inventory *inventory.Inventory
	// XO, if set, is asked for a VM whose uuid the Node reports but the inventory lacks.
	XO VMGetter
	// LookupTimeout bounds that call; keep it well inside the webhook's timeoutSeconds.
	LookupTimeout time.Duration
	Labels        node.LabelOptions
	Addresses     node.AddressOptions
	Recorder      events.EventRecorder
}

var _ admission.Defaulter[*corev1.Node] = &NodeDefaulter{}

// SetupWithManager registers the webhook at Path on the manager's webhook server.
func (d *NodeDefaulter) SetupWithManager(mgr ctrl.Manager) error {
	return d.Register(mgr.GetWebhookServer())
}

// Register serves the webhook at Path on srv.
func (d *NodeDefaulter) Register(srv ctrlwebhook.Server) error {
	if srv == nil {
		return errors.New("no webhook server")
	}
	srv.Register(Path, d.Webhook())
	return nil
}

// Default resolves the Node's VM and sets what the VM implies. It always returns nil: an error
// would deny the Node, and registration must never depend on XO.
func (d *NodeDefaulter) Default(ctx context.Context, n *corev1.Node) error {
	start := time.Now()
	log := logr.FromContextOrDiscard(ctx)
	snap := d.Inventory.Snapshot()
	res := node.Resolve(snap, n)
	var vm *xo.VM
	switch res.Outcome {
	case node.OutcomeMatched:
		vm = res.VM
	case node.OutcomeForeign:
		observe(res, "foreign", start)
		return nil
	case node.OutcomeNotFound, node.OutcomeIncomplete:
		vm = d.lookup(ctx, n, log)
	}
	if vm == nil {
		log.V(1).Info("Node admitted unchanged", "node", n.Name, "outcome", res.Outcome.String(), "reason", res.String())
		d.Recorder.Eventf(n, nil, corev1.EventTypeWarning, ReasonVMNotResolved, ActionAdmit, "admitted unchanged, the controller retries: %s", res.String())
		observe(res, "unchanged", start)
		return nil
	}
	if vm.PoolID == "" {
		observe(res, "unchanged", start)
		return nil
	}
	if n.Spec.ProviderID == "" {
		n.Spec.ProviderID = node.FormatProviderID(vm.PoolID, vm.ID)
	}
	desired := node.Desired(vm, snap.Host(vm.Container), snap.Pool(vm.PoolID), n.Labels, d.Labels)
	node.Apply(n, desired)
	if addrs := node.Addresses(n, vm, d.Addresses); len(addrs) > 0 {
		n.Status.Addresses = addrs
	}
	for _, r := range desired.Rejected {
		d.Recorder.Eventf(n, nil, corev1.EventTypeWarning, ReasonLabelRejected, ActionAdmit, "%s", r.String())
	}
	if log := log.V(1); log.Enabled() {
		log.Info("Node described at creation", "node", n.Name, "vm", vm.ID, "pool", vm.PoolID, "method", res.Method.String())
	}
	observe(res, "mutated", start)
	return nil
}

// lookup asks XO directly for a VM the Node names by uuid but the inventory lacks.
func (d *NodeDefaulter) lookup(ctx context.Context, n *corev1.Node, log logr.Logger) *xo.VM {
	if d.XO == nil {
		return nil
	}
	ids := node.CandidateUUIDs(n)
	if len(ids) == 0 {
		return nil
	}
	timeout := d.LookupTimeout
	if timeout <= 0 {
		timeout = time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, id := range ids {
		vm, err := d.XO.GetVM(ctx, id)
		if err == nil {
			lookupsTotal.WithLabelValues("found").Inc()
			return vm
		}
		if !xo.IsNotFound(err) {
			lookupsTotal.WithLabelValues("error").Inc()
			log.V(1).Info("XO lookup failed", "node", n.Name, "vm", id, "error", err.Error())
			return nil
		}
	}
	lookupsTotal.WithLabelValues("not_found").Inc()
	return nil
}
