package node

import (
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/config"
)

// ManagedKeys returns the label keys the controllers own on a Node, read from
// AnnotationManagedLabels: sorted, de-duplicated, and without entries that are not valid label
// keys (a hand-edited annotation cannot make the controller touch an arbitrary key).
func ManagedKeys(annotations map[string]string) []string {
	return parseKeyList(annotations[AnnotationManagedLabels], func(k string) bool {
		return len(validation.IsQualifiedName(k)) == 0
	})
}

// ManagedTaints returns the taints the controllers own on a Node, as TaintID strings
// (<key>:<Effect>), read from AnnotationManagedTaints: sorted, de-duplicated, invalid entries
// dropped.
func ManagedTaints(annotations map[string]string) []string {
	return parseKeyList(annotations[AnnotationManagedTaints], func(id string) bool {
		i := strings.LastIndexByte(id, ':')
		return i > 0 && validEffect(corev1.TaintEffect(id[i+1:])) && len(validation.IsQualifiedName(id[:i])) == 0
	})
}

func parseKeyList(s string, valid func(string) bool) []string {
	var out []string
	forEachCSV(s, func(k string) {
		if valid(k) {
			out = append(out, k)
		}
	})
	sort.Strings(out)
	return slices.Compact(out)
}

// FormatManagedKeys returns the annotation value for a set of owned keys (or TaintIDs): sorted,
// de-duplicated, comma-separated. It returns "" for none.
func FormatManagedKeys(keys []string) string {
	k := slices.Clone(keys)
	sort.Strings(k)
	k = slices.Compact(k)
	if len(k) > 0 && k[0] == "" {
		k = k[1:]
	}
	return strings.Join(k, ",")
}

// isAuthorityLabel reports whether the controller is the authority for a label key: the
// standard topology and instance-type keys and the keys of the computed namespaces
// (topology., vm. and node.k8s.xenorchestra). It overwrites
// them whoever set them, and takes ownership.
func isAuthorityLabel(key string) bool {
	switch key {
	case LabelInstanceType, LabelRegion, LabelZone:
		return true
	}
	if _, ok := betaLabels[key]; ok {
		return true
	}
	domain := keyDomain(key)
	return domain != "" && slices.Contains(computedDomains, config.ReservedKeyDomain(domain))
}

// removable reports whether the controller may ever remove a key it owns: an authority key, or
// one outside the reserved namespaces. A hand-edited ownership annotation naming, say,
// kubernetes.io/hostname therefore cannot make it remove that label.
func removable(key string) bool {
	return isAuthorityLabel(key) || !IsReservedKey(key)
}

// ReadsLabel reports whether a Node's label key can play a part in what the controllers
// decide: the keys they may write or remove (removable), which includes every key outside the
// reserved namespaces, as a VM tag may produce it. The other keys (kubernetes.io/hostname,
// kubernetes.io/arch, node-role.kubernetes.io/...) never do, except through an ignore selector
// (Ignorer.ReadsLabel).
func ReadsLabel(key string) bool { return removable(key) }

// LabelChanges computes the label patch that brings a Node's labels to the desired set while
// respecting ownership:
//
//   - a desired key that is absent is set and owned;
//   - a desired key with another value is overwritten and owned when the controller owns it or
//     is the authority for it (the standard topology and instance-type keys and the
//     *.k8s.xenorchestra/* keys); otherwise (a tag-derived key someone else set) it is left
//     alone and listed in conflicts;
//   - a desired key with the same value stays; it becomes owned when it was, or when it is an
//     authority key;
//   - an owned key that is no longer desired is removed (only if present, and never a key in a
//     reserved namespace other than the authority keys);
//   - a key neither owned nor desired is never touched.
//
// set is nil when nothing is to be set; remove, newOwned (the keys owned after the patch) and
// conflicts are sorted.
func LabelChanges(current map[string]string, owned []string, desired map[string]string) (set map[string]string, remove []string, newOwned []string, conflicts []string) {
	remove, newOwned, conflicts = labelChanges(current, owned, desired, func(k, v string) {
		if set == nil {
			set = make(map[string]string, len(desired))
		}
		set[k] = v
	})
	return set, remove, newOwned, conflicts
}

