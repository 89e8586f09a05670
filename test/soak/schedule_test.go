package soak_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// The schedule is generated from the seed alone, before the run starts: the generator plays
// the test's own side of the world (which VMs exist, where they run, which Nodes the test
// registered, which pools XO holds, which faults are on) in a model of its own, so that every
// step it writes is valid for the world the previous steps made. Nothing the system under test
// does feeds back into it: a Node the controller deleted is only a Node a later step may find
// missing (the step then does nothing). The same seed and duration give the same schedule;
// the timing of the system under test is not deterministic, so a replay meets the same steps at
// the same offsets, not necessarily the same interleaving with the controller.

// Action kinds. Each fault has a start and an end step.
const (
	// Node churn
	actNodeRegister   = "node-register"    // a kubelet registers the Node of a VM
	actNodeDelete     = "node-delete"      // someone deletes a Node (kubectl delete node)
	actNodeReady      = "node-ready"       // the kubelet reports Ready (Arg "true") or NotReady
	actNodeIgnored    = "node-ignored"     // a Node the controller must leave alone (ignore label or selector)
	actNodeForeign    = "node-foreign"     // a Node of another provider (its providerID)
	actNodeForeignSet = "node-foreign-set" // someone edits a foreign label of a Node
	// VM churn
	actVMCreate  = "vm-create"
	actVMDelete  = "vm-delete"
	actVMMigrate = "vm-migrate"     // live migration to another host (Arg: host index), maybe another pool of the same XO
	actVMPower   = "vm-power"       // Arg: Running, Halted, Suspended, Paused
	actVMRename  = "vm-rename"      // Arg: the new name
	actVMResize  = "vm-resize"      // N: vCPUs, Arg: memory GiB
	actVMTags    = "vm-tags"        // Arg: the new tags, joined with "|"
	actVMMove    = "vm-move-halted" // a halted VM moved to a host of another pool (Arg: host index)
	// XO faults (Server: which XO)
	actXO5xx         = "xo-5xx"        // Arg: path prefix, N: status
	actXOHang        = "xo-hang"       // Arg: path prefix
	actXORefuse      = "xo-refuse"     // connections refused (XO.Close, then Reopen)
	actXO401         = "xo-401"        // the token revoked, then restored
	actXOStreamCut   = "xo-stream-cut" // event streams cut in the middle of a message (instant)
	actXOTruncate    = "xo-truncate"   // ndjson listings truncated (N listings; instant)
	actPoolDrop      = "pool-drop"     // XO loses a pool (staged: VMs first)
	actPoolBegin     = "pool-reconnect-begin"
	actPoolReveal    = "pool-reveal"     // the pool and its hosts
	actPoolRevealVMs = "pool-reveal-vms" // N VMs
	actPoolReconnect = "pool-reconnect"  // the rest at once
	actServerDisable = "server-disable"  // the pool's /servers entry disabled (End: enabled again)
	actServerRemove  = "server-remove"   // the pool's /servers entry removed (End: added back)
	// Kubernetes faults
	actKillLeader = "kill-leader" // SIGKILL the Lease holder (End: restart it)
	actKillOther  = "kill-other"  // SIGKILL the replica that does not lead (End: restart it)
	actAPI429     = "api-429"     // the API proxy answers 429 to a share of the binaries' requests
	actAPIRestart = "api-restart" // the API server goes away: connections cut and refused (End: back)
	actCARotate   = "ca-rotate"   // the self-managed webhook CA Secret deleted: a new CA is made
	actQuiet      = "quiet"       // faults and churn stop: convergence is checked from here
)

// Step is one timed action of the schedule.
type Step struct {
	Seq    int
	At     time.Duration
	Kind   string
	End    bool // the end of a fault window
	VM     int
	Node   int
	Pool   int
	Server int
	N      int
	Arg    string
}

