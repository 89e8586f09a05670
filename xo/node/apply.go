package node

import (
	corev1 "k8s.io/api/core/v1"
)

// Apply brings a Node's labels, tag-derived taints and ownership annotations to d, in place,
// with the ownership rules of LabelChanges and TaintChanges. It returns whether the Node
// changed and the label keys and taint ids it left alone because someone else set them.
// The webhook applies it to the Node being created, the controllers to a copy they patch.
func Apply(n *corev1.Node, d DesiredState) (changed bool, conflicts []string) {
	set := 0
	remove, owned, labelConflicts := labelChanges(n.Labels, ManagedKeys(n.Annotations), d.Labels, func(k, v string) {
		if n.Labels == nil {
			n.Labels = make(map[string]string, len(d.Labels))
		}
		n.Labels[k] = v
		set++
	})
	for _, k := range remove {
		delete(n.Labels, k)
	}
	taints, ownedTaints, taintConflicts, taintsChanged := TaintChanges(n.Spec.Taints, ManagedTaints(n.Annotations), d.Taints)
	if taintsChanged {
		n.Spec.Taints = taints
	}
	changed = set > 0 || len(remove) > 0 || taintsChanged
	changed = setAnnotation(n, AnnotationManagedLabels, FormatManagedKeys(owned)) || changed
	changed = setAnnotation(n, AnnotationManagedTaints, FormatManagedKeys(ownedTaints)) || changed
	return changed, append(labelConflicts, taintConflicts...)
}

// setAnnotation sets (or, for an empty value, removes) an annotation and reports a change.
func setAnnotation(n *corev1.Node, key, value string) bool {
	cur, has := n.Annotations[key]
	if value == "" {
		if has {
			delete(n.Annotations, key)
			return true
		}
		return false
	}
	if has && cur == value {
		return false
	}
	if n.Annotations == nil {
		n.Annotations = make(map[string]string, 2)
	}
	n.Annotations[key] = value
	return true
}
