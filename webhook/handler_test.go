package webhook_test

import (
	"context"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/nodeevents"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/webhook"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
)

// request is the admission request of a CREATE of the Node raw.
func request(raw []byte) admission.Request {
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID:       "0b4b0a8e-9a9c-4b23-9b41-5c1e1b2d3c4e",
		Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Node"},
		Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "nodes"},
		Operation: admissionv1.Create,
		Object:    runtime.RawExtension{Raw: raw},
	}}
}

// kubeletNode returns the Node a kubelet registers, as the API server sends it to webhooks
// (testdata/kubelet-node.json), with fields no Go type knows added at every level, and its
// systemUUID set to vm.
func kubeletNode(t *testing.T, vm string) map[string]any {
	t.Helper()
	b, err := os.ReadFile("testdata/kubelet-node.json")
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := json.Unmarshal(b, &obj); err != nil {
		t.Fatal(err)
	}
	obj["futureTopLevel"] = "kept"
	obj["metadata"].(map[string]any)["futureMeta"] = map[string]any{"a": []any{1.0, "b"}}
	spec := obj["spec"].(map[string]any)
	spec["futureSpec"] = true
	spec["taints"].([]any)[0].(map[string]any)["futureTaintField"] = "kept"
	status := obj["status"].(map[string]any)
	status["futureStatus"] = map[string]any{"x": "y"}
	status["nodeInfo"].(map[string]any)["systemUUID"] = vm
	return obj
}

// TestWebhookKeepsAdmittedObject checks that the patch changes only what Default sets:
// fields the Go type does not know, and zero values it omits (creationTimestamp: null,
// kubeProxyVersion: ""), stay as the API server sent them. With Initialize, the Node (its VM
// has an address) is born complete: the uninitialized taint, and the unknown field it carried,
// go; the kubelet's other taint stays as sent.
func TestWebhookKeepsAdmittedObject(t *testing.T) {
	e, ids := benchEstate(t, 16)
	for _, initialize := range []bool{false, true} {
		d := &webhook.NodeDefaulter{Estate: e, Labels: tagLabels, Events: nodeevents.New(discardRecorder{}, "webhook", nil), Initialize: initialize}
		sent := kubeletNode(t, ids[3])
		raw, err := json.Marshal(sent)
		if err != nil {
			t.Fatal(err)
		}
		resp := d.Webhook().Handle(context.Background(), request(raw))
		if !resp.Allowed || len(resp.Patch) == 0 {
			t.Fatalf("initialize %v: not mutated: %+v", initialize, resp.AdmissionResponse)
		}
		patch, err := jsonpatch.DecodePatch(resp.Patch)
		if err != nil {
			t.Fatal(err)
		}
		out, err := patch.Apply(raw)
		if err != nil {
			t.Fatalf("apply %s: %v", resp.Patch, err)
		}
		var got map[string]any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatal(err)
		}
		if pid, _ := got["spec"].(map[string]any)["providerID"].(string); !strings.HasSuffix(pid, "/"+ids[3]) {
			t.Fatalf("providerID %q; patch %s", pid, resp.Patch)
		}
		if region := got["metadata"].(map[string]any)["labels"].(map[string]any)[node.LabelRegion]; region == nil {
			t.Fatalf("no region label; patch %s", resp.Patch)
		}
		// Everything but what Default writes is as sent: the kubelet's taints first, the tag
		// taints after them.
		kubelet := 2
		if initialize {
			st := sent["spec"].(map[string]any)
			st["taints"] = st["taints"].([]any)[1:] // without the uninitialized taint
			kubelet = 1
		}
		for _, o := range []map[string]any{sent, got} {
			delete(o["metadata"].(map[string]any), "labels")
			delete(o["metadata"].(map[string]any), "annotations")
			delete(o["spec"].(map[string]any), "providerID")
			delete(o["status"].(map[string]any), "addresses")
			taints := o["spec"].(map[string]any)["taints"].([]any)
			o["spec"].(map[string]any)["taints"] = taints[:kubelet]
		}
		if !reflect.DeepEqual(normalize(t, sent), got) {
			t.Fatalf("initialize %v: the patch changed more than Default sets:\npatch %s\nsent %v\ngot  %v", initialize, resp.Patch, sent, got)
		}
	}
}

// normalize returns obj as encoding/json decodes it (numbers as float64).
func normalize(t *testing.T, obj map[string]any) map[string]any {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestWebhookNeverDenies checks that an object the defaulter cannot decode is admitted
// unchanged, with a warning.
func TestWebhookNeverDenies(t *testing.T) {
	e, _ := benchEstate(t, 4)
	d := &webhook.NodeDefaulter{Estate: e, Events: nodeevents.New(discardRecorder{}, "webhook", nil)}
	for name, raw := range map[string]string{
		"spec not an object": `{"apiVersion":"v1","kind":"Node","metadata":{"name":"a"},"spec":"x"}`,
		"not a Node":         `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"}}`,
		"not JSON":           `{"apiVersion":`,
	} {
		t.Run(name, func(t *testing.T) {
			resp := d.Webhook().Handle(context.Background(), request([]byte(raw)))
			if !resp.Allowed || len(resp.Patch) > 0 || len(resp.Warnings) == 0 {
				t.Fatalf("want admitted unchanged with a warning: %+v", resp.AdmissionResponse)
			}
		})
	}
}

// TestWebhookIgnoredBySelector checks that a Node the configured selector ignores is not
// changed, while the same Node without the label is.
func TestWebhookIgnoredBySelector(t *testing.T) {
	e, ids := benchEstate(t, 4)
	ignore, err := node.NewIgnorer("example.com/bare-metal")
	if err != nil {
		t.Fatal(err)
	}
	d := &webhook.NodeDefaulter{Estate: e, Ignore: ignore, Events: nodeevents.New(discardRecorder{}, "webhook", nil)}
	for _, ignored := range []bool{false, true} {
		obj := kubeletNode(t, ids[1])
		if ignored {
			obj["metadata"].(map[string]any)["labels"].(map[string]any)["example.com/bare-metal"] = ""
		}
		raw, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		resp := d.Webhook().Handle(context.Background(), request(raw))
		if !resp.Allowed || (len(resp.Patch) == 0) != ignored {
			t.Fatalf("ignored %v: patch %s", ignored, resp.Patch)
		}
	}
}
