package node

import (
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestApply(t *testing.T) {
	uninit := taint(TaintUninitialized, "true", corev1.TaintEffectNoSchedule)
	gpuTaint := taint("example.com/dedicated", "gpu", corev1.TaintEffectNoSchedule)
	desired := DesiredState{
		Labels: map[string]string{LabelZone: hostA, "example.com/gpu": "true"},
		Taints: []corev1.Taint{gpuTaint},
	}

	// A Node as a kubelet creates it: the webhook describes it.
	n := testNode("n1")
	n.Labels = map[string]string{"kubernetes.io/hostname": "n1"}
	n.Spec.Taints = []corev1.Taint{uninit}
	changed, conflicts := Apply(n, desired)
	if !changed || len(conflicts) != 0 {
		t.Fatalf("first Apply = %v, %q", changed, conflicts)
	}
	wantLabels := map[string]string{"kubernetes.io/hostname": "n1", LabelZone: hostA, "example.com/gpu": "true"}
	if !maps.Equal(n.Labels, wantLabels) {
		t.Fatalf("labels = %v, want %v", n.Labels, wantLabels)
	}
	if !slices.Equal(n.Spec.Taints, []corev1.Taint{uninit, gpuTaint}) {
		t.Fatalf("taints = %v", n.Spec.Taints)
	}
	if got := n.Annotations[AnnotationManagedLabels]; got != "example.com/gpu,"+LabelZone {
		t.Fatalf("managed labels = %q", got)
	}
	if got := n.Annotations[AnnotationManagedTaints]; got != "example.com/dedicated:NoSchedule" {
		t.Fatalf("managed taints = %q", got)
	}

	// Nothing changed: nothing to patch.
	before := n.DeepCopy()
	if changed, conflicts := Apply(n, desired); changed || len(conflicts) != 0 {
		t.Fatalf("second Apply = %v, %q", changed, conflicts)
	}
	if !maps.Equal(before.Labels, n.Labels) || !maps.Equal(before.Annotations, n.Annotations) || !slices.Equal(before.Spec.Taints, n.Spec.Taints) {
		t.Fatal("second Apply modified the node")
	}

	// The tags are gone: owned labels and taints go, the kubelet's stay, the annotations go.
	if changed, _ := Apply(n, DesiredState{Labels: map[string]string{}}); !changed {
		t.Fatal("Apply of an empty set reported no change")
	}
	if !maps.Equal(n.Labels, map[string]string{"kubernetes.io/hostname": "n1"}) {
		t.Fatalf("labels = %v", n.Labels)
	}
	if !slices.Equal(n.Spec.Taints, []corev1.Taint{uninit}) {
		t.Fatalf("taints = %v", n.Spec.Taints)
	}
	if _, ok := n.Annotations[AnnotationManagedLabels]; ok {
		t.Fatalf("managed-labels annotation left: %v", n.Annotations)
	}
	if _, ok := n.Annotations[AnnotationManagedTaints]; ok {
		t.Fatalf("managed-taints annotation left: %v", n.Annotations)
	}

	// Someone else set the tag label and taint with other values: left alone, reported.
	other := testNode("n2")
	other.Labels = map[string]string{"example.com/gpu": "false"}
	other.Spec.Taints = []corev1.Taint{taint("example.com/dedicated", "db", corev1.TaintEffectNoSchedule)}
	changed, conflicts = Apply(other, desired)
	if !changed || !slices.Equal(conflicts, []string{"example.com/gpu", "example.com/dedicated:NoSchedule"}) {
		t.Fatalf("Apply = %v, %q", changed, conflicts)
	}
	if other.Labels["example.com/gpu"] != "false" || other.Spec.Taints[0].Value != "db" || other.Labels[LabelZone] != hostA {
		t.Fatalf("node = %v %v", other.Labels, other.Spec.Taints)
	}
	if got := other.Annotations[AnnotationManagedLabels]; got != LabelZone {
		t.Fatalf("managed labels = %q", got)
	}
}
