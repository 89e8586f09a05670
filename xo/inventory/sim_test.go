package inventory_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-logr/logr"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/inventory"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/xosim"
)

// TestSimReconnectionBetweenPolls: against the simulator, XO loses pool A and begins
// reconnecting it between two polls, so no listing sees it disconnected. When the pool object
// and one of its VMs are back one settle time later, the VM still loading must not count as
// absent, although XO's direct reads (no such VM, the pool readable, its server connected)
// would confirm it gone.
func TestSimReconnectionBetweenPolls(t *testing.T) {
	ctx := context.Background()
	sim := xosim.New(xosim.Options{Tokens: []string{"tok"}})
	pool, err := sim.AddPool(xosim.PoolSpec{NameLabel: "pool-a"})
	if err != nil {
		t.Fatal(err)
	}
	host, err := sim.AddHost(xosim.HostSpec{PoolID: pool, NameLabel: "host-a"})
	if err != nil {
		t.Fatal(err)
	}
	var vms [2]string
	for i, name := range []string{"worker-1", "worker-2"} {
		if vms[i], err = sim.AddVM(xosim.VMSpec{PoolID: pool, HostID: host, NameLabel: name}); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(sim)
	defer srv.Close()
	c, err := xo.New(xo.Options{URL: srv.URL, Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Now())
	const settle = 30 * time.Second
	inv := inventory.New(c, inventory.Options{Clock: clk, Log: logr.Discard(), SettleTime: settle, DisableEventStream: true})
	relist := func() *inventory.Snapshot {
		t.Helper()
		if err := inv.Relist(ctx); err != nil {
			t.Fatal(err)
		}
		return inv.Snapshot()
	}
	relist()
	clk.Step(settle)
	if !relist().PoolConnected(pool) {
		t.Fatal("test setup: pool not trusted")
	}

	// Between two polls XO drops the pool and reconnects it: the server "connected", nothing
	// loaded.
	if err := sim.DisconnectPool(pool); err != nil {
		t.Fatal(err)
	}
	if err := sim.BeginReconnect(pool); err != nil {
		t.Fatal(err)
	}
	clk.Step(10 * time.Second)
	relist()
	// The pool object and the first VM are back; the second is still loading.
	if err := sim.RevealPool(pool); err != nil {
		t.Fatal(err)
	}
	if _, err := sim.RevealVMs(pool, 1); err != nil {
		t.Fatal(err)
	}
	clk.Step(settle)
	s := relist()
	if _, err := c.GetVM(ctx, vms[1]); !xo.IsNotFound(err) {
		t.Fatalf("test setup: XO's direct read of the VM still loading = %v, want not found", err)
	}
	if wait, ok := s.AbsenceWait(vms[1], pool); ok && wait == 0 {
		t.Fatal("a VM still loading in XO counts as absent: its Node could be deleted")
	}

	// The VM loads; the pool is trusted at the first listing one settle time after the one
	// that first showed its object.
	if _, err := sim.RevealVMs(pool, 1); err != nil {
		t.Fatal(err)
	}
	if s := relist(); s.PoolConnected(pool) {
		t.Fatal("trusted at the listing that first showed the pool object, its VMs still loading")
	}
	clk.Step(settle)
	if s := relist(); !s.PoolConnected(pool) || s.VM(vms[1]) == nil {
		t.Fatal("the reconnected pool must be trusted once settled and loaded")
	}
}

// TestSimPoolScope: against the simulator, with XO's own filter syntax, an inventory scoped to
// one pool (by name, or by uuid) holds that pool's VMs and none of the other's, also after VMs
// are added to both.
func TestSimPoolScope(t *testing.T) {
	ctx := context.Background()
	sim := xosim.New(xosim.Options{Tokens: []string{"tok"}})
	pools, vms := map[string]string{}, map[string][]string{}
	add := func(pool, name string) {
		t.Helper()
		host := pool + "-host"
		id, err := sim.AddVM(xosim.VMSpec{PoolID: pools[pool], HostID: pools[host], NameLabel: name})
		if err != nil {
			t.Fatal(err)
		}
		vms[pool] = append(vms[pool], id)
	}
	for _, name := range []string{"pool-a", "pool-b"} {
		id, err := sim.AddPool(xosim.PoolSpec{NameLabel: name})
		if err != nil {
			t.Fatal(err)
		}
		pools[name] = id
		if pools[name+"-host"], err = sim.AddHost(xosim.HostSpec{PoolID: id, NameLabel: name + "-host"}); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			add(name, fmt.Sprintf("%s-vm-%d", name, i))
		}
	}
	srv := httptest.NewServer(sim)
	defer srv.Close()
	c, err := xo.New(xo.Options{URL: srv.URL, Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ scope, in, out string }{
		{"pool-a", "pool-a", "pool-b"},
		{pools["pool-b"], "pool-b", "pool-a"},
	} {
		t.Run(tt.in, func(t *testing.T) {
			inv := inventory.New(c, inventory.Options{Log: logr.Discard(), Pools: []string{tt.scope}, DisableEventStream: true})
			check := func() {
				t.Helper()
				if err := inv.Relist(ctx); err != nil {
					t.Fatal(err)
				}
				s := inv.Snapshot()
				for _, id := range vms[tt.in] {
					if s.VM(id) == nil {
						t.Errorf("VM %s of the pool in scope missing", id)
					}
				}
				for _, id := range vms[tt.out] {
					if s.VM(id) != nil {
						t.Errorf("VM %s of the pool out of scope held", id)
					}
				}
				if s.Len() != len(vms[tt.in]) {
					t.Errorf("%d VMs held, want the %d of %s", s.Len(), len(vms[tt.in]), tt.in)
				}
			}
			check()
			add(tt.in, tt.in+"-new")
			add(tt.out, tt.out+"-new")
			check()
		})
	}
}

// simPool is a simulator serving one pool with one host and the named VMs, an inventory of it
// on a fake clock with the given settle time and no event stream (relists only, as the test
// calls them), and the pool's and VMs' ids.
type simPool struct {
	sim  *xosim.Server
	clk  *clocktesting.FakeClock
	inv  *inventory.Inventory
	pool string
	vms  []string
}

func newSimPool(t *testing.T, settle time.Duration, names ...string) *simPool {
	t.Helper()
	p := &simPool{sim: xosim.New(xosim.Options{Tokens: []string{"tok"}}), clk: clocktesting.NewFakeClock(time.Now())}
	var err error
	if p.pool, err = p.sim.AddPool(xosim.PoolSpec{NameLabel: "pool-a"}); err != nil {
		t.Fatal(err)
	}
	host, err := p.sim.AddHost(xosim.HostSpec{PoolID: p.pool, NameLabel: "host-a"})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		id, err := p.sim.AddVM(xosim.VMSpec{PoolID: p.pool, HostID: host, NameLabel: name})
		if err != nil {
			t.Fatal(err)
		}
		p.vms = append(p.vms, id)
	}
	srv := httptest.NewServer(p.sim)
	t.Cleanup(srv.Close)
	c, err := xo.New(xo.Options{URL: srv.URL, Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	p.inv = inventory.New(c, inventory.Options{Clock: p.clk, Log: logr.Discard(), SettleTime: settle, DisableEventStream: true})
	p.relist(t)
	p.clk.Step(settle)
	if !p.relist(t).PoolConnected(p.pool) {
		t.Fatal("test setup: pool not trusted")
	}
	return p
}

func (p *simPool) relist(t *testing.T) *inventory.Snapshot {
	t.Helper()
	if err := p.inv.Relist(context.Background()); err != nil {
		t.Fatal(err)
	}
	return p.inv.Snapshot()
}

// deletable reports whether the inventory vouches for the VM's absence from the pool now: its
// Node may be deleted once XO's direct reads confirm it.
func (p *simPool) deletable(vm string) bool {
	wait, ok := p.inv.Snapshot().AbsenceWait(vm, p.pool)
	return ok && wait == 0
}

// TestSimAbsenceAfterReconnectionTakesOneSettleTime: a VM deleted while XO had lost its pool
// stays absent once XO reconnects the pool. Its absence counts from the listing that showed the
// pool connected again: it is vouched for one settle time after that listing (30 s with the
// default settle time), not one settle time after the pool became trusted (twice that).
func TestSimAbsenceAfterReconnectionTakesOneSettleTime(t *testing.T) {
	const settle = 30 * time.Second
	const tick = 500 * time.Millisecond // a listing every tick
	p := newSimPool(t, settle, "stays", "gone")
	stays, gone := p.vms[0], p.vms[1]

	if err := p.sim.DisconnectPool(p.pool); err != nil {
		t.Fatal(err)
	}
	p.clk.Step(time.Second)
	if s := p.relist(t); s.PoolUp(p.pool) || p.deletable(gone) {
		t.Fatal("test setup: the pool still up, or a VM of a lost pool vouched absent")
	}
	if err := p.sim.RemoveVM(gone); err != nil { // deleted while XO has lost the pool
		t.Fatal(err)
	}
	for range 4 { // an outage of two settle times: the VMs' tombstones expire
		p.clk.Step(settle / 2)
		p.relist(t)
		if p.deletable(gone) {
			t.Fatal("a VM of a lost pool vouched absent")
		}
	}

	if err := p.sim.ReconnectPool(p.pool); err != nil {
		t.Fatal(err)
	}
	p.clk.Step(time.Second)
	reconnecting := p.clk.Now()
	if s := p.relist(t); !s.PoolUp(p.pool) || s.PoolConnected(p.pool) {
		t.Fatal("test setup: the listing after the reconnection must show the pool up and not trusted yet")
	}
	var after time.Duration
	for after == 0 && p.clk.Since(reconnecting) < 3*settle {
		p.clk.Step(tick)
		p.relist(t)
		if p.deletable(stays) {
			t.Fatal("a VM XO shows vouched absent")
		}
		if p.deletable(gone) {
			after = p.clk.Since(reconnecting)
		}
	}
	t.Logf("VM absent after the reconnection vouched for %v after the reconnecting listing (settle time %v, a listing every %v)", after, settle, tick)
	if after < settle || after > settle+tick {
		t.Fatalf("absence vouched for %v after the listing that showed the pool connected again; want the settle time %v (+ at most %v)", after, settle, tick)
	}
}

// TestSimLateVMOfAStagedReconnectionNeverVouchedAbsent: xo-server reconnects a pool in stages
// (the server entry connected, then the pool object and hosts, then the VMs one by one). A VM
// that appears within the settle time after XO shows the pool object is never vouched absent,
// at any moment, with a listing every poll period: whether the first listing after the
// reconnection shows the pool object already, or only the server connected without it (the
// object then arrives just before the next listing, a poll period later: with the default
// poll period and settle time, both 30 s, that listing is one settle time after the first).
func TestSimLateVMOfAStagedReconnectionNeverVouchedAbsent(t *testing.T) {
	const (
		settle = 30 * time.Second
		tick   = time.Second
	)
	for _, tt := range []struct {
		name string
		poll time.Duration
		// objectAt is when the pool object appears, after the server shows connected (and
		// a listing sees it so).
		objectAt time.Duration
	}{
		{"pool object in the first listing", 10 * time.Second, 0},
		{"pool object just before the second listing", settle, settle - tick},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := newSimPool(t, settle, "vm-0", "vm-1", "vm-2", "vm-3")
			if err := p.sim.DisconnectPool(p.pool); err != nil {
				t.Fatal(err)
			}
			p.clk.Step(settle)
			p.relist(t)

			if err := p.sim.BeginReconnect(p.pool); err != nil {
				t.Fatal(err)
			}
			begun := p.clk.Now()
			if tt.objectAt == 0 {
				if err := p.sim.RevealPool(p.pool); err != nil {
					t.Fatal(err)
				}
			}
			// The VMs appear one by one, the last a tick before the settle time after the
			// pool object.
			revealed, last := 0, tt.objectAt+settle-tick
			every := (settle - tick) / time.Duration(len(p.vms))
			check := func(when string) {
				t.Helper()
				for _, vm := range p.vms {
					if p.deletable(vm) {
						t.Fatalf("VM %s of a pool XO was loading vouched absent %v after the reconnection began (%s; pool object shown at %v, %d VMs revealed)",
							vm, p.clk.Since(begun), when, tt.objectAt, revealed)
					}
				}
			}
			for at := time.Duration(0); at <= last+2*settle; at += tick {
				p.clk.SetTime(begun.Add(at))
				if at == tt.objectAt && at > 0 {
					if err := p.sim.RevealPool(p.pool); err != nil {
						t.Fatal(err)
					}
				}
				for revealed < len(p.vms) && at >= tt.objectAt && at >= last-time.Duration(len(p.vms)-1-revealed)*every {
					if _, err := p.sim.RevealVMs(p.pool, 1); err != nil {
						t.Fatal(err)
					}
					revealed++
				}
				check("before the listing")
				if at%tt.poll == 0 {
					p.relist(t)
					check("after the listing")
				}
			}
			if revealed != len(p.vms) || !p.inv.Snapshot().PoolConnected(p.pool) {
				t.Fatalf("test setup: %d VMs revealed, pool trusted %v", revealed, p.inv.Snapshot().PoolConnected(p.pool))
			}
		})
	}
}
