package diagnose

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/cmd/app"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/controllers/cloudnode"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/controllers/common"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/controllers/labelsync"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/controllers/lifecycle"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/controllers/nodestates"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/inventory"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
)

// Sections of explain, after the context check also gives (API, release, config, XO).
const (
	secVM      = "VM"
	secDesired = "Desired state"
	secNext    = "What the controllers do next"
)

// Explain runs explain node NAME and returns its report: the context (API server, release,
// config, XO servers) and, for the Node, what the controller knows and will do.
func Explain(ctx context.Context, o *Options, name string) *Report {
	s := &session{o: o, rep: &Report{Command: "explain node " + name}}
	if !s.connect(ctx) {
		return s.rep
	}
	gctx, cancel := context.WithTimeout(ctx, o.Timeout)
	n, err := s.cs.CoreV1().Nodes().Get(gctx, name, metav1.GetOptions{})
	cancel()
	secNode := "Node " + name
	if err != nil {
		fix := ""
		if apierrors.IsNotFound(err) {
			fix = "kubectl get nodes lists them"
		}
		s.rep.fail(secNode, "cannot get the Node: "+err.Error(), fix)
		return s.rep
	}
	if o.ConfigFile == "" || o.Namespace != "" || o.Release != "" {
		// The release gives the config (without --config) and the controllers it runs.
		s.findRelease(ctx)
	}
	s.loadConfig(ctx)
	s.checkXO(ctx)
	s.explainNode(ctx, secNode, n)
	return s.rep
}

// explainNode reports what the controller knows about n and what each controller does next.
func (s *session) explainNode(ctx context.Context, sec string, n *corev1.Node) {
	s.nodeFacts(sec, n)
	switch nodestates.Classify(n, s.ignorer()) {
	case nodestates.ClassIgnored:
		s.rep.ok(sec, "ignored (label %s=true or nodes.ignoreSelector): no controller and no webhook touches it", node.LabelIgnore)
		return
	case nodestates.ClassForeign:
		s.rep.ok(sec, "another provider's providerID: the controller leaves it alone")
		return
	case nodestates.ClassNoCloudProvider:
		s.rep.add(sec, noCloudProvider(n))
	}
	if s.estate == nil {
		s.rep.warn(secVM, "its VM is not looked for without the XO config", "pass the controller's config with --config")
		return
	}
	res, view, err := s.estate.Find(ctx, n)
	l := resolutionLine(n, res, view, err)
	l.Message = strings.TrimPrefix(l.Message, n.Name+": ")
	if res.Outcome == node.OutcomeMatched {
		l.Message += ": " + res.Message
	}
	s.rep.add(secVM, l)
	if res.Outcome != node.OutcomeMatched {
		for _, vm := range candidates(view, n, res.Method) {
			s.rep.info(secVM, "candidate: %s", vmWords(vm, view))
		}
	}
	var after *corev1.Node
	var desc node.Description
	if res.VM != nil {
		after, desc = s.desiredState(n, res.VM, view)
	}
	s.nextSteps(ctx, n, res, after, desc)
}

// nodeFacts states what the Node is: readiness, kubelet, keys, taints.
func (s *session) nodeFacts(sec string, n *corev1.Node) {
	ready := "NotReady"
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status == corev1.ConditionTrue {
				ready = "Ready"
			}
			ready += " since " + since(c.LastTransitionTime.Time)
		}
	}
	s.rep.info(sec, "%s, kubelet %s, created %s ago", ready, n.Status.NodeInfo.KubeletVersion, since(n.CreationTimestamp.Time))
	pid := n.Spec.ProviderID
	if pid == "" {
		pid = "none"
	}
	s.rep.info(sec, "providerID %s; system UUID %q; addresses %s", pid, n.Status.NodeInfo.SystemUUID, addressList(n.Status.Addresses))
	var taints []string
	for _, t := range n.Spec.Taints {
		taints = append(taints, t.ToString())
	}
	if len(taints) == 0 {
		taints = []string{"none"}
	}
	s.rep.info(sec, "taints: %s", strings.Join(taints, ", "))
}

// addressList writes a Node's addresses.
func addressList(as []corev1.NodeAddress) string {
	if len(as) == 0 {
		return "none"
	}
	parts := make([]string, len(as))
	for i, a := range as {
		parts[i] = string(a.Type) + " " + a.Address
	}
	return strings.Join(parts, ", ")
}

// described returns a copy of n described by its VM, as the webhook and the controllers
// describe it (node.Describe and node.Addresses), and the description.
func (s *session) described(n *corev1.Node, vm *xo.VM, view *inventory.View) (*corev1.Node, node.Description) {
	after := n.DeepCopy()
	desc := node.Describe(view, after, vm, app.LabelOptions(s.cfg))
	if addrs := node.Addresses(n, vm, app.AddressOptions(s.cfg)); len(addrs) > 0 {
		after.Status.Addresses = addrs
	}
	return after, desc
}

