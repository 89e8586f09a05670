package inventory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
)

// Reader is the direct XO access beyond the inventory: a VM missing from it, and the double
// checks before anything irreversible. *xo.Client implements it.
type Reader interface {
	GetVM(ctx context.Context, id string) (*xo.VM, error)
	GetPool(ctx context.Context, id string) (*xo.Pool, error)
	ListServers(ctx context.Context, fn func(*xo.Server)) error
}

// Member is one XO server of an Estate: its inventory and a client for direct reads.
type Member struct {
	Inventory *Inventory
	XO        Reader
}

// Estate is every configured XO server, in configuration order. Each server has its own
// inventory, event stream, relists and health; the Estate answers across them. When the same
// pool is reachable through two servers, the first server (in configuration order) whose
// inventory is current and has it connected wins, so answers do not flap between copies, and
// a server that is down never answers with its old copies over a current one.
type Estate struct {
	members []Member
	// lookupTimeout bounds the direct reads of Find.
	lookupTimeout time.Duration
}

// DefaultLookupTimeout bounds Find's direct reads when NewEstate is given no timeout.
const DefaultLookupTimeout = time.Second

// NewEstate returns the Estate of these servers; lookupTimeout bounds Find's direct reads
// (0: DefaultLookupTimeout).
func NewEstate(lookupTimeout time.Duration, members ...Member) *Estate {
	if lookupTimeout <= 0 {
		lookupTimeout = DefaultLookupTimeout
	}
	return &Estate{members: members, lookupTimeout: lookupTimeout}
}

// Members returns the servers, in configuration order.
func (e *Estate) Members() []Member { return e.members }

// AddHandler registers fn to be told of every change of every server (see
// Inventory.AddHandler).
func (e *Estate) AddHandler(fn func(Change)) {
	for _, m := range e.members {
		m.Inventory.AddHandler(fn)
	}
}

// HasSynced reports whether at least one server has been listed.
func (e *Estate) HasSynced() bool {
	for _, m := range e.members {
		if m.Inventory.HasSynced() {
			return true
		}
	}
	return false
}

