package inventory

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
)

// fakeSource serves fixed listings; hooks let a test act in the middle of a relist.
type fakeSource struct {
	mu       sync.Mutex
	vms      []xo.VM
	hosts    []xo.Host
	pools    []xo.Pool
	servers  []xo.Server
	err      error
	duringVM func()
	// filters records the filters of the VM listings.
	filters []string
}

// inFilter reports whether an object of this pool passes an xo.PoolFilter filter.
func inFilter(filter, pool string) bool {
	return filter == "" || strings.Contains(filter, pool)
}

func (f *fakeSource) ListVMs(_ context.Context, filter string, fn func(*xo.VM)) error {
	f.mu.Lock()
	vms, err, hook := append([]xo.VM(nil), f.vms...), f.err, f.duringVM
	f.filters = append(f.filters, filter)
	f.mu.Unlock()
	if hook != nil {
		hook()
	}
	if err != nil {
		return err
	}
	for i := range vms {
		if inFilter(filter, vms[i].PoolID) {
			fn(&vms[i])
		}
	}
	return nil
}

func (f *fakeSource) ListHosts(_ context.Context, filter string, fn func(*xo.Host)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.hosts {
		h := f.hosts[i]
		if inFilter(filter, h.PoolID) {
			fn(&h)
		}
	}
	return nil
}

func (f *fakeSource) ListPools(_ context.Context, fn func(*xo.Pool)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.pools {
		p := f.pools[i]
		fn(&p)
	}
	return nil
}

func (f *fakeSource) ListServers(_ context.Context, fn func(*xo.Server)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.servers {
		s := f.servers[i]
		fn(&s)
	}
	return nil
}

func (f *fakeSource) Watch(ctx context.Context, _ xo.WatchOptions, _ func(xo.Event)) error {
	<-ctx.Done()
	return ctx.Err()
}

const (
	poolA = "5e0b1a6c-8f2d-4c39-a1e7-0d9b3c4f2a10"
	poolB = "6f1c2b7d-9a3e-4d4a-b2f8-1eac4d5a3b21"
	hostA = "b61a5c92-700e-4966-a13b-00633f03eea8"
	vm1   = "3f1c2b7e-0c4a-4d2b-9e51-6a0f2e8b1c11"
	vm2   = "a7d94e20-51b3-4f8e-8c02-93e1d5f4ab76"
)

func source() *fakeSource {
	return &fakeSource{
		vms: []xo.VM{
			{ID: vm1, NameLabel: "worker-1", PowerState: xo.PowerStateRunning, PoolID: poolA, Container: hostA, MainIPAddress: "10.0.0.1", Addresses: xo.AddressesOf(map[string]string{"0/ipv4/0": "10.0.0.1", "0/ipv6/0": "fd00::1"})},
			{ID: vm2, NameLabel: "worker-2", PowerState: xo.PowerStateHalted, PoolID: poolA, Container: poolA},
		},
		hosts:   []xo.Host{{ID: hostA, NameLabel: "host-a", PoolID: poolA}},
		pools:   []xo.Pool{{ID: poolA, NameLabel: "pool-a"}},
		servers: []xo.Server{{ID: "s1", PoolID: poolA, Status: xo.ServerConnected}},
	}
}

const testSettle = 10 * time.Second

func newInventory(src Source, clk *clocktesting.FakeClock) *Inventory {
	return New(src, Options{Clock: clk, Log: logr.Discard(), StaleAfter: time.Minute, SettleTime: testSettle})
}

// settled relists, lets the settle time pass and relists again: the connected pools are
// trusted then.
func settled(t *testing.T, inv *Inventory, clk *clocktesting.FakeClock) *Snapshot {
	t.Helper()
	for range 2 {
		if err := inv.Relist(context.Background()); err != nil {
			t.Fatal(err)
		}
		clk.Step(testSettle)
	}
	return inv.Snapshot()
}

