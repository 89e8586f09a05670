package inventory

import (
	"maps"
	"slices"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
)

// The pool a VM left from. A VM can move to another pool while its Node's providerID keeps
// naming the first one, and XO drops every VM of a pool it loses: seen from the providerID's
// pool, the VM then looks gone. So the inventory remembers, for each VM that left it, the pool
// its last copy was in, until that pool has vouched for the absence: while the VM's tombstone
// lasts, and after it for as long as that pool is not connected and trusted. A VM that comes
// back forgets it.

// LastPool returns the pool the VM was in when it left the inventory; "" when the VM is
// present, never was, or its pool has vouched for its absence since (see above).
func (s *Snapshot) LastPool(vmID string) string { return s.lastPools[lower(vmID)] }

// LastPools returns the pools the VM was in when it left the servers' inventories, each once.
func (v *View) LastPools(vmID string) []string {
	var out []string
	for _, s := range v.snaps {
		if p := lower(s.LastPool(vmID)); p != "" && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// recordPool remembers the pool vm was in as it leaves (see bury).
func (b *builder) recordPool(vm *xo.VM) {
	if vm.PoolID == "" {
		return
	}
	b.copyLastPools()
	b.s.lastPools[vm.ID] = vm.PoolID
}

// forgetPool forgets where a VM that is back left from (see putVM).
func (b *builder) forgetPool(id string) {
	if _, ok := b.s.lastPools[id]; ok {
		b.copyLastPools()
		delete(b.s.lastPools, id)
	}
}

func (b *builder) copyLastPools() {
	if !b.lastPoolsCopied {
		b.s.lastPools = maps.Clone(b.s.lastPools)
		if b.s.lastPools == nil {
			b.s.lastPools = map[string]string{}
		}
		b.lastPoolsCopied = true
	}
}

// carryLastPools carries into next, the snapshot fromListing built from a relist and nobody
// holds yet, what old remembers that still matters: the VM absent from the listing (whose own
// departures fromListing has recorded), and its tombstone still there or its pool not trusted
// in next. A VM deleted for good is thus forgotten at the first relist after its pool vouched
// for its absence.
func carryLastPools(next, old *Snapshot) {
	for id, pool := range old.lastPools {
		if _, ok := next.lastPools[id]; ok || next.vms.get(id) != nil {
			continue
		}
		if _, ok := next.tombs[id]; !ok && next.PoolConnected(pool) {
			continue
		}
		if next.lastPools == nil {
			next.lastPools = map[string]string{}
		}
		next.lastPools[id] = pool
	}
}
