package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/webhook"
)

// FuzzAdmissionHandler posts arbitrary bodies to the webhook's HTTP handler, as the API server
// (or anyone reaching the port) could. It must never panic and never deny a request it could
// read, and whatever it patches in must apply to the object sent and give valid labels.
func FuzzAdmissionHandler(f *testing.F) {
	// A small inventory, so that bodies naming vm-0-1 or 10.0.0.2 resolve and get patched.
	e, _ := benchEstate(f, 16)
	h := newHandler(e)
	seed := func(n *corev1.Node) []byte {
		raw, _ := json.Marshal(n)
		b, _ := json.Marshal(map[string]any{
			"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
			"request": map[string]any{"uid": "1", "kind": map[string]string{"version": "v1", "kind": "Node"},
				"resource": map[string]string{"version": "v1", "resource": "nodes"}, "operation": "CREATE", "object": json.RawMessage(raw)},
		})
		return b
	}
	f.Add(seed(&corev1.Node{}))
	f.Add(seed(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "vm-0-1", Labels: map[string]string{"a": "b"}}}))
	f.Add(seed(testenv.KubeletNode("x", testenv.WithNodeIP("10.0.0.2"))))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","object":{"kind":"Node","spec":{"providerID":"xenorchestra:///zz"}}}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","object":{"kind":"Node","metadata":{"name":"vm-0-1"},"spec":"x"}}}`))
	f.Add([]byte(`{"request":null}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequestWithContext(context.Background(), http.MethodPost, webhook.Path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var review admissionv1.AdmissionReview
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &review) != nil || review.Response == nil {
			t.Fatalf("no AdmissionReview answer: %d %s", rec.Code, rec.Body.Bytes())
		}
		// controller-runtime answers a body that is no AdmissionReview without apiVersion and
		// kind; one it could read went through the defaulter, which never denies.
		if review.Kind == "" {
			return
		}
		if !review.Response.Allowed {
			t.Fatalf("denied: %+v", review.Response.Result)
		}
		if len(review.Response.Patch) == 0 {
			return
		}
		// The patch applies to the object sent, and gives a Node with valid new labels.
		var sent admissionv1.AdmissionReview
		if err := json.Unmarshal(body, &sent); err != nil || sent.Request == nil {
			t.Fatalf("patched an undecodable review: %v", err)
		}
		patch, err := jsonpatch.DecodePatch(review.Response.Patch)
		if err != nil {
			t.Fatalf("patch %s: %v", review.Response.Patch, err)
		}
		patched, err := patch.Apply(sent.Request.Object.Raw)
		if err != nil {
			t.Fatalf("patch %s does not apply to %s: %v", review.Response.Patch, sent.Request.Object.Raw, err)
		}
		var before, after corev1.Node
		_ = json.Unmarshal(sent.Request.Object.Raw, &before)
		if err := json.Unmarshal(patched, &after); err != nil {
			t.Fatalf("patched object is not a Node: %v\n%s", err, patched)
		}
		for k, v := range after.Labels {
			if old, ok := before.Labels[k]; ok && old == v {
				continue
			}
			if len(validation.IsQualifiedName(k)) > 0 || len(validation.IsValidLabelValue(v)) > 0 {
				t.Fatalf("invalid label %q=%q patched in", k, v)
			}
		}
	})
}
