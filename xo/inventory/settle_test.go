package inventory

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
)

func relist(t *testing.T, inv *Inventory) *Snapshot {
	t.Helper()
	if err := inv.Relist(context.Background()); err != nil {
		t.Fatal(err)
	}
	return inv.Snapshot()
}

func TestPoolTrustedOnlyAfterSettleTimeAndAListing(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	inv := newInventory(source(), clk)
	s := relist(t, inv)
	if s.PoolConnected(poolA) || s.Complete() || !s.Settling() {
		t.Fatal("a pool seen connected for the first time must not be trusted yet")
	}
	if _, ok := s.AbsentSince("c0ffee00-0000-4000-8000-000000000009", poolA); ok {
		t.Fatal("absence in an untrusted pool must not be vouched for")
	}
	clk.Step(testSettle - time.Second)
	if s := relist(t, inv); s.PoolConnected(poolA) {
		t.Fatal("trusted before the settle time")
	}
	clk.Step(time.Second)
	if inv.Snapshot().PoolConnected(poolA) {
		t.Fatal("the settle time alone, without a listing after it, must not make a pool trusted")
	}
	s = relist(t, inv)
	if !s.PoolConnected(poolA) || !s.Complete() || s.Settling() {
		t.Fatal("a pool connected for the settle time and listed after it must be trusted")
	}
}

// TestTrustListing: a one-shot reader (check, explain) trusts the pools its one listing shows
// up, and counts a VM's absence from that listing, a settle time still to go.
func TestTrustListing(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	inv := New(source(), Options{Clock: clk, Log: logr.Discard(), StaleAfter: time.Minute, SettleTime: testSettle, TrustListing: true})
	s := relist(t, inv)
	if !s.PoolConnected(poolA) || !s.Complete() || s.Settling() {
		t.Fatal("with TrustListing, a pool up at the first listing must be trusted at once")
	}
	const gone = "c0ffee00-0000-4000-8000-000000000009"
	if wait, ok := s.AbsenceWait(gone, poolA); !ok || wait != testSettle {
		t.Fatalf("AbsenceWait of a VM absent from the first listing = %s, %v; want the whole settle time %s", wait, ok, testSettle)
	}
	clk.Step(testSettle / 2)
	if wait, _ := s.AbsenceWait(gone, poolA); wait != testSettle/2 {
		t.Fatalf("AbsenceWait half a settle time later = %s, want %s", wait, testSettle/2)
	}
}

// TestReconnectionInStages models what xo-server does on reconnection: the server entry says
// connected first, then the pool and its hosts arrive, then the VMs one by one.
func TestReconnectionInStages(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	src := source()
	inv := newInventory(src, clk)
	settled(t, inv, clk)

	// XO loses the pool: its objects go (events), then the server entry.
	inv.apply(xo.Event{Type: xo.EventRemove, VM: &xo.VM{ID: vm1, PoolID: poolA}})
	inv.apply(xo.Event{Type: xo.EventRemove, VM: &xo.VM{ID: vm2, PoolID: poolA}})
	if wait, ok := inv.Snapshot().AbsenceWait(vm1, poolA); !ok || wait != testSettle {
		t.Fatalf("AbsenceWait right after the remove event = %v, %v; want the whole settle time", wait, ok)
	}
	if !inv.Snapshot().RemovedRecently("worker-1") || !inv.Snapshot().RemovedRecently("10.0.0.1") {
		t.Fatal("a just-removed VM's name and address must stay suspect")
	}
	inv.apply(xo.Event{Type: xo.EventRemove, Pool: &xo.Pool{ID: poolA}})
	if s := inv.Snapshot(); s.PoolConnected(poolA) || s.Complete() {
		t.Fatal("a removed pool must not be connected")
	}

	// Stage 1: the server entry says connected, nothing is loaded.
	all := src.vms
	src.mu.Lock()
	src.vms, src.pools, src.hosts = nil, nil, nil
	src.mu.Unlock()
	clk.Step(time.Minute)
	if s := relist(t, inv); s.PoolConnected(poolA) || s.Complete() {
		t.Fatal("a server connected without its pool loaded must not be trusted")
	}
	// Stage 2: the pool and hosts are back; stage 3: one VM.
	src.mu.Lock()
	src.pools, src.hosts = source().pools, source().hosts
	src.vms = all[:1]
	src.mu.Unlock()
	clk.Step(testSettle / 2)
	s := relist(t, inv)
	if s.PoolConnected(poolA) {
		t.Fatal("a pool still loading (within the settle time of its reconnection) must not be trusted")
	}
	if _, ok := s.AbsenceWait(vm2, poolA); ok {
		t.Fatal("the VM not loaded yet must not count as absent")
	}
	// Everything loaded, the settle time over: trusted, and vm2 is there.
	src.mu.Lock()
	src.vms = all
	src.mu.Unlock()
	clk.Step(testSettle)
	s = relist(t, inv)
	if !s.PoolConnected(poolA) || s.VM(vm2) == nil {
		t.Fatal("the reconnected pool must be trusted once settled")
	}

	// A VM really deleted afterwards: absent for the settle time, then it counts.
	src.mu.Lock()
	src.vms = all[:1]
	src.mu.Unlock()
	s = relist(t, inv)
	if wait, ok := s.AbsenceWait(vm2, poolA); !ok || wait != testSettle {
		t.Fatalf("AbsenceWait = %v, %v right after the deletion", wait, ok)
	}
	clk.Step(testSettle)
	if wait, ok := inv.Snapshot().AbsenceWait(vm2, poolA); !ok || wait != 0 {
		t.Fatalf("AbsenceWait = %v, %v after the settle time", wait, ok)
	}
}

