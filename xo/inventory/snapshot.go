package inventory

import (
	"maps"
	"net/netip"
	"strings"
	"time"
	"unique"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
)

// Snapshot is an immutable view of XO's inventory. Its lookups take no lock and allocate
// nothing; the objects they return must not be modified.
type Snapshot struct {
	vms    shardedMap[*xo.VM]
	byName shardedMap[[]*xo.VM]
	byAddr shardedMap[[]*xo.VM]
	hosts  map[string]*xo.Host
	pools  map[string]*xo.Pool
	// connected holds the pools XO has a connected server for.
	connected map[string]bool
	// allConnected is false while any of XO's servers is not connected.
	allConnected bool
	// listedAt is when the listing this snapshot stems from finished.
	listedAt time.Time
	inv      *Inventory
}

func emptySnapshot(inv *Inventory) *Snapshot {
	return &Snapshot{
		vms: newShardedMap[*xo.VM](0), byName: newShardedMap[[]*xo.VM](0), byAddr: newShardedMap[[]*xo.VM](0),
		hosts: map[string]*xo.Host{}, pools: map[string]*xo.Pool{}, connected: map[string]bool{}, inv: inv,
	}
}

func lower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			return strings.ToLower(s)
		}
	}
	return s
}

// VM returns the VM with this uuid, or nil.
func (s *Snapshot) VM(id string) *xo.VM { return s.vms.get(lower(id)) }

// VMsByName returns the VMs whose name_label is exactly name.
func (s *Snapshot) VMsByName(name string) []*xo.VM { return s.byName.get(name) }

// VMsByAddress returns the VMs that report this IP address (canonical form).
func (s *Snapshot) VMsByAddress(ip string) []*xo.VM { return s.byAddr.get(ip) }

// Host returns the host with this uuid, or nil.
func (s *Snapshot) Host(id string) *xo.Host { return s.hosts[lower(id)] }

// Pool returns the pool with this uuid, or nil.
func (s *Snapshot) Pool(id string) *xo.Pool { return s.pools[lower(id)] }

// PoolConnected reports whether XO has a connected server for the pool and holds its objects.
func (s *Snapshot) PoolConnected(poolID string) bool {
	id := lower(poolID)
	return s.connected[id] && s.pools[id] != nil
}

// Complete reports whether the snapshot can be trusted to hold every VM: a listing succeeded,
// every XO server is connected, and the data is fresh (the event stream is up, or the last
// listing is younger than the staleness limit). Matches by name or address need it; a VM
// absent from an incomplete snapshot may simply be in a pool XO cannot see.
func (s *Snapshot) Complete() bool {
	return s.allConnected && !s.listedAt.IsZero() && s.inv != nil && s.inv.fresh(s.listedAt)
}

// Synced reports whether the snapshot comes from at least one successful listing.
func (s *Snapshot) Synced() bool { return !s.listedAt.IsZero() }

// Len returns the number of VMs.
func (s *Snapshot) Len() int { return s.vms.len() }

// internVM replaces the strings thousands of VMs share (pool and host uuids, power states,
// tags) with one shared copy each.
func internVM(vm *xo.VM) {
	vm.PowerState, vm.PoolID, vm.Container = intern(vm.PowerState), intern(vm.PoolID), intern(vm.Container)
	for i, t := range vm.Tags {
		vm.Tags[i] = intern(t)
	}
}

func intern(s string) string { return unique.Make(s).Value() }

// vmAddresses returns a VM's distinct, canonical IP addresses.
func vmAddresses(vm *xo.VM) []string {
	var out []string
	add := func(s string) {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return
		}
		c := a.WithZone("").String()
		for _, o := range out {
			if o == c {
				return
			}
		}
		out = append(out, c)
	}
	if vm.MainIPAddress != "" {
		add(vm.MainIPAddress)
	}
	for _, v := range vm.Addresses {
		add(v)
	}
	return out
}

// builder produces the next snapshot from the current one by copy on write: the VM maps copy
// only the shards a change touches, the small host, pool and connection maps are copied whole.
type builder struct {
	s                        *Snapshot
	vms                      *shardedWriter[*xo.VM]
	byName, byAddr           *shardedWriter[[]*xo.VM]
	hostsCopied, poolsCopied bool
	connectedCopied          bool
}

func newBuilder(base *Snapshot) *builder {
	next := *base
	return &builder{s: &next, vms: writer(base.vms), byName: writer(base.byName), byAddr: writer(base.byAddr)}
}