func (s Step) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d +%s %s", s.Seq, s.At.Round(time.Millisecond), s.Kind)
	if s.End {
		b.WriteString(" END")
	}
	switch {
	case strings.HasPrefix(s.Kind, "node-"):
		fmt.Fprintf(&b, " node=%d vm=%d", s.Node, s.VM)
	case strings.HasPrefix(s.Kind, "vm-"):
		fmt.Fprintf(&b, " vm=%d", s.VM)
	case strings.HasPrefix(s.Kind, "pool-") || strings.HasPrefix(s.Kind, "server-"):
		fmt.Fprintf(&b, " pool=%d", s.Pool)
	case strings.HasPrefix(s.Kind, "xo-"):
		fmt.Fprintf(&b, " xo=%d", s.Server)
	}
	if s.N != 0 {
		fmt.Fprintf(&b, " n=%d", s.N)
	}
	if s.Arg != "" {
		fmt.Fprintf(&b, " %q", s.Arg)
	}
	return b.String()
}

// Node kinds: how the kubelet registers, hence how the Node can be matched to its VM.
const (
	kindUUID       = "uuid"       // systemUUID = VM uuid (BIOS guest)
	kindSwapped    = "swapped"    // systemUUID = VM uuid byte-swapped (UEFI guest)
	kindName       = "name"       // no systemUUID (PV guest): Node name = VM name
	kindAddress    = "address"    // no systemUUID, another name: --node-ip = the VM's address
	kindProviderID = "providerid" // kubelet --provider-id
	kindIgnored    = "ignored"    // left alone: node.k8s.xenorchestra/ignore=true
	kindIgnoredSel = "ignoredsel" // left alone: nodes.ignoreSelector
	kindForeign    = "foreign"    // another provider's providerID
)

// Topology of the simulated estate: pools per XO server, hosts per pool; the last pool of the
// second XO is outside its pools scope.
type poolDef struct {
	server  int
	name    string
	hosts   int
	inScope bool
}

var poolDefs = []poolDef{
	{0, "xo1-pool-a", 2, true},
	{0, "xo1-pool-b", 2, true},
	{1, "xo2-pool-a", 2, true},
	{1, "xo2-pool-b", 1, true},
	{1, "xo2-outside", 1, false},
}

// hostDefs flattens the hosts: index → pool index.
func hostDefs() []int {
	var out []int
	for p, d := range poolDefs {
		for range d.hosts {
			out = append(out, p)
		}
	}
	return out
}

// Pool connection states in the model.
const (
	poolConnected    = "connected"
	poolDropped      = "dropped"
	poolBegun        = "begun"    // server connected, no objects
	poolRevealed     = "revealed" // pool + hosts, some VMs
	poolDisabled     = "disabled"
	poolRemoved      = "removed"
	numServers       = 2
	tagLabelPrefix   = "k8s.xenorchestra/label:"
	tagTaintPrefix   = "k8s.xenorchestra/taint:"
	ownedTagKeyBase  = "tag.k8s.xenorchestra/"
	foreignLabelKey  = "soak.example.com/team"
	foreignTaintKey  = "soak.example.com/dedicated"
	ignoreSelectorKv = "soak.example.com/metal"
)

type genVM struct {
	id      string
	pool    int
	host    int
	power   string
	name    string
	cpus    int
	memGiB  int
	tags    []string
	ip      string
	uefi    bool
	exists  bool
	renames int
}

type genNode struct {
	name   string
	vm     int
	kind   string
	exists bool
	ready  bool
}

type gen struct {
	r        *rand.Rand
	steps    []Step
	vms      []*genVM
	nodes    []*genNode
	pools    []string // state per pool
	hosts    []int
	active   map[string]time.Duration // fault key → end
	nextIP   int
	killBusy time.Duration // no kill before this offset (a killed replica restarts first)
	load     time.Duration // the longest time XO takes to load a pool's VMs (poolLoad)
	// now is the offset being generated; poolBack is when each pool's staged reconnection ends.
	now      time.Duration
	poolBack map[int]time.Duration
	// moveHidden lets VMs move from or to a pool XO does not hold (unless SOAK_MOVE_HIDDEN=0).
	moveHidden bool
	apiBusy    time.Duration // no kube-apiserver restart before this offset (one a minute at most)
}

