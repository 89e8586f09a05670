package node

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/config"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
)

// Label keys this project computes. The first three are the standard Kubernetes ones; the
// others live under the k8s.xenorchestra namespaces of the upstream XO CCM.
const (
	LabelInstanceType   = "node.kubernetes.io/instance-type"
	LabelRegion         = "topology.kubernetes.io/region"
	LabelZone           = "topology.kubernetes.io/zone"
	LabelPoolID         = "topology.k8s.xenorchestra/pool_id"
	LabelPoolName       = "topology.k8s.xenorchestra/pool_name_label"
	LabelHostID         = "topology.k8s.xenorchestra/host_id"
	LabelHostName       = "topology.k8s.xenorchestra/host_name_label"
	LabelVMName         = "vm.k8s.xenorchestra/name_label"
	LabelOriginalHostID = "topology.k8s.xenorchestra/original_host_id"
	LabelOriginalPoolID = "topology.k8s.xenorchestra/original_pool_id"
)

// betaLabels maps the deprecated beta topology and instance-type labels (which the upstream XO
// CCM set through k8s.io/cloud-provider) to their GA keys. They are never added; on a Node that
// carries one, it is kept equal to its GA label (and owned), so that nothing reads a stale zone
// after a migration.
var betaLabels = map[string]string{
	"failure-domain.beta.kubernetes.io/zone":   LabelZone,
	"failure-domain.beta.kubernetes.io/region": LabelRegion,
	"beta.kubernetes.io/instance-type":         LabelInstanceType,
}

// Annotation keys recording what the controllers own on a Node: the label keys, and the taints
// as <key>:<Effect>, each sorted and comma-separated.
const (
	AnnotationManagedLabels = "node.k8s.xenorchestra/managed-labels"
	AnnotationManagedTaints = "node.k8s.xenorchestra/managed-taints"
)

// AnnotationOutOfService records that the lifecycle controller put the out-of-service taint
// on a Node, so that it only ever lifts a taint it added.
const AnnotationOutOfService = "node.k8s.xenorchestra/out-of-service-taint"

// Taint keys the controllers manage.
const (
	// TaintUninitialized is put by a kubelet running with --cloud-provider=external, and
	// removed once the node is fully initialized.
	TaintUninitialized = "node.cloudprovider.kubernetes.io/uninitialized"
	// TaintShutdown marks (NoSchedule) a node whose VM is not running.
	TaintShutdown = "node.cloudprovider.kubernetes.io/shutdown"
	// TaintOutOfService (NoExecute) lets stateful workloads of a halted node fail over at once.
	TaintOutOfService = "node.kubernetes.io/out-of-service"
)

// VM tag prefixes that turn a tag into a node label or taint:
//
//	k8s.xenorchestra/label:<key>=<value>          label <key>=<value> (value may be empty)
//	k8s.xenorchestra/label:<key>                  label <key>=""
//	k8s.xenorchestra/taint:<key>=<value>:<Effect> taint
//	k8s.xenorchestra/taint:<key>:<Effect>         taint with an empty value
//
// Effect is NoSchedule, PreferNoSchedule or NoExecute.
const (
	TagLabelPrefix = "k8s.xenorchestra/label:"
	TagTaintPrefix = "k8s.xenorchestra/taint:"
)

// maxLabelValueLen is the Kubernetes limit on a label value's length.
const maxLabelValueLen = 63

// gib is one GiB in bytes.
const gib = 1 << 30

// InstanceType returns the node.kubernetes.io/instance-type value of a VM:
// "<vCPUs>vCPU-<memory GiB>GB", e.g. "2vCPU-1GB" (the upstream XO CCM's format).
//
//   - vCPUs is CPUs.max (the stable maximum), or CPUs.number when max is 0.
//   - Memory is memory.dynamic[1] (dynamic max) when present and positive, else
//     memory.static[1], else memory.size.
//   - GiB is written as the shortest decimal with at most two fractional digits, rounded half
//     up: 1 GiB → "1", 512 MiB → "0.5", 1.5 GiB → "1.5", 1000 MiB → "0.98". Rounding is to the
//     nearest hundredth, never to a whole number, so a 512 MiB VM is not "0GB" or "1GB".
//
// It returns "" (no label) when the vCPU count or the memory is unknown, or when the memory
// rounds to 0.00 GiB.
func InstanceType(vm *xo.VM) string {
	if vm == nil {
		return ""
	}
	cpus := vm.CPUs.Max
	if cpus <= 0 {
		cpus = vm.CPUs.Number
	}
	mem := memoryBytes(vm.Memory)
	if cpus <= 0 || mem <= 0 {
		return ""
	}
	gb := formatGiB(mem)
	if gb == "" {
		return ""
	}
	return strconv.Itoa(cpus) + "vCPU-" + gb + "GB"
}

