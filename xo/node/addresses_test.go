package node

import (
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
)

func cidrs(t *testing.T, ss ...string) []netip.Prefix {
	t.Helper()
	var out []netip.Prefix
	for _, s := range ss {
		n, err := netip.ParsePrefix(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}

func addrs(kv ...string) []corev1.NodeAddress {
	var out []corev1.NodeAddress
	for i := 0; i < len(kv); i += 2 {
		out = append(out, corev1.NodeAddress{Type: corev1.NodeAddressType(kv[i]), Address: kv[i+1]})
	}
	return out
}

const (
	internal = string(corev1.NodeInternalIP)
	external = string(corev1.NodeExternalIP)
	hostname = string(corev1.NodeHostName)
)

func TestAddresses(t *testing.T) {
	guest := &xo.VM{
		MainIPAddress: "10.0.0.5",
		Addresses: xo.AddressesOf(map[string]string{
			"0/ipv4/0":  "10.0.0.5",
			"0/ipv4/1":  "192.0.2.10",
			"0/ipv6/0":  "fe80::4c1:6ff:fe9a:12",
			"0/ipv6/1":  "2001:DB8:0::7",
			"10/ipv4/0": "10.0.10.5",
			"2/ipv4/0":  "10.0.2.5",
			"3/ipv4/0":  "127.0.0.1",
			"4/ipv4/0":  "not an ip",
			"5/ipv4/0":  "0.0.0.0",
			"6/ipv6/0":  "::ffff:10.0.6.5",
		}),
	}
	tests := []struct {
		name string
		node *corev1.Node
		vm   *xo.VM
		opts AddressOptions
		want []corev1.NodeAddress
	}{
		{
			name: "guest addresses, mainIpAddress first, keys in numeric order",
			node: testNode("n1"), vm: guest,
			want: addrs(internal, "10.0.0.5", internal, "192.0.2.10", internal, "2001:db8::7",
				internal, "10.0.2.5", internal, "10.0.6.5", internal, "10.0.10.5", hostname, "n1"),
		},
		{
			name: "provided node IP wins for InternalIP",
			node: testNode("n1", withAnnotation(AnnotationProvidedNodeIP, "10.0.2.5, 2001:db8::99")), vm: guest,
			want: addrs(internal, "10.0.2.5", internal, "2001:db8::99", hostname, "n1"),
		},
		{
			name: "provided node IP plus ExternalIPs by CIDR",
			node: testNode("n1", withAnnotation(AnnotationProvidedNodeIP, "10.0.2.5")), vm: guest,
			opts: AddressOptions{ExternalCIDRs: cidrs(t, "192.0.2.0/24", "10.0.2.0/24")},
			want: addrs(internal, "10.0.2.5", external, "192.0.2.10", hostname, "n1"),
		},
		{
			name: "ExternalCIDRs and InternalCIDRs",
			node: testNode("n1"), vm: guest,
			opts: AddressOptions{InternalCIDRs: cidrs(t, "10.0.0.0/16"), ExternalCIDRs: cidrs(t, "192.0.2.0/24", "2001:db8::/32")},
			want: addrs(internal, "10.0.0.5", external, "192.0.2.10", external, "2001:db8::7",
				internal, "10.0.2.5", internal, "10.0.6.5", internal, "10.0.10.5", hostname, "n1"),
		},
		{
			name: "InternalCIDRs restrict guest addresses",
			node: testNode("n1"), vm: guest,
			opts: AddressOptions{InternalCIDRs: cidrs(t, "10.0.2.0/24", "2001:db8::/32")},
			want: addrs(internal, "2001:db8::7", internal, "10.0.2.5", hostname, "n1"),
		},
		{
			name: "address in both lists is external",
			node: testNode("n1"), vm: &xo.VM{MainIPAddress: "10.0.0.5"},
			opts: AddressOptions{InternalCIDRs: cidrs(t, "10.0.0.0/8"), ExternalCIDRs: cidrs(t, "10.0.0.0/24")},
			want: addrs(external, "10.0.0.5", hostname, "n1"),
		},
		{
			name: "unusable provided node IPs fall back to guest addresses",
			node: testNode("n1", withAnnotation(AnnotationProvidedNodeIP, "127.0.0.1,garbage,")), vm: &xo.VM{MainIPAddress: "10.0.0.5"},
			want: addrs(internal, "10.0.0.5", hostname, "n1"),
		},
		{
			name: "no VM, provided node IP only",
			node: testNode("n1", withAnnotation(AnnotationProvidedNodeIP, "10.1.1.1")),
			want: addrs(internal, "10.1.1.1", hostname, "n1"),
		},
		{
			name: "no IP at all: nil",
			node: testNode("n1"), vm: &xo.VM{Addresses: xo.AddressesOf(map[string]string{"0/ipv6/0": "fe80::1"})},
		},
		{
			name: "nil node",
			vm:   guest,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Addresses(tt.node, tt.vm, tt.opts)
			if !AddressesEqual(got, tt.want) {
				t.Fatalf("Addresses =\n %v\nwant\n %v", got, tt.want)
			}
			if tt.want == nil && got != nil {
				t.Fatalf("want nil, got %v", got)
			}
			for i := 0; i < 5; i++ {
				if again := Addresses(tt.node, tt.vm, tt.opts); !AddressesEqual(again, got) {
					t.Fatalf("not deterministic: %v vs %v", again, got)
				}
			}
		})
	}
}

func TestAddressesEqual(t *testing.T) {
	a := addrs(internal, "10.0.0.1", hostname, "n")
	if !AddressesEqual(a, addrs(internal, "10.0.0.1", hostname, "n")) {
		t.Fatal("equal lists reported different")
	}
	if AddressesEqual(a, addrs(hostname, "n", internal, "10.0.0.1")) {
		t.Fatal("order must matter")
	}
	if AddressesEqual(a, addrs(external, "10.0.0.1", hostname, "n")) {
		t.Fatal("type must matter")
	}
	if !AddressesEqual(nil, []corev1.NodeAddress{}) {
		t.Fatal("nil and empty are equal")
	}
}

// TestAddressesKeepUpstreamExternalIP: a Node the upstream XO CCM initialized carries the VM's
// mainIpAddress as ExternalIP; without ExternalCIDRs it stays, so taking over the Node writes
// nothing; with ExternalCIDRs (the operator opted in) the CIDR rules decide.
func TestAddressesKeepUpstreamExternalIP(t *testing.T) {
	vm := &xo.VM{MainIPAddress: "192.0.2.10", Addresses: xo.AddressesOf(map[string]string{"0/ipv4/0": "192.0.2.10"})}
	upstream := []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: "10.0.0.5"},
		{Type: corev1.NodeExternalIP, Address: "192.0.2.10"},
		{Type: corev1.NodeHostName, Address: "w1"},
	}
	n := &corev1.Node{}
	n.Name = "w1"
	n.Annotations = map[string]string{AnnotationProvidedNodeIP: "10.0.0.5"}
	n.Status.Addresses = upstream
	if got := Addresses(n, vm, AddressOptions{}); !AddressesEqual(got, upstream) {
		t.Fatalf("takeover changed the addresses: %v", got)
	}
	// An ExternalIP that is not the VM's is not kept.
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeExternalIP, Address: "198.51.100.1"}}
	if got := Addresses(n, vm, AddressOptions{}); len(got) != 2 || got[0].Address != "10.0.0.5" {
		t.Fatalf("a foreign ExternalIP was kept: %v", got)
	}
	// Opted in: the CIDR rules alone decide.
	n.Status.Addresses = upstream
	opts := AddressOptions{ExternalCIDRs: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}}
	for _, a := range Addresses(n, vm, opts) {
		if a.Type == corev1.NodeExternalIP {
			t.Fatalf("ExternalIP %s kept although ExternalCIDRs exclude it", a.Address)
		}
	}
	// While the guest reports nothing (the VM halted or rebooting), the ExternalIP stays: a
	// look then must not lose it for good, as nothing puts it back once the guest reports.
	n.Status.Addresses = upstream
	booting := &xo.VM{}
	if got := Addresses(n, booting, AddressOptions{}); !AddressesEqual(got, upstream) {
		t.Fatalf("a VM without guest addresses changed the addresses: %v", got)
	}
	n.Status.Addresses = Addresses(n, booting, AddressOptions{})
	if got := Addresses(n, vm, AddressOptions{}); !AddressesEqual(got, upstream) {
		t.Fatalf("the ExternalIP did not survive a reboot: %v", got)
	}
	// Within ExternalCIDRs when set.
	opts = AddressOptions{ExternalCIDRs: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}}
	if got := Addresses(n, booting, opts); !AddressesEqual(got, upstream) {
		t.Fatalf("with ExternalCIDRs, a VM without guest addresses changed the addresses: %v", got)
	}
	opts = AddressOptions{ExternalCIDRs: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}}
	if got := Addresses(n, booting, opts); len(got) != 2 || got[0].Address != "10.0.0.5" {
		t.Fatalf("an ExternalIP outside ExternalCIDRs was kept: %v", got)
	}
}