// Schedule is the generated run: the initial estate (VMs and the Nodes registered before the
// binaries start) and the timed steps.
type Schedule struct {
	Seed     uint64
	Duration time.Duration
	Options  Options
	Quiet    time.Duration // offset of the quiet step
	VMs      []*genVM      // every VM the run will ever have (ids and initial state of the first ones)
	Initial  int           // VMs[:Initial] exist at the start
	Nodes    []*genNode    // every Node name the run will use
	InitialN int           // Nodes[:InitialN] are registered before the binaries start
	Steps    []Step
}

// uuidFrom returns a version-4 UUID drawn from r.
func uuidFrom(r *rand.Rand) string {
	var b [16]byte
	for i := range b {
		b[i] = byte(r.UintN(256))
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

const (
	// quietFor is how long before the end the schedule stops: the convergence check needs
	// settleTime + 10 s, plus margin for the final checks.
	quietFor = 40 * time.Second
	// checkpointEvery: a long run also stops this often for a convergence check, and goes on
	// resumeAfter after the quiet step.
	checkpointEvery = 10 * time.Minute
	resumeAfter     = 30 * time.Second
)

// defaultPoolLoad is the longest time the simulated XO takes, in a staged reconnection, from
// showing a pool object to holding all of its VMs. It stays under settleTime: the controller
// trusts a pool's absences one settle time after XO shows the pool again (issue 24's fix), so
// settleTime must exceed XO's load time, and the soak keeps to that. SOAK_POOL_LOAD changes it:
// 5s (with settleTime 3 s) makes the controller delete Nodes whose VMs XO had not loaded yet.
const defaultPoolLoad = 2 * time.Second

// Options are the knobs of a schedule besides its seed and duration.
type Options struct {
	// PoolLoad bounds XO's loading of a reconnected pool (defaultPoolLoad).
	PoolLoad time.Duration
	// MoveHidden lets VMs move between pools while XO does not hold one of them (a move made
	// with XAPI, outside XO); off, VMs move only between pools XO holds, as XO migrates them.
	MoveHidden bool
}

// Generate builds the schedule of a run of duration d from seed.
func Generate(seed uint64, d time.Duration, o Options) *Schedule {
	poolLoad := o.PoolLoad
	g := &gen{r: rand.New(rand.NewPCG(seed, seed^0x5eed5eed)), active: map[string]time.Duration{}, hosts: hostDefs(), load: poolLoad, moveHidden: o.MoveHidden,
		poolBack: map[int]time.Duration{}}
	g.pools = make([]string, len(poolDefs))
	for i := range g.pools {
		g.pools[i] = poolConnected
	}
	// The initial estate: 6 VMs per pool in scope, 3 outside, a Node for most in-scope ones.
	for p, pd := range poolDefs {
		n := 6
		if !pd.inScope {
			n = 3
		}
		for range n {
			g.newVM(p)
		}
	}
	initial := len(g.vms)
	for i, v := range g.vms {
		if poolDefs[v.pool].inScope && g.r.IntN(4) != 0 {
			g.newNode(i, g.pickKind(), true)
		}
	}
	initialN := len(g.nodes)
	quiet := d - quietFor
	if quiet < 30*time.Second {
		quiet = d / 2
	}
	// Long runs also stop every checkpointEvery for a convergence check, then go on.
	var quiets []time.Duration
	for q := checkpointEvery; q < quiet-checkpointEvery/2; q += checkpointEvery {
		quiets = append(quiets, q)
	}
	quiets = append(quiets, quiet)
	at := 5 * time.Second // the binaries are up and ready at 0
	for _, q := range quiets {
		// Churn stops a few seconds before each quiet step, so that the kubelets' follow-up
		// steps (Ready a moment after a VM starts) land before it too.
		for at < q-6*time.Second {
			g.now = at
			g.endFaultsBefore(at)
			g.step(at, q)
			// One action every 150–650 ms.
			at += time.Duration(150+g.r.IntN(500)) * time.Millisecond
		}
		g.endFaultsBefore(q + time.Hour)
		g.add(Step{At: q, Kind: actQuiet})
		at = q + resumeAfter
	}
	slices.SortStableFunc(g.steps, func(a, b Step) int { return int(a.At - b.At) })
	for i := range g.steps {
		g.steps[i].Seq = i + 1
	}
	return &Schedule{Seed: seed, Duration: d, Options: o, Quiet: quiet, VMs: g.vms, Initial: initial, Nodes: g.nodes, InitialN: initialN, Steps: g.steps}
}

func (g *gen) add(s Step) { g.steps = append(g.steps, s) }

// newVM adds a VM to the model (running on a random host of pool p) and returns its index.
func (g *gen) newVM(p int) int {
	idx := len(g.vms)
	g.nextIP++
	v := &genVM{
		id: uuidFrom(g.r), pool: p, host: g.hostOf(p), power: "Running",
		name: fmt.Sprintf("vm-%d", idx), cpus: 1 << g.r.IntN(3), memGiB: 1 << g.r.IntN(3),
		ip: fmt.Sprintf("10.%d.%d.%d", 40+p, g.nextIP/200, 1+g.nextIP%200), uefi: g.r.IntN(2) == 0, exists: true,
	}
	v.tags = g.randomTags()
	if !poolDefs[p].inScope && g.r.IntN(2) == 0 {
		// The pool outside the scope misbehaves: a twin of a VM in scope, by name.
		if tw := pick(g.r, g.vms, func(o *genVM) bool { return o.exists && poolDefs[o.pool].inScope }); tw >= 0 {
			v.name = g.vms[tw].name
		}
	}
	g.vms = append(g.vms, v)
	return idx
}

func (g *gen) hostOf(p int) int {
	var hs []int
	for h, hp := range g.hosts {
		if hp == p {
			hs = append(hs, h)
		}
	}
	return hs[g.r.IntN(len(hs))]
}

// randomTags draws VM tags: label and taint tags under the allowed prefix, a tag outside it
// (refused by the controller), and plain XO tags.
func (g *gen) randomTags() []string {
	var tags []string
	teams := []string{"db", "web", "batch"}
	if g.r.IntN(2) == 0 {
		tags = append(tags, tagLabelPrefix+ownedTagKeyBase+"team="+teams[g.r.IntN(len(teams))])
	}
	if g.r.IntN(3) == 0 {
		tags = append(tags, tagLabelPrefix+ownedTagKeyBase+"tier=t"+fmt.Sprint(g.r.IntN(3)))
	}
	if g.r.IntN(4) == 0 {
		tags = append(tags, tagTaintPrefix+ownedTagKeyBase+"dedicated=gpu:NoSchedule")
	}
	if g.r.IntN(5) == 0 {
		tags = append(tags, tagLabelPrefix+"example.com/not-allowed=x")
	}
	if g.r.IntN(2) == 0 {
		tags = append(tags, "backup=daily")
	}
	return tags
}

func (g *gen) pickKind() string {
	switch x := g.r.IntN(100); {
	case x < 30:
		return kindUUID
	case x < 55:
		return kindSwapped
	case x < 70:
		return kindName
	case x < 85:
		return kindAddress
	default:
		return kindProviderID
	}
}

// newNode adds a Node for VM vm and returns its index.
func (g *gen) newNode(vm int, kind string, exists bool) int {
	idx := len(g.nodes)
	name := fmt.Sprintf("node-%d", idx)
	if kind == kindName {
		name = g.vms[vm].name
	}
	g.nodes = append(g.nodes, &genNode{name: name, vm: vm, kind: kind, exists: exists, ready: g.vms[vm].power == "Running"})
	return idx
}

// pick returns a random index of xs for which ok holds, or -1.
func pick[T any](r *rand.Rand, xs []T, ok func(T) bool) int {
	var cand []int
	for i, x := range xs {
		if ok(x) {
			cand = append(cand, i)
		}
	}
	if len(cand) == 0 {
		return -1
	}
	return cand[r.IntN(len(cand))]
}

// visible reports whether XO holds pool p's objects in the model, its staged reconnection
// over.
func (g *gen) visible(p int) bool { return g.pools[p] == poolConnected && g.now >= g.poolBack[p] }

// endFaultsBefore writes the end steps of the fault windows that end before at.
func (g *gen) endFaultsBefore(at time.Duration) {
	keys := make([]string, 0, len(g.active))
	for k := range g.active {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		end := g.active[k]
		if end > at {
			continue
		}
		delete(g.active, k)
		var kind string
		var server, pool int
		_, _ = fmt.Sscanf(k, "%s %d %d", &kind, &server, &pool) // a pool fault's key; other keys leave kind empty
		switch kind {
		case actPoolDrop:
			// Reconnect in stages as XO does: server connected, then pool and hosts, then
			// the VMs a few at a time, each a fraction of a second apart.
			// The VMs load within g.load of the pool object showing (see poolLoad).
			t := end
			g.add(Step{At: t, Kind: actPoolBegin, Pool: pool})
			t += time.Duration(300+g.r.IntN(1500)) * time.Millisecond
			g.add(Step{At: t, Kind: actPoolReveal, Pool: pool})
			load := g.load * time.Duration(30+g.r.IntN(71)) / 100
			n := 2 + g.r.IntN(3)
			weights := make([]int, n+1)
			sum := 0
			for i := range weights {
				weights[i] = 1 + g.r.IntN(10)
				sum += weights[i]
			}
			for i := range n {
				t += load * time.Duration(weights[i]) / time.Duration(sum)
				g.add(Step{At: t, Kind: actPoolRevealVMs, Pool: pool, N: 1 + g.r.IntN(3)})
			}
			t += load * time.Duration(weights[n]) / time.Duration(sum)
			g.add(Step{At: t, Kind: actPoolReconnect, Pool: pool})
			g.pools[pool] = poolConnected
			g.poolBack[pool] = t
		case actServerDisable, actServerRemove:
			g.add(Step{At: end, Kind: kind, End: true, Pool: pool})
			g.pools[pool] = poolConnected
		default:
			g.add(Step{At: end, Kind: kind, End: true, Server: server, Pool: pool})
		}
	}
}

// startFault opens a fault window of kind on (server, pool) unless one is open; false when
// one is.
func (g *gen) startFault(kind string, server, pool int, at, dur time.Duration) bool {
	k := fmt.Sprintf("%s %d %d", kind, server, pool)
	if _, on := g.active[k]; on {
		return false
	}
	g.active[k] = at + dur
	return true
}

func (g *gen) dur(minMs, maxMs int) time.Duration {
	return time.Duration(minMs+g.r.IntN(maxMs-minMs)) * time.Millisecond
}

// step draws one action at offset at (faults end before quiet).
func (g *gen) step(at, quiet time.Duration) {
	room := quiet - at
	x := g.r.IntN(1000)
	switch {
	case x < 330:
		g.nodeChurn(at)
	case x < 660:
		g.vmChurn(at)
	case x < 900:
		if room > 25*time.Second {
			g.xoFault(at)
		} else {
			g.vmChurn(at)
		}
	default:
		if room > 40*time.Second {
			g.kubeFault(at, room)
		} else {
			g.nodeChurn(at)
		}
	}
}

func (g *gen) nodeChurn(at time.Duration) {
	x := g.r.IntN(100)
	switch {
	case x < 35: // a new Node for a VM of a pool in scope that has none
		vm := pick(g.r, g.vms, func(v *genVM) bool { return v.exists && poolDefs[v.pool].inScope })
		if vm < 0 {
			return
		}
		for _, n := range g.nodes {
			if n.vm == vm && n.exists && n.kind != kindIgnored && n.kind != kindIgnoredSel && n.kind != kindForeign {
				return
			}
		}
		kind := g.pickKind()
		if kind == kindName {
			// A name-only Node of a VM whose name another Node holds is a clash of Node names.
			for _, n := range g.nodes {
				if n.name == g.vms[vm].name {
					kind = kindUUID
				}
			}
		}
		ni := g.newNode(vm, kind, true)
		g.add(Step{At: at, Kind: actNodeRegister, Node: ni, VM: vm, Arg: fmt.Sprint(g.nodes[ni].ready)})
	case x < 50: // delete a Node
		ni := pick(g.r, g.nodes, func(n *genNode) bool { return n.exists })
		if ni < 0 {
			return
		}
		g.nodes[ni].exists = false
		g.add(Step{At: at, Kind: actNodeDelete, Node: ni, VM: g.nodes[ni].vm})
	case x < 62: // re-register a deleted Node (same name, same VM)
		ni := pick(g.r, g.nodes, func(n *genNode) bool { return !n.exists && g.vms[n.vm].exists })
		if ni < 0 {
			return
		}
		n := g.nodes[ni]
		n.exists, n.ready = true, g.vms[n.vm].power == "Running"
		g.add(Step{At: at, Kind: actNodeRegister, Node: ni, VM: n.vm, Arg: fmt.Sprint(n.ready)})
	case x < 85: // a Ready/NotReady flap
		ni := pick(g.r, g.nodes, func(n *genNode) bool { return n.exists })
		if ni < 0 {
			return
		}
		n := g.nodes[ni]
		n.ready = !n.ready
		g.add(Step{At: at, Kind: actNodeReady, Node: ni, VM: n.vm, Arg: fmt.Sprint(n.ready)})
		if !n.ready && g.vms[n.vm].power == "Running" && g.r.IntN(2) == 0 {
			// A flap: back soon.
			n.ready = true
			g.add(Step{At: at + g.dur(500, 4000), Kind: actNodeReady, Node: ni, VM: n.vm, Arg: "true"})
		}
	case x < 92: // an ignored Node (systemUUID of a real VM)
		vm := pick(g.r, g.vms, func(v *genVM) bool { return v.exists && poolDefs[v.pool].inScope })
		if vm < 0 {
			return
		}
		kind := kindIgnored
		if g.r.IntN(2) == 0 {
			kind = kindIgnoredSel
		}
		ni := g.newNode(vm, kind, true)
		g.add(Step{At: at, Kind: actNodeIgnored, Node: ni, VM: vm})
	case x < 97: // another provider's Node
		vm := pick(g.r, g.vms, func(v *genVM) bool { return v.exists && poolDefs[v.pool].inScope })
		if vm < 0 {
			return
		}
		ni := g.newNode(vm, kindForeign, true)
		g.add(Step{At: at, Kind: actNodeForeign, Node: ni, VM: vm})
	default: // someone edits a label the controller does not own
		ni := pick(g.r, g.nodes, func(n *genNode) bool { return n.exists })
		if ni < 0 {
			return
		}
		g.add(Step{At: at, Kind: actNodeForeignSet, Node: ni, VM: g.nodes[ni].vm, Arg: fmt.Sprintf("team-%d", g.r.IntN(100))})
	}
}

// nodesOf returns the indexes of the existing Nodes of VM vm registered as kubelets do.
func (g *gen) nodesOf(vm int) []int {
	var out []int
	for i, n := range g.nodes {
		if n.vm == vm && n.exists && n.kind != kindIgnored && n.kind != kindIgnoredSel && n.kind != kindForeign {
			out = append(out, i)
		}
	}
	return out
}

// kubeletFollows writes what the kubelets of VM vm report a moment after its power state
// changed: NotReady when it stops running, Ready when it runs again.
func (g *gen) kubeletFollows(at time.Duration, vm int) {
	v := g.vms[vm]
	for _, ni := range g.nodesOf(vm) {
		n := g.nodes[ni]
		ready := v.exists && v.power == "Running"
		if n.ready == ready {
			continue
		}
		n.ready = ready
		g.add(Step{At: at + g.dur(200, 3000), Kind: actNodeReady, Node: ni, VM: vm, Arg: fmt.Sprint(ready)})
	}
}

func (g *gen) vmChurn(at time.Duration) {
	x := g.r.IntN(100)
	anyVM := func(v *genVM) bool { return v.exists }
	switch {
	case x < 12: // create
		p := g.r.IntN(len(poolDefs))
		vm := g.newVM(p)
		g.add(Step{At: at, Kind: actVMCreate, VM: vm})
		if poolDefs[p].inScope && g.r.IntN(3) != 0 {
			// Its kubelet registers a few seconds later.
			kind := g.pickKind()
			ni := g.newNode(vm, kind, true)
			g.add(Step{At: at + g.dur(300, 5000), Kind: actNodeRegister, Node: ni, VM: vm, Arg: "true"})
		}
	case x < 22: // delete
		vm := pick(g.r, g.vms, anyVM)
		if vm < 0 {
			return
		}
		g.vms[vm].exists = false
		g.add(Step{At: at, Kind: actVMDelete, VM: vm})
		g.kubeletFollows(at, vm)
	case x < 37: // migrate a running VM to another host of its XO (maybe another pool)
		vm := pick(g.r, g.vms, func(v *genVM) bool { return v.exists && v.power == "Running" })
		if vm < 0 {
			return
		}
		v := g.vms[vm]
		h := pick(g.r, g.hosts, func(p int) bool {
			return poolDefs[p].server == poolDefs[v.pool].server && poolDefs[p].inScope == poolDefs[v.pool].inScope && g.movable(v.pool, p)
		})
		if h < 0 || h == v.host {
			return
		}
		v.host, v.pool = h, g.hosts[h]
		g.add(Step{At: at, Kind: actVMMigrate, VM: vm, N: h})
	case x < 55: // power
		vm := pick(g.r, g.vms, anyVM)
		if vm < 0 {
			return
		}
		v := g.vms[vm]
		states := []string{"Running", "Halted", "Suspended", "Paused"}
		st := states[g.r.IntN(len(states))]
		if v.power != "Running" && g.r.IntN(3) != 0 {
			st = "Running"
		}
		if st == v.power {
			return
		}
		v.power = st
		g.add(Step{At: at, Kind: actVMPower, VM: vm, Arg: st})
		g.kubeletFollows(at, vm)
	case x < 65: // rename (always to a name never used)
		vm := pick(g.r, g.vms, anyVM)
		if vm < 0 {
			return
		}
		v := g.vms[vm]
		v.renames++
		v.name = fmt.Sprintf("vm-%d-r%d", vm, v.renames)
		g.add(Step{At: at, Kind: actVMRename, VM: vm, Arg: v.name})
	case x < 75: // resize
		vm := pick(g.r, g.vms, anyVM)
		if vm < 0 {
			return
		}
		v := g.vms[vm]
		v.cpus, v.memGiB = 1<<g.r.IntN(3), 1<<g.r.IntN(3)
		g.add(Step{At: at, Kind: actVMResize, VM: vm, N: v.cpus, Arg: fmt.Sprint(v.memGiB)})
	case x < 92: // tags
		vm := pick(g.r, g.vms, anyVM)
		if vm < 0 {
			return
		}
		v := g.vms[vm]
		v.tags = g.randomTags()
		g.add(Step{At: at, Kind: actVMTags, VM: vm, Arg: strings.Join(v.tags, "|")})
	default: // a halted VM moved to a host of another pool of the same XO
		vm := pick(g.r, g.vms, func(v *genVM) bool { return v.exists && v.power == "Halted" })
		if vm < 0 {
			return
		}
		v := g.vms[vm]
		h := pick(g.r, g.hosts, func(p int) bool {
			return p != v.pool && poolDefs[p].server == poolDefs[v.pool].server && poolDefs[p].inScope == poolDefs[v.pool].inScope && g.movable(v.pool, p)
		})
		if h < 0 {
			return
		}
		v.host, v.pool = h, g.hosts[h]
		g.add(Step{At: at, Kind: actVMMove, VM: vm, N: h})
	}
}

func (g *gen) xoFault(at time.Duration) {
	s := g.r.IntN(numServers)
	prefixes := []string{"/rest/v0/vms", "/rest/v0/pools", "/rest/v0/hosts", "/rest/v0/servers", "/rest/v0/events", "/rest/v0"}
	x := g.r.IntN(100)
	switch {
	case x < 14:
		d := g.dur(1000, 6000)
		p := prefixes[g.r.IntN(len(prefixes))]
		if g.startFault(actXO5xx, s, 0, at, d) {
			codes := []int{500, 502, 503}
			g.add(Step{At: at, Kind: actXO5xx, Server: s, Arg: p, N: codes[g.r.IntN(len(codes))]})
		}
	case x < 26:
		d := g.dur(1000, 6000)
		p := prefixes[g.r.IntN(len(prefixes))]
		if g.startFault(actXOHang, s, 0, at, d) {
			g.add(Step{At: at, Kind: actXOHang, Server: s, Arg: p})
		}
	case x < 36:
		if g.startFault(actXORefuse, s, 0, at, g.dur(1000, 6000)) {
			g.add(Step{At: at, Kind: actXORefuse, Server: s})
		}
	case x < 46:
		if g.startFault(actXO401, s, 0, at, g.dur(1000, 6000)) {
			g.add(Step{At: at, Kind: actXO401, Server: s})
		}
	case x < 56:
		g.add(Step{At: at, Kind: actXOStreamCut, Server: s})
	case x < 66:
		g.add(Step{At: at, Kind: actXOTruncate, Server: s, N: 1 + g.r.IntN(3)})
	case x < 82: // a pool dropped (any pool, the one outside the scope too), reconnected in stages later
		p := pick(g.r, poolDefs, func(pd poolDef) bool { return true })
		if !g.visible(p) || g.busyServer(poolDefs[p].server) {
			return
		}
		if g.startFault(actPoolDrop, poolDefs[p].server, p, at, g.dur(1000, 12000)) {
			g.pools[p] = poolDropped
			g.add(Step{At: at, Kind: actPoolDrop, Pool: p})
		}
	case x < 91:
		p := g.r.IntN(len(poolDefs))
		if !g.visible(p) || g.busyServer(poolDefs[p].server) {
			return
		}
		if g.startFault(actServerDisable, poolDefs[p].server, p, at, g.dur(1000, 10000)) {
			g.pools[p] = poolDisabled
			g.add(Step{At: at, Kind: actServerDisable, Pool: p})
		}
	default:
		p := g.r.IntN(len(poolDefs))
		if !g.visible(p) || g.busyServer(poolDefs[p].server) {
			return
		}
		if g.startFault(actServerRemove, poolDefs[p].server, p, at, g.dur(1000, 10000)) {
			g.pools[p] = poolRemoved
			g.add(Step{At: at, Kind: actServerRemove, Pool: p})
		}
	}
}

// movable reports whether a VM may move from pool from to pool to: XO migrates between pools
// it holds, so both must be connected, unless moveHidden (a move made outside XO, by XAPI,
// while XO does not hold one of the pools).
func (g *gen) movable(from, to int) bool {
	return g.moveHidden || (g.visible(from) && g.visible(to))
}

// busyServer reports whether one of the server's pools is already out: one pool at a time per
// XO keeps every run with a pool to match against.
func (g *gen) busyServer(s int) bool {
	for p := range g.pools {
		if poolDefs[p].server == s && !g.visible(p) {
			return true
		}
	}
	return false
}

// apiQuiet: the API server's own faults (429s, restarts) stop this long before a quiet step.
// After them a replica's watches come back only after client-go's reflector backoff (800 ms
// doubling to 30 s, with jitter up to twice that): a soak run found a Node watch down for 49 s
// after a restart and 429s, which no bound of settleTime + 10 s can cover.
const apiQuiet = 90 * time.Second

func (g *gen) kubeFault(at, room time.Duration) {
	x := g.r.IntN(100)
	switch {
	case x < 30:
		if at >= g.killBusy {
			d := g.dur(1000, 8000)
			if g.startFault(actKillLeader, 0, 0, at, d) {
				g.killBusy = at + d + 5*time.Second
				g.add(Step{At: at, Kind: actKillLeader})
			}
		}
	case x < 50:
		if at >= g.killBusy {
			d := g.dur(1000, 8000)
			if g.startFault(actKillOther, 0, 0, at, d) {
				g.killBusy = at + d + 5*time.Second
				g.add(Step{At: at, Kind: actKillOther})
			}
		}
	case x < 72:
		if room > apiQuiet && g.startFault(actAPI429, 0, 0, at, g.dur(2000, 10000)) {
			g.add(Step{At: at, Kind: actAPI429, N: 30 + g.r.IntN(60)}) // percent of requests refused
		}
	case x < 87:
		if room > apiQuiet && at >= g.apiBusy && g.startFault(actAPIRestart, 0, 0, at, g.dur(1000, 5000)) {
			g.apiBusy = at + time.Minute
			g.add(Step{At: at, Kind: actAPIRestart})
		}
	default:
		g.add(Step{At: at, Kind: actCARotate})
	}
}
