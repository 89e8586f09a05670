package common

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// IsReady reports whether the Node's Ready condition is True.
func IsReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// OpenNode opens a reconcile of the Node name, as the three controllers do: it reads the
// Node from the cache, read only (client.UnsafeDisableDeepCopy: every change is made on a copy;
// a copy at every look would be 2 KB of garbage per Node and controller at each wave over all
// Nodes). A Node that is gone, being deleted or not wanted has its retries and own writes
// forgotten and needs nothing more; a Node the cache shows older than the controller's own last
// write is looked at again shortly (OwnWrites). In those cases, and on a read error, n is nil
// and the reconcile returns res and err.
func OpenNode(ctx context.Context, c client.Reader, name string, wants func(*corev1.Node) bool, written *OwnWrites, retries *Retries) (n *corev1.Node, res ctrl.Result, err error) {
	var node corev1.Node
	err = c.Get(ctx, types.NamespacedName{Name: name}, &node, client.UnsafeDisableDeepCopy)
	switch {
	case apierrors.IsNotFound(err), err == nil && (!node.DeletionTimestamp.IsZero() || !wants(&node)):
		retries.Forget(name)
		written.Forget(name)
		return nil, ctrl.Result{}, nil
	case err != nil:
		return nil, ctrl.Result{}, fmt.Errorf("get node %s: %w", name, err)
	case written.Behind(&node):
		return nil, ctrl.Result{RequeueAfter: CacheCatchUp}, nil
	}
	return &node, ctrl.Result{}, nil
}
