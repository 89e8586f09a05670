package common

import (
	"maps"
	"slices"
	"unique"

	corev1 "k8s.io/api/core/v1"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
)

// readAnnotations are the only annotations the controllers read; TrimNode drops the others.
var readAnnotations = []string{
	node.AnnotationManagedLabels, node.AnnotationManagedTaints, node.AnnotationProvidedNodeIP, node.AnnotationOutOfService,
	node.AnnotationInitializedBy,
}

// TrimNode returns the manager cache's transform for Nodes (cache.Options.DefaultTransform):
// it keeps in the Node cache only what the controllers read: metadata (less managed fields,
// the labels that neither node.ReadsLabel nor ignore reads, and the annotations not in
// readAnnotations), spec, the addresses, the Ready condition and the system uuid. Capacity,
// images, volumes, node info, the other conditions and labels such as kubernetes.io/hostname
// (most of a Node's size) are dropped, and the strings many Nodes share (label keys and values,
// the managed-labels list, condition reasons) are interned, so that memory stays small with
// thousands of Nodes.
//
// Patches are computed between two copies of the cached object (client.MergeFrom, a JSON
// merge patch that changes maps key by key and replaces no list trimNode shortens), so a field
// or label absent from both is never written: trimming cannot erase anything on the API server.
func TrimNode(ignore node.Ignorer) func(any) (any, error) {
	keepLabel := func(k string) bool { return node.ReadsLabel(k) || ignore.ReadsLabel(k) }
	return func(obj any) (any, error) {
		n, ok := obj.(*corev1.Node)
		if !ok {
			return obj, nil
		}
		n.ManagedFields = nil
		n.Labels = internMap(n.Labels, keepLabel)
		n.Annotations = internMap(n.Annotations, func(k string) bool { return slices.Contains(readAnnotations, k) })
		for i := range n.Spec.Taints {
			t := &n.Spec.Taints[i]
			t.Key, t.Value, t.Effect = intern(t.Key), intern(t.Value), corev1.TaintEffect(intern(string(t.Effect)))
		}
		var ready []corev1.NodeCondition
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				c.Type, c.Status, c.Reason, c.Message = corev1.NodeReady, corev1.ConditionStatus(intern(string(c.Status))), intern(c.Reason), ""
				ready = append(ready, c)
			}
		}
		addresses := n.Status.Addresses
		for i := range addresses {
			addresses[i].Type = corev1.NodeAddressType(intern(string(addresses[i].Type)))
		}
		n.Status = corev1.NodeStatus{
			Addresses:  addresses,
			Conditions: ready,
			NodeInfo:   corev1.NodeSystemInfo{SystemUUID: n.Status.NodeInfo.SystemUUID},
		}
		return n, nil
	}
}

// internMap returns the entries of m whose key keep accepts, keys and values interned; nil
// when none is kept. m, the freshly decoded object's, loses the others.
func internMap(m map[string]string, keep func(string) bool) map[string]string {
	maps.DeleteFunc(m, func(k, _ string) bool { return !keep(k) })
	if len(m) == 0 {
		return nil
	}
	// Sized for what it keeps: a map sized for all of the decoded one can take twice the memory.
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[intern(k)] = intern(v)
	}
	return out
}

// intern returns the canonical copy of s, shared by every Node that has the same string; it is
// freed once no Node uses it.
func intern(s string) string { return unique.Make(s).Value() }
