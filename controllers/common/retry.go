package common

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// Retryable reports a failed write worth retrying quietly: an optimistic-lock conflict, or a
// Node deleted meanwhile (the next Get sees it gone).
func Retryable(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsNotFound(err)
}

// The delays of Retries.
const (
	// NotYetBase is the first delay before looking again at a Node that cannot be handled yet;
	// each controller chooses the maximum.
	NotYetBase = time.Second
	// A write that lost an optimistic-lock race (the Node changed under us) is retried almost
	// at once: the cache catches up within milliseconds.
	conflictBase = 10 * time.Millisecond
	conflictMax  = 10 * time.Second
)

// Retries is a controller's per-Node retry policy, the same in the three controllers: two
// delays, each client-go's per-item exponential failure rate limiter (the delay doubles with each
// failure of the Node in a row, until Forget), and one handling of failed writes. The XO client's
// own retries (resty's, on network errors, 429 and 5xx answers) are the transport's, below this.
type Retries struct {
	notYet, conflict workqueue.TypedRateLimiter[string]
}

// NewRetries returns the policy of a controller that looks again at a Node it cannot handle yet
// after notYetBase (NotYetBase in the controllers, shorter or longer in tests), doubling up to
// notYetMax.
func NewRetries(notYetBase, notYetMax time.Duration) *Retries {
	return &Retries{
		notYet:   workqueue.NewTypedItemExponentialFailureRateLimiter[string](notYetBase, notYetMax),
		conflict: workqueue.NewTypedItemExponentialFailureRateLimiter[string](conflictBase, conflictMax),
	}
}

// NotYet records that the Node name cannot be handled yet (its VM unknown, XO failing, a
// deletion refused) and returns when to look again. An inventory change concerning the Node
// wakes it up earlier.
func (r *Retries) NotYet(name string) time.Duration { return r.notYet.When(name) }

// Forget ends the Node's failures in a row: it was handled, or is gone.
func (r *Retries) Forget(name string) {
	r.notYet.Forget(name)
	r.conflict.Forget(name)
}

// HandleWriteError returns the reconcile result of a write to the Node name that failed with
// err. A Retryable error (a conflict, or the Node deleted meanwhile) is retried quietly after a
// short delay (10 ms doubling to 10 s); any other is returned, for the workqueue's own rate
// limiter and controller-runtime's error log.
func (r *Retries) HandleWriteError(ctx context.Context, name string, err error) (ctrl.Result, error) {
	if Retryable(err) {
		log.FromContext(ctx).V(1).Info("Node changed meanwhile; retrying")
		return ctrl.Result{RequeueAfter: r.conflict.When(name)}, nil
	}
	return ctrl.Result{}, err
}