// missingFix says what XO must report for the fields node.Missing lists.
const missingFix = "XO must report them for the VM: its pool (region), CPUs and memory (instance type), the host of a running VM (zone), an IP address (its guest tools; or the kubelet's --node-ip)"

// desiredState reports what the VM implies for the Node against what it has (described). It
// returns the described copy (addresses included) and the description.
func (s *session) desiredState(n *corev1.Node, vm *xo.VM, view *inventory.View) (*corev1.Node, node.Description) {
	after, desc := s.described(n, vm, view)
	if n.Spec.ProviderID == after.Spec.ProviderID {
		s.rep.ok(secDesired, "providerID %s", after.Spec.ProviderID)
	} else {
		s.rep.warn(secDesired, "providerID to set: "+after.Spec.ProviderID, "")
	}
	owned := node.ManagedKeys(after.Annotations)
	keys := slices.Sorted(maps.Keys(unionKeys(n.Labels, after.Labels)))
	for _, k := range keys {
		was, had := n.Labels[k]
		now, has := after.Labels[k]
		switch {
		case had && has && was == now && slices.Contains(owned, k):
			s.rep.ok(secDesired, "label %s=%s", k, now)
		case !had && has:
			s.rep.warn(secDesired, fmt.Sprintf("label %s=%s to set", k, now), "")
		case had && has && was != now:
			s.rep.warn(secDesired, fmt.Sprintf("label %s: %q to change to %q", k, was, now), "")
		case had && !has:
			s.rep.warn(secDesired, fmt.Sprintf("label %s=%s to remove: owned by the controller, no longer implied by the VM", k, was), "")
		}
	}
	before := map[string]corev1.Taint{}
	for _, t := range n.Spec.Taints {
		before[node.TaintID(t.Key, t.Effect)] = t
	}
	ownedTaints := node.ManagedTaints(after.Annotations)
	for _, t := range after.Spec.Taints {
		id := node.TaintID(t.Key, t.Effect)
		switch b, had := before[id]; {
		case !slices.Contains(ownedTaints, id):
		case had && b.Value == t.Value:
			s.rep.ok(secDesired, "taint %s (from a VM tag)", t.ToString())
		default:
			s.rep.warn(secDesired, fmt.Sprintf("taint %s to set (from a VM tag)", t.ToString()), "")
		}
		delete(before, id)
	}
	for id, t := range before {
		if slices.Contains(node.ManagedTaints(n.Annotations), id) {
			s.rep.warn(secDesired, fmt.Sprintf("taint %s to remove: owned, its VM tag is gone", t.ToString()), "")
		}
	}
	if node.AddressesEqual(n.Status.Addresses, after.Status.Addresses) {
		s.rep.ok(secDesired, "addresses %s", addressList(after.Status.Addresses))
	} else {
		s.rep.warn(secDesired, fmt.Sprintf("addresses to change from %s to %s", addressList(n.Status.Addresses), addressList(after.Status.Addresses)), "")
	}
	s.rep.info(secDesired, "labels the controller owns (annotation %s): %s", node.AnnotationManagedLabels, listOrNone(owned))
	s.rep.info(secDesired, "taints the controller owns (annotation %s): %s", node.AnnotationManagedTaints, listOrNone(ownedTaints))
	if !view.PoolConnected(vm.PoolID) {
		s.rep.warn(secDesired, "the VM's pool is not connected and settled on a current XO server: labels are added and updated, none removed", "see XO servers above")
	}
	for _, r := range desc.Rejected {
		s.rep.warn(secDesired, "refused: "+r.String(), "docs/configuration.md#labels-and-taints-from-xo-tags: a tag's key must start with a prefix of labels.tagLabelPrefixes (tagTaintPrefixes for taints), outside the reserved namespaces")
	}
	for _, c := range desc.Conflicts {
		s.rep.warn(secDesired, "left alone: "+c+" is set by someone else with another value", "remove it from the Node if the controller should own it")
	}
	return after, desc
}

// unionKeys returns the keys of both maps.
func unionKeys(a, b map[string]string) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// enabled reports whether the release runs the controller (every controller without a
// release).
func (s *session) enabled(name string) bool {
	return s.rel == nil || slices.Contains(s.rel.Flags.EnabledControllers(), name)
}