// memoryBytes picks the memory figure of InstanceType.
func memoryBytes(m xo.Memory) int64 {
	if m.Dynamic[1] > 0 {
		return m.Dynamic[1]
	}
	if m.Static[1] > 0 {
		return m.Static[1]
	}
	return m.Size
}

// formatGiB writes a positive byte count in GiB with at most two fractional digits, rounded
// half up, trailing zeros dropped; "" when it rounds to zero. Integer arithmetic only, so it is
// exact for every int64.
func formatGiB(b int64) string {
	whole := b / gib
	rem := b % gib
	// rem < 2^30, so rem*100 cannot overflow.
	hundredths := (rem*100 + gib/2) / gib
	if hundredths == 100 {
		whole++
		hundredths = 0
	}
	if whole == 0 && hundredths == 0 {
		return ""
	}
	s := strconv.FormatInt(whole, 10)
	switch {
	case hundredths == 0:
		return s
	case hundredths%10 == 0:
		return s + "." + strconv.FormatInt(hundredths/10, 10)
	case hundredths < 10:
		return s + ".0" + strconv.FormatInt(hundredths, 10)
	default:
		return s + "." + strconv.FormatInt(hundredths, 10)
	}
}

// labelValueByte reports whether c may appear in a label value.
func labelValueByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
}

// alnum reports whether c is an ASCII letter or digit.
func alnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// validLabelValue is a fast equivalent of validation.IsValidLabelValue(s) being empty, for a
// non-empty s.
func validLabelValue(s string) bool {
	if s == "" || len(s) > maxLabelValueLen || !alnum(s[0]) || !alnum(s[len(s)-1]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !labelValueByte(s[i]) {
			return false
		}
	}
	return true
}

// SanitizeLabelValue turns an arbitrary string (a VM, host or pool name) into a valid,
// non-empty label value: every run of bytes outside [A-Za-z0-9._-] (including every non-ASCII
// character, which label values do not allow) becomes one "-", the result is cut to 63 bytes,
// and then non-alphanumerics are trimmed from both ends, so a cut value never ends in "-".
// It returns ("", false) when nothing is left. A value that is already valid is returned as is.
func SanitizeLabelValue(s string) (string, bool) {
	if validLabelValue(s) {
		return s, true
	}
	b := make([]byte, 0, min(len(s), maxLabelValueLen+1))
	inRun := false
	for i := 0; i < len(s) && len(b) < maxLabelValueLen; i++ {
		c := s[i]
		if labelValueByte(c) {
			b = append(b, c)
			inRun = false
			continue
		}
		if !inRun {
			b = append(b, '-')
			inRun = true
		}
	}
	start, end := 0, len(b)
	for start < end && !alnum(b[start]) {
		start++
	}
	for end > start && !alnum(b[end-1]) {
		end--
	}
	if start == end {
		return "", false
	}
	return string(b[start:end]), true
}

// Topology label sources: the values of the config's topology.region and topology.zone.
const (
	RegionPoolID   = config.RegionPoolID
	RegionPoolName = config.RegionPoolName
	RegionServer   = config.RegionServer
	ZoneHostID     = config.ZoneHostID
	ZoneHostName   = config.ZoneHostName
)

// LabelOptions are the settings that govern the labels a VM implies: the topology label
// sources, and the labels and taints derived from VM tags.
type LabelOptions struct {
	// Region is RegionPoolID (also when empty), RegionPoolName or RegionServer.
	Region string
	// Zone is ZoneHostID (also when empty) or ZoneHostName.
	Zone string
	// TagLabelPrefixes lists the key prefixes a tag label may have (plain string prefixes,
	// e.g. "example.com/"; "" allows every key that is not reserved). Empty: no tag labels.
	TagLabelPrefixes []string
	// TagTaintPrefixes is the same for tag taints. Empty: no tag taints.
	TagTaintPrefixes []string
}

// RejectReason says why a label or taint was not produced. It is a small fixed set, usable as a
// metric label value.
type RejectReason string

