package node

import (
	"fmt"
	"net"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
)

const (
	poolA = "5e0b1a6c-8f2d-4c39-a1e7-0d9b3c4f2a10"
	poolB = "9a8b7c6d-1111-4222-8333-444455556666"
	hostA = "b61a5c92-700e-4966-a13b-00633f03eea8"
	hostB = "c72b6da3-811f-4a77-b24c-11744f14ffb9"

	vmUUID        = "3f1c2b7e-0c4a-4d2b-9e51-6a0f2e8b1c11"
	vmUUIDSwapped = "7e2b1c3f-4a0c-2b4d-9e51-6a0f2e8b1c11"
	otherUUID     = "0d6e1f2a-3b4c-4d5e-8f60-718293a4b5c6"
	thirdUUID     = "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee"
	unknownUUID   = "12345678-9abc-4def-8123-456789abcdef"
)

func testVM(id, name string, addrs ...string) *xo.VM {
	vm := &xo.VM{ID: id, NameLabel: name, PowerState: xo.PowerStateRunning, PoolID: poolA, Container: hostA}
	if len(addrs) > 0 {
		vm.MainIPAddress = addrs[0]
		m := map[string]string{}
		for i, a := range addrs {
			fam := "ipv4"
			if strings.Contains(a, ":") {
				fam = "ipv6"
			}
			m[fmt.Sprintf("0/%s/%d", fam, i)] = a
		}
		vm.Addresses = xo.AddressesOf(m)
	}
	return vm
}

type nodeOpt func(*corev1.Node)

func withProviderID(p string) nodeOpt { return func(n *corev1.Node) { n.Spec.ProviderID = p } }
func withSystemUUID(u string) nodeOpt {
	return func(n *corev1.Node) { n.Status.NodeInfo.SystemUUID = u }
}
func withAnnotation(k, v string) nodeOpt {
	return func(n *corev1.Node) {
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[k] = v
	}
}
func withAddress(t corev1.NodeAddressType, a string) nodeOpt {
	return func(n *corev1.Node) {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: t, Address: a})
	}
}

func testNode(name string, opts ...nodeOpt) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, o := range opts {
		o(n)
	}
	return n
}

