package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// referenceNode is admittedNode as encoding/json decodes it, the behaviour decodeNode matches.
type referenceNode struct {
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

// referenceDecode decodes data with encoding/json.
func referenceDecode(data []byte) (admittedNode, error) {
	var r referenceNode
	if err := json.Unmarshal(data, &r); err != nil {
		return admittedNode{}, err
	}
	var n admittedNode
	n.Metadata.Name, n.Metadata.Labels, n.Metadata.Annotations = r.Metadata.Name, r.Metadata.Labels, r.Metadata.Annotations
	if r.Spec != nil {
		n.Spec = &admittedSpec{ProviderID: r.Spec.ProviderID, Taints: r.Spec.Taints}
	}
	if r.Status != nil {
		n.Status = &admittedStatus{SystemUUID: r.Status.NodeInfo.SystemUUID, Addresses: r.Status.Addresses}
	}
	return n, nil
}

// decodedMembers are the member names decodeNode matches itself; encoding/json also matches
// them in other cases.
var decodedMembers = []string{"metadata", "spec", "status", "name", "labels", "annotations", "providerID", "taints", "nodeInfo", "systemUUID", "addresses", "key", "value", "effect", "timeAdded", "type", "address"}

// canonical reports whether data is JSON on which decodeNode and encoding/json agree by
// design: no object repeats a member name, and no member name is one of decodedMembers in
// another case.
func canonical(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	type level struct {
		object bool
		key    bool // the next token of this object is a member name
		seen   map[string]bool
	}
	var stack []*level
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return true
		}
		if err != nil {
			return true // invalid JSON: both must refuse it
		}
		var top *level
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if s, ok := tok.(string); ok && top != nil && top.object && top.key {
			if top.seen[s] {
				return false
			}
			top.seen[s] = true
			for _, m := range decodedMembers {
				if s != m && strings.EqualFold(s, m) {
					return false
				}
			}
			top.key = false
			continue
		}
		if top != nil && top.object {
			top.key = true // a value was read (or an object or array begins: its end sets it)
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &level{object: true, key: true, seen: map[string]bool{}})
		case json.Delim('['):
			stack = append(stack, &level{})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
	}
}

// checkDecode fails when decodeNode and encoding/json disagree on canonical data.
func checkDecode(t *testing.T, data []byte) {
	t.Helper()
	if !canonical(data) {
		return
	}
	got, err := decodeNode(data)
	want, wantErr := referenceDecode(data)
	if (err == nil) != (wantErr == nil) {
		t.Fatalf("decodeNode(%q): error %v, encoding/json: %v", data, err, wantErr)
	}
	if err == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("decodeNode(%q):\n got %#v\nwant %#v", data, got, want)
	}
}

