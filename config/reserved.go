package config

import (
	"slices"
	"strings"
)

// The key namespaces VM tags may never write, with all their subdomains. They are defined here
// for both users: xo/node refuses a tag key in them (node.IsReservedKey), and Validate refuses a
// tag prefix in them, under which no tag could ever set a key. xo/node imports config, so
// config cannot import them from there.
var (
	// kubernetesKeyDomains are Kubernetes' own (node-role.kubernetes.io, ...).
	kubernetesKeyDomains = []string{"kubernetes.io", "k8s.io"}
	// computedKeyDomains hold the keys the controller computes from XO data and owns.
	computedKeyDomains = []string{"topology.k8s.xenorchestra", "vm.k8s.xenorchestra", "node.k8s.xenorchestra"}
	// reservedKeyDomains are both, made once: ReservedKeyDomain is on the admission path.
	reservedKeyDomains = slices.Concat(kubernetesKeyDomains, computedKeyDomains)
)

// ComputedKeyDomains returns the namespaces of the label and taint keys the controller computes
// from XO data and owns: topology.k8s.xenorchestra, vm.k8s.xenorchestra and
// node.k8s.xenorchestra. tag.k8s.xenorchestra, the default namespace of tag-derived keys, is not
// among them.
func ComputedKeyDomains() []string { return slices.Clone(computedKeyDomains) }

// ReservedKeyDomain returns the namespace VM tags may never write that domain (the part of a
// key before "/", compared in lower case) lies in: kubernetes.io, k8s.io or one of
// ComputedKeyDomains, when domain is it or a subdomain of it; else "".
func ReservedKeyDomain(domain string) string {
	domain = strings.ToLower(domain)
	for _, d := range reservedKeyDomains {
		if domain == d || strings.HasSuffix(domain, "."+d) {
			return d
		}
	}
	return ""
}
