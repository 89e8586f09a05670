// Package common holds what the three node controllers share: the Node cache trimming, the
// Node indexes, the source that turns XO inventory changes into reconcile requests, the
// registration, the optimistic-lock patch, and the retry and resync timing.
package common

import (
	"context"
	"math/rand/v2"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

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

// Retryable reports a failed write worth retrying quietly: an optimistic-lock conflict, or a
// Node deleted meanwhile (the next Get sees it gone).
func Retryable(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsNotFound(err)
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

// NewBackoff returns the per-Node retry delays of a controller: base, doubling on each
// consecutive failure up to max; Forget a Node once it succeeds.
func NewBackoff(base, max time.Duration) workqueue.TypedRateLimiter[string] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[string](base, max)
}

// Resync is the periodic requeue of a Node, with up to a tenth of the period added at random
// so that Nodes do not come due all at once.
func Resync(period time.Duration) ctrl.Result {
	return ctrl.Result{RequeueAfter: period + rand.N(period/10+1)}
}