// TestAddressesUpstreamV110Shapes: the addresses the upstream XO CCM v1.1.0 leaves (its
// InternalIP is the kubelet's --node-ip, its ExternalIP the VM's mainIpAddress, ordered by
// k8s.io/cloud-provider's GetNodeAddressesFromNodeIP) are what Addresses computes, so that
// taking such a Node over writes no address; only a Node upstream left without InternalIP
// gains one, and keeps its ExternalIP.
func TestAddressesUpstreamV110Shapes(t *testing.T) {
	vm := &xo.VM{MainIPAddress: "10.0.0.5", Addresses: xo.AddressesOf(map[string]string{
		"0/ipv4/0": "10.0.0.5", "1/ipv4/0": "192.0.2.10",
	})}
	for _, tc := range []struct {
		name   string
		nodeIP string
		before []corev1.NodeAddress
		opts   AddressOptions
		// halted: the guest reports no address.
		halted bool
		want   []corev1.NodeAddress
	}{{
		name:   "--node-ip is mainIpAddress: one address both InternalIP and ExternalIP",
		nodeIP: "10.0.0.5",
		before: addrs(internal, "10.0.0.5", external, "10.0.0.5", hostname, "w1"),
		want:   addrs(internal, "10.0.0.5", external, "10.0.0.5", hostname, "w1"),
	}, {
		name:   "--node-ip another guest address",
		nodeIP: "192.0.2.10",
		before: addrs(internal, "192.0.2.10", external, "10.0.0.5", hostname, "w1"),
		want:   addrs(internal, "192.0.2.10", external, "10.0.0.5", hostname, "w1"),
	}, {
		name:   "no --node-ip: the guest addresses become InternalIPs, mainIpAddress too",
		before: addrs(external, "10.0.0.5", hostname, "w1"),
		want:   addrs(external, "10.0.0.5", internal, "10.0.0.5", internal, "192.0.2.10", hostname, "w1"),
	}, {
		name:   "ExternalCIDRs set: the CIDR rules decide, the node IP is not also external",
		nodeIP: "10.0.0.5",
		before: addrs(internal, "10.0.0.5", external, "10.0.0.5", hostname, "w1"),
		opts:   AddressOptions{ExternalCIDRs: cidrs(t, "10.0.0.0/24", "192.0.2.0/24")},
		want:   addrs(internal, "10.0.0.5", external, "192.0.2.10", hostname, "w1"),
	}, {
		name:   "ExternalCIDRs set without --node-ip: an external address is not also internal",
		before: addrs(external, "10.0.0.5", hostname, "w1"),
		opts:   AddressOptions{ExternalCIDRs: cidrs(t, "10.0.0.0/24")},
		want:   addrs(external, "10.0.0.5", internal, "192.0.2.10", hostname, "w1"),
	}, {
		name:   "the VM halted: the node IP and upstream's ExternalIP both stay",
		nodeIP: "10.0.0.5",
		before: addrs(internal, "10.0.0.5", external, "10.0.0.5", hostname, "w1"),
		halted: true,
		want:   addrs(internal, "10.0.0.5", external, "10.0.0.5", hostname, "w1"),
	}} {
		t.Run(tc.name, func(t *testing.T) {
			n := testNode("w1")
			if tc.nodeIP != "" {
				n.Annotations = map[string]string{AnnotationProvidedNodeIP: tc.nodeIP}
			}
			n.Status.Addresses = tc.before
			v := vm
			if tc.halted {
				v = &xo.VM{}
			}
			if got := Addresses(n, v, tc.opts); !AddressesEqual(got, tc.want) {
				t.Fatalf("Addresses =\n %v\nwant\n %v", got, tc.want)
			}
		})
	}
}
