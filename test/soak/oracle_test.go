package soak_test

import (
	"fmt"
	"maps"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
)

// The oracle knows XO's true state: the executor records every change it makes to a VM, with
// the time XO made it visible (a change to a VM of a pool XO does not hold shows when the pool
// is back), and the Nodes the test registered, with the VM each belongs to. It checks every
// Node change the API server's watch shows (continuously) and the state after the faults stop
// (convergence).

// vmState is what the labels of a VM's Node derive from, at one moment.
type vmState struct {
	exists    bool
	pool      string // uuid
	poolName  string
	host      string // uuid, only while the VM runs (Running or Paused)
	hostName  string
	power     string
	name      string
	instType  string
	tagLabels map[string]string // key → value (owned prefix only)
	tagTaints []corev1.Taint
	ip        string
}

// histEntry is a state of a VM from at (when the test made the change in XO). visibleAt is when
// XO showed it (zero while XO does not hold the VM's pool): until then the state before it
// stays a value the controller may hold.
type histEntry struct {
	at, visibleAt time.Time
	st            vmState
}

// nodeRec is a Node the test registered.
type nodeRec struct {
	name    string
	vm      string // the VM uuid it belongs to
	vmIdx   int
	kind    string
	created *corev1.Node // as the test sent it (labels, annotations, taints, providerID)
	// foreign holds the values the test gave the labels it owns: value → until when it may
	// still show (zero: the current one).
	foreign map[string]map[string]time.Time
	uid     string
	exists  bool
	ready   bool
	byTest  map[string]bool // UIDs the test deleted
	// maybeByTest is a UID the test tried to delete with a request that failed.
	maybeByTest string
	lastSeen    *corev1.Node
	createdAt   time.Time
	// notReadySince and providerSeenAt are when the watch first showed the Node NotReady
	// (zero while Ready) and with a providerID: with its VM gone, the Node is deletable from
	// the last of the three.
	notReadySince  time.Time
	providerSeenAt time.Time
	lateReported   bool
}

// deletion is a Node the controller deleted, and how long after it became deletable.
type deletion struct {
	node      string
	latency   time.Duration
	faultFree bool // no fault at all between deletable and deleted
	// afterReconnect: the VM went while XO did not hold its pool; the Node became deletable
	// when the pool came back.
	afterReconnect bool
}

// Violation is a broken invariant.
type Violation struct {
	At        time.Time
	Invariant int
	What      string
	Objects   string
}

type oracle struct {
	mu     sync.Mutex
	start  time.Time
	window time.Duration // settleTime + tolerance
	hist   map[string][]histEntry
	nodes  map[string]*nodeRec
	viol   []Violation
	onViol func(Violation)
	notes  []string
	// faults: open fault windows (key → since) and closed ones.
	openFaults map[string]time.Time
	faultWins  [][2]time.Time
	deletions  []deletion
	vmPools    map[string]map[string]bool // every pool a VM was ever in
}

func newOracle(window time.Duration) *oracle {
	return &oracle{start: time.Now(), window: window, hist: map[string][]histEntry{},
		nodes: map[string]*nodeRec{}, vmPools: map[string]map[string]bool{}, openFaults: map[string]time.Time{}}
}

func (o *oracle) violate(inv int, what string, objs ...any) {
	var b strings.Builder
	for _, x := range objs {
		fmt.Fprintf(&b, "%s\n", dump(x))
	}
	v := Violation{At: time.Now(), Invariant: inv, What: what, Objects: b.String()}
	o.viol = append(o.viol, v)
	if o.onViol != nil {
		o.onViol(v)
	}
}

// record sets VM id's state from now; visible false: XO does not show it yet (reveal).
func (o *oracle) record(id string, st vmState, visible bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if st.exists {
		if o.vmPools[id] == nil {
			o.vmPools[id] = map[string]bool{}
		}
		o.vmPools[id][st.pool] = true
	}
	now := time.Now()
	e := histEntry{at: now, st: st}
	if visible {
		e.visibleAt = now
	}
	o.hist[id] = append(o.hist[id], e)
}

// reveal marks visible now the hidden states of the VMs for which in holds (their pool is back).
func (o *oracle) reveal(in func(id string, st vmState) bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := time.Now()
	for id, h := range o.hist {
		for i := range h {
			if h[i].visibleAt.IsZero() && in(id, h[i].st) {
				h[i].visibleAt = now
			}
		}
	}
}

