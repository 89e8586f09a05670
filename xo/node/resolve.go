package node

import (
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
)

// AnnotationProvidedNodeIP is set by a kubelet started with --cloud-provider=external and
// --node-ip: the node IPs it was given, comma-separated.
const AnnotationProvidedNodeIP = "alpha.kubernetes.io/provided-node-ip"

// Method is the piece of evidence that tied a Node to a VM. Its String form is a fixed,
// snake_case set usable as a metric label value.
type Method uint8

// Methods, in the order Resolve tries them.
const (
	MethodNone Method = iota
	MethodProviderID
	MethodSystemUUID
	MethodSystemUUIDSwapped
	MethodName
	MethodAddress
)

var methodNames = [...]string{
	MethodNone:              "none",
	MethodProviderID:        "provider_id",
	MethodSystemUUID:        "system_uuid",
	MethodSystemUUIDSwapped: "system_uuid_swapped",
	MethodName:              "name",
	MethodAddress:           "address",
}

// String returns the metric label value of m.
func (m Method) String() string {
	if int(m) < len(methodNames) {
		return methodNames[m]
	}
	return "unknown"
}

// Methods returns every Method, for pre-registering metric label values.
func Methods() []Method {
	return []Method{MethodNone, MethodProviderID, MethodSystemUUID, MethodSystemUUIDSwapped, MethodName, MethodAddress}
}

// Outcome is how a resolution ended. Its String form is a fixed, snake_case set usable as a
// metric label value.
type Outcome uint8

// Outcomes of Resolve.
const (
	// OutcomeNotFound: no VM matches (and, for the name and address steps, the inventory is
	// complete, so none is hiding in a missing pool).
	OutcomeNotFound Outcome = iota
	// OutcomeMatched: exactly one VM matches; Result.VM is set.
	OutcomeMatched
	// OutcomeAmbiguous: several VMs match one step; no guess is made.
	OutcomeAmbiguous
	// OutcomeForeign: the node's providerID belongs to another provider; leave it alone.
	OutcomeForeign
	// OutcomeIncomplete: no uuid match, and the inventory is incomplete (a pool disconnected,
	// or the last refresh failed or is stale), so a name or address match cannot be trusted
	// and the absence of one proves nothing.
	OutcomeIncomplete
	// OutcomeInvalid: the providerID has our scheme but is malformed. It cannot be changed
	// (the API server refuses), so the node cannot be resolved.
	OutcomeInvalid
)

var outcomeNames = [...]string{
	OutcomeNotFound:   "not_found",
	OutcomeMatched:    "matched",
	OutcomeAmbiguous:  "ambiguous",
	OutcomeForeign:    "foreign",
	OutcomeIncomplete: "incomplete",
	OutcomeInvalid:    "invalid",
}

// String returns the metric label value of o.
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "unknown"
}

// Outcomes returns every Outcome, for pre-registering metric label values.
func Outcomes() []Outcome {
	return []Outcome{OutcomeNotFound, OutcomeMatched, OutcomeAmbiguous, OutcomeForeign, OutcomeIncomplete, OutcomeInvalid}
}

// Result is the answer of Resolve.
type Result struct {
	// VM is the matched VM when Outcome is OutcomeMatched, else nil. It is an immutable
	// snapshot: never modify it.
	VM *xo.VM
	// Method is the step that matched, or that found the ambiguity or the untrusted candidate;
	// MethodNone when no step produced a candidate.
	Method Method
	// Outcome is how the resolution ended.
	Outcome Outcome
	// Candidates is the number of VMs the deciding step found.
	Candidates int
	// Message is a constant sentence saying why, without node or VM specifics.
	Message string
}

// Messages of Result.Message. They are constants so that Resolve does not allocate for them.
const (
	msgNoNode            = "no node given"
	msgNoIndex           = "no inventory available"
	msgForeign           = "the providerID belongs to another provider"
	msgInvalid           = "the providerID has the xenorchestra scheme but is malformed, and a providerID cannot be changed"
	msgProviderIDMatch   = "the providerID names this VM"
	msgProviderIDMissing = "the VM named by the providerID is not in the inventory"
	msgUUIDMatch         = "the node's systemUUID equals the VM uuid"
	msgUUIDSwappedMatch  = "the node's systemUUID equals the VM uuid with its first three fields byte-swapped (UEFI)"
	msgUUIDAmbiguous     = "the node's systemUUID matches one VM as-is and another byte-swapped"
	msgNameMatch         = "the node name equals the VM name_label, and no other VM has it"
	msgNameAmbiguous     = "several VMs have the node's name as name_label"
	msgAddressMatch      = "a node address belongs to this VM only"
	msgAddressAmbiguous  = "the node's addresses belong to several VMs"
	msgIncompleteMatch   = "a VM matches by name or address, but the inventory is incomplete (a pool is disconnected or settling, a VM with that name or address just left, or the last refresh failed), so the match is not trusted"
	msgIncompleteNone    = "no VM matches, but the inventory is incomplete (a pool is disconnected or the last refresh failed)"
	msgNotFound          = "no VM matches the node's providerID, systemUUID, name or addresses"
)