func TestDisabledServerEntryDoesNotCount(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	src := source()
	src.servers = append(src.servers, xo.Server{ID: "s2", Status: xo.ServerDisconnected, Enabled: ptr.To(false)})
	inv := newInventory(src, clk)
	if s := settled(t, inv, clk); !s.Complete() {
		t.Fatal("a disabled server entry must not make the inventory incomplete")
	}
}

func TestPoolScope(t *testing.T) {
	src := source()
	src.pools = append(src.pools, xo.Pool{ID: poolB, NameLabel: "lab"})
	src.vms = append(src.vms, xo.VM{ID: "c0ffee00-0000-4000-8000-000000000003", NameLabel: "lab-vm", PoolID: poolB})
	// The lab pool's server is down: without a scope that makes the inventory incomplete.
	src.servers = append(src.servers, xo.Server{ID: "s2", Status: xo.ServerDisconnected})

	for _, scope := range [][]string{{poolA}, {"pool-a"}} {
		clk := clocktesting.NewFakeClock(time.Now())
		inv := New(src, Options{Clock: clk, StaleAfter: time.Minute, SettleTime: testSettle, Pools: scope})
		s := settled(t, inv, clk)
		if !s.Complete() || s.Pool(poolB) != nil || s.VM("c0ffee00-0000-4000-8000-000000000003") != nil || s.Len() != 2 {
			t.Fatalf("scope %v: complete=%v, pools/VMs outside the scope held", scope, s.Complete())
		}
		if f := src.filters[len(src.filters)-1]; f != xo.PoolFilter([]string{poolA}) {
			t.Fatalf("scope %v: VM listing filter %q", scope, f)
		}
		// An event of an out-of-scope VM is dropped; a VM moving out of the scope leaves.
		inv.apply(xo.Event{Type: xo.EventAdd, VM: &xo.VM{ID: "c0ffee00-0000-4000-8000-000000000004", PoolID: poolB}})
		moved := *s.VM(vm1)
		moved.PoolID = poolB
		inv.apply(xo.Event{Type: xo.EventUpdate, VM: &moved})
		if s := inv.Snapshot(); s.Len() != 1 || s.VM(vm1) != nil {
			t.Fatalf("scope %v: out-of-scope events applied: %d VMs", scope, s.Len())
		}
		src.filters = nil
	}

	// A scope name XO has never listed: nothing is listed, and the inventory is incomplete.
	clk := clocktesting.NewFakeClock(time.Now())
	inv := New(src, Options{Clock: clk, StaleAfter: time.Minute, SettleTime: testSettle, Pools: []string{"no-such-pool"}})
	if s := settled(t, inv, clk); s.Complete() || s.Len() != 0 {
		t.Fatalf("unknown scope name: complete=%v, %d VMs", s.Complete(), s.Len())
	}
}

// TestScopeNameSurvivesDisconnection: a pool in the scope by name stays in it (and keeps the
// inventory incomplete) while XO, having lost it, no longer lists it.
func TestScopeNameSurvivesDisconnection(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	src := source()
	inv := New(src, Options{Clock: clk, StaleAfter: time.Minute, SettleTime: testSettle, Pools: []string{"pool-a"}})
	settled(t, inv, clk)
	src.mu.Lock()
	src.pools, src.hosts, src.vms = nil, nil, nil
	src.servers = []xo.Server{{ID: "s1", Status: xo.ServerDisconnected}}
	src.mu.Unlock()
	s := relist(t, inv)
	if s.Complete() || s.PoolConnected(poolA) {
		t.Fatal("a disconnected pool of the scope must keep the inventory incomplete")
	}
	if f := src.filters[len(src.filters)-1]; f != xo.PoolFilter([]string{poolA}) {
		t.Fatalf("the scope lost its pool: filter %q", f)
	}
}