// recent returns the states VM id may show at now: those it had at some moment of
// [now-window, now], and the one XO showed last while a later one is hidden.
func (o *oracle) recent(id string, now time.Time) []vmState {
	h := o.hist[id]
	var out []vmState
	for i, e := range h {
		if e.at.After(now) {
			continue
		}
		if i+1 < len(h) {
			end := h[i+1].visibleAt
			if !end.IsZero() && end.Before(now.Add(-o.window)) {
				continue
			}
		}
		out = append(out, e.st)
	}
	return out
}

func (o *oracle) current(id string) (vmState, bool) {
	h := o.hist[id]
	if len(h) == 0 {
		return vmState{}, false
	}
	return h[len(h)-1].st, true
}

// computedKeys are the label keys the controller computes; each maps a state to the value it
// implies ("" and false: none).
var computedKeys = map[string]func(vmState) (string, bool){
	node.LabelRegion:       func(s vmState) (string, bool) { return s.pool, s.exists },
	node.LabelPoolID:       func(s vmState) (string, bool) { return s.pool, s.exists },
	node.LabelPoolName:     func(s vmState) (string, bool) { return s.poolName, s.exists },
	node.LabelZone:         func(s vmState) (string, bool) { return s.host, s.exists && s.host != "" },
	node.LabelHostID:       func(s vmState) (string, bool) { return s.host, s.exists && s.host != "" },
	node.LabelHostName:     func(s vmState) (string, bool) { return s.hostName, s.exists && s.host != "" },
	node.LabelVMName:       func(s vmState) (string, bool) { return s.name, s.exists },
	node.LabelInstanceType: func(s vmState) (string, bool) { return s.instType, s.exists },
}

func isTagKey(k string) bool { return strings.HasPrefix(k, ownedTagKeyBase) }

// labelAllowed reports whether value (present or not) of label key is one the VM implied at
// some moment of the window.
func labelAllowed(states []vmState, key, value string, present bool) bool {
	for _, s := range states {
		if f, ok := computedKeys[key]; ok {
			if !present {
				return true // the controller keeps the last value rather than removing these
			}
			if v, ok := f(s); ok && v == value {
				return true
			}
			continue
		}
		v, ok := s.tagLabels[key]
		if ok == present && (!ok || v == value) {
			return true
		}
	}
	return false
}

func taintAllowed(states []vmState, t corev1.Taint, present bool) bool {
	for _, s := range states {
		has := slices.ContainsFunc(s.tagTaints, func(x corev1.Taint) bool { return x.MatchTaint(&t) && x.Value == t.Value })
		if has == present {
			return true
		}
	}
	return false
}

