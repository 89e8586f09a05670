// Package common holds what the node controllers share: their dependencies, the Node indexes,
// the source that turns XO inventory changes into reconcile requests, and the patch helper.
package common

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/inventory"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
)

// XO is the direct XO access the controllers need beyond the inventory: double checks before
// anything irreversible. *xo.Client implements it.
type XO interface {
	GetVM(ctx context.Context, id string) (*xo.VM, error)
	GetPool(ctx context.Context, id string) (*xo.Pool, error)
	ListServers(ctx context.Context, fn func(*xo.Server)) error
}

// Deps are the dependencies every node controller takes.
type Deps struct {
	Client    client.Client
	Inventory *inventory.Inventory
	XO        XO
	Recorder  events.EventRecorder
	Clock     clock.PassiveClock
	Labels    node.LabelOptions
	Addresses node.AddressOptions
	// Workers is the number of Nodes a controller reconciles at once.
	Workers int
	// OutOfServiceTaint enables the out-of-service taint on NotReady Nodes of halted VMs.
	OutOfServiceTaint bool
}

// Patch sends the difference between before and after as a merge patch carrying before's
// resourceVersion, so a concurrent change makes it fail with a conflict rather than lose
// data (taints are a list: a plain merge patch would overwrite them). A conflict is returned
// as is; the caller requeues.
func Patch(ctx context.Context, c client.Client, before, after *corev1.Node) error {
	return c.Patch(ctx, after, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
}

// PatchStatus is Patch for the status subresource.
func PatchStatus(ctx context.Context, c client.Client, before, after *corev1.Node) error {
	return c.Status().Patch(ctx, after, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
}

// IsConflict reports an optimistic-lock failure.
func IsConflict(err error) bool {
	return apierrors.IsConflict(err)
}

// IsReady reports whether the Node's Ready condition is True.
func IsReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
