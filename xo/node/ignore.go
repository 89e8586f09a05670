package node

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// LabelIgnore set to "true" on a Node makes the controller leave it alone: no lookup, no
// label, no taint, no address, no deletion. For the bare-metal and other-provider Nodes of a
// mixed cluster.
const LabelIgnore = "node.k8s.xenorchestra/ignore"

// Ignorer tells which Nodes the controller leaves alone: those labelled LabelIgnore=true and
// those matching the configured selector (config nodes.ignoreSelector).
type Ignorer struct {
	selector labels.Selector
}

// NewIgnorer returns the Ignorer of a label selector in kubectl's syntax ("" for none).
func NewIgnorer(selector string) (Ignorer, error) {
	if selector == "" {
		return Ignorer{}, nil
	}
	s, err := labels.Parse(selector)
	if err != nil {
		return Ignorer{}, fmt.Errorf("ignore selector %q: %w", selector, err)
	}
	return Ignorer{selector: s}, nil
}

// ReadsLabel reports whether Ignored reads label key: LabelIgnore and the selector's keys.
func (f Ignorer) ReadsLabel(key string) bool {
	if key == LabelIgnore {
		return true
	}
	if f.selector == nil {
		return false
	}
	reqs, _ := f.selector.Requirements()
	for _, r := range reqs {
		if r.Key() == key {
			return true
		}
	}
	return false
}

// Ignored reports whether the controller leaves n alone.
func (f Ignorer) Ignored(n *corev1.Node) bool {
	if n.Labels[LabelIgnore] == "true" {
		return true
	}
	return f.selector != nil && !f.selector.Empty() && f.selector.Matches(labels.Set(n.Labels))
}