// TestReconnectionBetweenListings: XO loses pool A and reconnects it between two listings
// (polling, or the event stream down meanwhile), so no listing sees it disconnected. The next
// listing sees the server connected without the pool object, as XO reports it before loading
// the pool: the pool's connection starts over there. Half a settle time later a listing shows
// the pool object with one VM of two: XO is loading the VMs from some moment since the last
// listing, so the connection starts over at that listing, and the VM still loading does not
// count as absent until a listing begun one settle time after it, which trusts the pool.
func TestReconnectionBetweenListings(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	src := source()
	inv := newInventory(src, clk)
	settled(t, inv, clk)

	all := src.vms
	src.mu.Lock()
	src.vms, src.pools, src.hosts = nil, nil, nil // the server still "connected": reconnecting
	src.mu.Unlock()
	if s := relist(t, inv); s.PoolConnected(poolA) || s.Complete() || !s.Settling() {
		t.Fatal("a server connected without its pool object must not be trusted")
	}

	src.mu.Lock()
	src.pools, src.hosts = source().pools, source().hosts
	src.vms = all[:1] // vm2 not loaded yet
	src.mu.Unlock()
	clk.Step(testSettle / 2)
	shown := clk.Now()
	for range 2 {
		if s := relist(t, inv); s.PoolConnected(poolA) {
			t.Fatalf("trusted %v after the listing that first showed the pool object, within the settle time", clk.Since(shown))
		} else if _, ok := s.AbsenceWait(vm2, poolA); ok {
			t.Fatal("the VM not loaded yet counts as absent from an untrusted pool")
		}
		clk.Step(testSettle / 2)
	}
	s := relist(t, inv)
	if !s.PoolConnected(poolA) {
		t.Fatal("the pool must be trusted at the first listing one settle time after the one that first showed its object")
	}
	if c := s.conn[poolA]; !c.since.Equal(shown) {
		t.Fatalf("connected since %v, want the listing that first showed the pool object (%v)", c.since, shown)
	}
	// A VM still missing then has had the settle time to load: its absence counts.
	if wait, ok := s.AbsenceWait(vm2, poolA); !ok || wait != 0 {
		t.Fatalf("AbsenceWait of a VM still missing one settle time after XO showed the pool = %v, %v; want 0, true", wait, ok)
	}
}

// TestReconnectedPoolObjectByEvent: after a listing saw the server connected without the pool
// object, the object arrives by event: the pool was loading until then, so its settle time
// counts from the event. A listing begun one settle time after it makes the pool trusted, none
// before.
func TestReconnectedPoolObjectByEvent(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	src := source()
	inv := newInventory(src, clk)
	settled(t, inv, clk)

	all := src.vms
	src.mu.Lock()
	src.vms, src.pools, src.hosts = nil, nil, nil
	src.mu.Unlock()
	relist(t, inv)

	clk.Step(testSettle / 2)
	src.mu.Lock()
	src.vms, src.pools, src.hosts = all, source().pools, source().hosts
	src.mu.Unlock()
	loaded := clk.Now()
	inv.apply(xo.Event{Type: xo.EventAdd, Pool: &xo.Pool{ID: poolA, NameLabel: "pool-a"}})
	for i := range all {
		inv.apply(xo.Event{Type: xo.EventAdd, VM: &all[i]})
	}
	if s := inv.Snapshot(); s.PoolConnected(poolA) || !s.nextTrust().Equal(loaded.Add(testSettle)) {
		t.Fatalf("pool object added by event: trusted=%v, next trust %v; want untrusted until %v",
			s.PoolConnected(poolA), s.nextTrust(), loaded.Add(testSettle))
	}
	for range 2 {
		if s := relist(t, inv); s.PoolConnected(poolA) {
			t.Fatalf("trusted %v after the pool object arrived, within the settle time", clk.Since(loaded))
		}
		clk.Step(testSettle / 2)
	}
	if s := relist(t, inv); !s.PoolConnected(poolA) || s.VM(vm2) == nil {
		t.Fatal("the pool must be trusted at the first listing after its settle time")
	}
	// A VM XO does not show once the pool is trusted has been missing one settle time since
	// XO showed the pool: its absence counts from the event that brought the pool object.
	const never = "c0ffee00-0000-4000-8000-000000000009"
	if since, ok := inv.Snapshot().AbsentSince(never, poolA); !ok || !since.Equal(loaded) {
		t.Fatalf("AbsentSince of a VM XO does not show = %v, %v; want the pool object's event (%v)", since, ok, loaded)
	}
	if wait, ok := inv.Snapshot().AbsenceWait(never, poolA); !ok || wait != 0 {
		t.Fatalf("AbsenceWait of a VM XO does not show, the pool trusted = %v, %v; want 0", wait, ok)
	}
}
