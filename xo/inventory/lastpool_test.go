package inventory

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
)

// TestLastPoolOutlivesTheTombstoneWhileThePoolIsLost: two VMs move from pool A to pool B, XO
// then loses B. The inventory remembers that they left from B past their tombstones, as long as
// B is not trusted; once B is back and settled, the VM that came back and the VM deleted
// meanwhile are both forgotten.
func TestLastPoolOutlivesTheTombstoneWhileThePoolIsLost(t *testing.T) {
	const hostB = "c72b6da3-811f-4a77-b24c-11744f14ffb9"
	clk := clocktesting.NewFakeClock(time.Now())
	src := source()
	src.hosts = append(src.hosts, xo.Host{ID: hostB, NameLabel: "host-b", PoolID: poolB})
	src.pools = append(src.pools, xo.Pool{ID: poolB, NameLabel: "pool-b"})
	src.servers = append(src.servers, xo.Server{ID: "s2", PoolID: poolB, Status: xo.ServerConnected})
	inv := newInventory(src, clk)
	settled(t, inv, clk)

	// Both VMs migrate to B (events), and the listings agree.
	moved := []xo.VM{src.vms[0], src.vms[1]}
	for i := range moved {
		moved[i].PoolID, moved[i].Container = poolB, hostB
		vm := moved[i]
		inv.apply(xo.Event{Type: xo.EventUpdate, VM: &vm})
	}
	src.mu.Lock()
	src.vms = moved
	src.mu.Unlock()
	if s := relist(t, inv); s.VM(vm1).PoolID != poolB || s.LastPool(vm1) != "" {
		t.Fatalf("VM in pool %s, LastPool %q; want pool B and no departure", s.VM(vm1).PoolID, s.LastPool(vm1))
	}

	// XO loses B: the VMs go (a remove event carries the id only), then the pool and the entry.
	inv.apply(xo.Event{Type: xo.EventRemove, VM: &xo.VM{ID: vm1}})
	inv.apply(xo.Event{Type: xo.EventRemove, VM: &xo.VM{ID: vm2}})
	inv.apply(xo.Event{Type: xo.EventRemove, Pool: &xo.Pool{ID: poolB}})
	if got := inv.Snapshot().LastPool(vm1); got != poolB {
		t.Fatalf("LastPool right after the removal = %q, want pool B", got)
	}
	src.mu.Lock()
	src.vms, src.pools, src.hosts = nil, src.pools[:1], src.hosts[:1]
	src.servers[1] = xo.Server{ID: "s2", Status: xo.ServerDisconnected}
	src.mu.Unlock()
	clk.Step(3 * testSettle)
	s := relist(t, inv)
	// The trap: pool A is trusted and the VM has been absent from it for long.
	if wait, ok := s.AbsenceWait(vm1, poolA); !ok || wait != 0 {
		t.Fatalf("setup: AbsenceWait in pool A = %v, %v; want vouched for", wait, ok)
	}
	for _, id := range []string{vm1, vm2} {
		if got := s.LastPool(id); got != poolB {
			t.Errorf("LastPool(%s) past the settle time with B lost = %q, want pool B", id, got)
		}
	}
	if got := NewEstate(0, Member{Inventory: inv}).View().LastPools(vm1); len(got) != 1 || got[0] != poolB {
		t.Errorf("View.LastPools = %v, want [pool B]", got)
	}

	// B comes back with vm2 only (vm1 was deleted meanwhile), and settles.
	src.mu.Lock()
	src.vms = moved[1:]
	src.pools, src.hosts = source().pools, append(source().hosts, xo.Host{ID: hostB, NameLabel: "host-b", PoolID: poolB})
	src.pools = append(src.pools, xo.Pool{ID: poolB, NameLabel: "pool-b"})
	src.servers[1] = xo.Server{ID: "s2", PoolID: poolB, Status: xo.ServerConnected}
	src.mu.Unlock()
	s = relist(t, inv)
	if s.LastPool(vm2) != "" {
		t.Error("a VM that is back must forget where it left from")
	}
	if s.PoolConnected(poolB) || s.LastPool(vm1) != poolB {
		t.Fatalf("B trusted %v, LastPool(vm1) %q before B settled; want untrusted, pool B", s.PoolConnected(poolB), s.LastPool(vm1))
	}
	clk.Step(testSettle)
	if s = relist(t, inv); !s.PoolConnected(poolB) || s.LastPool(vm1) != "" {
		t.Fatalf("B trusted %v, LastPool(vm1) %q once B settled; want trusted and forgotten", s.PoolConnected(poolB), s.LastPool(vm1))
	}
}