// ReadyCheck is a healthz checker: ready once at least one server has been listed, and no
// listed server still has pools of its first listing settling (Inventory.SettleCheck).
//
// One server's trouble never blocks another's Nodes, as before the settle time counted: a
// server that is down at start-up does not keep the webhook from serving the others' Nodes
// (Nodes of a server not listed yet resolve as incomplete and are finished by the
// controllers), and neither does a listed server whose last refresh failed or whose inventory
// is not current. A listed server whose pools are settling does hold readiness back: the wait
// is bounded by the settle time, and a Node admitted meanwhile could be matched by name or
// address by any replica that has run longer, but not by this one.
func (e *Estate) ReadyCheck(_ any) error {
	if !e.HasSynced() {
		names := make([]string, len(e.members))
		for i, m := range e.members {
			names[i] = m.Inventory.Name()
		}
		return fmt.Errorf("no XO server listed yet (%s)", strings.Join(names, ", "))
	}
	var errs []error
	for _, m := range e.members {
		if err := m.Inventory.SettleCheck(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// LastError returns the last refresh error of any server, naming it; nil when every last
// refresh succeeded.
func (e *Estate) LastError() error {
	var errs []error
	for _, m := range e.members {
		if err := m.Inventory.LastError(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// View returns the current snapshots of every server, taken at once, with whether each is
// current (Snapshot.Fresh) at that instant.
func (e *Estate) View() *View {
	n := len(e.members)
	v := &View{snaps: make([]*Snapshot, n), readers: make([]Reader, n), fresh: make([]bool, n)}
	for i, m := range e.members {
		v.snaps[i], v.readers[i] = m.Inventory.Snapshot(), m.XO
		v.fresh[i] = v.snaps[i].Fresh()
	}
	return v
}

var resolutionsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "xenorchestra_node_resolutions_total",
	Help: "Node-to-VM resolutions (webhook and cloud-node), by method and outcome; direct reads of XO for a VM missing from the inventory are counted with the method that named it.",
}, []string{"method", "outcome"})

func init() {
	metrics.Registry.MustRegister(resolutionsTotal)
	for _, m := range node.Methods() {
		for _, o := range node.Outcomes() {
			resolutionsTotal.WithLabelValues(m.String(), o.String())
		}
	}
}

// Find finds the VM behind a Node: in memory first (node.Resolve on the View), then, when the
// Node names a VM uuid the inventory lacks (a VM created seconds ago), by one direct read of
// every server, bounded by the Estate's lookup timeout. It returns the View it resolved
// against (for Describe) and an error when XO could not answer the direct read; a VM XO does
// not have is OutcomeNotFound, not an error, and a system uuid that names one VM as-is and
// another byte-swapped is OutcomeAmbiguous, as in memory.
func (e *Estate) Find(ctx context.Context, n *corev1.Node) (node.Result, *View, error) {
	v := e.View()
	res := node.Resolve(v, n)
	var err error
	if res.Outcome == node.OutcomeNotFound || res.Outcome == node.OutcomeIncomplete {
		var found node.Result
		if found, err = e.read(ctx, v, n); found.VM != nil || found.Outcome == node.OutcomeAmbiguous {
			res = found
		}
	}
	resolutionsTotal.WithLabelValues(res.Method.String(), res.Outcome.String()).Inc()
	return res, v, err
}

// msgReadUUIDAmbiguous is the message of a direct read that found two VMs for a system uuid.
const msgReadUUIDAmbiguous = "XO has one VM with the node's systemUUID as-is and another with it byte-swapped"

// read asks every server for the VM uuids the Node names, at once. Two different VMs, one for
// the raw system uuid and one for the byte-swapped form, are no match (OutcomeAmbiguous), as in
// node.Resolve: never a guess.
func (e *Estate) read(ctx context.Context, v *View, n *corev1.Node) (node.Result, error) {
	ids := node.CandidateUUIDs(n)
	if len(ids) == 0 {
		return node.Result{}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, e.lookupTimeout)
	defer cancel()
	type answer struct {
		server, rank int
		vm           *xo.VM
		err          error
	}
	answers := make(chan answer, len(v.readers)*len(ids))
	for s, r := range v.readers {
		for rank, id := range ids {
			go func() {
				vm, err := r.GetVM(ctx, id)
				answers <- answer{s, rank, vm, err}
			}()
		}
	}
	// The best answer is the raw uuid before the swapped one; among servers, the first to answer
	// (two servers can only hold the same VM through the same pool). It is final once every
	// answer that could beat it is in and no server has answered one of its reads without the
	// other (which may name a second VM), so a hung server, which answers none, delays only the
	// reads that need it. A twin on a hung server is not waited for, as in memory a twin a down
	// server never listed is not known.
	before := func(a, b *answer) bool { return a.rank < b.rank }
	answered := make(map[[2]int]bool, len(v.readers)*len(ids))
	perServer := make([]int, len(v.readers))
	settled := func(best *answer) bool {
		for s := range v.readers {
			if perServer[s] > 0 && perServer[s] < len(ids) {
				return false
			}
			for rank := range ids {
				if c := (answer{server: s, rank: rank}); before(&c, best) && !answered[[2]int{s, rank}] {
					return false
				}
			}
		}
		return true
	}
	var best *answer
	byRank := make([]*xo.VM, len(ids)) // the first VM found for each uuid
	var errs []error
	for range len(v.readers) * len(ids) {
		a := <-answers
		answered[[2]int{a.server, a.rank}] = true
		perServer[a.server]++
		switch {
		case a.err == nil && a.vm != nil:
			if byRank[a.rank] == nil {
				byRank[a.rank] = a.vm
			}
			if best == nil || before(&a, best) {
				best = &a
			}
		case a.err != nil && !xo.IsNotFound(a.err):
			errs = append(errs, fmt.Errorf("%s: %w", v.snaps[a.server].Server(), a.err))
		}
		if best != nil && settled(best) {
			break
		}
	}
	if best == nil {
		return node.Result{}, errors.Join(errs...)
	}
	if len(byRank) == 2 && byRank[0] != nil && byRank[1] != nil && lower(byRank[0].ID) != lower(byRank[1].ID) {
		return node.Result{Method: node.MethodSystemUUID, Outcome: node.OutcomeAmbiguous, Candidates: 2, Message: msgReadUUIDAmbiguous}, nil
	}
	vm := best.vm
	vm.ID = lower(vm.ID)
	internVM(vm)
	method := node.MethodSystemUUID
	switch {
	case n.Spec.ProviderID != "":
		method = node.MethodProviderID
	case best.rank > 0:
		method = node.MethodSystemUUIDSwapped
	}
	return node.Result{VM: vm, Method: method, Outcome: node.OutcomeMatched, Candidates: 1, Message: "XO has the VM the node names by uuid; the inventory has not caught up yet"}, nil
}

// View is the snapshots of every server at one instant. It implements node.Index.
//
// A server's copy of an object counts when that server's snapshot is current (fresh when the
// View was taken) and has the object's pool connected and trusted: the same test as ForPool.
// A counting copy always wins over one that does not, so that a server that is down (its
// snapshot stale, its copies as they were when it went away) never answers for a pool another
// server serves. In particular, for the VM v.VM returns, v.PoolConnected(vm.PoolID) is true
// exactly when the server that copy comes from vouches for it: the controllers take the VM and
// its trust as a pair. With one server, the copy is the server's whatever its state, as the
// server's own snapshot gives it.
type View struct {
	snaps   []*Snapshot
	readers []Reader
	// fresh is snaps[i].Fresh() when the View was taken: every answer of the View judges a
	// server current or not alike.
	fresh []bool
}

var _ node.Index = (*View)(nil)

// counts reports whether server i's copy of an object of this pool counts: its snapshot is
// current and has the pool connected and trusted.
func (v *View) counts(i int, poolID string) bool {
	return v.fresh[i] && v.snaps[i].PoolConnected(poolID)
}

// VM returns the VM with this uuid: the copy of the first server whose copy counts (see
// View). Failing that, the first copy of a pool no current server has connected (untrusted:
// PoolConnected is false for it). nil when there is none: a VM that only servers that are down
// still hold, in a pool a current server has connected without it, is absent, and its
// absence is judged by that current server (ForPool).
func (v *View) VM(id string) *xo.VM {
	if len(v.snaps) == 1 {
		return v.snaps[0].VM(id)
	}
	var fallback *xo.VM
	for i, s := range v.snaps {
		vm := s.VM(id)
		switch {
		case vm == nil:
		case v.counts(i, vm.PoolID):
			return vm
		case fallback == nil && v.ForPool(vm.PoolID) == nil:
			fallback = vm
		}
	}
	return fallback
}

// merged returns the VMs the servers give for one key, each VM once: a copy that counts (see
// View) before one that does not, else the first copy. Every copy is a candidate, so that a
// twin held only by a server that is down still makes a match ambiguous.
func (v *View) merged(get func(*Snapshot) []*xo.VM) []*xo.VM {
	if len(v.snaps) == 1 {
		return get(v.snaps[0])
	}
	var out []*xo.VM
	var counted []bool
	for i, s := range v.snaps {
		for _, vm := range get(s) {
			c := v.counts(i, vm.PoolID)
			switch j := slices.IndexFunc(out, func(o *xo.VM) bool { return o.ID == vm.ID }); {
			case j < 0:
				out, counted = append(out, vm), append(counted, c)
			case c && !counted[j]:
				out[j], counted[j] = vm, true
			}
		}
	}
	return out
}

// VMsByName returns the VMs whose name_label is exactly name.
func (v *View) VMsByName(name string) []*xo.VM {
	return v.merged(func(s *Snapshot) []*xo.VM { return s.VMsByName(name) })
}

// VMsByAddress returns the VMs reporting this address.
func (v *View) VMsByAddress(ip string) []*xo.VM {
	return v.merged(func(s *Snapshot) []*xo.VM { return s.VMsByAddress(ip) })
}

// Host returns the host with this uuid: the copy of the first server whose copy counts (see
// View), else the first copy; nil when no server has it.
func (v *View) Host(id string) *xo.Host {
	return preferCounting(v, func(s *Snapshot) *xo.Host { return s.Host(id) }, func(h *xo.Host) string { return h.PoolID })
}

// Pool returns the pool with this uuid: the copy of the first server whose copy counts (see
// View), else the first copy; nil when no server has it.
func (v *View) Pool(id string) *xo.Pool {
	return preferCounting(v, func(s *Snapshot) *xo.Pool { return s.Pool(id) }, func(p *xo.Pool) string { return p.ID })
}

// preferCounting returns the first server's copy (get) whose copy counts for its pool (poolOf),
// else the first copy; nil when no server has one.
func preferCounting[T any](v *View, get func(*Snapshot) *T, poolOf func(*T) string) *T {
	var first *T
	for i, s := range v.snaps {
		if c := get(s); c != nil {
			if v.counts(i, poolOf(c)) {
				return c
			}
			if first == nil {
				first = c
			}
		}
	}
	return first
}

// PoolConnected reports whether a server with a current inventory has the pool connected and
// trusted.
func (v *View) PoolConnected(poolID string) bool {
	return v.ForPool(poolID) != nil
}

// Complete reports whether every server's snapshot is complete.
func (v *View) Complete() bool {
	for _, s := range v.snaps {
		if !s.Complete() {
			return false
		}
	}
	return true
}

// RemovedRecently reports whether a VM with this name or address left any server's inventory
// less than the settle time ago.
func (v *View) RemovedRecently(key string) bool {
	for _, s := range v.snaps {
		if s.RemovedRecently(key) {
			return true
		}
	}
	return false
}

// Region returns the configured region of the server serving the pool ("" when none).
func (v *View) Region(poolID string) string {
	if s := v.ForPool(poolID); s != nil {
		return s.ServerRegion()
	}
	for _, s := range v.snaps {
		if s.Pool(poolID) != nil {
			return s.ServerRegion()
		}
	}
	return ""
}

// HostNameShared reports whether another host than id carries this name.
func (v *View) HostNameShared(name, id string) bool {
	return v.nameShared(name, id, func(s *Snapshot) (int, func(string) string) {
		return s.HostNameCount(name), func(n string) string { return s.hostIDByName(n) }
	})
}

// PoolNameShared reports whether another pool than id carries this name.
func (v *View) PoolNameShared(name, id string) bool {
	return v.nameShared(name, id, func(s *Snapshot) (int, func(string) string) {
		return s.PoolNameCount(name), func(n string) string { return s.poolIDByName(n) }
	})
}

func (v *View) nameShared(name, id string, counts func(*Snapshot) (int, func(string) string)) bool {
	id = lower(id)
	for _, s := range v.snaps {
		c, idOf := counts(s)
		switch {
		case c > 1:
			return true
		case c == 1 && idOf(name) != id:
			return true
		}
	}
	return false
}

// CurrentVM returns the copy of the VM that a server with a current inventory shows in a pool
// it has up (Snapshot.PoolUp), a settled one's first, and whether that server has the pool
// connected and settled (Snapshot.PoolConnected); nil when no current server shows it: the
// last copy of a VM whose pool XO lost, or of a server gone stale, says nothing about it now.
func (v *View) CurrentVM(id string) (vm *xo.VM, settled bool) {
	for i, s := range v.snaps {
		c := s.VM(id)
		if c == nil || !v.fresh[i] || !s.PoolUp(c.PoolID) {
			continue
		}
		if s.PoolConnected(c.PoolID) {
			return c, true
		}
		if vm == nil {
			vm = c
		}
	}
	return vm, false
}

// ForPool returns the snapshot of the first server whose inventory is current and has the
// pool connected and trusted (whose copies of the pool's objects count, see View), nil when
// none has.
func (v *View) ForPool(poolID string) *Snapshot {
	for i, s := range v.snaps {
		if v.counts(i, poolID) {
			return s
		}
	}
	return nil
}

// ReaderFor returns the direct-read client of the server s comes from.
func (v *View) ReaderFor(s *Snapshot) Reader {
	for i, o := range v.snaps {
		if o == s {
			return v.readers[i]
		}
	}
	return nil
}
