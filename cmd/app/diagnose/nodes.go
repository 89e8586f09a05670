package diagnose

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/controllers/nodestates"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/inventory"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
)

// checkNodes reports the Nodes the controller cannot initialize, and why: before the install
// (--pre) every Node, with the VM it resolves to and by which key; after it, the Nodes still
// uninitialized.
func (s *session) checkNodes(ctx context.Context) {
	lctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	list, err := s.cs.CoreV1().Nodes().List(lctx, metav1.ListOptions{})
	cancel()
	if err != nil {
		s.rep.fail(secNodes, "cannot list the Nodes: "+err.Error(), "run check as a user allowed to list Nodes")
		return
	}
	ignore := s.ignorer()
	initialized := 0
	for i := range list.Items {
		n := &list.Items[i]
		switch class := nodestates.Classify(n, ignore); {
		case class == nodestates.ClassIgnored:
			s.rep.info(secNodes, "%s: ignored (label %s=true or nodes.ignoreSelector): the controller leaves it alone", n.Name, node.LabelIgnore)
		case class == nodestates.ClassForeign:
			s.rep.warn(secNodes, fmt.Sprintf("%s: another provider's providerID %q: the controller leaves it alone", n.Name, n.Spec.ProviderID),
				fmt.Sprintf("if it is an XO VM, label it %s=true to say so, or delete the Node and restart its kubelet without --provider-id", node.LabelIgnore))
		case class == nodestates.ClassNoCloudProvider:
			l := noCloudProvider(n)
			l.Message = n.Name + ": " + l.Message
			s.rep.add(secNodes, l)
		case class == nodestates.ClassInitialized && !s.o.Pre:
			initialized++
		case s.estate == nil:
			s.rep.warn(secNodes, n.Name+": "+classWords[class]+"; its VM is not looked for without the XO config", "pass the controller's config with --config")
		default:
			res, view, err := s.estate.Find(ctx, n)
			l := resolutionLine(n, res, view, err)
			if class == nodestates.ClassUninitialized && !s.o.Pre && res.VM != nil {
				l = s.stillUninitialized(n, res, view, strings.TrimPrefix(l.Message, n.Name+": "))
			}
			s.rep.add(secNodes, l)
		}
	}
	if !s.o.Pre {
		s.rep.ok(secNodes, "%d of %d Nodes initialized", initialized, len(list.Items))
	}
}

// stillUninitialized words an uninitialized Node whose VM is known: what node.Missing says it
// lacks once described, as cloud-node describes it, or nothing (cloud-node initializes it at its
// next look).
func (s *session) stillUninitialized(n *corev1.Node, res node.Result, view *inventory.View, resolved string) Line {
	after, _ := s.described(n, res.VM, view)
	if missing := node.Missing(after, res.VM); len(missing) > 0 {
		return Line{Status: Failed, Message: fmt.Sprintf("%s: still uninitialized: it %s, but lacks %s", n.Name, resolved, strings.Join(missing, ", ")), Fix: missingFix}
	}
	return Line{Status: Warning, Message: n.Name + ": still uninitialized although it " + resolved + " and its description is complete: cloud-node initializes it at its next look",
		Fix: "if it stays so, see what the controller will do: explain node " + n.Name}
}

// noCloudProvider is the failure of a Node registered without --cloud-provider=external.
func noCloudProvider(n *corev1.Node) Line {
	return Line{Status: Failed,
		Message: fmt.Sprintf("registered by a kubelet without --cloud-provider=external (no providerID, no %s taint): the controller never initializes it", node.TaintUninitialized),
		Fix:     "restart its kubelet with --cloud-provider=external, then delete the Node (kubectl delete node " + n.Name + "): the kubelet registers it again, tainted, and it is initialized"}
}

// ignorer returns the config's Node ignore rule (the label alone without a config).
func (s *session) ignorer() node.Ignorer {
	sel := ""
	if s.cfg != nil {
		sel = s.cfg.Nodes.IgnoreSelector
	}
	ig, err := node.NewIgnorer(sel)
	if err != nil {
		ig, _ = node.NewIgnorer("")
	}
	return ig
}

// classWords says what a Node of a class is, as a check line reads.
var classWords = map[nodestates.Class]string{
	nodestates.ClassUninitialized: "uninitialized",
	nodestates.ClassInitialized:   "initialized",
}

// methodWords says which key tied a Node to its VM.
var methodWords = map[node.Method]string{
	node.MethodProviderID:        "its providerID",
	node.MethodSystemUUID:        "its system UUID",
	node.MethodSystemUUIDSwapped: "its system UUID byte-swapped (a UEFI guest's SMBIOS form)",
	node.MethodName:              "its name (the VM's name_label)",
	node.MethodAddress:           "its address",
}

