package inventory

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
)

// fakeReader answers direct reads from a map; err, when set, is every answer.
type fakeReader struct {
	vms   map[string]*xo.VM
	err   error
	calls atomic.Int32
}

func (r *fakeReader) GetVM(_ context.Context, id string) (*xo.VM, error) {
	r.calls.Add(1)
	if r.err != nil {
		return nil, r.err
	}
	if vm, ok := r.vms[id]; ok {
		c := *vm
		return &c, nil
	}
	return nil, &xo.Error{Kind: xo.KindNotFound, Op: "get vm", Message: "no such VM " + id}
}

func (r *fakeReader) GetPool(context.Context, string) (*xo.Pool, error) { return nil, r.err }
func (r *fakeReader) ListServers(context.Context, func(*xo.Server)) error {
	return r.err
}

func member(t *testing.T, name string, src *fakeSource, clk *clocktesting.FakeClock, r Reader) Member {
	t.Helper()
	inv := New(src, Options{Name: name, Clock: clk, StaleAfter: time.Minute, SettleTime: testSettle})
	settled(t, inv, clk)
	return Member{Inventory: inv, XO: r}
}

func TestEstateSamePoolThroughTwoServers(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	first, second := source(), source()
	second.vms[0].NameLabel = "renamed-copy" // a second XO that lags behind: never the answer
	e := NewEstate(0, member(t, "a", first, clk, &fakeReader{}), member(t, "b", second, clk, &fakeReader{}))
	v := e.View()
	for range 3 {
		if vm := v.VM(vm1); vm == nil || vm.NameLabel != "worker-1" {
			t.Fatalf("VM = %+v, want the first server's copy", vm)
		}
	}
	if got := v.VMsByName("worker-2"); len(got) != 1 {
		t.Fatalf("one VM listed by two servers must count once, got %d", len(got))
	}
	if v.ForPool(poolA) == nil || !v.Complete() || v.HostNameShared("host-a", hostA) {
		t.Fatal("two copies of one pool are one pool")
	}
	// The first server goes stale (no stream, no listing for longer than StaleAfter): the
	// second one serves the pool.
	clk.Step(2 * time.Minute)
	_ = relist(t, e.Members()[1].Inventory)
	if s := e.View().ForPool(poolA); s == nil || s.Server() != "b" {
		t.Fatalf("ForPool after the first server went stale = %v", s)
	}
}

// TestEstateStaleServerCopiesDoNotCount: the same pool through two servers, and the first
// one goes stale (down: no stream, no listing). Its copies, as they were when it went away,
// never win over the current second server's: a VM, its host and the pool come from the
// second server, with PoolConnected vouching for that very copy, and a VM the second server
// no longer has is absent, not the stale server's copy. With one server, a stale copy is
// still returned, untrusted.
func TestEstateStaleServerCopiesDoNotCount(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	first, second := source(), source()
	second.vms = second.vms[:1]                    // vm2 deleted since the first server went away
	second.vms[0].PowerState = xo.PowerStateHalted // vm1 halted meanwhile
	second.hosts[0].NameLabel = "host-a-renamed"   // and its host renamed
	second.pools[0].NameLabel = "pool-a-renamed"   // and the pool
	a, b := member(t, "a", first, clk, &fakeReader{}), member(t, "b", second, clk, &fakeReader{})
	e := NewEstate(0, a, b)
	if vm := e.View().VM(vm1); vm == nil || vm.PowerState != xo.PowerStateRunning {
		t.Fatalf("VM while both servers are current = %+v, want the first server's copy", vm)
	}

	clk.Step(2 * time.Minute)
	_ = relist(t, b.Inventory)
	v := e.View()
	if s := v.ForPool(poolA); s == nil || s.Server() != "b" {
		t.Fatalf("ForPool = %v, want the current server b", s)
	}
	vm := v.VM(vm1)
	if vm == nil || vm.PowerState != xo.PowerStateHalted || !v.PoolConnected(vm.PoolID) {
		t.Fatalf("VM = %+v (pool connected %v), want the current server's copy (Halted), trusted", vm, vm != nil && v.PoolConnected(vm.PoolID))
	}
	if h := v.Host(hostA); h == nil || h.NameLabel != "host-a-renamed" {
		t.Fatalf("Host = %+v, want the current server's copy", h)
	}
	if p := v.Pool(poolA); p == nil || p.NameLabel != "pool-a-renamed" {
		t.Fatalf("Pool = %+v, want the current server's copy", p)
	}
	if got := v.VMsByName("worker-1"); len(got) != 1 || got[0].PowerState != xo.PowerStateHalted {
		t.Fatalf("VMsByName = %+v, want the current server's copy once", got)
	}
	if vm := v.VM(vm2); vm != nil {
		t.Fatalf("VM only the stale server still has, absent from the current server of its pool = %+v, want nil", vm)
	}
	if wait, ok := v.ForPool(poolA).AbsenceWait(vm2, poolA); !ok || wait != 0 {
		t.Fatalf("AbsenceWait on the current server = %v, %v; want its absence to count", wait, ok)
	}

	if vm, settled := v.CurrentVM(vm1); vm == nil || vm.PowerState != xo.PowerStateHalted || !settled {
		t.Fatalf("CurrentVM = %+v, settled %v; want the current server's copy (Halted), settled", vm, settled)
	}
	if vm, _ := v.CurrentVM(vm2); vm != nil {
		t.Fatalf("CurrentVM of a VM only the stale server still has = %+v, want nil", vm)
	}

	// One server, stale: its copies are what there is, untrusted, and none is current.
	single := NewEstate(0, a).View()
	if vm := single.VM(vm2); vm == nil || single.PoolConnected(vm.PoolID) {
		t.Fatalf("single stale server: VM = %+v, pool connected %v; want its copy, untrusted", vm, vm != nil && single.PoolConnected(vm.PoolID))
	}
	if vm, _ := single.CurrentVM(vm1); vm != nil {
		t.Fatalf("single stale server: CurrentVM = %+v, want nil", vm)
	}
}

