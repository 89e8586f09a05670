package node

import (
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
)

// AddressOptions decide which VM guest addresses become InternalIP or ExternalIP.
type AddressOptions struct {
	// InternalCIDRs, when not empty, restricts the InternalIPs taken from the VM's guest
	// addresses to these networks. It does not filter the kubelet's provided node IPs.
	InternalCIDRs []netip.Prefix
	// ExternalCIDRs lists the networks whose guest addresses become ExternalIP. Empty (the
	// default): no new ExternalIP, and an ExternalIP the Node already carries that is one of the
	// VM's guest addresses (the upstream XO CCM sets mainIpAddress as ExternalIP) is kept, also
	// when the same address is the Node's InternalIP (upstream's shape when --node-ip is the
	// mainIpAddress), so that taking over a Node changes nothing until the operator opts in.
	// An address in both lists is external.
	ExternalCIDRs []netip.Prefix
}

// Addresses returns the addresses a Node should carry in status.addresses:
//
//  1. InternalIP: the kubelet's alpha.kubernetes.io/provided-node-ip (comma-separated, IPv4 and
//     IPv6) when it holds a usable address; otherwise the VM's guest addresses, mainIpAddress
//     first, then the "addresses" map in key order (<dev>/<ipv4|ipv6>/<n>, numbers compared
//     as numbers), restricted to opts.InternalCIDRs when that is set.
//  2. ExternalIP: the VM's guest addresses inside opts.ExternalCIDRs (also when the kubelet
//     provided its node IP, which is then not also an ExternalIP); without ExternalCIDRs, the
//     Node's current ExternalIPs that are guest addresses of the VM, in their current order,
//     before any guest InternalIP. Such a kept ExternalIP may be an InternalIP too: the
//     provided node IP, or a guest address classified as internal. While the guest reports no
//     address at all, the current ExternalIPs (inside ExternalCIDRs when set) stay as they
//     are.
//  3. Hostname: the node name.
//
// Loopback, link-local, multicast, unspecified and zoned addresses are skipped; addresses are
// written in canonical form and de-duplicated per type (the first occurrence wins). The order
// is deterministic. It returns nil when no IP address is found, so that a caller never replaces
// the node's addresses with a bare hostname while the guest agent has not reported yet.
func Addresses(n *corev1.Node, vm *xo.VM, opts AddressOptions) []corev1.NodeAddress {
	if n == nil {
		return nil
	}
	var out []corev1.NodeAddress
	// add appends an address once per type: one address may be both InternalIP and ExternalIP
	// (upstream's shape when --node-ip is the VM's mainIpAddress).
	add := func(t corev1.NodeAddressType, ip string) {
		if !slices.Contains(out, corev1.NodeAddress{Type: t, Address: ip}) {
			out = append(out, corev1.NodeAddress{Type: t, Address: ip})
		}
	}

	var provided []string
	forEachCSV(n.Annotations[AnnotationProvidedNodeIP], func(s string) {
		if a, ip, ok := canonicalIP(s); ok && usableAddr(a) {
			add(corev1.NodeInternalIP, ip)
			provided = append(provided, ip)
		}
	})

	guest := guestAddresses(vm)
	for _, a := range n.Status.Addresses {
		if a.Type != corev1.NodeExternalIP {
			continue
		}
		addr, ip, ok := canonicalIP(a.Address)
		if !ok {
			continue
		}
		var keep bool
		switch {
		case len(guest) == 0:
			// The guest agent reports nothing (VM halted or booting): nothing to check the
			// ExternalIPs against, so they stay, as a partial answer removes nothing.
			keep = len(opts.ExternalCIDRs) == 0 || inCIDRs(addr, opts.ExternalCIDRs)
		case len(opts.ExternalCIDRs) == 0:
			keep = slices.ContainsFunc(guest, func(g string) bool {
				_, gip, ok := canonicalIP(g)
				return ok && gip == ip
			})
		}
		if keep {
			add(corev1.NodeExternalIP, ip)
		}
	}
	// The guest's addresses are classified once each: a provided node IP is not also an
	// ExternalIP by CIDR, and an address in ExternalCIDRs is not also an InternalIP. A kept
	// ExternalIP is no classification: the same address is still a guest InternalIP.
	var classified []string
	for _, s := range guest {
		a, ip, ok := canonicalIP(s)
		if !ok || !usableAddr(a) || slices.Contains(provided, ip) || slices.Contains(classified, ip) {
			continue
		}
		classified = append(classified, ip)
		switch {
		case inCIDRs(a, opts.ExternalCIDRs):
			add(corev1.NodeExternalIP, ip)
		case len(provided) > 0:
		case len(opts.InternalCIDRs) == 0 || inCIDRs(a, opts.InternalCIDRs):
			add(corev1.NodeInternalIP, ip)
		}
	}
	if len(out) == 0 {
		return nil
	}
	if n.Name != "" {
		out = append(out, corev1.NodeAddress{Type: corev1.NodeHostName, Address: n.Name})
	}
	return out
}

// guestAddresses returns the VM's main address, then its guest addresses in key order
// (duplicates included).
func guestAddresses(vm *xo.VM) []string {
	if vm == nil {
		return nil
	}
	out := make([]string, 0, len(vm.Addresses)+1)
	if vm.MainIPAddress != "" {
		out = append(out, vm.MainIPAddress)
	}
	for _, a := range vm.Addresses {
		out = append(out, a.IP)
	}
	return out
}

// inCIDRs reports whether a is inside one of the networks.
func inCIDRs(a netip.Addr, nets []netip.Prefix) bool {
	a = a.Unmap()
	for _, n := range nets {
		if n.Contains(a) {
			return true
		}
	}
	return false
}

// AddressesEqual reports whether two address lists are the same, in the same order (order
// matters: the first InternalIP of a family is the node's IP for that family).
func AddressesEqual(a, b []corev1.NodeAddress) bool {
	return slices.Equal(a, b)
}
