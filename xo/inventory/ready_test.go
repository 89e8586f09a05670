package inventory

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
)

// wantSettling checks that err says the server waits for n pools.
func wantSettling(t *testing.T, err error, server string, n int) {
	t.Helper()
	if err == nil {
		t.Fatalf("ready while %d pool(s) of %s's first listing settle", n, server)
	}
	for _, want := range []string{"XO server " + server + ":", " " + strconv.Itoa(n) + " pool(s) of the first listing still settling", "inventory.settleTime"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("readiness error %q does not say %q", err, want)
		}
	}
}

// TestNotReadyUntilTheFirstListingSettles: a replica is not ready while the pools of its
// first listing are untrusted (a Node matching by name or address only would be admitted
// unlabelled), and ready from the listing that trusts them on; later reconnections do not
// make it unready again.
func TestNotReadyUntilTheFirstListingSettles(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	src := source()
	inv := newInventory(src, clk)
	if err := inv.ReadyCheck(nil); err == nil || !strings.Contains(err.Error(), "not synced") {
		t.Fatalf("ReadyCheck before any listing = %v", err)
	}
	relist(t, inv)
	err := inv.ReadyCheck(nil)
	wantSettling(t, err, "xo", 1)
	if want := "from about 2026-01-02T03:04:15Z (in 10s;"; !strings.Contains(err.Error(), want) {
		t.Errorf("readiness error %q does not say until when (%q)", err, want)
	}
	if n, until := inv.Settling(); n != 1 || !until.Equal(clk.Now().Add(testSettle)) {
		t.Fatalf("Settling = %d, %s; want 1 until the listing plus the settle time", n, until)
	}

	clk.Step(testSettle - time.Second)
	relist(t, inv)
	wantSettling(t, inv.ReadyCheck(nil), "xo", 1)
	clk.Step(time.Second)
	wantSettling(t, inv.ReadyCheck(nil), "xo", 1) // the settle time alone trusts nothing
	relist(t, inv)
	if err := inv.ReadyCheck(nil); err != nil {
		t.Fatalf("not ready once the first listing's pools are trusted: %v", err)
	}

	// A later reconnection makes the pool untrusted again, but not the replica unready: no
	// replica could vouch for that pool.
	inv.apply(xo.Event{Type: xo.EventRemove, Pool: &xo.Pool{ID: poolA}})
	inv.apply(xo.Event{Type: xo.EventAdd, Pool: &xo.Pool{ID: poolA, NameLabel: "pool-a"}})
	relist(t, inv)
	if s := inv.Snapshot(); s.PoolConnected(poolA) {
		t.Fatal("test setup: the reconnected pool is trusted")
	}
	if err := inv.ReadyCheck(nil); err != nil {
		t.Fatalf("a reconnection after the start made the replica unready: %v", err)
	}
}

// TestPoolLostMeanwhileDoesNotHoldReadiness: a pool of the first listing that XO loses before
// it is trusted, or that reconnects (its connection starting over), no longer holds readiness
// back; the others still do.
func TestPoolLostMeanwhileDoesNotHoldReadiness(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	src := source()
	src.pools = append(src.pools, xo.Pool{ID: poolB, NameLabel: "pool-b"})
	src.servers = append(src.servers, xo.Server{ID: "s2", PoolID: poolB, Status: xo.ServerConnected})
	inv := newInventory(src, clk)
	relist(t, inv)
	wantSettling(t, inv.ReadyCheck(nil), "xo", 2)

	// XO loses pool B (event): one pool left to settle.
	inv.apply(xo.Event{Type: xo.EventRemove, Pool: &xo.Pool{ID: poolB}})
	wantSettling(t, inv.ReadyCheck(nil), "xo", 1)
	// Pool A reconnects between two listings: XO shows its server connected without the pool
	// object, so its connection starts over. No replica could vouch for it sooner.
	src.mu.Lock()
	pools := src.pools
	src.pools = nil
	src.mu.Unlock()
	clk.Step(time.Second)
	relist(t, inv)
	// Both pools back (readiness not asked in between: once ready, it stays so).
	src.mu.Lock()
	src.pools = pools
	src.mu.Unlock()
	s := relist(t, inv)
	if s.PoolConnected(poolA) || s.PoolConnected(poolB) || !s.PoolUp(poolA) || !s.PoolUp(poolB) {
		t.Fatal("test setup: both pools must be up and settling")
	}
	if err := inv.ReadyCheck(nil); err != nil {
		t.Fatalf("pools lost or reconnected since the first listing hold readiness back: %v", err)
	}
}

