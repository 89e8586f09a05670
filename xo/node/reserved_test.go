package node

import (
	"strings"
	"testing"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/config"
)

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

// TestConfigRefusesReservedPrefixes checks config's validation of tag prefixes against
// IsReservedKey: a prefix is refused as reserved exactly when IsReservedKey would refuse every
// key under it (a prefix config accepted that no tag could ever use would fail at run time only).
func TestConfigRefusesReservedPrefixes(t *testing.T) {
	var prefixes []string
	for _, d := range []string{"kubernetes.io", "k8s.io", "topology.k8s.xenorchestra", "vm.k8s.xenorchestra", "node.k8s.xenorchestra",
		"node-role.kubernetes.io", "a.b.k8s.io", "x.topology.k8s.xenorchestra", "a.vm.k8s.xenorchestra", "b.node.k8s.xenorchestra",
		"tag.k8s.xenorchestra", "k8s.xenorchestra", "xenorchestra", "example.com", "notkubernetes.io", "k8s.io.example.com",
		"topology.k8s.xenorchestra.example.com", "mytopology.k8s.xenorchestra", "vm-k8s.xenorchestra"} {
		prefixes = append(prefixes, d+"/", d+"/name-")
	}
	for _, p := range prefixes {
		cfg := config.Default()
		cfg.Clusters = []config.Cluster{{URL: "https://xoa.example.com", Token: "0123456789abcdef",
			RequestTimeout: config.DefaultRequestTimeout, ListTimeout: config.DefaultListTimeout}}
		cfg.Labels.TagLabelPrefixes = []string{p}
		cfg.Labels.TagTaintPrefixes = []string{p}
		err := cfg.Validate()
		refused := err != nil && strings.Contains(err.Error(), "reserved")
		if err != nil && !refused {
			t.Errorf("prefix %s: %v", p, err)
			continue
		}
		if reserved := IsReservedKey(p + "x"); refused != reserved {
			t.Errorf("prefix %s: config refuses it as reserved %v, IsReservedKey(%sx) %v", p, refused, p, reserved)
		}
	}
}