// labelChanges is LabelChanges calling set for each label to set, in no particular order.
// set may write into current: it is only called for desired keys, whose entries in current are
// read before their own set.
func labelChanges(current map[string]string, owned []string, desired map[string]string, set func(k, v string)) (remove []string, newOwned []string, conflicts []string) {
	if !slices.IsSorted(owned) {
		owned = slices.Sorted(slices.Values(owned))
	}
	isOwned := func(k string) bool {
		_, ok := slices.BinarySearch(owned, k)
		return ok
	}
	newOwned = make([]string, 0, len(desired))
	for k, v := range desired {
		cur, has := current[k]
		mayOverwrite := isOwned(k) || isAuthorityLabel(k)
		switch {
		case !has:
		case cur == v:
			if mayOverwrite {
				newOwned = append(newOwned, k)
			}
			continue
		case !mayOverwrite:
			conflicts = append(conflicts, k)
			continue
		}
		set(k, v)
		newOwned = append(newOwned, k)
	}
	for _, k := range owned {
		if _, ok := desired[k]; ok {
			continue
		}
		if _, has := current[k]; has {
			if !removable(k) {
				continue
			}
			remove = append(remove, k)
		}
	}
	sort.Strings(remove)
	remove = slices.Compact(remove)
	sort.Strings(newOwned)
	sort.Strings(conflicts)
	return remove, newOwned, conflicts
}

// TaintChanges computes the taint list that brings a Node's taints to the desired (tag-derived)
// set while respecting ownership, matching taints by key and effect (see TaintID), with the
// same rules as LabelChanges except that no taint key is an authority key: a taint someone else
// put with another value is left alone and listed in conflicts. owned and newOwned are TaintIDs.
//
// taints is the complete new list (a fresh slice: current is not modified), in the order of
// current with new taints appended in sorted order; changed reports whether it differs from
// current.
func TaintChanges(current []corev1.Taint, owned []string, desired []corev1.Taint) (taints []corev1.Taint, newOwned []string, conflicts []string, changed bool) {
	isOwned := make(map[string]bool, len(owned))
	for _, id := range owned {
		isOwned[id] = true
	}
	want := make(map[string]corev1.Taint, len(desired))
	for _, t := range desired {
		want[TaintID(t.Key, t.Effect)] = t
	}

	taints = make([]corev1.Taint, 0, len(current)+len(desired))
	for _, t := range current {
		id := TaintID(t.Key, t.Effect)
		_, isWanted := want[id]
		if isOwned[id] && !isWanted && !IsReservedKey(t.Key) {
			changed = true
			continue
		}
		taints = append(taints, t)
	}

	add := slices.Clone(desired)
	sortTaints(add)
	for _, d := range add {
		id := TaintID(d.Key, d.Effect)
		i := slices.IndexFunc(taints, func(t corev1.Taint) bool { return t.Key == d.Key && t.Effect == d.Effect })
		switch {
		case i < 0:
			taints = append(taints, corev1.Taint{Key: d.Key, Value: d.Value, Effect: d.Effect})
			changed = true
		case taints[i].Value == d.Value:
			if !isOwned[id] {
				continue
			}
		case !isOwned[id]:
			conflicts = append(conflicts, id)
			continue
		default:
			taints[i].Value = d.Value
			changed = true
		}
		newOwned = append(newOwned, id)
	}
	sort.Strings(newOwned)
	newOwned = slices.Compact(newOwned)
	sort.Strings(conflicts)
	return taints, newOwned, slices.Compact(conflicts), changed
}

// HasTaint reports whether taints holds a taint with this key and effect (any effect when
// effect is "").
func HasTaint(taints []corev1.Taint, key string, effect corev1.TaintEffect) bool {
	return slices.IndexFunc(taints, func(t corev1.Taint) bool {
		return t.Key == key && (effect == "" || t.Effect == effect)
	}) >= 0
}

// WithTaint returns a copy of taints holding t (matched by key and effect; its value updated if
// it differs), and whether that changed anything. TimeAdded is kept from an existing taint.
func WithTaint(taints []corev1.Taint, t corev1.Taint) ([]corev1.Taint, bool) {
	out := slices.Clone(taints)
	for i := range out {
		if out[i].Key == t.Key && out[i].Effect == t.Effect {
			if out[i].Value == t.Value {
				return out, false
			}
			out[i].Value = t.Value
			return out, true
		}
	}
	return append(out, t), true
}

// WithoutTaint returns a copy of taints without the taints of this key and effect (any effect
// when effect is ""), and whether any was removed.
func WithoutTaint(taints []corev1.Taint, key string, effect corev1.TaintEffect) ([]corev1.Taint, bool) {
	out := make([]corev1.Taint, 0, len(taints))
	for _, t := range taints {
		if t.Key == key && (effect == "" || t.Effect == effect) {
			continue
		}
		out = append(out, t)
	}
	return out, len(out) != len(taints)
}
