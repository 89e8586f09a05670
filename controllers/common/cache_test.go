package common

import (
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
)

func TestTrimNodeKeepsWhatControllersRead(t *testing.T) {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{
			"a": "b", node.LabelZone: "h", "failure-domain.beta.kubernetes.io/zone": "h", node.LabelPoolID: "p",
			corev1.LabelHostname: "n", corev1.LabelArchStable: "amd64", "node-role.kubernetes.io/worker": "", corev1.LabelOSStable: "linux",
		}, Annotations: map[string]string{"c": "d", node.AnnotationManagedLabels: "a"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
		Spec: corev1.NodeSpec{ProviderID: "xenorchestra://p/v", Taints: []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{
			Capacity:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeMemoryPressure}, {Type: corev1.NodeReady, Status: corev1.ConditionTrue, Message: "long text"}},
			NodeInfo:   corev1.NodeSystemInfo{SystemUUID: "u", KernelVersion: "6.12"},
			Images:     []corev1.ContainerImage{{Names: []string{"x"}}},
		},
	}
	// An ignore selector naming a reserved key keeps that key.
	ignore, err := node.NewIgnorer(corev1.LabelOSStable + "=windows")
	if err != nil {
		t.Fatal(err)
	}
	out, err := TrimNode(ignore)(n)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*corev1.Node)
	wantLabels := map[string]string{"a": "b", node.LabelZone: "h", "failure-domain.beta.kubernetes.io/zone": "h", node.LabelPoolID: "p", corev1.LabelOSStable: "linux"}
	if !maps.Equal(got.Labels, wantLabels) {
		t.Errorf("labels %v, want %v", got.Labels, wantLabels)
	}
	if got.Labels["a"] != "b" || got.Annotations[node.AnnotationManagedLabels] != "a" || got.Spec.ProviderID == "" || len(got.Spec.Taints) != 1 ||
		len(got.Status.Addresses) != 1 || got.Status.NodeInfo.SystemUUID != "u" ||
		len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Status != corev1.ConditionTrue {
		t.Fatalf("trimmed what the controllers read: %+v", got)
	}
	if got.ManagedFields != nil || len(got.Annotations) != 1 || got.Status.Capacity != nil || got.Status.Images != nil || got.Status.NodeInfo.KernelVersion != "" {
		t.Fatalf("kept what no controller reads: %+v", got.Status)
	}
}