// maxEventValue bounds how much of a VM-supplied string Result.String repeats.
const maxEventValue = 100

// String returns a one-line description of r, fit for an event message. VM-supplied text is
// quoted and cut to a bounded length.
func (r Result) String() string {
	var b strings.Builder
	b.WriteString(r.Outcome.String())
	if r.Method != MethodNone {
		b.WriteString(" by ")
		b.WriteString(r.Method.String())
	}
	if r.VM != nil {
		fmt.Fprintf(&b, " (VM %s %q)", truncate(r.VM.ID, maxEventValue), truncate(r.VM.NameLabel, maxEventValue))
	} else if r.Candidates > 1 {
		fmt.Fprintf(&b, " (%d candidate VMs)", r.Candidates)
	}
	if r.Message != "" {
		b.WriteString(": ")
		b.WriteString(r.Message)
	}
	return b.String()
}

// Resolve finds the VM behind a Node, in this order, stopping at the first step that gives an
// answer:
//
//  1. spec.providerID: ours (current or legacy scheme) → the VM it names, or OutcomeNotFound
//     when that VM is not in the inventory (a providerID cannot change, so nothing else is
//     tried; callers may GET CandidateUUIDs); another provider's → OutcomeForeign; ours but
//     malformed → OutcomeInvalid.
//  2. status.nodeInfo.systemUUID (any case) equal to a VM uuid as-is or with its first three
//     fields byte-swapped. Both forms are looked up: matching two different VMs is ambiguous.
//  3. The node name equal to exactly one VM name_label.
//  4. The node's addresses (status.addresses InternalIP and ExternalIP, and the kubelet's
//     alpha.kubernetes.io/provided-node-ip annotation) belonging to exactly one VM.
//
// Several candidates at any step give OutcomeAmbiguous: never a guess. Steps 3 and 4 are only
// trusted when idx.Complete(): otherwise a unique-looking candidate may have a twin in a
// missing pool, and the answer is OutcomeIncomplete. Steps 1 and 2 do not depend on
// completeness.
//
// Resolve does no I/O. On the common paths it allocates at most once (for the byte-swapped
// uuid).
func Resolve(idx Index, n *corev1.Node) Result {
	if n == nil {
		return Result{Outcome: OutcomeNotFound, Message: msgNoNode}
	}
	if idx == nil {
		return Result{Outcome: OutcomeIncomplete, Message: msgNoIndex}
	}

	if pid := n.Spec.ProviderID; pid != "" {
		_, vmID, err := ParseProviderID(pid)
		switch {
		case errors.Is(err, ErrNotOurs):
			return Result{Outcome: OutcomeForeign, Message: msgForeign}
		case err != nil:
			return Result{Outcome: OutcomeInvalid, Method: MethodProviderID, Message: msgInvalid}
		}
		// The pool part is not checked against the VM's pool: the VM uuid identifies it, and
		// the VM's own pool is the truth for the labels (unlike upstream, a moved VM or an
		// empty pool part is not an error).
		if vm := idx.VM(vmID); vm != nil {
			return Result{VM: vm, Method: MethodProviderID, Outcome: OutcomeMatched, Candidates: 1, Message: msgProviderIDMatch}
		}
		return Result{Method: MethodProviderID, Outcome: OutcomeNotFound, Message: msgProviderIDMissing}
	}

	if r, ok := resolveSystemUUID(idx, n.Status.NodeInfo.SystemUUID); ok {
		return r
	}

	complete := idx.Complete()

	if n.Name != "" {
		switch vms := idx.VMsByName(n.Name); {
		case len(vms) > 1:
			return Result{Method: MethodName, Outcome: OutcomeAmbiguous, Candidates: len(vms), Message: msgNameAmbiguous}
		case len(vms) == 1 && vms[0] != nil:
			if !complete || idx.RemovedRecently(n.Name) {
				return Result{Method: MethodName, Outcome: OutcomeIncomplete, Candidates: 1, Message: msgIncompleteMatch}
			}
			return Result{VM: vms[0], Method: MethodName, Outcome: OutcomeMatched, Candidates: 1, Message: msgNameMatch}
		}
	}

	vm, count, removed := resolveAddresses(idx, n)
	switch {
	case count > 1:
		return Result{Method: MethodAddress, Outcome: OutcomeAmbiguous, Candidates: count, Message: msgAddressAmbiguous}
	case count == 1 && (!complete || removed):
		return Result{Method: MethodAddress, Outcome: OutcomeIncomplete, Candidates: 1, Message: msgIncompleteMatch}
	case count == 1:
		return Result{VM: vm, Method: MethodAddress, Outcome: OutcomeMatched, Candidates: 1, Message: msgAddressMatch}
	case !complete:
		return Result{Outcome: OutcomeIncomplete, Message: msgIncompleteNone}
	}
	return Result{Outcome: OutcomeNotFound, Message: msgNotFound}
}