// TestCurrentVMWhileThePoolSettles: a VM XO shows in a pool it has just (re)connected is
// current (its state is XO's) before the pool is settled; settled says which.
func TestCurrentVMWhileThePoolSettles(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	inv := New(source(), Options{Name: "a", Clock: clk, StaleAfter: time.Minute, SettleTime: testSettle})
	_ = relist(t, inv)
	m := Member{Inventory: inv, XO: &fakeReader{}}
	e := NewEstate(0, m)
	if s := inv.Snapshot(); s.PoolConnected(poolA) || !s.PoolUp(poolA) {
		t.Fatal("setup: pool A must be up and settling")
	}
	if vm, settled := e.View().CurrentVM(vm1); vm == nil || settled {
		t.Fatalf("CurrentVM while pool A settles = %+v, settled %v; want the VM, not settled", vm, settled)
	}
	clk.Step(testSettle)
	_ = relist(t, inv)
	if vm, settled := e.View().CurrentVM(vm1); vm == nil || !settled {
		t.Fatalf("CurrentVM once pool A settled = %+v, settled %v; want the VM, settled", vm, settled)
	}
}

func TestEstateNamesSharedAcrossServers(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	other := &fakeSource{
		hosts:   []xo.Host{{ID: "c0ffee00-0000-4000-8000-0000000000b1", NameLabel: "host-a", PoolID: poolB}},
		pools:   []xo.Pool{{ID: poolB, NameLabel: "pool-b"}},
		servers: []xo.Server{{ID: "s2", PoolID: poolB, Status: xo.ServerConnected}},
	}
	e := NewEstate(0, member(t, "a", source(), clk, &fakeReader{}), member(t, "b", other, clk, &fakeReader{}))
	v := e.View()
	if !v.HostNameShared("host-a", hostA) {
		t.Fatal("two hosts named host-a on two servers must be reported shared")
	}
	if v.PoolNameShared("pool-a", poolA) {
		t.Fatal("pool-a is unique")
	}
}

func TestEstateFindReadsEveryServer(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	const fresh = "c0ffee00-0000-4000-8000-00000000f00d"
	down := &fakeReader{err: &xo.Error{Kind: xo.KindUnavailable, Op: "get vm"}}
	has := &fakeReader{vms: map[string]*xo.VM{fresh: {ID: "C0FFEE00-0000-4000-8000-00000000F00D", PoolID: poolB}}}
	e := NewEstate(time.Second, member(t, "a", source(), clk, down), member(t, "b", source(), clk, has))
	n := &corev1.Node{Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{SystemUUID: fresh}}}
	res, _, err := e.Find(context.Background(), n)
	if err != nil || res.Outcome != node.OutcomeMatched || res.VM.ID != fresh || res.Method != node.MethodSystemUUID {
		t.Fatalf("Find = %+v, %v; want the second server's VM, lower-cased, despite the first being down", res, err)
	}
	// Nobody has it and one server cannot answer: an error, not "not found".
	n.Status.NodeInfo.SystemUUID = "c0ffee00-0000-4000-8000-00000000beef"
	res, _, err = e.Find(context.Background(), n)
	if res.VM != nil || err == nil || !errors.As(err, new(*xo.Error)) {
		t.Fatalf("Find = %+v, %v; want no VM and the down server's error", res, err)
	}
	// In the inventory: no direct read at all.
	before := has.calls.Load()
	n.Status.NodeInfo.SystemUUID = vm1
	if res, _, err := e.Find(context.Background(), n); err != nil || res.Outcome != node.OutcomeMatched || has.calls.Load() != before {
		t.Fatalf("Find of an inventory VM = %+v, %v, %d direct reads", res, err, has.calls.Load()-before)
	}
}