// Reasons of a Rejection.
const (
	// ReasonUnsanitizable: a name has nothing left once made a valid label value.
	ReasonUnsanitizable RejectReason = "unsanitizable_value"
	// ReasonInvalidID: an XO id is not a valid label value.
	ReasonInvalidID RejectReason = "invalid_id"
	// ReasonMalformedTag: a tag with our prefix does not follow the documented form.
	ReasonMalformedTag RejectReason = "malformed_tag"
	// ReasonInvalidKey: the key is not a valid label or taint key.
	ReasonInvalidKey RejectReason = "invalid_key"
	// ReasonReservedKey: the key is in a namespace tags may never write (kubernetes.io, k8s.io,
	// k8s.xenorchestra and their subdomains).
	ReasonReservedKey RejectReason = "reserved_key"
	// ReasonPrefixNotAllowed: the key does not start with a configured prefix.
	ReasonPrefixNotAllowed RejectReason = "prefix_not_allowed"
	// ReasonInvalidValue: the value is not a valid label (or taint) value.
	ReasonInvalidValue RejectReason = "invalid_value"
	// ReasonInvalidEffect: the taint effect is not NoSchedule, PreferNoSchedule or NoExecute.
	ReasonInvalidEffect RejectReason = "invalid_effect"
	// ReasonConflictingTags: several tags give the same key (and effect) different values.
	ReasonConflictingTags RejectReason = "conflicting_tags"
	// ReasonDuplicateName: a topology label set to names would merge two hosts or pools that
	// share a name; the uuid is written instead.
	ReasonDuplicateName RejectReason = "duplicate_name"
)

// Rejection kinds.
const (
	KindLabel = "label"
	KindTaint = "taint"
)

// maxRejectedValue bounds the copy of a hostile value a Rejection keeps.
const maxRejectedValue = 256

// Rejection records a label or taint that was not produced, so the caller can emit an event and
// count it.
type Rejection struct {
	// Kind is KindLabel or KindTaint.
	Kind string
	// Key is the label or taint key concerned (possibly invalid, cut to a bounded length).
	Key string
	// Value is the offending value or tag, cut to a bounded length.
	Value string
	// Reason is why.
	Reason RejectReason
}

// String returns a one-line description, fit for an event message; outside text is quoted.
func (r Rejection) String() string {
	if r.Reason == ReasonDuplicateName {
		return fmt.Sprintf("%s %q: the name %q is shared by another host or pool; the uuid is written instead", r.Kind, truncate(r.Key, maxEventValue), truncate(r.Value, maxEventValue))
	}
	return fmt.Sprintf("%s %q not set (%s): %q", r.Kind, truncate(r.Key, maxEventValue), r.Reason, truncate(r.Value, maxEventValue))
}

func reject(kind, key, value string, reason RejectReason) Rejection {
	return Rejection{Kind: kind, Key: truncate(key, maxRejectedValue), Value: truncate(value, maxRejectedValue), Reason: reason}
}

// DesiredState is the label and taint set a VM implies for its Node (see Desired).
type DesiredState struct {
	// Labels is never nil.
	Labels map[string]string
	// Taints is sorted by key, then effect.
	Taints []corev1.Taint
	// Rejected lists what could not be produced, sorted.
	Rejected []Rejection
}

// isRunning reports whether XO's $container is the host the VM is resident on.
func isRunning(vm *xo.VM) bool {
	return vm.PowerState == xo.PowerStateRunning || vm.PowerState == xo.PowerStatePaused
}