// TestPoolWithoutObjectAtFirstListingDoesNotHoldReadiness: XO shows pool B's server connected
// without the pool object at the first listing (still loading, or hidden from the token): B
// cannot become trusted at a listing, so it must not hold readiness back; pool A does until it
// is trusted.
func TestPoolWithoutObjectAtFirstListingDoesNotHoldReadiness(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	src := source()
	src.servers = append(src.servers, xo.Server{ID: "s2", PoolID: poolB, Status: xo.ServerConnected})
	inv := newInventory(src, clk)
	relist(t, inv)
	wantSettling(t, inv.ReadyCheck(nil), "xo", 1)
	clk.Step(testSettle)
	s := relist(t, inv)
	if !s.PoolConnected(poolA) || !s.Settling() {
		t.Fatal("test setup: pool A must be trusted, pool B still settling")
	}
	if err := inv.ReadyCheck(nil); err != nil {
		t.Fatalf("a pool without its object at the first listing holds readiness back: %v", err)
	}
}

// TestServerInTroubleDoesNotHoldReadiness: a listed server whose refresh fails holds nothing
// back, so that its trouble does not keep the webhook from serving another server's Nodes; a
// server never listed holds nothing back either once another is listed (as before); a
// healthy server settling does.
func TestServerInTroubleDoesNotHoldReadiness(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	srcA, srcB, srcC := source(), source(), source()
	srcB.pools[0].ID, srcB.servers[0].PoolID = poolB, poolB
	srcB.vms, srcB.hosts = nil, nil
	srcC.err = &xo.Error{Kind: xo.KindServerError, Op: "list vms", StatusCode: 503}
	opts := func(name string) Options {
		return Options{Name: name, Clock: clk, Log: logr.Discard(), StaleAfter: time.Minute, SettleTime: testSettle}
	}
	a, b, c := New(srcA, opts("a")), New(srcB, opts("b")), New(srcC, opts("c"))
	e := NewEstate(0, Member{Inventory: a}, Member{Inventory: b}, Member{Inventory: c})
	if err := e.ReadyCheck(nil); err == nil || !strings.Contains(err.Error(), "no XO server listed yet (a, b, c)") {
		t.Fatalf("ReadyCheck before any listing = %v", err)
	}
	relist(t, a)
	relist(t, b)
	if err := c.Relist(context.Background()); err == nil {
		t.Fatal("test setup: server c listed")
	}
	err := e.ReadyCheck(nil)
	wantSettling(t, err, "a", 1)
	wantSettling(t, err, "b", 1)
	if strings.Contains(err.Error(), "server c") {
		t.Errorf("server c, never listed, holds readiness back: %v", err)
	}

	// Server b's XO fails: b no longer holds readiness back; a still does until trusted.
	srcB.mu.Lock()
	srcB.err = &xo.Error{Kind: xo.KindServerError, Op: "list vms", StatusCode: 503}
	srcB.mu.Unlock()
	clk.Step(testSettle)
	if err := b.Relist(context.Background()); err == nil {
		t.Fatal("test setup: server b listed")
	}
	err = e.ReadyCheck(nil)
	wantSettling(t, err, "a", 1)
	if strings.Contains(err.Error(), "server b") {
		t.Errorf("server b, whose refresh fails, holds readiness back: %v", err)
	}
	relist(t, a)
	if err := e.ReadyCheck(nil); err != nil {
		t.Fatalf("not ready with a settled and two servers in trouble: %v", err)
	}
}

// TestReadyAfterTheSettleTimeWithTheRelistLoop runs the inventory's own loop on a fake clock:
// the listing that trusts the first listing's pools comes by itself once the settle time has
// passed, and makes the inventory ready.
func TestReadyAfterTheSettleTimeWithTheRelistLoop(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	inv := New(source(), Options{Clock: clk, Log: logr.Discard(), SettleTime: testSettle, PollPeriod: time.Hour, DisableEventStream: true})
	startSynced(t, inv)
	wantSettling(t, inv.ReadyCheck(nil), "xo", 1)
	// The loop waits on the clock for the pool's settle time.
	waitFor(t, "the relist loop waiting on the clock", clk.HasWaiters)
	clk.Step(testSettle - time.Millisecond)
	waitFor(t, "the relist loop waiting on the clock again", clk.HasWaiters)
	wantSettling(t, inv.ReadyCheck(nil), "xo", 1)
	clk.Step(time.Second)
	waitFor(t, "ready once the settle time has passed", func() bool { return inv.ReadyCheck(nil) == nil })
}

// waitFor waits up to 5 s for cond.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
