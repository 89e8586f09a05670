package webhook

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// handler is the admission handler of the Node webhook. It runs NodeDefaulter.Default like
// controller-runtime's generic defaulter would, but decodes only the fields the defaulter reads
// and writes, and answers with patch operations for exactly the fields Default changed. The
// generic path decodes the whole Node, encodes it again and diffs two generic JSON trees, which
// costs ten times what resolving the VM does (see BenchmarkAdmissionHandler).
type handler struct {
	d *NodeDefaulter
}

// admittedNode holds the parts of a Node the defaulter reads and writes. Pointers tell a
// missing object from an empty one, because a JSON patch cannot add into a missing object.
type admittedNode struct {
	Metadata struct {
		Name        string            `json:"name"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec *struct {
		ProviderID string         `json:"providerID"`
		Taints     []corev1.Taint `json:"taints"`
	} `json:"spec"`
	Status *struct {
		NodeInfo struct {
			SystemUUID string `json:"systemUUID"`
		} `json:"nodeInfo"`
		Addresses []corev1.NodeAddress `json:"addresses"`
	} `json:"status"`
}

// Handle admits every request; a Node it can describe gets the patch.
func (h *handler) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create || req.Kind.Kind != "Node" {
		return admission.Allowed("")
	}
	var in admittedNode
	if err := json.Unmarshal(req.Object.Raw, &in); err != nil {
		// Never deny: the controller describes the Node later.
		return admission.Allowed("").WithWarnings("xenorchestra: undecodable Node: " + err.Error())
	}
	n := &corev1.Node{}
	n.Name = in.Metadata.Name
	n.Labels = maps.Clone(in.Metadata.Labels)
	n.Annotations = maps.Clone(in.Metadata.Annotations)
	if in.Spec != nil {
		n.Spec.ProviderID = in.Spec.ProviderID
		n.Spec.Taints = slices.Clone(in.Spec.Taints)
	}
	if in.Status != nil {
		n.Status.NodeInfo.SystemUUID = in.Status.NodeInfo.SystemUUID
		n.Status.Addresses = slices.Clone(in.Status.Addresses)
	}
	if err := h.d.Default(ctx, n); err != nil {
		return admission.Allowed("")
	}
	return admission.Patched("", nodePatch(&in, n)...)
}

// nodePatch returns the operations that turn the admitted Node into n.
func nodePatch(in *admittedNode, n *corev1.Node) []jsonpatch.JsonPatchOperation {
	var ops []jsonpatch.JsonPatchOperation
	ops = mapPatch(ops, "/metadata/labels", in.Metadata.Labels, n.Labels)
	ops = mapPatch(ops, "/metadata/annotations", in.Metadata.Annotations, n.Annotations)
	spec := map[string]any{}
	if in.Spec == nil || in.Spec.ProviderID != n.Spec.ProviderID {
		if n.Spec.ProviderID != "" {
			spec["providerID"] = n.Spec.ProviderID
		}
	}
	if in.Spec == nil || !equality.Semantic.DeepEqual(in.Spec.Taints, n.Spec.Taints) {
		if len(n.Spec.Taints) > 0 {
			spec["taints"] = n.Spec.Taints
		}
	}
	ops = objectPatch(ops, "/spec", in.Spec != nil, spec)
	status := map[string]any{}
	if in.Status == nil || !equality.Semantic.DeepEqual(in.Status.Addresses, n.Status.Addresses) {
		if len(n.Status.Addresses) > 0 {
			status["addresses"] = n.Status.Addresses
		}
	}
	return objectPatch(ops, "/status", in.Status != nil, status)
}

// objectPatch sets fields of the object at path, adding the object when it is missing.
func objectPatch(ops []jsonpatch.JsonPatchOperation, path string, exists bool, fields map[string]any) []jsonpatch.JsonPatchOperation {
	if len(fields) == 0 {
		return ops
	}
	if !exists {
		return append(ops, jsonpatch.NewOperation("add", path, fields))
	}
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		ops = append(ops, jsonpatch.NewOperation("add", path+"/"+k, fields[k]))
	}
	return ops
}

// mapPatch adds, replaces and removes the entries of a string map at path.
func mapPatch(ops []jsonpatch.JsonPatchOperation, path string, before, after map[string]string) []jsonpatch.JsonPatchOperation {
	if maps.Equal(before, after) {
		return ops
	}
	if before == nil {
		return append(ops, jsonpatch.NewOperation("add", path, after))
	}
	for _, k := range slices.Sorted(maps.Keys(after)) {
		if v, ok := before[k]; !ok || v != after[k] {
			ops = append(ops, jsonpatch.NewOperation("add", path+"/"+escapePointer(k), after[k]))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(before)) {
		if _, ok := after[k]; !ok {
			ops = append(ops, jsonpatch.NewOperation("remove", path+"/"+escapePointer(k), nil))
		}
	}
	return ops
}

// pointerEscaper escapes a key for a JSON pointer (RFC 6901).
var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

func escapePointer(k string) string { return pointerEscaper.Replace(k) }

var _ admission.Handler = &handler{}

// Webhook returns the admission webhook: the handler wrapped by controller-runtime, which
// serves the AdmissionReview protocol and recovers from panics.
func (d *NodeDefaulter) Webhook() *admission.Webhook {
	return &admission.Webhook{Handler: &handler{d: d}}
}