// slowReader answers as its fakeReader after a delay.
type slowReader struct {
	fakeReader
	delay time.Duration
}

func (r *slowReader) GetVM(ctx context.Context, id string) (*xo.VM, error) {
	time.Sleep(r.delay)
	return r.fakeReader.GetVM(ctx, id)
}

// TestEstateFindSwappedTwinAmbiguous: a system uuid XO's direct read finds as one VM as-is and
// as another byte-swapped is no match, as in memory (node.Resolve), whether one server or two
// hold the pair; the same VM through both forms, or one form only, is a match.
func TestEstateFindSwappedTwinAmbiguous(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	const raw = "c0ffee00-1111-4222-8333-00000000a1a1"
	swapped, _ := node.SwapUUID(raw)
	n := &corev1.Node{Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{SystemUUID: raw}}}
	rawVM, swappedVM := &xo.VM{ID: raw, PoolID: poolA}, &xo.VM{ID: swapped, PoolID: poolA}
	ambiguous := func(name string, e *Estate) {
		t.Helper()
		res, _, err := e.Find(context.Background(), n)
		if err != nil || res.VM != nil || res.Outcome != node.OutcomeAmbiguous || res.Candidates != 2 {
			t.Errorf("%s: Find = %+v, %v; want no VM, ambiguous", name, res, err)
		}
	}
	ambiguous("one server", NewEstate(time.Second, member(t, "a", source(), clk, &fakeReader{vms: map[string]*xo.VM{raw: rawVM, swapped: swappedVM}})))
	// The raw one on a slower server: the swapped answer comes first and waits for it.
	ambiguous("two servers", NewEstate(time.Second,
		member(t, "a", source(), clk, &slowReader{fakeReader{vms: map[string]*xo.VM{raw: rawVM}}, 50 * time.Millisecond}),
		member(t, "b", source(), clk, &fakeReader{vms: map[string]*xo.VM{swapped: swappedVM}})))

	for name, vms := range map[string]map[string]*xo.VM{
		"raw only":     {raw: rawVM},
		"swapped only": {swapped: swappedVM},
		"one VM twice": {raw: rawVM, swapped: {ID: strings.ToUpper(raw), PoolID: poolA}},
	} {
		res, _, err := NewEstate(time.Second, member(t, "a", source(), clk, &fakeReader{vms: vms})).Find(context.Background(), n)
		if err != nil || res.VM == nil || res.Outcome != node.OutcomeMatched {
			t.Errorf("%s: Find = %+v, %v; want a match", name, res, err)
		}
	}
}

// hungReader blocks every read until its context ends.
type hungReader struct{ fakeReader }

func (r *hungReader) GetVM(ctx context.Context, _ string) (*xo.VM, error) {
	<-ctx.Done()
	return nil, &xo.Error{Kind: xo.KindUnavailable, Op: "get vm", Err: ctx.Err()}
}

// TestEstateFindNotDelayedByAHungServer: a VM one server has is found without waiting for
// another server that hangs.
func TestEstateFindNotDelayedByAHungServer(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	const fresh = "c0ffee00-0000-4000-8000-00000000f00d"
	has := &fakeReader{vms: map[string]*xo.VM{fresh: {ID: fresh, PoolID: poolA}}}
	e := NewEstate(5*time.Second, member(t, "hung", source(), clk, &hungReader{}), member(t, "b", source(), clk, has))
	n := &corev1.Node{Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{SystemUUID: fresh}}}
	start := time.Now()
	res, _, _ := e.Find(context.Background(), n)
	if res.VM == nil || time.Since(start) > 2*time.Second {
		t.Fatalf("Find = %+v after %v; want the VM without waiting for the hung server", res, time.Since(start))
	}
}
