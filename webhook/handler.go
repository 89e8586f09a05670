package webhook

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"unicode/utf8"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
)

// handler is the admission handler of the Node webhook. It runs NodeDefaulter.Default like
// controller-runtime's generic defaulter would, but decodes only the fields the defaulter reads
// and writes (see decodeNode) and writes the JSON patch for exactly the fields Default changed.
// The generic path decodes the whole Node, encodes it again and diffs two generic JSON trees,
// which costs ten times what resolving the VM does (see BenchmarkAdmissionHandler).
type handler struct {
	d *NodeDefaulter
}

var jsonPatchType = admissionv1.PatchTypeJSONPatch

// Handle admits every request; a Node it can describe gets the patch.
func (h *handler) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create || req.Kind.Kind != "Node" {
		return admission.Allowed("")
	}
	in, err := decodeNode(req.Object.Raw)
	if err != nil {
		// Never deny: the controller describes the Node later.
		return admission.Allowed("").WithWarnings("xenorchestra: undecodable Node: " + err.Error())
	}
	n := in.node()
	if err := h.d.Default(ctx, n); err != nil {
		return admission.Allowed("")
	}
	resp := admission.Allowed("")
	// The patch is set directly, not as resp.Patches, which Complete would marshal again.
	if patch := nodePatch(&in, n); len(patch) > 0 {
		resp.Patch, resp.PatchType = patch, &jsonPatchType
	}
	return resp
}

// node returns a Node holding copies of what was admitted, for Default to change.
func (in *admittedNode) node() *corev1.Node {
	n := &corev1.Node{}
	n.Name = in.Metadata.Name
	// Room for the labels and annotations Default adds, so that they do not grow the maps.
	n.Labels = cloneMap(in.Metadata.Labels, 16)
	n.Annotations = cloneMap(in.Metadata.Annotations, 2)
	if in.Spec != nil {
		n.Spec.ProviderID = in.Spec.ProviderID
		n.Spec.Taints = slices.Clone(in.Spec.Taints)
	}
	if in.Status != nil {
		n.Status.NodeInfo.SystemUUID = in.Status.SystemUUID
		n.Status.Addresses = slices.Clone(in.Status.Addresses)
	}
	return n
}

// cloneMap copies m into a map with room for extra more entries; nil stays nil.
func cloneMap(m map[string]string, extra int) map[string]string {
	if m == nil {
		return nil
	}
	c := make(map[string]string, len(m)+extra)
	maps.Copy(c, m)
	return c
}

// nodePatch returns the JSON patch (RFC 6902) that turns the admitted Node into n, nil when
// they are the same.
func nodePatch(in *admittedNode, n *corev1.Node) []byte {
	var p patch
	p.stringMap("/metadata/labels", in.Metadata.Labels, n.Labels)
	p.stringMap("/metadata/annotations", in.Metadata.Annotations, n.Annotations)
	var spec []field
	if (in.Spec == nil || in.Spec.ProviderID != n.Spec.ProviderID) && n.Spec.ProviderID != "" {
		spec = append(spec, field{"providerID", appendString(nil, n.Spec.ProviderID, false)})
	}
	if (in.Spec == nil || !taintsEqual(in.Spec.Taints, n.Spec.Taints)) && len(n.Spec.Taints) > 0 {
		spec = append(spec, field{"taints", marshal(n.Spec.Taints)})
	}
	p.object("/spec", in.Spec != nil, spec)
	if (in.Status == nil || !node.AddressesEqual(in.Status.Addresses, n.Status.Addresses)) && len(n.Status.Addresses) > 0 {
		p.object("/status", in.Status != nil, []field{{"addresses", marshal(n.Status.Addresses)}})
	}
	return p.done()
}

// patch writes a JSON patch document operation by operation, straight into one buffer.
type patch struct {
	buf []byte
}

// field is one member of an object: its name and its JSON value.
type field struct {
	name  string
	value []byte
}

// start begins an operation on path, or on the member key of path when key is not empty; the
// caller writes the value, if any, and ends it with '}'.
func (p *patch) start(op, path, key string) {
	if p.buf == nil {
		p.buf = append(make([]byte, 0, 2048), '[') // a kubelet's Node takes about 1.8 KB
	} else {
		p.buf = append(p.buf, ',')
	}
	p.buf = append(p.buf, `{"op":"`...)
	p.buf = append(p.buf, op...)
	p.buf = append(p.buf, `","path":"`...)
	p.buf = append(p.buf, path...)
	if key != "" {
		p.buf = append(p.buf, '/')
		p.buf = appendStringBody(p.buf, key, true)
	}
	p.buf = append(p.buf, '"')
	if op != "remove" {
		p.buf = append(p.buf, `,"value":`...)
	}
}