// TestRelistsRunOneAtATime: a Relist called while another lists stores its own, newer listing
// last; the one begun earlier must not overwrite it with what XO held before.
func TestRelistsRunOneAtATime(t *testing.T) {
	src := source()
	inv := newInventory(src, clocktesting.NewFakeClock(time.Now()))
	listing, release := make(chan struct{}), make(chan struct{})
	src.duringVM = func() { close(listing); <-release }
	first := make(chan error, 1)
	go func() { first <- inv.Relist(context.Background()) }()
	<-listing

	// XO changes while the first relist lists; a second relist begins.
	src.mu.Lock()
	src.duringVM, src.vms = nil, src.vms[:1]
	src.mu.Unlock()
	second := make(chan error, 1)
	go func() { second <- inv.Relist(context.Background()) }()
	// Were relists concurrent, the second would finish now, before the first; either way the
	// first is released after at most this wait.
	select {
	case err := <-second:
		second <- err
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	for _, c := range []chan error{first, second} {
		if err := <-c; err != nil {
			t.Fatal(err)
		}
	}
	if inv.Snapshot().VM(vm2) != nil {
		t.Error("the snapshot holds a VM XO removed before the last Relist began")
	}
}

func TestRelistBuildsIndexes(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	inv := newInventory(source(), clk)
	s := settled(t, inv, clk)
	if s.VM(vm1) == nil || s.VM("3F1C2B7E-0C4A-4D2B-9E51-6A0F2E8B1C11") == nil {
		t.Fatal("VM lookup by id (any case) failed")
	}
	if got := s.VMsByName("worker-2"); len(got) != 1 || got[0].ID != vm2 {
		t.Fatalf("VMsByName = %v", got)
	}
	if got := s.VMsByAddress("fd00::1"); len(got) != 1 || got[0].ID != vm1 {
		t.Fatalf("VMsByAddress(fd00::1) = %v", got)
	}
	if s.Host(hostA) == nil || s.Pool(poolA) == nil || !s.PoolConnected(poolA) {
		t.Fatal("host, pool or connection missing")
	}
	if !s.Complete() || !inv.HasSynced() {
		t.Fatal("a fresh complete listing must be Complete and synced")
	}
	clk.Step(time.Minute)
	if s.Complete() {
		t.Fatal("a listing older than StaleAfter without event stream must not be Complete")
	}
}

func TestFailedRelistKeepsSnapshot(t *testing.T) {
	src := source()
	inv := newInventory(src, clocktesting.NewFakeClock(time.Now()))
	if err := inv.Relist(context.Background()); err != nil {
		t.Fatal(err)
	}
	before := inv.Snapshot()
	src.mu.Lock()
	src.vms = src.vms[:1]
	src.err = &xo.Error{Kind: xo.KindBadResponse, Op: "list vms", Message: "listing cut short"}
	src.mu.Unlock()
	if err := inv.Relist(context.Background()); !xo.IsBadResponse(err) {
		t.Fatalf("Relist error = %v, want the listing's bad response", err)
	}
	if inv.Snapshot() != before || inv.Snapshot().VM(vm2) == nil {
		t.Fatal("a failed listing replaced the snapshot")
	}
	if inv.LastError() == nil {
		t.Fatal("LastError must report the failure")
	}
}

func TestDisconnectedServerMakesIncomplete(t *testing.T) {
	src := source()
	src.servers = append(src.servers, xo.Server{ID: "s2", Status: xo.ServerDisconnected})
	clk := clocktesting.NewFakeClock(time.Now())
	inv := newInventory(src, clk)
	s := settled(t, inv, clk)
	if s.Complete() {
		t.Fatal("a disconnected server must make the snapshot incomplete")
	}
	if !s.PoolConnected(poolA) || s.PoolConnected(poolB) {
		t.Fatal("PoolConnected wrong")
	}
}

func TestEventsApplyAndNotify(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	inv := newInventory(source(), clk)
	settled(t, inv, clk)
	var got []Change
	inv.AddHandler(func(c Change) { got = append(got, c) })
	old := inv.Snapshot()

	moved := *old.VM(vm1)
	moved.Container = "c0ffee00-0000-4000-8000-000000000001"
	moved.NameLabel = "renamed"
	inv.apply(xo.Event{Type: xo.EventUpdate, Collection: xo.CollectionVM, VM: &moved})
	s := inv.Snapshot()
	if s.VM(vm1).Container != moved.Container || len(s.VMsByName("worker-1")) != 0 || len(s.VMsByName("renamed")) != 1 {
		t.Fatal("update not applied to the VM and its name index")
	}
	if old.VM(vm1).NameLabel != "worker-1" || len(old.VMsByName("worker-1")) != 1 {
		t.Fatal("an event modified an older snapshot")
	}
	same := *s.VM(vm1)
	inv.apply(xo.Event{Type: xo.EventUpdate, Collection: xo.CollectionVM, VM: &same})
	inv.apply(xo.Event{Type: xo.EventRemove, Collection: xo.CollectionVM, VM: &xo.VM{ID: vm2}})
	if inv.Snapshot().VM(vm2) != nil {
		t.Fatal("remove not applied")
	}
	inv.apply(xo.Event{Type: xo.EventRemove, Collection: xo.CollectionPool, Pool: &xo.Pool{ID: poolA}})
	if inv.Snapshot().PoolConnected(poolA) || inv.Snapshot().Complete() {
		t.Fatal("a removed pool must count as disconnected")
	}
	want := []Change{{VMChanged, vm1}, {VMChanged, vm2}, {PoolChanged, poolA}}
	if len(got) != len(want) {
		t.Fatalf("changes = %v, want %v (an unchanged update must not notify)", got, want)
	}
	for i := range want {
		if got[i].Kind != want[i].Kind || got[i].ID != want[i].ID {
			t.Fatalf("change %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestEventDuringRelistWins(t *testing.T) {
	src := source()
	inv := newInventory(src, clocktesting.NewFakeClock(time.Now()))
	if err := inv.Relist(context.Background()); err != nil {
		t.Fatal(err)
	}
	// While the VMs are being listed (the listing still says Running), an event says the VM
	// halted: the newer event must survive the listing.
	src.duringVM = func() {
		halted := *inv.Snapshot().VM(vm1)
		halted.PowerState = xo.PowerStateHalted
		halted.Container = poolA
		inv.apply(xo.Event{Type: xo.EventUpdate, Collection: xo.CollectionVM, VM: &halted})
	}
	if err := inv.Relist(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := inv.Snapshot().VM(vm1).PowerState; got != xo.PowerStateHalted {
		t.Fatalf("power state after relist = %s, want the event's Halted", got)
	}
}

func TestRelistDiffNotifies(t *testing.T) {
	src := source()
	inv := newInventory(src, clocktesting.NewFakeClock(time.Now()))
	if err := inv.Relist(context.Background()); err != nil {
		t.Fatal(err)
	}
	var got []Change
	inv.AddHandler(func(c Change) { got = append(got, c) })
	if err := inv.Relist(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Fatalf("an identical relist published %v", got)
	}
	src.mu.Lock()
	src.vms[1].PowerState = xo.PowerStateRunning
	src.mu.Unlock()
	if err := inv.Relist(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != vm2 {
		t.Fatalf("changes = %v, want only %s", got, vm2)
	}
}

// TestCurrentAgainNotifies: a relist that makes a stale inventory current again notifies each
// pool, even when nothing in XO changed: the controllers put off what needs a current inventory
// (a shutdown taint, a deletion) and must not wait for their periodic look to do it. Found by the
// soak: a shutdown taint 29.8 s late, its resync period.
func TestCurrentAgainNotifies(t *testing.T) {
	src := source()
	clk := clocktesting.NewFakeClock(time.Now())
	inv := newInventory(src, clk)
	settled(t, inv, clk)
	var got []Change
	inv.AddHandler(func(c Change) { got = append(got, c) })

	clk.Step(30 * time.Second) // under StaleAfter
	if err := inv.Relist(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Fatalf("a relist of a current inventory that changed nothing published %v", got)
	}

	clk.Step(time.Minute + time.Second) // over StaleAfter
	if inv.Snapshot().Fresh() {
		t.Fatal("the inventory is still current after StaleAfter without a listing")
	}
	if err := inv.Relist(context.Background()); err != nil {
		t.Fatal(err)
	}
	if want := []Change{{Kind: PoolChanged, ID: poolA}}; !slices.Equal(got, want) {
		t.Fatalf("current again: changes = %v, want %v", got, want)
	}
}

func TestStartWithoutStream(t *testing.T) {
	src := source()
	inv := New(src, Options{DisableEventStream: true, Log: logr.Discard()})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = inv.Start(ctx); close(done) }()
	select {
	case <-inv.Synced():
	case <-time.After(5 * time.Second):
		t.Fatal("inventory did not sync")
	}
	cancel()
	<-done
	if errors.Is(inv.LastError(), context.Canceled) {
		t.Fatal("cancel must not count as a refresh error")
	}
}

// readyWatch is a source whose event stream subscribes at once and then stays up, silent.
type readyWatch struct{ *fakeSource }

func (r readyWatch) Watch(ctx context.Context, o xo.WatchOptions, _ func(xo.Event)) error {
	if o.Ready != nil {
		o.Ready()
	}
	<-ctx.Done()
	return ctx.Err()
}

// TestStreamCurrentOnlyOnceRelistedAfterSubscribing: the event stream (re)subscribes and the
// relist that follows fails. What changed while the stream was down is only in a listing, so
// the snapshot listed before counts as current only until StaleAfter, stream or not; once a
// relist succeeds, the stream keeps it current.
func TestStreamCurrentOnlyOnceRelistedAfterSubscribing(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	src := source()
	inv := New(readyWatch{src}, Options{Clock: clk, Log: logr.Discard(), StaleAfter: time.Minute, SettleTime: testSettle})
	settled(t, inv, clk) // listed before the stream subscribed
	src.mu.Lock()
	src.err = &xo.Error{Kind: xo.KindServerError, Op: "list vms", StatusCode: 503}
	src.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = inv.Start(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(5 * time.Second)
	for inv.LastError() == nil {
		if time.Now().After(deadline) {
			t.Fatal("the relist that follows the subscription did not run")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !inv.Streaming() {
		t.Fatal("test setup: the stream is not up")
	}
	if s := inv.Snapshot(); !s.Complete() {
		t.Fatal("a listing younger than StaleAfter must count as current")
	}
	clk.Step(10 * time.Minute)
	if s := inv.Snapshot(); s.Fresh() || s.Complete() {
		t.Fatal("a snapshot listed before the subscription, whose relist failed, counts as current past StaleAfter")
	}

	src.mu.Lock()
	src.err = nil
	src.mu.Unlock()
	if err := inv.Relist(context.Background()); err != nil {
		t.Fatal(err)
	}
	clk.Step(10 * time.Minute)
	if s := inv.Snapshot(); !s.Fresh() || !s.Complete() {
		t.Fatal("relisted after the subscription, the stream must keep the inventory current")
	}
}

// endingWatch is a source whose event stream subscribes at once and stays up, silent, until
// end is closed.
type endingWatch struct {
	*fakeSource
	end chan struct{}
}

func (w endingWatch) Watch(ctx context.Context, o xo.WatchOptions, _ func(xo.Event)) error {
	o.Ready()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-w.end:
		return errors.New("stream cut")
	}
}

// TestSnapshotIsAValue: while a stream keeps the inventory current, its snapshot says so past
// StaleAfter; the stream's end publishes a snapshot that no longer says so, and the snapshot
// taken before answers as it did: nothing it says comes from the live inventory.
func TestSnapshotIsAValue(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	src := source()
	w := endingWatch{fakeSource: src, end: make(chan struct{})}
	inv := New(w, Options{Clock: clk, Log: logr.Discard(), StaleAfter: time.Minute, SettleTime: testSettle})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = inv.Start(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	waitUntil("a listing after the subscription", func() bool { return inv.Snapshot().streamed })

	held := inv.Snapshot()
	clk.Step(10 * time.Minute)
	if !held.Fresh() {
		t.Fatal("a snapshot the stream keeps current is not current past StaleAfter")
	}

	src.mu.Lock()
	src.err = &xo.Error{Kind: xo.KindServerError, Op: "list vms", StatusCode: 503}
	src.mu.Unlock()
	close(w.end)
	waitUntil("the stream's end published", func() bool { return !inv.Snapshot().streamed })
	if inv.Snapshot().Fresh() {
		t.Error("with the stream down and the last listing 10 minutes old, the inventory counts as current")
	}
	if !held.Fresh() || held.Len() != 2 {
		t.Error("the snapshot taken before the stream ended changed its answers")
	}
}

// countingSource counts full listings (one servers listing each).
type countingSource struct {
	*fakeSource
	lists atomic.Int32
}

func (c *countingSource) ListServers(ctx context.Context, fn func(*xo.Server)) error {
	c.lists.Add(1)
	return c.fakeSource.ListServers(ctx, fn)
}

// TestPoolWithoutObjectDoesNotDriveRelists: XO lists a server connected to pool B without
// listing the pool object (B still loading, or hidden from the token). Such a pool cannot
// become trusted, so the relist loop keeps its period instead of relisting as soon as B's
// settle time is past; once B's object arrives by event, B is trusted at the first listing
// after its settle time, long before the next period.
func TestPoolWithoutObjectDoesNotDriveRelists(t *testing.T) {
	src := &countingSource{fakeSource: source()}
	src.servers = append(src.servers, xo.Server{ID: "s2", PoolID: poolB, Status: xo.ServerConnected})
	const settle = 50 * time.Millisecond
	inv := New(src, Options{Log: logr.Discard(), SettleTime: settle, PollPeriod: time.Hour, DisableEventStream: true})
	startSynced(t, inv)
	// Past the first listings and the one that trusts pool A, the loop waits for its period.
	time.Sleep(10 * settle)
	before := src.lists.Load()
	time.Sleep(10 * settle)
	if n := src.lists.Load() - before; n > 0 {
		t.Fatalf("%d listings within %v (poll period 1h): pool B, connected without its object, drives the relist loop", n, 10*settle)
	}
	if s := inv.Snapshot(); !s.PoolConnected(poolA) || s.PoolConnected(poolB) || !s.Settling() {
		t.Fatal("pool A must be trusted, pool B (no pool object) not")
	}

	src.mu.Lock()
	src.pools = append(src.pools, xo.Pool{ID: poolB, NameLabel: "pool-b"})
	src.mu.Unlock()
	inv.apply(xo.Event{Type: xo.EventAdd, Pool: &xo.Pool{ID: poolB, NameLabel: "pool-b"}})
	deadline := time.Now().Add(5 * time.Second)
	for !inv.Snapshot().PoolConnected(poolB) {
		if time.Now().After(deadline) {
			t.Fatal("pool B, its object added by event, is not trusted after its settle time")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// startSynced runs inv until the test ends and waits for its first listing.
func startSynced(t *testing.T, inv *Inventory) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = inv.Start(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-inv.Synced():
	case <-time.After(5 * time.Second):
		t.Fatal("inventory did not sync")
	}
}