// decodeSeeds are Nodes as the API server sends them, and the edge cases of the decoder.
func decodeSeeds(t testing.TB) [][]byte {
	// A kubelet's Node at registration, as the API server passes it to the webhook.
	kubelet, err := os.ReadFile("testdata/kubelet-node.json")
	if err != nil {
		t.Fatal(err)
	}
	// The same, compact, as encoding/json writes it.
	var n corev1.Node
	if err := json.Unmarshal(kubelet, &n); err != nil {
		t.Fatal(err)
	}
	n.Labels, n.Annotations, n.Spec = nil, nil, corev1.NodeSpec{}
	n.Status.Conditions[0].LastHeartbeatTime = metav1.Time{}
	bare, err := json.Marshal(&n)
	if err != nil {
		t.Fatal(err)
	}
	seeds := [][]byte{kubelet, bare}
	for _, s := range []string{
		`{}`, `null`, ` {"spec":null,"status":null} `, `{"spec":{},"status":{}}`,
		`{"metadata":{"name":null,"labels":{},"annotations":null}}`,
		`{"metadata":{"labels":{"a":null,"b":"","c\u0000":"\ud83d\ude00","\u006eame":"x\"y\\z\/"}}}`,
		`{"metadata":{"name":"\ud800"}}`, "{\"metadata\":{\"name\":\"\xff\xfe é 🚀\"}}",
		`{"status":{"nodeInfo":{"systemUUID":"A","machineID":"b"},"addresses":null,"capacity":{"cpu":"2"}}}`,
		`{"status":{"conditions":[{"type":"Ready","status":"True","lastHeartbeatTime":"2026-01-01T00:00:00Z"}],"x":[1,-0.5e+3,2E-7,true,false,null,[],{}]}}`,
		`{"spec":{"taints":[{"key":"k","effect":"NoSchedule","timeAdded":"2026-01-01T00:00:00Z"}],"providerID":"xenorchestra://p/v"}}`,
		`{"spec":{"taints":[]},"status":{"addresses":[]}}`, `{"spec":{"taints":[{},null,{"timeAdded":null,"x":1}]},"status":{"addresses":[null,{"type":null,"z":[]}]}}`,
		// Invalid: each must be refused.
		``, `[]`, `5`, `"x"`, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{,}`, `{"a":1}x`, `{"a":1}{}`, `{'a':1}`,
		`{"a":01}`, `{"a":-}`, `{"a":1.}`, `{"a":1e}`, `{"a":.5}`, `{"a":+1}`, `{"a":tru}`, `{"a":nul}`,
		`{"a":"\x"}`, `{"a":"\u12"}`, `{"a":"` + "\x01" + `"}`, `{"a":"unterminated}`, `{"a":[1 2]}`, `{"a":[1,]}`,
		`{"metadata":[]}`, `{"metadata":{"name":5}}`, `{"metadata":{"labels":{"a":1}}}`, `{"metadata":{"labels":[]}}`,
		`{"spec":[]}`, `{"spec":{"taints":{}}}`, `{"spec":{"taints":[{"timeAdded":"yesterday"}]}}`,
		`{"status":5}`, `{"spec":{"taints":[5]}}`, `{"spec":{"taints":[{"timeAdded":5}]}}`, `{"spec":{"taints":[{"key":"a"]}}`, `{"status":{"addresses":{}}}`, `{"status":{"nodeInfo":[]}}`, `{"status":{"addresses":[{"type":5}]}}`,
	} {
		seeds = append(seeds, []byte(s))
	}
	return seeds
}

// TestDecodeNode checks decodeNode against encoding/json on Nodes and on each edge case.
func TestDecodeNode(t *testing.T) {
	// The nesting limit. Not fuzz seeds: the fuzzer would spend its time minimizing them.
	deep := [][]byte{
		[]byte(strings.Repeat("[", maxDepth+1)),
		[]byte(`{"a":` + strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth) + `}`),
		[]byte(`{"a":` + strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1) + `}`),
	}
	for _, s := range append(decodeSeeds(t), deep...) {
		checkDecode(t, s)
	}
	n, err := decodeNode(decodeSeeds(t)[0])
	if err != nil {
		t.Fatal(err)
	}
	if n.Metadata.Name != "worker-1" || n.Metadata.Labels[corev1.LabelHostname] != "worker-1" || n.Spec == nil || len(n.Spec.Taints) != 2 ||
		n.Status == nil || n.Status.SystemUUID != "ec2f7e9a-1b3c-4d5e-8f90-123456789abc" || len(n.Status.Addresses) != 3 {
		t.Fatalf("kubelet Node decoded as %#v", n)
	}
}

// TestDecodeNodeMemberNames documents the two differences from encoding/json.
func TestDecodeNodeMemberNames(t *testing.T) {
	n, err := decodeNode([]byte(`{"Metadata":{"name":"a"},"metadata":{"NAME":"b","labels":{"x":"1"},"labels":{"y":"2"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if n.Metadata.Name != "" || !reflect.DeepEqual(n.Metadata.Labels, map[string]string{"y": "2"}) {
		t.Fatalf("got %#v, want no name (other cases do not match) and the last labels", n.Metadata)
	}
}

// FuzzDecodeNode checks decodeNode against encoding/json on any input.
func FuzzDecodeNode(f *testing.F) {
	for _, s := range decodeSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(checkDecode)
}

// BenchmarkDecodeNode compares decodeNode with encoding/json on a kubelet's Node.
func BenchmarkDecodeNode(b *testing.B) {
	raw := decodeSeeds(b)[0]
	b.Run("decodeNode", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeNode(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := referenceDecode(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
}