// nextSteps says what cloud-node, cloud-node-label-sync and cloud-node-lifecycle do next with
// the Node, by their own rules; after and desc are the described copy (nil without a VM).
func (s *session) nextSteps(ctx context.Context, n *corev1.Node, res node.Result, after *corev1.Node, desc node.Description) {
	uninitialized := node.HasTaint(n.Spec.Taints, node.TaintUninitialized, "")
	ours := node.IsOurs(n.Spec.ProviderID)
	say := func(controller string, l Line) {
		l.Message = controller + ": " + l.Message
		if !s.enabled(controller) {
			l = Line{Status: Info, Message: l.Message + " (not run by this release: --controllers)"}
		}
		s.rep.add(secNext, l)
	}

	// cloud-node.
	switch {
	case uninitialized && after == nil:
		say(cloudnode.Name, Line{Status: Failed, Message: "keeps the uninitialized taint and retries with backoff: " + res.String(),
			Fix: "see VM above"})
	case uninitialized:
		// The rule of cloud-node (and of the webhook at CREATE), on a copy of the described Node.
		if missing, _ := node.Initialize(after.DeepCopy(), res.VM, node.InitializedByController); len(missing) > 0 {
			say(cloudnode.Name, Line{Status: Failed, Message: "sets what it can and keeps the uninitialized taint: missing " + strings.Join(missing, ", "),
				Fix: missingFix})
		} else {
			say(cloudnode.Name, Line{Status: Warning, Message: "initializes it: sets the desired state above and lifts the uninitialized taint"})
		}
	case !ours:
	case after == nil:
		say(cloudnode.Name, Line{Status: OK, Message: "leaves the addresses alone: the VM is not in the inventory"})
	case !node.AddressesEqual(n.Status.Addresses, after.Status.Addresses):
		say(cloudnode.Name, Line{Status: Warning, Message: "updates status.addresses to " + addressList(after.Status.Addresses)})
	default:
		say(cloudnode.Name, Line{Status: OK, Message: "nothing to do: initialized, addresses current"})
	}

	// cloud-node-label-sync: initialized Nodes of this provider.
	switch {
	case uninitialized || !ours:
		say(labelsync.Name, Line{Status: Info, Message: "nothing until the Node is initialized"})
	case after == nil:
		say(labelsync.Name, Line{Status: OK, Message: "leaves the labels alone: the VM is not in the inventory"})
	case desc.Changed:
		say(labelsync.Name, Line{Status: Warning, Message: "patches the labels and tag taints to the desired state above"})
	default:
		say(labelsync.Name, Line{Status: OK, Message: "nothing to do: labels and tag taints current"})
	}

	// cloud-node-lifecycle: Nodes of this provider.
	if !ours {
		say(lifecycle.Name, Line{Status: Info, Message: "nothing until the Node has a providerID"})
		return
	}
	d, err := lifecycle.Decide(ctx, s.estate, n, lifecycle.Options{OutOfServiceTaint: s.cfg.Lifecycle.OutOfServiceTaint, XOTimeout: s.o.Timeout})
	if err != nil {
		say(lifecycle.Name, Line{Status: Info, Message: "leaves it alone: " + err.Error()})
		return
	}
	say(lifecycle.Name, lifecycleLine(n, d, s.cfg.Inventory.SettleTime))
}

// lifecycleLine words a lifecycle decision.
func lifecycleLine(n *corev1.Node, d lifecycle.Decision, settle time.Duration) Line {
	ready := common.IsReady(n)
	power := "not in the inventory"
	if d.VM != nil {
		power = d.VM.PowerState
	}
	t := d.Taints
	switch {
	case d.Gone && d.Refusal == "":
		return Line{Status: Warning, Message: "deletes the Node now: it is NotReady and its VM is confirmed gone from XO"}
	case d.Refusal == lifecycle.RefusedSettling:
		return Line{Status: Warning, Message: fmt.Sprintf("deletes the Node within %s: it is NotReady and its VM is gone from a connected pool, and the absence must last inventory.settleTime (%s) from when the controller saw the VM leave (at the latest, this listing)",
			d.Wait.Round(time.Second), settle)}
	case d.Gone:
		return Line{Status: Warning, Message: fmt.Sprintf("keeps the Node although it is NotReady and its VM is missing from XO: deletion refused (%s): %s", d.Refusal, d.Why),
			Fix: "docs/troubleshooting.md#node-not-deleted-after-its-vm-was-deleted; if the VM is gone for good and XO cannot vouch for it, delete the Node yourself"}
	case t.AddShutdown || t.AddOutOfService:
		what := node.TaintShutdown
		if t.AddOutOfService {
			what += " and " + node.TaintOutOfService
		}
		return Line{Status: Warning, Message: fmt.Sprintf("taints it %s: it is NotReady and its VM is %s", what, power)}
	case t.RemoveShutdown || t.RemoveOutOfService:
		why := "the Node is Ready"
		if !ready {
			why = "its VM runs again"
		}
		return Line{Status: Warning, Message: "lifts its shutdown taint: " + why}
	case node.HasTaint(n.Spec.Taints, node.TaintShutdown, ""):
		return Line{Status: OK, Message: fmt.Sprintf("keeps the shutdown taint: the Node is NotReady and its VM is %s (or XO cannot show its power state now)", power)}
	case ready:
		return Line{Status: OK, Message: "nothing to do: the Node is Ready (a Ready Node is never deleted)"}
	}
	return Line{Status: OK, Message: fmt.Sprintf("nothing to do: the Node is NotReady and its VM is %s", power)}
}
