package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Webhook returns the admission webhook: controller-runtime's typed defaulter, which decodes
// the Node, runs Default and answers with the JSON patch from the admitted object to the
// defaulted one. It drops the "remove" operations the Go type alone would cause (fields it
// does not know, zero values it omits), so the rest of the API server's object is kept; the
// taints, which that patch compares by position, are written by key (keyedTaints).
func (d *NodeDefaulter) Webhook() *admission.Webhook {
	wh := admission.WithDefaulter[*corev1.Node](scheme.Scheme, d)
	wh.Handler = admitAlways{wh.Handler}
	wh.LogConstructor = logConstructor
	return wh
}

// admitAlways admits what the defaulter refuses, which it does only for an object it cannot
// decode: registration must never depend on this webhook, and the controller describes the
// Node later. It also writes the defaulter's change of the taints by key (keyedTaints).
type admitAlways struct {
	admission.Handler
}

// Handle runs the defaulter, writes its change of the taints as one keyed operation
// (keyedTaints), and turns a refusal, or taints it cannot write, into an admission of the Node
// unchanged, with a warning.
func (h admitAlways) Handle(ctx context.Context, req admission.Request) admission.Response {
	var out finalTaints
	resp := h.Handler.Handle(context.WithValue(ctx, finalTaintsKey{}, &out), req)
	if resp.Allowed && out.changed {
		keyed, err := keyedTaints(resp, req.Object.Raw, out.taints)
		if err == nil {
			return keyed
		}
		resp = admission.Errored(http.StatusInternalServerError, err)
	}
	if resp.Allowed {
		return resp
	}
	msg := "refused by the defaulter"
	if resp.Result != nil && resp.Result.Message != "" {
		msg = resp.Result.Message
	}
	return admission.Allowed("").WithWarnings("xenorchestra: Node admitted unchanged: " + msg)
}

// logConstructor adds the request's fields (user, uid, ...) to the logger only when debug
// logs are on: building them costs more than describing the Node.
func logConstructor(base logr.Logger, req *admission.Request) logr.Logger {
	if !base.V(1).Enabled() {
		return base
	}
	return admission.DefaultLogConstructor(base, req)
}

// finalTaints is where Default leaves the Node's taints when it changed them; Handle passes it
// in the context (finalTaintsKey).
type finalTaints struct {
	taints  []corev1.Taint
	changed bool
}

type finalTaintsKey struct{}

// recordTaints tells Handle, through ctx, the taints Default left on the Node when they differ
// from before.
func recordTaints(ctx context.Context, before, after []corev1.Taint) {
	if out, ok := ctx.Value(finalTaintsKey{}).(*finalTaints); ok && !slices.Equal(before, after) {
		out.taints, out.changed = after, true
	}
}

// keyedTaints replaces the patch's operations on spec.taints with one that writes the final
// list, each taint the Node was sent with copied as sent. The framework's patch compares lists
// by position: lifting the first of the kubelet's two taints rewrote the first element into the
// second, and a field the Go type does not know (from a newer API server) stayed on the wrong
// taint. Taints are told apart by key, effect and value, as the API server keeps them.
func keyedTaints(resp admission.Response, raw []byte, final []corev1.Taint) (admission.Response, error) {
	var sent struct {
		Spec struct {
			Taints []json.RawMessage `json:"taints"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(raw, &sent); err != nil {
		return resp, fmt.Errorf("read the taints of the Node sent: %w", err)
	}
	value := make([]any, 0, len(final))
	for _, t := range final {
		var v any = t
		for _, r := range sent.Spec.Taints {
			var s corev1.Taint
			if json.Unmarshal(r, &s) == nil && s.Key == t.Key && s.Effect == t.Effect && s.Value == t.Value {
				v = r
				break
			}
		}
		value = append(value, v)
	}
	resp.Patches = slices.DeleteFunc(resp.Patches, func(p jsonpatch.JsonPatchOperation) bool {
		return p.Path == "/spec/taints" || strings.HasPrefix(p.Path, "/spec/taints/")
	})
	op := "replace"
	if sent.Spec.Taints == nil {
		op = "add"
	}
	resp.Patches = append(resp.Patches, jsonpatch.JsonPatchOperation{Operation: op, Path: "/spec/taints", Value: value})
	pt := admissionv1.PatchTypeJSONPatch
	resp.PatchType = &pt
	return resp, nil
}
