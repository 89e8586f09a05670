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

// The controllers' two retry policies, per Node. Each is client-go's per-item exponential
// failure rate limiter: the delay doubles with each failure of the Node in a row; Forget the
// Node once it succeeds or is gone.
const (
	// NotYetBase is the first delay before looking again at a Node that cannot be handled yet
	// (its VM unknown, XO failing, a deletion refused); each controller chooses the maximum. An
	// inventory change concerning the Node wakes it up earlier.
	NotYetBase = time.Second
	// A write that lost an optimistic-lock race (the Node changed under us) is retried almost
	// at once: the cache catches up within milliseconds.
	conflictBase = 10 * time.Millisecond
	conflictMax  = 10 * time.Second
)

// NewNotYetBackoff returns the delays for Nodes that cannot be handled yet: NotYetBase,
// doubling up to max.
func NewNotYetBackoff(max time.Duration) workqueue.TypedRateLimiter[string] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[string](NotYetBase, max)
}

// NewConflictBackoff returns the delays after optimistic-lock conflicts: 10 ms doubling to 10 s.
func NewConflictBackoff() workqueue.TypedRateLimiter[string] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[string](conflictBase, conflictMax)
}
