// Package common holds what the three node controllers share: the Node cache trimming, the
// Node indexes, the sources that turn XO inventory changes and the periodic resync into
// reconcile requests, the registration, the reconcile loggers, the optimistic-lock patch, and
// the retry timing.
package common

import (
	"context"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Patch sends the difference between before and after as a merge patch. When the taints
// change, the patch carries before's resourceVersion, so a concurrent change makes it fail
// with a conflict rather than lose data (taints are a list: a merge patch replaces it whole);
// a conflict is returned as is and the caller requeues. Labels and annotations are maps, which
// a merge patch changes key by key: such a patch needs no lock, so it does not conflict with a
// concurrent status write or another controller's label write.
func Patch(ctx context.Context, c client.Client, before, after *corev1.Node) error {
	if slices.EqualFunc(before.Spec.Taints, after.Spec.Taints, func(a, b corev1.Taint) bool {
		return a.MatchTaint(&b) && a.Value == b.Value && a.TimeAdded.Equal(b.TimeAdded)
	}) {
		return c.Patch(ctx, after, client.MergeFrom(before))
	}
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
