package e2e_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/xosim"
)

// TestTrimmedCacheErasesNothing runs the binary, whose Node cache keeps only what the
// controllers read (cmd/app trimNode), and checks that their patches at initialization and
// after a resize and a tag taint leave every field the cache drops as it is on the API server:
// other annotations, conditions, capacity, images, node info.
func TestTrimmedCacheErasesNothing(t *testing.T) {
	env := testenv.StartTest(t, testenv.Options{})
	c := env.Client
	ctx := context.Background()
	token := newToken(t)
	x := newXO(t, token, false)
	vm := x.addVM(t, x.poolA, x.hostA1, "trimmed", "10.0.0.5")
	cfg := writeConfig(t, t.TempDir(), "config.yaml", fmt.Sprintf("url: %s\ntoken: %s\ninventory: {settleTime: 1s}\n", x.URL, token))
	p := startCCM(t, "trimmed", ccmArgs{kubeconfig: writeKubeconfig(t, env), config: cfg})
	p.waitReady(t, 30*time.Second)

	n := testenv.KubeletNode("trimmed", testenv.WithSystemUUID(x.systemUUID(t, vm)), testenv.WithNodeIP("10.0.0.5"),
		testenv.WithAnnotations(map[string]string{"example.com/keep": "yes"}))
	n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse,
		Reason: "KubeletHasSufficientMemory", Message: "kubelet has sufficient memory available"})
	n.Status.Images = []corev1.ContainerImage{{Names: []string{"registry.k8s.io/pause:3.10"}, SizeBytes: 320000}}
	if err := c.Create(ctx, n); err != nil {
		t.Fatal(err)
	}
	// A merge patch, not an update: the controller may already have initialized the Node, and
	// an update carrying the CREATE's resourceVersion would then meet a 409.
	orig := n.DeepCopy()
	n.Status.Conditions[0].Message = "kubelet is posting ready status"
	if err := c.Status().Patch(ctx, n, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	get := func() *corev1.Node {
		var got corev1.Node
		if err := c.Get(ctx, client.ObjectKeyFromObject(n), &got); err != nil {
			t.Fatal(err)
		}
		return &got
	}
	// What the kubelet wrote: the Node as created (the controller's writes come after the
	// CREATE's answer) with the status patch above.
	before := orig.DeepCopy()
	before.Status.Conditions[0].Message = n.Status.Conditions[0].Message

	testenv.WaitFor(t, 30*time.Second, "the Node initialized", func() error { return initialized(c, n.Name) })
	if err := x.sim.Resize(vm, 4, 2*xosim.GiB); err != nil {
		t.Fatal(err)
	}
	if err := x.sim.AddTag(vm, node.TagTaintPrefix+"tag.k8s.xenorchestra/dedicated=ci:NoSchedule"); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 30*time.Second, "the resize and the tag taint on the Node", func() error {
		got := get()
		if got.Labels[node.LabelInstanceType] != "4vCPU-2GB" || !node.HasTaint(got.Spec.Taints, "tag.k8s.xenorchestra/dedicated", corev1.TaintEffectNoSchedule) {
			return fmt.Errorf("labels %v taints %v", got.Labels, got.Spec.Taints)
		}
		return nil
	})

	after := get()
	for k, v := range before.Labels {
		if node.ReadsLabel(k) {
			continue
		}
		if after.Labels[k] != v {
			t.Errorf("label %s the cache drops changed: %q, was %q", k, after.Labels[k], v)
		}
	}
	if after.Annotations["example.com/keep"] != "yes" || after.Annotations["volumes.kubernetes.io/controller-managed-attach-detach"] != "true" {
		t.Errorf("annotations the cache drops were changed: %v", after.Annotations)
	}
	if !equality.Semantic.DeepEqual(after.Status.Conditions, before.Status.Conditions) {
		t.Errorf("conditions changed:\n got %+v\nwant %+v", after.Status.Conditions, before.Status.Conditions)
	}
	if !equality.Semantic.DeepEqual(after.Status.Capacity, before.Status.Capacity) || !equality.Semantic.DeepEqual(after.Status.Allocatable, before.Status.Allocatable) ||
		!equality.Semantic.DeepEqual(after.Status.Images, before.Status.Images) || after.Status.NodeInfo != before.Status.NodeInfo {
		t.Errorf("status fields the cache drops changed:\n got %+v\nwant %+v", after.Status, before.Status)
	}
}