// member begins the i-th member of an object value.
func (p *patch) member(i int) []byte {
	if i == 0 {
		return append(p.buf, '{')
	}
	return append(p.buf, ',')
}

// done returns the document, nil when it has no operation.
func (p *patch) done() []byte {
	if p.buf == nil {
		return nil
	}
	return append(p.buf, ']')
}

// object sets fields of the object at path, adding the object when it is missing.
func (p *patch) object(path string, exists bool, fields []field) {
	if len(fields) == 0 {
		return
	}
	if exists {
		for _, f := range fields {
			p.start("add", path, f.name)
			p.buf = append(append(p.buf, f.value...), '}')
		}
		return
	}
	p.start("add", path, "")
	for i, f := range fields {
		p.buf = appendString(p.member(i), f.name, false)
		p.buf = append(append(p.buf, ':'), f.value...)
	}
	p.buf = append(p.buf, '}', '}')
}

// stringMap adds, replaces and removes the entries of a string map at path, in map order: the
// order of operations on distinct keys does not change the result.
func (p *patch) stringMap(path string, before, after map[string]string) {
	if maps.Equal(before, after) {
		return
	}
	if before == nil {
		p.start("add", path, "")
		i := 0
		for k, v := range after {
			p.buf = appendString(p.member(i), k, false)
			p.buf = appendString(append(p.buf, ':'), v, false)
			i++
		}
		p.buf = append(p.buf, '}', '}')
		return
	}
	for k, v := range after {
		if old, ok := before[k]; !ok || old != v {
			p.start("add", path, k)
			p.buf = append(appendString(p.buf, v, false), '}')
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			p.start("remove", path, k)
			p.buf = append(p.buf, '}')
		}
	}
}

// taintsEqual reports whether two taint lists are the same, in the same order.
func taintsEqual(a, b []corev1.Taint) bool {
	return slices.EqualFunc(a, b, func(x, y corev1.Taint) bool {
		return x.Key == y.Key && x.Value == y.Value && x.Effect == y.Effect && x.TimeAdded.Equal(y.TimeAdded)
	})
}

// marshal encodes a value that cannot fail to encode (taints, addresses).
func marshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // unreachable for the types above; controller-runtime recovers it
	}
	return b
}

// appendString appends s as a JSON string.
func appendString(b []byte, s string, pointer bool) []byte {
	return append(appendStringBody(append(b, '"'), s, pointer), '"')
}

// appendStringBody appends s escaped for a JSON string, and first for a JSON pointer (RFC
// 6901: "~" is "~0", "/" is "~1") when pointer is set. Invalid UTF-8 becomes U+FFFD, as
// encoding/json writes it.
func appendStringBody(b []byte, s string, pointer bool) []byte {
	const hex = "0123456789abcdef"
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b = append(append(b, s[start:i]...), `\ufffd`...)
				start = i + 1
			}
			i += size
			continue
		}
		if c >= 0x20 && c != '"' && c != '\\' && (!pointer || c != '~' && c != '/') {
			i++
			continue
		}
		b = append(b, s[start:i]...)
		switch {
		case pointer && c == '~':
			b = append(b, '~', '0')
		case pointer && c == '/':
			b = append(b, '~', '1')
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\r':
			b = append(b, '\\', 'r')
		case c == '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		i++
		start = i
	}
	return append(b, s[start:]...)
}

var _ admission.Handler = &handler{}

// Webhook returns the admission webhook: the handler wrapped by controller-runtime, which
// serves the AdmissionReview protocol and recovers from panics.
func (d *NodeDefaulter) Webhook() *admission.Webhook {
	return &admission.Webhook{Handler: &handler{d: d}, LogConstructor: logConstructor}
}

// logConstructor adds the request's fields (user, uid, ...) to the logger only when debug
// logs are on: building them costs a tenth of an admission.
func logConstructor(base logr.Logger, req *admission.Request) logr.Logger {
	if !base.V(1).Enabled() {
		return base
	}
	return admission.DefaultLogConstructor(base, req)
}
