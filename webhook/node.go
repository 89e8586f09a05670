// Package webhook is the mutating admission webhook that gives a Node, in the request that
// creates it, its providerID, topology and instance-type labels, XO labels and addresses.
//
// When that description is complete by the rule cloud-node applies before lifting the
// node.cloudprovider.kubernetes.io/uninitialized taint (node.Initialize: providerID, region,
// instance type, the zone of a running VM, an IP address), the webhook lifts the taint in the
// same patch (NodeDefaulter.Initialize, --webhook-initialize, on by default): the Node is born
// complete, schedulable in the answer to its CREATE, and cloud-node has nothing to write.
// Anything missing leaves the taint, and cloud-node finishes as for a Node the webhook never
// saw.
//
// It never denies a Node: when it cannot resolve the VM it admits the Node unchanged and the
// cloud-node controller finishes the job.
package webhook

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/nodeevents"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/inventory"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
)

// Path is where the webhook is served.
const Path = "/mutate-v1-node"

// NodeDefaulter describes a Node at CREATE. It reads the inventory from memory; only a VM uuid
// missing from the inventory (a VM created seconds ago) costs one bounded XO read, which the
// Estate makes.
type NodeDefaulter struct {
	Estate    *inventory.Estate
	Labels    node.LabelOptions
	Addresses node.AddressOptions
	// Ignore names the Nodes left alone: no lookup, no change.
	Ignore node.Ignorer
	// Events emits the webhook's events (nodeevents.New(…, "webhook", …)); nil emits none.
	Events *nodeevents.Recorder
	// Initialize lifts the uninitialized taint of a Node it describes completely
	// (node.Initialize); false leaves every Node to cloud-node.
	Initialize bool
}

var _ admission.Defaulter[*corev1.Node] = &NodeDefaulter{}

// Register serves the webhook at Path on srv.
func (d *NodeDefaulter) Register(srv ctrlwebhook.Server) error {
	if srv == nil {
		return errors.New("no webhook server")
	}
	srv.Register(Path, d.Webhook())
	return nil
}

// Default finds the Node's VM and sets what the VM implies. It always returns nil: an error
// would deny the Node, and registration must never depend on XO.
func (d *NodeDefaulter) Default(ctx context.Context, n *corev1.Node) error {
	start := time.Now()
	// A dry run (kubectl create --dry-run=server, check's probe) gets the answer a real CREATE
	// would get, and nothing else: the webhook declares sideEffects None, so no event, and no
	// count in the admission metrics, which alert on Nodes left undescribed.
	dry := dryRun(ctx)
	observe := func(result, method, outcome string) {
		if !dry {
			observeAdmission(result, method, outcome, start)
		}
	}
	observeResult := func(result string, res node.Result) { observe(result, res.Method.String(), res.Outcome.String()) }
	if d.Ignore.Ignored(n) {
		observe("ignored", node.MethodNone.String(), "none")
		return nil
	}
	log := logr.FromContextOrDiscard(ctx)
	res, view, err := d.Estate.Find(ctx, n)
	if err != nil {
		log.V(1).Info("XO could not answer the direct read", "node", n.Name, "error", err.Error())
	}
	switch {
	case res.Outcome == node.OutcomeForeign:
		observeResult("foreign", res)
		return nil
	case res.Outcome != node.OutcomeMatched || res.VM == nil:
		log.V(1).Info("Node admitted unchanged", "node", n.Name, "outcome", res.Outcome.String(), "reason", res.String())
		if !dry {
			d.eventVMNotResolved(n, res)
		}
		observeResult("unchanged", res)
		return nil
	}
	vm := res.VM
	taints := slices.Clone(n.Spec.Taints)
	defer func() { recordTaints(ctx, taints, n.Spec.Taints) }()
	desc := node.Describe(view, n, vm, d.Labels)
	if addrs := node.Addresses(n, vm, d.Addresses); len(addrs) > 0 {
		n.Status.Addresses = addrs
	}
	result := "mutated"
	// Last, as cloud-node does: the taint goes only once everything else is in this patch.
	if d.Initialize {
		if _, lifted := node.Initialize(n, vm, node.InitializedByWebhook); lifted {
			result = "initialized"
		}
	}
	if !dry {
		for _, r := range desc.Rejected {
			d.eventLabelRejected(n, r)
		}
		// A brand-new Node has no owned keys, hence no conflicts; reported all the same.
		for _, c := range desc.Conflicts {
			d.eventLabelConflict(n, c)
		}
	}
	if log := log.V(1); log.Enabled() {
		log.Info("Node described at creation", "node", n.Name, "vm", vm.ID, "pool", vm.PoolID, "method", res.Method.String(), "result", result)
	}
	observeResult(result, res)
	return nil
}

// dryRun reports whether the request is a dry run (kubectl create --dry-run=server): the
// webhook declares sideEffects None, so it then emits no event.
func dryRun(ctx context.Context) bool {
	req, err := admission.RequestFromContext(ctx)
	return err == nil && req.DryRun != nil && *req.DryRun
}
