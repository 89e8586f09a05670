package webhook

import (
	"context"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Webhook returns the admission webhook: controller-runtime's typed defaulter, which decodes
// the Node, runs Default and answers with the JSON patch from the admitted object to the
// defaulted one. It drops the "remove" operations the Go type alone would cause (fields it
// does not know, zero values it omits), so the rest of the API server's object is kept.
func (d *NodeDefaulter) Webhook() *admission.Webhook {
	wh := admission.WithDefaulter[*corev1.Node](scheme.Scheme, d)
	wh.Handler = admitAlways{wh.Handler}
	wh.LogConstructor = logConstructor
	return wh
}

// admitAlways admits what the defaulter refuses, which it does only for an object it cannot
// decode: registration must never depend on this webhook, and the controller describes the
// Node later.
type admitAlways struct {
	admission.Handler
}

// Handle runs the defaulter and turns a refusal into an admission with a warning.
func (h admitAlways) Handle(ctx context.Context, req admission.Request) admission.Response {
	resp := h.Handler.Handle(ctx, req)
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