// observe checks one Node change (old nil: the first sight of the Node).
func (o *oracle) observe(old, n *corev1.Node) {
	o.mu.Lock()
	defer o.mu.Unlock()
	rec := o.nodes[n.Name]
	if rec == nil || (rec.uid != "" && rec.uid != string(n.UID)) || rec.byTest[string(n.UID)] {
		// Not the test's, or an earlier incarnation of the name (the watch may still be
		// delivering the changes it had before the test deleted it).
		return
	}
	if old != nil && old.UID != n.UID {
		// The watch was down while the name was deleted and registered again: its relist
		// shows the new incarnation as an update of the old one.
		old = nil
	}
	rec.lastSeen = n.DeepCopy()
	now := time.Now()
	if isReady(n) {
		rec.notReadySince = time.Time{}
	} else if rec.notReadySince.IsZero() {
		rec.notReadySince = now
	}
	if node.IsOurs(n.Spec.ProviderID) && rec.providerSeenAt.IsZero() {
		rec.providerSeenAt = now
	}
	if rec.kind == kindIgnored || rec.kind == kindIgnoredSel || rec.kind == kindForeign {
		o.checkUntouched(rec, n)
		return
	}
	// Foreign labels and taints: exactly what the test set.
	o.checkForeign(rec, n, now)
	for k, v := range rec.created.Labels {
		if strings.HasPrefix(k, "kubernetes.io/") || strings.HasPrefix(k, "beta.kubernetes.io/") {
			if n.Labels[k] != v {
				o.violate(2, fmt.Sprintf("Node %s: kubelet label %s=%q changed to %q", n.Name, k, v, n.Labels[k]), n)
			}
		}
	}
	if !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == foreignTaintKey }) {
		o.violate(2, fmt.Sprintf("Node %s: foreign taint %s removed", n.Name, foreignTaintKey), n)
	}
	states := o.recent(rec.vm, now)
	var oldLabels map[string]string
	if old != nil {
		oldLabels = old.Labels
	}
	// (2) every owned label that changed takes a value the VM had in the window.
	keys := map[string]bool{}
	for k := range n.Labels {
		keys[k] = true
	}
	for k := range oldLabels {
		keys[k] = true
	}
	for k := range keys {
		_, computed := computedKeys[k]
		if !computed && !isTagKey(k) {
			continue
		}
		ov, oOK := oldLabels[k]
		nv, nOK := n.Labels[k]
		if old != nil && ov == nv && oOK == nOK {
			continue
		}
		if old == nil && !nOK {
			continue
		}
		if !labelAllowed(states, k, nv, nOK) {
			what := fmt.Sprintf("Node %s: label %s=%q (present %v) is no value VM %s had in the last %s", n.Name, k, nv, nOK, rec.vm, o.window)
			o.violate(2, what, n, o.histDump(rec.vm))
		}
	}
	// Tag taints.
	oldT := []corev1.Taint{}
	if old != nil {
		oldT = old.Spec.Taints
	}
	for _, t := range n.Spec.Taints {
		if !isTagKey(t.Key) || slices.ContainsFunc(oldT, func(x corev1.Taint) bool { return x.MatchTaint(&t) && x.Value == t.Value }) {
			continue
		}
		if !taintAllowed(states, t, true) {
			o.violate(2, fmt.Sprintf("Node %s: taint %s no VM tag gave in the last %s", n.Name, t.ToString(), o.window), n, o.histDump(rec.vm))
		}
	}
	for _, t := range oldT {
		if !isTagKey(t.Key) || slices.ContainsFunc(n.Spec.Taints, func(x corev1.Taint) bool { return x.MatchTaint(&t) && x.Value == t.Value }) {
			continue
		}
		if !taintAllowed(states, t, false) {
			o.violate(2, fmt.Sprintf("Node %s: taint %s removed while the VM's tags kept it for the whole last %s", n.Name, t.ToString(), o.window), n, o.histDump(rec.vm))
		}
	}
	// (3) the uninitialized taint lifted only once providerID, the region and instance-type
	// labels and, for a VM that ran throughout the window, the zone and an IP address are set
	// (a VM that does not run has neither to give).
	hadUninit := old == nil || node.HasTaint(old.Spec.Taints, node.TaintUninitialized, "")
	if hadUninit && !node.HasTaint(n.Spec.Taints, node.TaintUninitialized, "") {
		var missing []string
		if n.Spec.ProviderID == "" {
			missing = append(missing, "providerID")
		}
		for _, k := range []string{node.LabelRegion, node.LabelInstanceType} {
			if n.Labels[k] == "" {
				missing = append(missing, k)
			}
		}
		running := len(states) > 0
		for _, s := range states {
			running = running && s.exists && s.power == "Running"
		}
		if running && n.Labels[node.LabelZone] == "" {
			missing = append(missing, node.LabelZone+" (the VM ran throughout)")
		}
		if running && !hasIP(n) {
			missing = append(missing, "an IP address (the VM ran throughout)")
		}
		if len(missing) > 0 {
			o.violate(3, fmt.Sprintf("Node %s: uninitialized taint lifted without %s", n.Name, strings.Join(missing, ", ")), old, n, o.histDump(rec.vm))
		}
	}
	// (4) the providerID names the Node's own VM, in a pool it was in.
	if n.Spec.ProviderID != "" && (old == nil || old.Spec.ProviderID != n.Spec.ProviderID) {
		pool, vm, err := node.ParseProviderID(n.Spec.ProviderID)
		switch {
		case err != nil:
			o.violate(4, fmt.Sprintf("Node %s: malformed providerID %q: %v", n.Name, n.Spec.ProviderID, err), n)
		case vm != rec.vm:
			o.violate(4, fmt.Sprintf("Node %s (registered by VM %s, kind %s) matched to VM %s", n.Name, rec.vm, rec.kind, vm), n, o.histDump(rec.vm), o.histDump(vm))
		case pool != "" && !o.vmPools[rec.vm][pool]:
			o.violate(4, fmt.Sprintf("Node %s: providerID pool %s is no pool VM %s was ever in", n.Name, pool, rec.vm), n, o.histDump(rec.vm))
		}
	}
}

