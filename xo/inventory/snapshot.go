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
	vms    map[string]*xo.VM
	byName map[string][]*xo.VM
	byAddr map[string][]*xo.VM
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
		vms: map[string]*xo.VM{}, byName: map[string][]*xo.VM{}, byAddr: map[string][]*xo.VM{},
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
func (s *Snapshot) VM(id string) *xo.VM { return s.vms[lower(id)] }

// VMsByName returns the VMs whose name_label is exactly name.
func (s *Snapshot) VMsByName(name string) []*xo.VM { return s.byName[name] }

// VMsByAddress returns the VMs that report this IP address (canonical form).
func (s *Snapshot) VMsByAddress(ip string) []*xo.VM { return s.byAddr[ip] }

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
func (s *Snapshot) Len() int { return len(s.vms) }

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

// builder produces the next snapshot from the current one by copy on write.
type builder struct {
	s                        *Snapshot
	vmsCopied, indexesCopied bool
	hostsCopied, poolsCopied bool
	connectedCopied          bool
}

func newBuilder(base *Snapshot) *builder {
	next := *base
	return &builder{s: &next}
}

func (b *builder) copyVMs() {
	if !b.vmsCopied {
		b.s.vms = maps.Clone(b.s.vms)
		b.vmsCopied = true
	}
	if !b.indexesCopied {
		b.s.byName = maps.Clone(b.s.byName)
		b.s.byAddr = maps.Clone(b.s.byAddr)
		b.indexesCopied = true
	}
}

// putVM adds, replaces (vm non-nil) or removes (vm nil) the VM with this id.
func (b *builder) putVM(id string, vm *xo.VM) {
	b.copyVMs()
	if old := b.s.vms[id]; old != nil {
		b.s.byName[old.NameLabel] = without(b.s.byName[old.NameLabel], id)
		if len(b.s.byName[old.NameLabel]) == 0 {
			delete(b.s.byName, old.NameLabel)
		}
		for _, a := range vmAddresses(old) {
			b.s.byAddr[a] = without(b.s.byAddr[a], id)
			if len(b.s.byAddr[a]) == 0 {
				delete(b.s.byAddr, a)
			}
		}
	}
	if vm == nil {
		delete(b.s.vms, id)
		return
	}
	b.s.vms[id] = vm
	index(b.s.byName, vm.NameLabel, vm)
	for _, a := range vmAddresses(vm) {
		index(b.s.byAddr, a, vm)
	}
}

// index appends vm to m[k] without sharing the old slice's array with older snapshots.
func index(m map[string][]*xo.VM, k string, vm *xo.VM) {
	old := m[k]
	next := make([]*xo.VM, len(old), len(old)+1)
	copy(next, old)
	m[k] = append(next, vm)
}

// without returns vms less the VM with this id, as a new slice.
func without(vms []*xo.VM, id string) []*xo.VM {
	out := make([]*xo.VM, 0, len(vms))
	for _, v := range vms {
		if v.ID != id {
			out = append(out, v)
		}
	}
	return out
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
		vms:       make(map[string]*xo.VM, len(l.vms)),
		byName:    make(map[string][]*xo.VM, len(l.vms)),
		byAddr:    make(map[string][]*xo.VM, len(l.vms)),
		hosts:     make(map[string]*xo.Host, len(l.hosts)),
		pools:     make(map[string]*xo.Pool, len(l.pools)),
		connected: make(map[string]bool, len(l.servers)),
		listedAt:  at,
		inv:       inv,
	}
	for _, vm := range l.vms {
		s.vms[vm.ID] = vm
		s.byName[vm.NameLabel] = append(s.byName[vm.NameLabel], vm)
		for _, a := range vmAddresses(vm) {
			s.byAddr[a] = append(s.byAddr[a], vm)
		}
	}
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
