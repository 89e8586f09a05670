package testenv

import (
	"context"
	"fmt"
	"maps"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Labels the chart puts on a release's objects (selector: the instance and name labels).
const (
	LabelPartOf   = "app.kubernetes.io/part-of"
	LabelInstance = "app.kubernetes.io/instance"
	LabelName     = "app.kubernetes.io/name"
	chartName     = "xenorchestra-cloud-controller-manager"
)

// ReleaseLabels returns the labels of the chart's objects for a release.
func ReleaseLabels(release string) map[string]string {
	return map[string]string{LabelPartOf: chartName, LabelInstance: release, LabelName: chartName}
}

// ChartDeployment returns the Deployment the chart would install for release in ns, as far as
// check and explain read it: its labels and selector, two replicas, the manager container with
// args, its metrics port, and each Secret of secrets (name → mount path) mounted read-only.
func ChartDeployment(ns, release string, args []string, secrets map[string]string) *appsv1.Deployment {
	selector := ReleaseLabels(release)
	delete(selector, LabelPartOf)
	c := corev1.Container{
		Name: "manager", Image: "ghcr.io/xenorchestra-k8s/xenorchestra-cloud-controller-manager:test", Args: args,
		Ports: []corev1.ContainerPort{{Name: "webhook", ContainerPort: 9443}, {Name: "metrics", ContainerPort: 8080}},
	}
	var volumes []corev1.Volume
	for i, name := range slices.Sorted(maps.Keys(secrets)) {
		v := fmt.Sprintf("secret-%d", i)
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: v, MountPath: secrets[name], ReadOnly: true})
		volumes = append(volumes, corev1.Volume{Name: v, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: name}}})
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: release, Namespace: ns, Labels: ReleaseLabels(release)},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: selector},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{c}, Volumes: volumes},
			},
		},
	}
}

// SetDeploymentAvailable writes the status the Deployment controller would: every replica
// ready and the Available condition True, or none ready and Available False.
func SetDeploymentAvailable(ctx context.Context, c client.Client, d *appsv1.Deployment, available bool) error {
	status, reason, ready := corev1.ConditionFalse, "MinimumReplicasUnavailable", int32(0)
	if available {
		status, reason, ready = corev1.ConditionTrue, "MinimumReplicasAvailable", *d.Spec.Replicas
	}
	d.Status = appsv1.DeploymentStatus{Replicas: *d.Spec.Replicas, UpdatedReplicas: *d.Spec.Replicas, ReadyReplicas: ready, AvailableReplicas: ready,
		Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: status, Reason: reason,
			LastUpdateTime: metav1.Now(), LastTransitionTime: metav1.Now()}}}
	return c.Status().Update(ctx, d)
}

// RunningPod returns a Pod of the Deployment's template named name; CreateRunningPod creates
// it with phase Running, as the kubelet would report it.
func RunningPod(d *appsv1.Deployment, name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: d.Namespace, Labels: maps.Clone(d.Spec.Template.Labels)},
		Spec: *d.Spec.Template.Spec.DeepCopy()}
}

// CreateRunningPod creates p and sets its phase to Running.
func CreateRunningPod(ctx context.Context, c client.Client, p *corev1.Pod) error {
	if err := c.Create(ctx, p); err != nil {
		return err
	}
	p.Status.Phase = corev1.PodRunning
	return c.Status().Update(ctx, p)
}