// checkForeign: the labels the test owns hold a value the test gave them.
func (o *oracle) checkForeign(rec *nodeRec, n *corev1.Node, now time.Time) {
	for k, vals := range rec.foreign {
		until, ok := vals[n.Labels[k]]
		if !ok || (!until.IsZero() && until.Before(now)) {
			o.violate(2, fmt.Sprintf("Node %s: foreign label %s=%q, a value the test never gave it (or not lately)", n.Name, k, n.Labels[k]), n)
		}
	}
}

// setForeign records a new value of a foreign label before the test writes it; the previous
// one may still show for a few seconds. The returned func undoes it, for a write that failed.
func (o *oracle) setForeign(name, key, value string) (undo func()) {
	o.mu.Lock()
	defer o.mu.Unlock()
	rec := o.nodes[name]
	if rec == nil {
		return func() {}
	}
	vals := rec.foreign[key]
	var prev []string
	for v, until := range vals {
		if until.IsZero() {
			prev = append(prev, v)
			vals[v] = time.Now().Add(10 * time.Second)
		}
	}
	_, had := vals[value]
	vals[value] = time.Time{}
	return func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		for _, v := range prev {
			vals[v] = time.Time{}
		}
		if !had {
			vals[value] = time.Now().Add(10 * time.Second)
		}
	}
}

// checkUntouched: an ignored or foreign Node keeps what the test gave it.
func (o *oracle) checkUntouched(rec *nodeRec, n *corev1.Node) {
	c := rec.created
	o.checkForeign(rec, n, time.Now())
	labels := maps.Clone(c.Labels)
	got := maps.Clone(n.Labels)
	for k := range rec.foreign {
		delete(labels, k)
		delete(got, k)
	}
	switch {
	case !maps.Equal(labels, got):
		o.violate(2, fmt.Sprintf("%s Node %s: labels touched", rec.kind, n.Name), c, n)
	case !maps.Equal(c.Annotations, n.Annotations):
		o.violate(2, fmt.Sprintf("%s Node %s: annotations touched", rec.kind, n.Name), c, n)
	case !slices.EqualFunc(c.Spec.Taints, withoutSystemTaints(n.Spec.Taints), func(a, b corev1.Taint) bool { return a.MatchTaint(&b) && a.Value == b.Value }):
		o.violate(2, fmt.Sprintf("%s Node %s: taints touched", rec.kind, n.Name), c, n)
	case c.Spec.ProviderID != n.Spec.ProviderID:
		o.violate(4, fmt.Sprintf("%s Node %s: providerID set to %q", rec.kind, n.Name, n.Spec.ProviderID), c, n)
	}
}

// withoutSystemTaints drops the taints the API server (TaintNodesByCondition) and Kubernetes'
// node lifecycle put on a Node from its conditions.
func withoutSystemTaints(ts []corev1.Taint) []corev1.Taint {
	return slices.DeleteFunc(slices.Clone(ts), func(t corev1.Taint) bool {
		switch t.Key {
		case corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable, corev1.TaintNodeUnschedulable,
			corev1.TaintNodeMemoryPressure, corev1.TaintNodeDiskPressure, corev1.TaintNodePIDPressure, corev1.TaintNodeNetworkUnavailable:
			return true
		}
		return false
	})
}

