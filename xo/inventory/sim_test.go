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

	// Once loaded and settled, a VM really deleted counts as absent after the settle time.
	if _, err := sim.RevealVMs(pool, 1); err != nil {
		t.Fatal(err)
	}
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
