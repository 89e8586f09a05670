package app

import (
	corev1 "k8s.io/api/core/v1"
)

// trimNode drops from cached Nodes what no controller reads: managed fields and the image,
// volume lists a kubelet reports (often most of a Node's size). It keeps memory flat with
// thousands of Nodes. Patches are computed between two copies of the cached object, so fields
// absent from both are never written.
func trimNode(obj any) (any, error) {
	if n, ok := obj.(*corev1.Node); ok {
		n.ManagedFields = nil
		n.Status.Images = nil
		n.Status.VolumesInUse = nil
		n.Status.VolumesAttached = nil
	}
	return obj, nil
}