// Desired computes the labels and taints a VM implies for its Node:
//
//   - instance type (see InstanceType), when known;
//   - region: by opts.Region, the pool uuid (default), the pool name, or the region of the XO
//     server serving the pool; pool_id: the pool uuid; pool_name_label: the pool name,
//     sanitized (kept from current while the pool is unknown);
//   - zone and host_id: the host uuid ($container) only while the VM is Running or Paused and
//     the host is known (the zone is the host name with opts.Zone ZoneHostName);
//     host_name_label its name, sanitized. Otherwise (a halted VM's $container is the pool
//     uuid) the current values are kept, and a zone equal to the pool uuid is never written or
//     kept;
//   - name_label: the VM name, sanitized;
//   - original_host_id and original_pool_id: recorded once. The current value is kept when
//     present; otherwise the first known value (the host_id/pool_id labels already on the
//     node, else the current host and pool) is used;
//   - labels and taints from VM tags (TagLabelPrefix, TagTaintPrefix), only for valid keys
//     under opts' prefixes and outside the reserved namespaces (see IsReservedKey).
//
// The host, pool and server region come from idx. A name shared by two hosts (pools) is never
// used as a zone (region): the uuid is written and the collision listed in Rejected, so that
// two failure domains are never merged. current is the Node's current labels (may be nil).
// Names that cannot be made valid label values, and refused tags, are listed in Rejected.
func Desired(idx Index, vm *xo.VM, current map[string]string, opts LabelOptions) DesiredState {
	d := DesiredState{Labels: make(map[string]string, 16)}
	if vm == nil {
		return d
	}
	host, pool := idx.Host(vm.Container), idx.Pool(vm.PoolID)
	setID := func(key, id string) {
		if id == "" {
			return
		}
		id = strings.ToLower(id)
		if !validLabelValue(id) {
			d.Rejected = append(d.Rejected, reject(KindLabel, key, id, ReasonInvalidID))
			return
		}
		d.Labels[key] = id
	}
	setName := func(key, name string) {
		if name == "" {
			return
		}
		v, ok := SanitizeLabelValue(name)
		if !ok {
			d.Rejected = append(d.Rejected, reject(KindLabel, key, name, ReasonUnsanitizable))
			return
		}
		d.Labels[key] = v
	}
	// setTopology writes a name as a topology label, or the uuid when another object has the
	// same name (or the name cannot be a label value).
	setTopology := func(key, name, id string, shared func(name, id string) bool) {
		if shared(name, id) {
			d.Rejected = append(d.Rejected, reject(KindLabel, key, name, ReasonDuplicateName))
			setID(key, id)
			return
		}
		if v, ok := SanitizeLabelValue(name); ok {
			d.Labels[key] = v
			return
		}
		d.Rejected = append(d.Rejected, reject(KindLabel, key, name, ReasonUnsanitizable))
		setID(key, id)
	}
	poolID := strings.ToLower(vm.PoolID)
	// keep carries a current label over, unless it is invalid or the pool uuid posing as a host.
	keep := func(key string) {
		if v, ok := current[key]; ok && validLabelValue(v) && (poolID == "" || !strings.EqualFold(v, poolID)) {
			d.Labels[key] = v
		}
	}

	if it := InstanceType(vm); it != "" {
		d.Labels[LabelInstanceType] = it
	}
	knownPool := pool != nil && (pool.ID == "" || strings.EqualFold(pool.ID, vm.PoolID))
	switch {
	case opts.Region == RegionServer && idx.Region(poolID) != "":
		d.Labels[LabelRegion] = idx.Region(poolID)
	case opts.Region == RegionPoolName && knownPool && pool.NameLabel != "":
		setTopology(LabelRegion, pool.NameLabel, poolID, idx.PoolNameShared)
	case (opts.Region == RegionPoolName || opts.Region == RegionServer) && validLabelValue(current[LabelRegion]):
		// The name (or the server) is unknown for now: keep what the Node has.
		d.Labels[LabelRegion] = current[LabelRegion]
	default:
		setID(LabelRegion, poolID)
	}
	setID(LabelPoolID, poolID)
	if knownPool {
		setName(LabelPoolName, pool.NameLabel)
	} else if v, ok := current[LabelPoolName]; ok && validLabelValue(v) {
		d.Labels[LabelPoolName] = v
	}

	hostID := ""
	if isRunning(vm) && vm.Container != "" && host != nil && strings.EqualFold(host.ID, vm.Container) &&
		!strings.EqualFold(vm.Container, vm.PoolID) {
		hostID = strings.ToLower(vm.Container)
		if opts.Zone == ZoneHostName && host.NameLabel != "" {
			setTopology(LabelZone, host.NameLabel, hostID, idx.HostNameShared)
		} else {
			setID(LabelZone, hostID)
		}
		setID(LabelHostID, hostID)
		setName(LabelHostName, host.NameLabel)
	} else {
		keep(LabelZone)
		keep(LabelHostID)
		if _, ok := d.Labels[LabelHostID]; ok {
			if v, ok := current[LabelHostName]; ok && validLabelValue(v) {
				d.Labels[LabelHostName] = v
			}
		}
	}
	setName(LabelVMName, vm.NameLabel)

	// Original host and pool: set once, then kept as they are.
	switch {
	case validLabelValue(current[LabelOriginalHostID]):
		d.Labels[LabelOriginalHostID] = current[LabelOriginalHostID]
	case validLabelValue(current[LabelHostID]) && !strings.EqualFold(current[LabelHostID], poolID):
		d.Labels[LabelOriginalHostID] = current[LabelHostID]
	case hostID != "" && validLabelValue(hostID):
		d.Labels[LabelOriginalHostID] = hostID
	}
	switch {
	case validLabelValue(current[LabelOriginalPoolID]):
		d.Labels[LabelOriginalPoolID] = current[LabelOriginalPoolID]
	case validLabelValue(current[LabelPoolID]):
		d.Labels[LabelOriginalPoolID] = current[LabelPoolID]
	case poolID != "" && validLabelValue(poolID):
		d.Labels[LabelOriginalPoolID] = poolID
	}

	for beta, ga := range betaLabels {
		if _, has := current[beta]; has && d.Labels[ga] != "" {
			d.Labels[beta] = d.Labels[ga]
		}
	}

	tagLabels(vm.Tags, opts.TagLabelPrefixes, &d)
	tagTaints(vm.Tags, opts.TagTaintPrefixes, &d)

	sort.Slice(d.Rejected, func(i, j int) bool {
		a, b := d.Rejected[i], d.Rejected[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if a.Key != b.Key {
			return a.Key < b.Key
		}
		if a.Reason != b.Reason {
			return a.Reason < b.Reason
		}
		return a.Value < b.Value
	})
	return d
}