func TestResolve(t *testing.T) {
	vm := testVM(vmUUID, "worker-1", "10.0.0.11", "2001:db8::11")
	other := testVM(otherUUID, "worker-2", "10.0.0.12")
	twinA := testVM(thirdUUID, "twin", "10.0.0.20")
	twinB := testVM("cccccccc-dddd-4eee-8fff-000000000000", "twin", "10.0.0.21")
	sharedA := testVM("11111111-2222-4333-8444-555555555555", "shared-a", "10.0.0.30")
	sharedB := testVM("66666666-7777-4888-9999-aaaaaaaaaaaa", "shared-b", "10.0.0.30")
	loop := testVM("bbbbbbbb-cccc-4ddd-8eee-ffffffffffff", "loop", "127.0.0.1", "fe80::1")
	full := func() *testIndex { return newTestIndex(vm, other, twinA, twinB, sharedA, sharedB, loop) }
	incomplete := func() *testIndex { x := full(); x.incomplete = true; return x }

	// swappedVM is a VM whose uuid is the byte-swapped form of vm's, to make systemUUID ambiguous.
	swappedVM := testVM(vmUUIDSwapped, "swapped")

	tests := []struct {
		name       string
		idx        Index
		node       *corev1.Node
		outcome    Outcome
		method     Method
		vm         string
		candidates int
	}{
		{"systemUUID raw", full(), testNode("n", withSystemUUID(vmUUID)), OutcomeMatched, MethodSystemUUID, vmUUID, 1},
		{"systemUUID swapped (UEFI)", full(), testNode("n", withSystemUUID(vmUUIDSwapped)), OutcomeMatched, MethodSystemUUIDSwapped, vmUUID, 1},
		{"systemUUID upper-case", full(), testNode("n", withSystemUUID(strings.ToUpper(vmUUID))), OutcomeMatched, MethodSystemUUID, vmUUID, 1},
		{"systemUUID upper-case swapped", full(), testNode("n", withSystemUUID(strings.ToUpper(vmUUIDSwapped))), OutcomeMatched, MethodSystemUUIDSwapped, vmUUID, 1},
		{"systemUUID matches two VMs raw and swapped", newTestIndex(vm, swappedVM), testNode("n", withSystemUUID(vmUUID)), OutcomeAmbiguous, MethodSystemUUID, "", 2},
		{"systemUUID beats name", full(), testNode("worker-2", withSystemUUID(vmUUID)), OutcomeMatched, MethodSystemUUID, vmUUID, 1},
		{"systemUUID unknown falls through to name", full(), testNode("worker-2", withSystemUUID(unknownUUID)), OutcomeMatched, MethodName, otherUUID, 1},
		{"systemUUID garbage falls through to name", full(), testNode("worker-2", withSystemUUID("not-a-uuid")), OutcomeMatched, MethodName, otherUUID, 1},
		{"empty systemUUID unique name", full(), testNode("worker-1"), OutcomeMatched, MethodName, vmUUID, 1},
		{"duplicate names are ambiguous", full(), testNode("twin"), OutcomeAmbiguous, MethodName, "", 2},
		{"duplicate names stay ambiguous even with a unique address", full(), testNode("twin", withAddress(corev1.NodeInternalIP, "10.0.0.20")), OutcomeAmbiguous, MethodName, "", 2},
		{"address match InternalIP", full(), testNode("nope", withAddress(corev1.NodeInternalIP, "10.0.0.12")), OutcomeMatched, MethodAddress, otherUUID, 1},
		{"address match ExternalIP", full(), testNode("nope", withAddress(corev1.NodeExternalIP, "10.0.0.12")), OutcomeMatched, MethodAddress, otherUUID, 1},
		{"address match Hostname type ignored", full(), testNode("nope", withAddress(corev1.NodeHostName, "10.0.0.12")), OutcomeNotFound, MethodNone, "", 0},
		{"address match via provided-node-ip", full(), testNode("nope", withAnnotation(AnnotationProvidedNodeIP, " 192.0.2.1 , 10.0.0.11")), OutcomeMatched, MethodAddress, vmUUID, 1},
		{"address match IPv6 non-canonical", full(), testNode("nope", withAddress(corev1.NodeInternalIP, "2001:DB8:0::0:11")), OutcomeMatched, MethodAddress, vmUUID, 1},
		{"two addresses of one VM", full(), testNode("nope", withAddress(corev1.NodeInternalIP, "10.0.0.11"), withAnnotation(AnnotationProvidedNodeIP, "2001:db8::11")), OutcomeMatched, MethodAddress, vmUUID, 1},
		{"addresses of two VMs are ambiguous", full(), testNode("nope", withAddress(corev1.NodeInternalIP, "10.0.0.11"), withAddress(corev1.NodeInternalIP, "10.0.0.12")), OutcomeAmbiguous, MethodAddress, "", 2},
		{"address shared by two VMs is ambiguous", full(), testNode("nope", withAddress(corev1.NodeInternalIP, "10.0.0.30")), OutcomeAmbiguous, MethodAddress, "", 2},
		{"loopback and link-local never match", full(), testNode("nope", withAddress(corev1.NodeInternalIP, "127.0.0.1"), withAnnotation(AnnotationProvidedNodeIP, "fe80::1")), OutcomeNotFound, MethodNone, "", 0},
		{"nothing matches", full(), testNode("nope", withSystemUUID(unknownUUID)), OutcomeNotFound, MethodNone, "", 0},

		{"incomplete: uuid still matches", incomplete(), testNode("n", withSystemUUID(vmUUID)), OutcomeMatched, MethodSystemUUID, vmUUID, 1},
		{"incomplete: swapped uuid still matches", incomplete(), testNode("n", withSystemUUID(vmUUIDSwapped)), OutcomeMatched, MethodSystemUUIDSwapped, vmUUID, 1},
		{"incomplete: providerID still matches", incomplete(), testNode("n", withProviderID(FormatProviderID(poolA, vmUUID))), OutcomeMatched, MethodProviderID, vmUUID, 1},
		{"incomplete: unique name not trusted", incomplete(), testNode("worker-1"), OutcomeIncomplete, MethodName, "", 1},
		{"incomplete: unique address not trusted", incomplete(), testNode("nope", withAddress(corev1.NodeInternalIP, "10.0.0.12")), OutcomeIncomplete, MethodAddress, "", 1},
		{"incomplete: ambiguous name stays ambiguous", incomplete(), testNode("twin"), OutcomeAmbiguous, MethodName, "", 2},
		{"incomplete: no match is not a proof", incomplete(), testNode("nope"), OutcomeIncomplete, MethodNone, "", 0},

		{"providerID ours", full(), testNode("worker-2", withProviderID(FormatProviderID(poolA, vmUUID))), OutcomeMatched, MethodProviderID, vmUUID, 1},
		{"providerID ours upper-case", full(), testNode("n", withProviderID("xenorchestra://"+strings.ToUpper(poolA)+"/"+strings.ToUpper(vmUUID))), OutcomeMatched, MethodProviderID, vmUUID, 1},
		{"providerID legacy scheme", full(), testNode("n", withProviderID("xeorchestra://"+poolA+"/"+vmUUID)), OutcomeMatched, MethodProviderID, vmUUID, 1},
		{"providerID empty pool", full(), testNode("n", withProviderID("xenorchestra:///"+vmUUID)), OutcomeMatched, MethodProviderID, vmUUID, 1},
		{"providerID other pool (moved VM) still matches", full(), testNode("n", withProviderID(FormatProviderID(poolB, vmUUID))), OutcomeMatched, MethodProviderID, vmUUID, 1},
		{"providerID ours, VM absent: no fallback", full(), testNode("worker-1", withProviderID(FormatProviderID(poolA, unknownUUID)), withSystemUUID(vmUUID)), OutcomeNotFound, MethodProviderID, "", 0},
		{"providerID foreign", full(), testNode("worker-1", withProviderID("aws:///us-east-1a/i-0123456789"), withSystemUUID(vmUUID)), OutcomeForeign, MethodNone, "", 0},
		{"providerID malformed ours", full(), testNode("worker-1", withProviderID("xenorchestra://"+poolA+"/not-a-uuid"), withSystemUUID(vmUUID)), OutcomeInvalid, MethodProviderID, "", 0},
		{"providerID scheme only", full(), testNode("worker-1", withProviderID("xenorchestra://")), OutcomeInvalid, MethodProviderID, "", 0},

		{"nil node", full(), nil, OutcomeNotFound, MethodNone, "", 0},
		{"nil index", nil, testNode("worker-1"), OutcomeIncomplete, MethodNone, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Resolve(tt.idx, tt.node)
			if r.Outcome != tt.outcome || r.Method != tt.method || r.Candidates != tt.candidates {
				t.Fatalf("Resolve = %s/%s/%d, want %s/%s/%d (%s)", r.Outcome, r.Method, r.Candidates, tt.outcome, tt.method, tt.candidates, r)
			}
			gotVM := ""
			if r.VM != nil {
				gotVM = r.VM.ID
			}
			if gotVM != tt.vm {
				t.Fatalf("VM = %q, want %q", gotVM, tt.vm)
			}
			if (r.Outcome == OutcomeMatched) != (r.VM != nil) {
				t.Fatalf("VM set = %v with outcome %s", r.VM != nil, r.Outcome)
			}
			if r.Message == "" {
				t.Fatalf("empty Message")
			}
		})
	}
}

