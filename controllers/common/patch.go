package common

import (
	"context"
	"encoding/json"
	"errors"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
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

// PatchAddresses replaces the Node's status.addresses, read as before's, with after's through
// the status subresource, under an optimistic lock on the addresses alone: a JSON patch that
// tests the Node's uid and its addresses as read, then sets the new list.
//
// Why not Patch's lock: the addresses are a list (a JSON merge patch replaces it whole) and
// the new list is computed from the old one (an ExternalIP kept only while the Node has it), so
// the write must fail when someone changed them since the read; but a resourceVersion lock
// also fails on every other write of the Node in between: the label patch cloud-node-label-sync
// sends for the same XO change, the kubelet's heartbeats. Those change neither the addresses
// nor anything the new list was computed from (other inputs, such as the kubelet's node IP
// annotation, are left in place by this write and their change enqueues the Node again), so
// this lock lets them through, whatever the order in which the writes land; a label patch and
// an address patch then never conflict.
//
// A failed test is answered 422 Invalid; it is returned as a Conflict, which callers requeue.
func PatchAddresses(ctx context.Context, c client.Client, before, after *corev1.Node) error {
	type op struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}
	// null tests that the Node has no addresses: the API server omits an empty list.
	var was any
	if len(before.Status.Addresses) > 0 {
		was = before.Status.Addresses
	}
	ops := []op{{"test", "/status/addresses", was}, {"add", "/status/addresses", after.Status.Addresses}}
	if before.UID != "" {
		// Another Node of the same name, deleted and created again since the read.
		ops = slices.Insert(ops, 0, op{"test", "/metadata/uid", before.UID})
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	err = c.Status().Patch(ctx, after, client.RawPatch(types.JSONPatchType, patch))
	if patchNotApplicable(err) {
		return apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, before.Name,
			errors.New("its addresses or uid changed since they were read"))
	}
	return err
}

// patchNotApplicable reports the API server's answer to a JSON patch that does not apply to
// the object as stored (a test operation failed): 422 Invalid without causes. An object that
// the patch changed but that fails validation is 422 Invalid too, with the offending fields
// as causes.
func patchNotApplicable(err error) bool {
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	return d == nil || len(d.Causes) == 0
}