// resolutionLine words the resolution of a Node (inventory.Estate.Find) as a check, with the
// fix of each way it can fail; err is the direct XO read's error.
func resolutionLine(n *corev1.Node, res node.Result, view *inventory.View, err error) Line {
	pid := "xenorchestra://<pool uuid>/<vm uuid>"
	fixProviderID := "or start its kubelet with --provider-id=" + pid + " to name its VM (then delete the Node so that it registers again)"
	name := n.Name + ": "
	switch res.Outcome {
	case node.OutcomeMatched:
		return Line{Status: OK, Message: name + "resolves to " + vmWords(res.VM, view) + " by " + methodWords[res.Method]}
	case node.OutcomeAmbiguous:
		var fix string
		switch res.Method {
		case node.MethodName:
			fix = "give the VMs distinct names in XO, " + fixProviderID
		case node.MethodAddress:
			fix = "the address belongs to several VMs (a clone, a shared address): name the Node after its VM, " + fixProviderID
		default:
			fix = "two VMs hold the system UUID, one as-is and one byte-swapped: " + strings.TrimPrefix(fixProviderID, "or ")
		}
		return Line{Status: Failed, Message: fmt.Sprintf("%sambiguous: %s, and the controller never guesses: %s", name, res.Message, candidateList(candidates(view, n, res.Method), view)), Fix: fix}
	case node.OutcomeNotFound:
		if res.Method == node.MethodProviderID {
			// The VM may be gone, or hidden with its pool: XO forgets the VMs of a pool it lost.
			l := Line{Status: Warning, Message: name + res.Message + " (" + n.Spec.ProviderID + ")",
				Fix: "the VM was deleted (cloud-node-lifecycle deletes a NotReady Node whose VM is confirmed gone), or its pool is outside the config's XO servers and pools"}
			if pool, _, err := node.ParseProviderID(n.Spec.ProviderID); err == nil && pool != "" && !view.PoolConnected(pool) {
				l.Message += ": its pool is not connected and settled on a current XO server, and XO forgets the VMs of a pool it lost"
				l.Fix = "see XO servers above"
			}
			if node.HasTaint(n.Spec.Taints, node.TaintUninitialized, "") {
				l.Status = Failed // it cannot be initialized
			}
			return l
		}
		return Line{Status: Failed, Message: name + res.Message + describeKeys(n),
			Fix: "make the VM findable: the guest reports the VM's uuid as its system UUID (HVM), the Node's name equals the VM's name_label, or XO reports one of its addresses (guest tools); and its pool is in the config's scope; " + fixProviderID}
	case node.OutcomeIncomplete:
		msg := name + res.Message
		if err != nil {
			msg += "; XO: " + err.Error()
		}
		return Line{Status: Warning, Message: msg, Fix: "see XO servers above: once every pool is connected, name and address matches resume"}
	case node.OutcomeInvalid:
		return Line{Status: Failed, Message: name + res.Message + ": " + n.Spec.ProviderID,
			Fix: "delete the Node and restart its kubelet with a valid --provider-id (" + pid + ") or none"}
	}
	return Line{Status: Info, Message: name + res.String()}
}

// describeKeys lists the keys a Node offers for resolution.
func describeKeys(n *corev1.Node) string {
	keys := []string{"name " + n.Name}
	if u := n.Status.NodeInfo.SystemUUID; u != "" {
		keys = append(keys, "system UUID "+u)
	}
	if a := nodeAddresses(n); len(a) > 0 {
		keys = append(keys, "addresses "+strings.Join(a, ", "))
	}
	return " (" + strings.Join(keys, "; ") + ")"
}

// nodeAddresses returns the addresses a Node offers for resolution: its InternalIP and
// ExternalIP addresses and the kubelet's --node-ip, in canonical form (the inventory's keys).
func nodeAddresses(n *corev1.Node) []string {
	var out []string
	add := func(s string) {
		if a, err := netip.ParseAddr(strings.TrimSpace(s)); err == nil && !slices.Contains(out, a.WithZone("").String()) {
			out = append(out, a.WithZone("").String())
		}
	}
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP || a.Type == corev1.NodeExternalIP {
			add(a.Address)
		}
	}
	for _, s := range strings.Split(n.Annotations[node.AnnotationProvidedNodeIP], ",") {
		add(s)
	}
	return out
}

// candidates returns the VMs the deciding step of a resolution found for the Node.
func candidates(view *inventory.View, n *corev1.Node, m node.Method) []*xo.VM {
	var out []*xo.VM
	add := func(vms ...*xo.VM) {
		for _, vm := range vms {
			if vm != nil && !slices.ContainsFunc(out, func(o *xo.VM) bool { return o.ID == vm.ID }) {
				out = append(out, vm)
			}
		}
	}
	switch m {
	case node.MethodName:
		add(view.VMsByName(n.Name)...)
	case node.MethodAddress:
		for _, a := range nodeAddresses(n) {
			add(view.VMsByAddress(a)...)
		}
	case node.MethodSystemUUID, node.MethodSystemUUIDSwapped:
		for _, id := range node.CandidateUUIDs(n) {
			add(view.VM(id))
		}
	}
	return out
}

// candidateList words candidate VMs.
func candidateList(vms []*xo.VM, view *inventory.View) string {
	if len(vms) == 0 {
		return "the candidates are not in the inventory"
	}
	parts := make([]string, len(vms))
	for i, vm := range vms {
		parts[i] = vmWords(vm, view)
	}
	return strings.Join(parts, "; ")
}

// vmWords names a VM: uuid, name, pool, power state.
func vmWords(vm *xo.VM, view *inventory.View) string {
	pool := vm.PoolID
	if p := view.Pool(vm.PoolID); p != nil && p.NameLabel != "" {
		pool = fmt.Sprintf("%s %q", vm.PoolID, p.NameLabel)
	}
	return fmt.Sprintf("VM %s %q (pool %s, %s)", vm.ID, vm.NameLabel, pool, vm.PowerState)
}