// ownBuilder changes s in place: s must not be published yet.
func ownBuilder(s *Snapshot) *builder {
	return &builder{s: s, vms: ownWriter(s.vms), byName: ownWriter(s.byName), byAddr: ownWriter(s.byAddr),
		hostsCopied: true, poolsCopied: true, connectedCopied: true}
}

// done returns the next snapshot.
func (b *builder) done() *Snapshot {
	b.s.vms, b.s.byName, b.s.byAddr = b.vms.m, b.byName.m, b.byAddr.m
	return b.s
}

// putVM adds, replaces (vm non-nil) or removes (vm nil) the VM with this id.
func (b *builder) putVM(id string, vm *xo.VM) {
	if old := b.vms.get(id); old != nil {
		unindex(b.byName, old.NameLabel, id)
		for _, a := range vmAddresses(old) {
			unindex(b.byAddr, a, id)
		}
	}
	if vm == nil {
		b.vms.delete(id)
		return
	}
	b.vms.set(id, vm)
	index(b.byName, vm.NameLabel, vm)
	for _, a := range vmAddresses(vm) {
		index(b.byAddr, a, vm)
	}
}

// index appends vm to the entry k without sharing the old slice's array with older snapshots.
func index(w *shardedWriter[[]*xo.VM], k string, vm *xo.VM) {
	old := w.get(k)
	next := make([]*xo.VM, len(old), len(old)+1)
	copy(next, old)
	w.set(k, append(next, vm))
}

// unindex removes the VM with this id from the entry k, as a new slice.
func unindex(w *shardedWriter[[]*xo.VM], k, id string) {
	old := w.get(k)
	next := make([]*xo.VM, 0, len(old))
	for _, v := range old {
		if v.ID != id {
			next = append(next, v)
		}
	}
	if len(next) == 0 {
		w.delete(k)
		return
	}
	w.set(k, next)
}

func (b *builder) putHost(id string, h *xo.Host) {
	if !b.hostsCopied {
		b.s.hosts = maps.Clone(b.s.hosts)
		b.hostsCopied = true
	}
	if h == nil {
		delete(b.s.hosts, id)
	} else {
		b.s.hosts[id] = h
	}
}

func (b *builder) putPool(id string, p *xo.Pool) {
	if !b.poolsCopied {
		b.s.pools = maps.Clone(b.s.pools)
		b.poolsCopied = true
	}
	if p == nil {
		delete(b.s.pools, id)
	} else {
		b.s.pools[id] = p
	}
}

// setConnected records whether XO holds a connected server for the pool.
func (b *builder) setConnected(poolID string, ok bool) {
	if !b.connectedCopied {
		b.s.connected = maps.Clone(b.s.connected)
		b.connectedCopied = true
	}
	b.s.connected[poolID] = ok
	if !ok {
		b.s.allConnected = false
	}
}

// fromListing builds a whole snapshot from a complete listing.
func fromListing(inv *Inventory, l *listing, at time.Time) *Snapshot {
	s := &Snapshot{
		hosts:     make(map[string]*xo.Host, len(l.hosts)),
		pools:     make(map[string]*xo.Pool, len(l.pools)),
		connected: make(map[string]bool, len(l.servers)),
		listedAt:  at,
		inv:       inv,
	}
	vms, byName, byAddr := ownWriter(newShardedMap[*xo.VM](len(l.vms))), ownWriter(newShardedMap[[]*xo.VM](len(l.vms))), ownWriter(newShardedMap[[]*xo.VM](len(l.vms)))
	for _, vm := range l.vms {
		vms.set(vm.ID, vm)
		byName.set(vm.NameLabel, append(byName.get(vm.NameLabel), vm))
		for _, a := range vmAddresses(vm) {
			byAddr.set(a, append(byAddr.get(a), vm))
		}
	}
	s.vms, s.byName, s.byAddr = vms.m, byName.m, byAddr.m
	for _, h := range l.hosts {
		s.hosts[h.ID] = h
	}
	for _, p := range l.pools {
		s.pools[p.ID] = p
	}
	s.allConnected = true
	for _, sv := range l.servers {
		ok := sv.Status == xo.ServerConnected
		if !ok {
			s.allConnected = false
		}
		if sv.PoolID != "" {
			s.connected[lower(sv.PoolID)] = s.connected[lower(sv.PoolID)] || ok
		}
	}
	return s
}
