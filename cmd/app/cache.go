package app

import (
	corev1 "k8s.io/api/core/v1"
)

// trimNode keeps in the Node cache only what the controllers read: metadata (less managed
// fields), spec, the addresses, the Ready condition and the system uuid. Capacity, images,
// volumes, node info and the other conditions (most of a Node's size) are dropped, so that
// memory stays small with thousands of Nodes.
//
// Patches are computed between two copies of the cached object (client.MergeFrom), so a field
// absent from both is never written: trimming cannot erase anything on the API server.
func trimNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	n.ManagedFields = nil
	var ready []corev1.NodeCondition
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			c.Message = ""
			ready = append(ready, c)
		}
	}
	n.Status = corev1.NodeStatus{
		Addresses:  n.Status.Addresses,
		Conditions: ready,
		NodeInfo:   corev1.NodeSystemInfo{SystemUUID: n.Status.NodeInfo.SystemUUID},
	}
	return n, nil
}