// deleted checks a Node deletion: (1) a Node the test did not delete is deleted only when its
// VM exists in no XO server (vmExists, asked for n).
func (o *oracle) deleted(n *corev1.Node, tombstone bool, vmExists func(id string, n *corev1.Node) bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	rec := o.nodes[n.Name]
	if rec == nil {
		return
	}
	if rec.byTest[string(n.UID)] || rec.maybeByTest == string(n.UID) {
		return
	}
	if rec.uid == string(n.UID) {
		rec.exists = false
	}
	ids := []string{rec.vm}
	if _, vm, err := node.ParseProviderID(n.Spec.ProviderID); err == nil && vm != rec.vm {
		ids = append(ids, vm)
	}
	for _, id := range ids {
		if vmExists(id, n) {
			o.violate(1, fmt.Sprintf("Node %s deleted while its VM %s exists in XO", n.Name, id), n, o.histDump(id))
		}
	}
	if rec.kind == kindIgnored || rec.kind == kindIgnoredSel || rec.kind == kindForeign {
		o.violate(1, fmt.Sprintf("%s Node %s deleted by the controller", rec.kind, n.Name), n)
	}
	// Ready as the test last reported it (the kubelet's side), and as the watch last saw it
	// unless the watch missed the deletion (its last state may then predate a NotReady).
	if rec.uid == string(n.UID) && rec.ready && (tombstone || isReady(n)) {
		o.violate(1, fmt.Sprintf("Node %s deleted while Ready", n.Name), n)
	}
	if rec.uid == string(n.UID) {
		if at := o.deletable(rec); !at.IsZero() {
			now := time.Now()
			d := deletion{node: n.Name, latency: now.Sub(at), faultFree: o.faultFree(at, now)}
			if h := o.hist[rec.vm]; len(h) > 0 {
				gone := h[len(h)-1]
				d.afterReconnect = gone.visibleAt.Sub(gone.at) > 100*time.Millisecond && !gone.visibleAt.Before(at)
			}
			o.deletions = append(o.deletions, d)
		}
	}
	o.notes = append(o.notes, fmt.Sprintf("%s Node %s deleted by the controller (VM %s gone)", time.Now().Format("15:04:05.000"), n.Name, rec.vm))
}

// deletable returns since when the Node may be deleted (its VM gone as XO shows it, the Node
// NotReady and with a providerID), zero when it may not.
func (o *oracle) deletable(rec *nodeRec) time.Time {
	if rec.kind == kindIgnored || rec.kind == kindIgnoredSel || rec.kind == kindForeign {
		return time.Time{} // never the controller's to delete
	}
	h := o.hist[rec.vm]
	if len(h) == 0 || h[len(h)-1].st.exists || h[len(h)-1].visibleAt.IsZero() || rec.notReadySince.IsZero() || rec.providerSeenAt.IsZero() {
		return time.Time{}
	}
	at := h[len(h)-1].visibleAt
	for _, t := range []time.Time{rec.notReadySince, rec.providerSeenAt} {
		if t.After(at) {
			at = t
		}
	}
	return at
}

// faultOn opens a fault window; faultOff closes it after tail (the time its effects last:
// a leader's Lease, a replica's start).
func (o *oracle) faultOn(key string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.openFaults[key]; !ok {
		o.openFaults[key] = time.Now()
	}
}

func (o *oracle) faultOff(key string, tail time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if since, ok := o.openFaults[key]; ok {
		delete(o.openFaults, key)
		o.faultWins = append(o.faultWins, [2]time.Time{since, time.Now().Add(tail)})
	}
}

// faultBlip records an instant fault whose effects last d.
func (o *oracle) faultBlip(d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := time.Now()
	o.faultWins = append(o.faultWins, [2]time.Time{now, now.Add(d)})
}

// faultFree reports whether no fault window overlaps [a, b].
func (o *oracle) faultFree(a, b time.Time) bool {
	for _, since := range o.openFaults {
		if since.Before(b) {
			return false
		}
	}
	for _, w := range o.faultWins {
		if w[0].Before(b) && w[1].After(a) {
			return false
		}
	}
	return true
}

// checkLate reports (invariant 5) the Nodes deletable for more than bound, all of it free of
// faults, and still there.
func (o *oracle) checkLate(bound time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := time.Now()
	for _, rec := range o.nodes {
		if !rec.exists || rec.lateReported || rec.lastSeen == nil || rec.uid != string(rec.lastSeen.UID) {
			continue
		}
		at := o.deletable(rec)
		if at.IsZero() || now.Sub(at) <= bound || !o.faultFree(at, now) {
			continue
		}
		rec.lateReported = true
		o.violate(5, fmt.Sprintf("Node %s: VM %s gone and the Node NotReady for %s without any fault, and not deleted (bound %s)",
			rec.name, rec.vm, now.Sub(at).Round(time.Millisecond), bound), rec.lastSeen, o.histDump(rec.vm))
	}
}

// hasIP reports whether the Node has an InternalIP or ExternalIP that is an IP address.
func hasIP(n *corev1.Node) bool {
	for _, a := range n.Status.Addresses {
		if (a.Type == corev1.NodeInternalIP || a.Type == corev1.NodeExternalIP) && net.ParseIP(a.Address) != nil {
			return true
		}
	}
	return false
}

func isReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (o *oracle) histDump(id string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "history of VM %s:\n", id)
	for _, e := range o.hist[id] {
		s := e.st
		shown := "hidden"
		if !e.visibleAt.IsZero() {
			shown = "shown " + e.visibleAt.Format("15:04:05.000")
		}
		fmt.Fprintf(&b, "  %s (%s) exists=%v pool=%s host=%s power=%s name=%s type=%s tags=%v taints=%v\n",
			e.at.Format("15:04:05.000"), shown, s.exists, s.pool, s.host, s.power, s.name, s.instType, s.tagLabels, s.tagTaints)
	}
	return b.String()
}

// expectation returns what is wrong with Node n now that the faults stopped ("" when it is
// what the truth implies), and whether the Node should be gone.
func (o *oracle) expectation(rec *nodeRec, n *corev1.Node, unique func(st vmState, kind string) bool) (problem string, shouldBeGone bool) {
	st, ok := o.current(rec.vm)
	if !ok || !st.exists {
		if !isReady(n) && n.Spec.ProviderID != "" {
			return fmt.Sprintf("VM %s is gone and the Node NotReady: it should be deleted", rec.vm), true
		}
		return "", false
	}
	var p []string
	matchable := n.Spec.ProviderID != ""
	switch rec.kind {
	case kindUUID, kindSwapped, kindProviderID:
		matchable = true
	case kindName, kindAddress:
		matchable = matchable || unique(st, rec.kind)
	}
	if !matchable {
		if !node.HasTaint(n.Spec.Taints, node.TaintUninitialized, "") {
			p = append(p, "not matchable but initialized")
		}
		return strings.Join(p, "; "), false
	}
	want := vmProviderIDs(o.vmPools[rec.vm], rec.vm)
	if !slices.Contains(want, n.Spec.ProviderID) {
		p = append(p, fmt.Sprintf("providerID %q, want one of %v", n.Spec.ProviderID, want))
	}
	for k, f := range computedKeys {
		v, ok := f(st)
		if !ok {
			continue
		}
		if n.Labels[k] != v {
			p = append(p, fmt.Sprintf("label %s=%q, want %q", k, n.Labels[k], v))
		}
	}
	for k, v := range n.Labels {
		if isTagKey(k) {
			if w, ok := st.tagLabels[k]; !ok || w != v {
				p = append(p, fmt.Sprintf("tag label %s=%q, the VM's tags give %q (%v)", k, v, w, ok))
			}
		}
	}
	for k, v := range st.tagLabels {
		if _, ok := n.Labels[k]; !ok {
			p = append(p, fmt.Sprintf("tag label %s=%q missing", k, v))
		}
	}
	var tagTaints []corev1.Taint
	for _, t := range n.Spec.Taints {
		if isTagKey(t.Key) {
			tagTaints = append(tagTaints, t)
		}
	}
	if !sameTaints(tagTaints, st.tagTaints) {
		p = append(p, fmt.Sprintf("tag taints %v, want %v", tagTaints, st.tagTaints))
	}
	// Without an IP address the Node stays uninitialized: the kubelet gave none, and XO shows
	// guest addresses only while the VM runs or is paused.
	addressable := hasIP(n) || n.Annotations[node.AnnotationProvidedNodeIP] != "" || st.power == "Running" || st.power == "Paused"
	if node.HasTaint(n.Spec.Taints, node.TaintUninitialized, "") && addressable {
		p = append(p, "still uninitialized")
	}
	shutdown := node.HasTaint(n.Spec.Taints, node.TaintShutdown, "")
	wantShutdown := !isReady(n) && st.power != "Running"
	if shutdown != wantShutdown {
		p = append(p, fmt.Sprintf("shutdown taint %v, want %v (Ready %v, VM %s)", shutdown, wantShutdown, isReady(n), st.power))
	}
	return strings.Join(p, "; "), false
}

func vmProviderIDs(pools map[string]bool, vm string) []string {
	var out []string
	for p := range pools {
		out = append(out, node.FormatProviderID(p, vm))
	}
	sort.Strings(out)
	return out
}

func sameTaints(a, b []corev1.Taint) bool {
	if len(a) != len(b) {
		return false
	}
	for _, t := range a {
		if !slices.ContainsFunc(b, func(x corev1.Taint) bool { return x.MatchTaint(&t) && x.Value == t.Value }) {
			return false
		}
	}
	return true
}