func TestResultString(t *testing.T) {
	hostile := testVM(vmUUID, "evil\nname "+strings.Repeat("x", 500))
	r := Resolve(newTestIndex(hostile), testNode("n", withSystemUUID(vmUUID)))
	s := r.String()
	if strings.ContainsAny(s, "\n\r") {
		t.Fatalf("String() contains a newline: %q", s)
	}
	if len(s) > 400 {
		t.Fatalf("String() is %d bytes long, want it bounded", len(s))
	}
	for _, want := range []string{"matched", "system_uuid", vmUUID} {
		if !strings.Contains(s, want) {
			t.Fatalf("String() = %q, want it to contain %q", s, want)
		}
	}
	amb := Resolve(newTestIndex(testVM(vmUUID, "twin"), testVM(otherUUID, "twin")), testNode("twin"))
	if s := amb.String(); !strings.Contains(s, "ambiguous by name (2 candidate VMs)") {
		t.Fatalf("String() = %q", s)
	}
}

func TestMethodOutcomeStrings(t *testing.T) {
	seen := map[string]bool{}
	for _, m := range Methods() {
		s := m.String()
		if s == "" || s == "unknown" || seen[s] {
			t.Fatalf("Method(%d).String() = %q (duplicate or empty)", m, s)
		}
		seen[s] = true
	}
	if len(seen) != 6 {
		t.Fatalf("%d methods, want 6", len(seen))
	}
	seen = map[string]bool{}
	for _, o := range Outcomes() {
		s := o.String()
		if s == "" || s == "unknown" || seen[s] {
			t.Fatalf("Outcome(%d).String() = %q (duplicate or empty)", o, s)
		}
		seen[s] = true
	}
	if len(seen) != 6 {
		t.Fatalf("%d outcomes, want 6", len(seen))
	}
	if Method(200).String() != "unknown" || Outcome(200).String() != "unknown" {
		t.Fatal("out-of-range values must print as unknown")
	}
}

