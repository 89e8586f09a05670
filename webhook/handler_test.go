package webhook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/webhook"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
)

// TestHandlerMatchesGenericDefaulter checks that the webhook's own patch gives the same Node
// as controller-runtime's generic defaulter (decode, Default, encode, diff) for the same
// defaulter, across the shapes a Node can arrive in.
func TestHandlerMatchesGenericDefaulter(t *testing.T) {
	inv, ids := benchInventory(t, 64)
	d := &webhook.NodeDefaulter{Inventory: inv, Recorder: discardRecorder{},
		Labels: node.LabelOptions{TagLabelPrefixes: []string{"tag.k8s.xenorchestra/"}, TagTaintPrefixes: []string{"tag.k8s.xenorchestra/"}}}
	ours := d.Webhook()
	generic := admission.WithDefaulter(scheme.Scheme, admission.Defaulter[*corev1.Node](d))

	cases := map[string]*corev1.Node{
		"kubelet":             testenv.KubeletNode("a", testenv.WithSystemUUID(ids[1]), testenv.WithNodeIP("192.0.2.1")),
		"no labels":           testenv.KubeletNode("b", testenv.WithSystemUUID(ids[2])),
		"preset provider id":  testenv.KubeletNode("c", testenv.WithProviderID("xenorchestra:///"+ids[3])),
		"label with slash ~":  testenv.KubeletNode("d", testenv.WithSystemUUID(ids[4]), testenv.WithLabels(map[string]string{"a~b/c": "x"})),
		"name match":          testenv.KubeletNode("vm-1-2"),
		"unknown":             testenv.KubeletNode("nobody"),
		"foreign provider id": testenv.KubeletNode("e", testenv.WithProviderID("aws:///i-1")),
	}
	cases["no labels"].Labels = nil
	cases["no labels"].Annotations = nil
	bare := testenv.KubeletNode("f", testenv.WithSystemUUID(ids[5]))
	bare.Spec = corev1.NodeSpec{}
	cases["no spec taints"] = bare

	for name, n := range cases {
		t.Run(name, func(t *testing.T) {
			req := admissionRequest(t, n.Name, n.Status.NodeInfo.SystemUUID)
			raw, err := json.Marshal(n)
			if err != nil {
				t.Fatal(err)
			}
			req.Object.Raw = raw
			a := apply(t, raw, ours.Handle(context.Background(), req))
			b := apply(t, raw, generic.Handle(context.Background(), req))
			if resolvable := name != "unknown" && name != "foreign provider id"; resolvable != (a.Labels[node.LabelRegion] != "") {
				t.Fatalf("region label %q: the case must (not) be resolved", a.Labels[node.LabelRegion])
			}
			if !equality.Semantic.DeepEqual(a, b) {
				t.Fatalf("patched Nodes differ:\nours    %+v\ngeneric %+v", a, b)
			}
		})
	}
}

func apply(t *testing.T, raw []byte, resp admission.Response) *corev1.Node {
	t.Helper()
	if !resp.Allowed {
		t.Fatalf("denied: %+v", resp.Result)
	}
	out := raw
	if len(resp.Patch) > 0 {
		patch, err := jsonpatch.DecodePatch(resp.Patch)
		if err != nil {
			t.Fatal(err)
		}
		if out, err = patch.Apply(raw); err != nil {
			t.Fatal(fmt.Errorf("apply %s: %w", resp.Patch, err))
		}
	}
	var n corev1.Node
	if err := json.Unmarshal(out, &n); err != nil {
		t.Fatal(err)
	}
	return &n
}
