package node

import (
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/config"
)

// computedDomains hold the keys the controller computes from XO data and owns. config defines
// them, with Kubernetes' own namespaces (config.ReservedKeyDomain), so that its validation refuses
// a tag prefix under which IsReservedKey would refuse every key.
var computedDomains = config.ComputedKeyDomains()

// keyDomain returns the prefix (DNS subdomain) of a qualified key, lower-cased; "" when it has
// none.
func keyDomain(key string) string {
	i := strings.IndexByte(key, '/')
	if i < 0 {
		return ""
	}
	return strings.ToLower(key[:i])
}

// IsReservedKey reports whether a label or taint key lies in a namespace VM tags may never
// write: kubernetes.io, k8s.io, the computed namespaces topology.k8s.xenorchestra,
// vm.k8s.xenorchestra and node.k8s.xenorchestra, or any subdomain of them (e.g.
// node-role.kubernetes.io/control-plane, foo.k8s.io/x, topology.k8s.xenorchestra/zone).
func IsReservedKey(key string) bool {
	domain := keyDomain(key)
	return domain != "" && config.ReservedKeyDomain(domain) != ""
}

// hasAllowedPrefix reports whether key starts with one of prefixes.
func hasAllowedPrefix(key string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// checkTagKey applies the key rules shared by tag labels and tag taints.
func checkTagKey(key string, prefixes []string) (RejectReason, bool) {
	switch {
	case len(validation.IsQualifiedName(key)) > 0:
		return ReasonInvalidKey, false
	case IsReservedKey(key):
		return ReasonReservedKey, false
	case !hasAllowedPrefix(key, prefixes):
		return ReasonPrefixNotAllowed, false
	}
	return "", true
}

// tagLabels adds to d the labels of VM tags "k8s.xenorchestra/label:<key>[=<value>]". A key given
// different values by several tags is refused altogether.
func tagLabels(tags []string, prefixes []string, d *DesiredState) {
	var (
		found     map[string]string
		conflicts map[string]bool
	)
	for _, tag := range tags {
		rest, ok := strings.CutPrefix(tag, TagLabelPrefix)
		if !ok {
			continue
		}
		key, value, _ := strings.Cut(rest, "=")
		if reason, ok := checkTagKey(key, prefixes); !ok {
			d.Rejected = append(d.Rejected, reject(KindLabel, key, tag, reason))
			continue
		}
		if len(validation.IsValidLabelValue(value)) > 0 {
			d.Rejected = append(d.Rejected, reject(KindLabel, key, tag, ReasonInvalidValue))
			continue
		}
		if found == nil {
			found = make(map[string]string)
		}
		if prev, ok := found[key]; ok && prev != value {
			if conflicts == nil {
				conflicts = make(map[string]bool)
			}
			if !conflicts[key] {
				d.Rejected = append(d.Rejected, reject(KindLabel, key, tag, ReasonConflictingTags))
			}
			conflicts[key] = true
			continue
		}
		found[key] = value
	}
	for k, v := range found {
		if !conflicts[k] {
			d.Labels[k] = v
		}
	}
}

// validEffect reports whether e is a taint effect a tag may ask for.
func validEffect(e corev1.TaintEffect) bool {
	return e == corev1.TaintEffectNoSchedule || e == corev1.TaintEffectPreferNoSchedule || e == corev1.TaintEffectNoExecute
}

// TaintID identifies a taint on a node by key and effect, as in AnnotationManagedTaints:
// "<key>:<Effect>".
func TaintID(key string, effect corev1.TaintEffect) string {
	return key + ":" + string(effect)
}

// tagTaints sets d.Taints from VM tags "k8s.xenorchestra/taint:<key>[=<value>]:<Effect>",
// sorted. A key and effect given different values by several tags is refused altogether.
func tagTaints(tags []string, prefixes []string, d *DesiredState) {
	var (
		found     map[string]corev1.Taint
		conflicts map[string]bool
	)
	for _, tag := range tags {
		rest, ok := strings.CutPrefix(tag, TagTaintPrefix)
		if !ok {
			continue
		}
		i := strings.LastIndexByte(rest, ':')
		if i < 0 {
			d.Rejected = append(d.Rejected, reject(KindTaint, rest, tag, ReasonMalformedTag))
			continue
		}
		effect := corev1.TaintEffect(rest[i+1:])
		key, value, _ := strings.Cut(rest[:i], "=")
		if reason, ok := checkTagKey(key, prefixes); !ok {
			d.Rejected = append(d.Rejected, reject(KindTaint, key, tag, reason))
			continue
		}
		if !validEffect(effect) {
			d.Rejected = append(d.Rejected, reject(KindTaint, key, tag, ReasonInvalidEffect))
			continue
		}
		if len(validation.IsValidLabelValue(value)) > 0 {
			d.Rejected = append(d.Rejected, reject(KindTaint, key, tag, ReasonInvalidValue))
			continue
		}
		id := TaintID(key, effect)
		if found == nil {
			found = make(map[string]corev1.Taint)
		}
		if prev, ok := found[id]; ok && prev.Value != value {
			if conflicts == nil {
				conflicts = make(map[string]bool)
			}
			if !conflicts[id] {
				d.Rejected = append(d.Rejected, reject(KindTaint, key, tag, ReasonConflictingTags))
			}
			conflicts[id] = true
			continue
		}
		found[id] = corev1.Taint{Key: key, Value: value, Effect: effect}
	}
	for id, t := range found {
		if !conflicts[id] {
			d.Taints = append(d.Taints, t)
		}
	}
	sortTaints(d.Taints)
}

// sortTaints orders taints by key, then effect, then value.
func sortTaints(ts []corev1.Taint) {
	sort.Slice(ts, func(i, j int) bool {
		a, b := ts[i], ts[j]
		if a.Key != b.Key {
			return a.Key < b.Key
		}
		if a.Effect != b.Effect {
			return a.Effect < b.Effect
		}
		return a.Value < b.Value
	})
}