// resolveSystemUUID is step 2 of Resolve. ok is false when the step gives no answer.
func resolveSystemUUID(idx Index, systemUUID string) (Result, bool) {
	raw, ok := NormalizeUUID(systemUUID)
	if !ok {
		// Empty (PV/PVH guests have no SMBIOS) or not a uuid: this step has nothing to say.
		return Result{}, false
	}
	direct := idx.VM(raw)
	var swapped *xo.VM
	if s, _ := SwapUUID(raw); s != raw {
		swapped = idx.VM(s)
	}
	switch {
	case direct != nil && swapped != nil && direct.ID != swapped.ID:
		return Result{Method: MethodSystemUUID, Outcome: OutcomeAmbiguous, Candidates: 2, Message: msgUUIDAmbiguous}, true
	case direct != nil:
		return Result{VM: direct, Method: MethodSystemUUID, Outcome: OutcomeMatched, Candidates: 1, Message: msgUUIDMatch}, true
	case swapped != nil:
		return Result{VM: swapped, Method: MethodSystemUUIDSwapped, Outcome: OutcomeMatched, Candidates: 1, Message: msgUUIDSwappedMatch}, true
	}
	return Result{}, false
}

// resolveAddresses is step 4 of Resolve: it returns the single VM owning any of the node's
// addresses, the number of distinct VMs found (the VM is meaningful only when it is 1), and
// whether a VM that had one of the addresses left the inventory recently.
func resolveAddresses(idx Index, n *corev1.Node) (*xo.VM, int, bool) {
	var (
		first   *xo.VM
		extra   []string // ids of further distinct VMs, allocated only on ambiguity
		removed bool
	)
	add := func(ip string) {
		removed = removed || idx.RemovedRecently(ip)
		for _, vm := range idx.VMsByAddress(ip) {
			switch {
			case vm == nil:
			case first == nil:
				first = vm
			case vm.ID == first.ID:
			default:
				for _, id := range extra {
					if id == vm.ID {
						return
					}
				}
				extra = append(extra, vm.ID)
			}
		}
	}
	for i := range n.Status.Addresses {
		a := &n.Status.Addresses[i]
		if a.Type != corev1.NodeInternalIP && a.Type != corev1.NodeExternalIP {
			continue
		}
		if ip, ok := matchableIP(a.Address); ok {
			add(ip)
		}
	}
	forEachCSV(n.Annotations[AnnotationProvidedNodeIP], func(s string) {
		if ip, ok := matchableIP(s); ok {
			add(ip)
		}
	})
	if first == nil {
		return nil, 0, removed
	}
	return first, 1 + len(extra), removed
}

// CandidateUUIDs returns the VM uuids a Node may belong to, for a caller that wants to GET a VM
// missing from the inventory: the VM of an (our, well-formed) providerID alone, since a
// providerID cannot change; else the systemUUID lower-cased and byte-swapped. It returns nil for
// a foreign or malformed providerID, or when there is nothing to try.
func CandidateUUIDs(n *corev1.Node) []string {
	if n == nil {
		return nil
	}
	if n.Spec.ProviderID != "" {
		_, vm, err := ParseProviderID(n.Spec.ProviderID)
		if err != nil {
			return nil
		}
		return []string{vm}
	}
	raw, ok := NormalizeUUID(n.Status.NodeInfo.SystemUUID)
	if !ok {
		return nil
	}
	if swapped, _ := SwapUUID(raw); swapped != raw {
		return []string{raw, swapped}
	}
	return []string{raw}
}
