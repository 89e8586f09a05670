package node

import "testing"

func TestDefaultTagNamespaceIsNotReserved(t *testing.T) {
	// The config's default tag prefix must be usable: it sits beside, not inside, the
	// computed namespaces.
	if IsReservedKey("tag.k8s.xenorchestra/env") {
		t.Fatal("tag.k8s.xenorchestra/env is reserved")
	}
	for _, k := range []string{"topology.k8s.xenorchestra/zone", "vm.k8s.xenorchestra/name_label", "node.k8s.xenorchestra/managed-labels", "a.topology.k8s.xenorchestra/x"} {
		if !IsReservedKey(k) {
			t.Errorf("%s is not reserved", k)
		}
	}
	if isAuthorityLabel("tag.k8s.xenorchestra/env") {
		t.Error("a tag-derived key must not be an authority key: someone else's value stays")
	}
}
