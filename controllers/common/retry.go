package common

import (
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/workqueue"
)

// Retryable reports a failed write worth retrying quietly: an optimistic-lock conflict, or a
// Node deleted meanwhile (the next Get sees it gone).
func Retryable(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsNotFound(err)
}

// NewBackoff returns the per-Node retry delays of a controller: base, doubling on each
// consecutive failure up to max; Forget a Node once it succeeds.
func NewBackoff(base, max time.Duration) workqueue.TypedRateLimiter[string] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[string](base, max)
}