func TestCandidateUUIDs(t *testing.T) {
	tests := []struct {
		name string
		node *corev1.Node
		want []string
	}{
		{"nil", nil, nil},
		{"nothing", testNode("n"), nil},
		{"providerID wins", testNode("n", withProviderID(FormatProviderID(poolA, otherUUID)), withSystemUUID(vmUUID)), []string{otherUUID}},
		{"legacy providerID", testNode("n", withProviderID("XEORCHESTRA:///"+strings.ToUpper(otherUUID))), []string{otherUUID}},
		{"foreign providerID", testNode("n", withProviderID("aws:///i-1"), withSystemUUID(vmUUID)), nil},
		{"malformed providerID", testNode("n", withProviderID("xenorchestra://x"), withSystemUUID(vmUUID)), nil},
		{"systemUUID raw and swapped", testNode("n", withSystemUUID(strings.ToUpper(vmUUID))), []string{vmUUID, vmUUIDSwapped}},
		{"symmetric systemUUID once", testNode("n", withSystemUUID("00000000-0000-0000-8000-000000000001")), []string{"00000000-0000-0000-8000-000000000001"}},
		{"garbage systemUUID", testNode("n", withSystemUUID("abc")), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := CandidateUUIDs(tt.node)
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("CandidateUUIDs = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestCanonicalIPMatchesNetParseIP(t *testing.T) {
	for _, s := range []string{
		"10.0.0.1", " 10.0.0.1 ", "::ffff:10.0.0.1", "2001:DB8::1", "2001:db8:0:0:0:0:0:1", "::", "0.0.0.0",
		"fe80::1%eth0", "010.0.0.1", "1.2.3", "", "2001:db8::1:0:0:1", "::1",
	} {
		_, got, ok := canonicalIP(s)
		ip := net.ParseIP(strings.TrimSpace(s))
		if ok != (ip != nil) {
			t.Errorf("canonicalIP(%q) ok = %v, net.ParseIP = %v", s, ok, ip)
			continue
		}
		if ok && got != ip.String() {
			t.Errorf("canonicalIP(%q) = %q, net.ParseIP(...).String() = %q", s, got, ip.String())
		}
	}
}

func FuzzCanonicalIP(f *testing.F) {
	for _, s := range []string{"10.0.0.1", "::ffff:1.2.3.4", "2001:db8::1", "fe80::1%lo", "1.2.3.04"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, got, ok := canonicalIP(s)
		ip := net.ParseIP(strings.TrimSpace(s))
		if !ok {
			return // netip is stricter on a few forms net accepts; never the other way round
		}
		if ip == nil || got != ip.String() {
			t.Fatalf("canonicalIP(%q) = %q, net.ParseIP = %v", s, got, ip)
		}
	})
}

// benchIndex builds a map-backed index of n VMs with unique names and addresses.
func benchIndex(n int) (*testIndex, []*xo.VM) {
	vms := make([]*xo.VM, n)
	for i := range vms {
		id := fmt.Sprintf("%08x-0c4a-4d2b-9e51-%012x", i, i)
		vms[i] = testVM(id, fmt.Sprintf("k8s-node-%05d", i), fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255))
	}
	return newTestIndex(vms...), vms
}

func BenchmarkResolve(b *testing.B) {
	idx, vms := benchIndex(10000)
	target := vms[4321]
	swapped, _ := SwapUUID(target.ID)
	cases := []struct {
		name string
		node *corev1.Node
		want Method
	}{
		{"providerID", testNode("x", withProviderID(FormatProviderID(poolA, target.ID))), MethodProviderID},
		{"systemUUID", testNode("x", withSystemUUID(target.ID)), MethodSystemUUID},
		{"systemUUIDSwapped", testNode("x", withSystemUUID(swapped)), MethodSystemUUIDSwapped},
		{"name", testNode(target.NameLabel), MethodName},
		{"address", testNode("x", withAddress(corev1.NodeInternalIP, target.MainIPAddress), withAnnotation(AnnotationProvidedNodeIP, target.MainIPAddress)), MethodAddress},
		{"miss", testNode("x", withSystemUUID(unknownUUID), withAddress(corev1.NodeInternalIP, "192.0.2.1")), MethodNone},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			if r := Resolve(idx, c.node); r.Method != c.want {
				b.Fatalf("Resolve = %s, want method %s", r, c.want)
			}
			b.ReportAllocs()
			for b.Loop() {
				Resolve(idx, c.node)
			}
		})
	}
}
