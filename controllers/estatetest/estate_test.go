package estatetest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/controllers/cloudnode"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/nodeevents"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/inventory"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/xosim"
)

// server returns the options of one XO server of a two-server estate, named name, with its
// own token and pool.
func server(name string) testenv.FixtureOptions {
	return testenv.FixtureOptions{
		Name: name, Token: name + "-token-0123456789abcdefghijklmnop",
		PoolName: name + "-pool", HostNames: [2]string{name + "-host-1", name + "-host-2"},
	}
}

// TestTwoServersInitialize: Nodes of VMs of two XO servers are initialized from one Estate,
// by system uuid and by name, each with its own server's pool.
func TestTwoServersInitialize(t *testing.T) {
	t.Parallel()
	a, b := testenv.NewFixture(t, env, server("xo-a")), testenv.NewFixture(t, env, server("xo-b"))
	cs := newControllers(env.Client, testenv.Estate(a.X, b.X), a.Rec, clock.RealClock{}, tagPrefixes, node.Ignorer{})
	var names []string
	want := map[string][2]string{} // Node → pool, VM
	for i, f := range []*testenv.Fixture{a, b} {
		// Each VM with an address: without one a Node is not initialized (node.Missing).
		byUUID := f.AddVM(xosim.VMSpec{NameLabel: "by-uuid", IPs: []string{fmt.Sprintf("10.20.%d.1", i)}})
		n := testenv.KubeletNode(testenv.NodeName(t, "uuid"), testenv.WithSystemUUID(byUUID))
		env.AddNode(t, n)
		want[n.Name] = [2]string{f.Pool, byUUID}
		name := testenv.NodeName(t, "name")
		byName := f.AddVM(xosim.VMSpec{NameLabel: name, VirtualizationMode: "pvh", IPs: []string{fmt.Sprintf("10.20.%d.2", i)}})
		env.AddNode(t, testenv.KubeletNode(name))
		want[name] = [2]string{f.Pool, byName}
		names = append(names, n.Name, name)
	}
	cs.reconcile(a.Ctx, t, names...)
	for n, pv := range want {
		got := env.Node(t, n)
		if !initialized(t, n) || got.Spec.ProviderID != node.FormatProviderID(pv[0], pv[1]) || got.Labels[node.LabelRegion] != pv[0] {
			t.Errorf("Node %s: initialized %v, providerID %q, region %q; want initialized, %s, %s", n, initialized(t, n), got.Spec.ProviderID, got.Labels[node.LabelRegion], node.FormatProviderID(pv[0], pv[1]), pv[0])
		}
	}
}

// fault makes one XO server unusable and returns what ends it.
type fault func(t *testing.T, f *testenv.Fixture) (clear func())

// TestOneServerFailing: while one XO server of two is down, hung or refuses the token, the
// other's Nodes are initialized, relabelled after a migration and deleted when their VM goes,
// on time; the failing server's Nodes are not deleted, relabelled, untainted or initialized.
// Once it recovers, what changed meanwhile reaches its Nodes.
func TestOneServerFailing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		inject fault
	}{
		{"connection refused", func(t *testing.T, f *testenv.Fixture) func() {
			return f.Refuse()
		}},
		{"hung", func(t *testing.T, f *testenv.Fixture) func() {
			hang := f.Sim.InjectFault(xosim.Fault{Kind: xosim.FaultLatency, Latency: time.Minute})
			stall := f.Sim.InjectFault(xosim.Fault{Kind: xosim.FaultStall, PathPrefix: xosim.BasePath + "/events"})
			return func() { f.Sim.RemoveFault(hang); f.Sim.RemoveFault(stall) }
		}},
		{"token refused", func(t *testing.T, f *testenv.Fixture) func() {
			f.Sim.RevokeToken(server("xo-b").Token)
			// XO keeps open event streams open: drop them, so that nothing comes through.
			f.Sim.CloseEventStreams()
			return func() { f.Sim.AddToken(server("xo-b").Token) }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			oneServerFailing(t, tc.inject)
		})
	}
}

func oneServerFailing(t *testing.T, inject fault) {
	a, b := testenv.NewFixture(t, env, server("xo-a")), testenv.NewFixture(t, env, server("xo-b"))
	cs := newControllers(env.Client, testenv.Estate(a.X, b.X), a.Rec, clock.RealClock{}, tagPrefixes, node.Ignorer{})
	ctx := a.Ctx

	// Before: on each server, a NotReady Node whose VM will be deleted, a Ready one whose VM
	// will migrate; on the failing server, a NotReady Node of a halted VM that will start.
	aGoneVM, bGoneVM := a.AddVM(xosim.VMSpec{NameLabel: "gone"}), b.AddVM(xosim.VMSpec{NameLabel: "gone"})
	aMoveVM, bMoveVM := a.AddVM(xosim.VMSpec{NameLabel: "move"}), b.AddVM(xosim.VMSpec{NameLabel: "move"})
	bHaltedVM := b.AddVM(xosim.VMSpec{NameLabel: "halted", PowerState: xo.PowerStateHalted})
	aGone, bGone := a.CreateNode("a-gone", aGoneVM, testenv.WithReady(false)).Name, b.CreateNode("b-gone", bGoneVM, testenv.WithReady(false)).Name
	aMove, bMove := a.CreateNode("a-move", aMoveVM).Name, b.CreateNode("b-move", bMoveVM).Name
	bHalted := b.CreateNode("b-halted", bHaltedVM, testenv.WithReady(false)).Name
	all := []string{aGone, bGone, aMove, bMove, bHalted}
	cs.reconcile(ctx, t, all...)
	if !hasTaint(t, bHalted, node.TaintShutdown) {
		t.Fatal("test setup: the halted VM's Node is not tainted")
	}
	wantLabels(t, bMove, map[string]string{node.LabelZone: b.Host1})
	before := map[string]nodeState{}
	for _, n := range []string{bGone, bMove, bHalted} {
		before[n] = stateOf(env.Node(t, n))
	}

	clear := inject(t, b)
	testenv.Eventually(t, 5*time.Second, "the failing server's event stream down", func() bool { return !b.Inventory.Streaming() })
	start := time.Now()
	// The same changes on both servers: a VM deleted, a VM migrated, a new VM and its Node.
	for _, f := range []*testenv.Fixture{a, b} {
		for _, vm := range []string{aGoneVM, bGoneVM} {
			if _, ok := f.Sim.VM(vm); ok {
				if err := f.Sim.RemoveVM(vm); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for _, m := range []struct {
		f  *testenv.Fixture
		vm string
	}{{a, aMoveVM}, {b, bMoveVM}} {
		if err := m.f.Sim.Migrate(m.vm, m.f.Host2); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Sim.SetPowerState(bHaltedVM, xo.PowerStateRunning); err != nil {
		t.Fatal(err)
	}
	aNewVM, bNewVM := a.AddVMQuietly(xosim.VMSpec{NameLabel: "new", IPs: []string{"10.23.0.1"}}), b.AddVMQuietly(xosim.VMSpec{NameLabel: "new", IPs: []string{"10.23.0.2"}})
	a.WaitInventory("the new VM", func(s *inventory.Snapshot) bool { return s.VM(aNewVM) != nil })
	aNew := testenv.KubeletNode(testenv.NodeName(t, "a-new"), testenv.WithSystemUUID(aNewVM))
	bNew := testenv.KubeletNode(testenv.NodeName(t, "b-new"), testenv.WithSystemUUID(bNewVM))
	env.AddNode(t, aNew)
	env.AddNode(t, bNew)
	before[bNew.Name] = stateOf(env.Node(t, bNew.Name))
	all = append(all, aNew.Name, bNew.Name)

	healthyDone := func() bool {
		return !env.NodeExists(t, aGone) && env.Node(t, aMove).Labels[node.LabelZone] == a.Host2 && initialized(t, aNew.Name)
	}
	if !testenv.Poll(10*time.Second, func() bool { cs.reconcile(ctx, t, all...); return healthyDone() }) {
		t.Fatalf("the healthy server's Nodes not handled: deleted %v, zone %q, initialized %v",
			!env.NodeExists(t, aGone), env.Node(t, aMove).Labels[node.LabelZone], initialized(t, aNew.Name))
	}
	took := time.Since(start)
	t.Logf("healthy server's deletion, migration and initialization done in %v while the other fails", took)
	if took > 5*time.Second {
		t.Errorf("the healthy server's Nodes took %v, want < 5s", took)
	}
	if got := env.Node(t, aNew.Name).Spec.ProviderID; got != node.FormatProviderID(a.Pool, aNewVM) {
		t.Errorf("new Node of the healthy server: providerID %q", got)
	}
	// A few more looks at the failing server's Nodes.
	for range 2 {
		cs.reconcile(ctx, t, all...)
	}
	for n, s := range before {
		unchanged(t, "while its XO server fails", s, n)
	}
	if ev := a.Rec.Find(bNew.Name, cloudnode.ReasonXOUnavailable); len(ev) == 0 {
		t.Errorf("no %s event on the failing server's new Node: %+v", cloudnode.ReasonXOUnavailable, a.Rec.All(bNew.Name))
	}
	for _, e := range a.Rec.All(bNew.Name) {
		if strings.Contains(e.Note, "token") && strings.Contains(e.Note, server("xo-b").Token) {
			t.Errorf("event leaks the token: %q", e.Note)
		}
	}

	clear()
	if !testenv.Poll(15*time.Second, func() bool {
		cs.reconcile(ctx, t, all...)
		return !env.NodeExists(t, bGone) && env.Node(t, bMove).Labels[node.LabelZone] == b.Host2 &&
			!hasTaint(t, bHalted, node.TaintShutdown) && initialized(t, bNew.Name)
	}) {
		t.Fatalf("the recovered server's Nodes not handled: deleted %v, zone %q, shutdown taint %v, initialized %v",
			!env.NodeExists(t, bGone), env.Node(t, bMove).Labels[node.LabelZone], hasTaint(t, bHalted, node.TaintShutdown), initialized(t, bNew.Name))
	}
	if got := env.Node(t, bNew.Name).Spec.ProviderID; got != node.FormatProviderID(b.Pool, bNewVM) {
		t.Errorf("new Node of the recovered server: providerID %q", got)
	}
}

// TestSamePoolTwoServers: one pool reachable through two XO servers (two XOAs on one pool).
// Each Node gets one providerID, its topology names are not taken for duplicates, and changes
// seen by the second server only, relists and events of both never make the labels flap.
func TestSamePoolTwoServers(t *testing.T) {
	t.Parallel()
	pool, host1, host2 := "6f0c5b6a-1d2e-4f3a-9b8c-7d6e5f4a3b21", "0b1c2d3e-4f5a-4b6c-8d7e-9f0a1b2c3d41", "0b1c2d3e-4f5a-4b6c-8d7e-9f0a1b2c3d42"
	shared := func(name string) testenv.FixtureOptions {
		o := server(name)
		o.PoolID, o.HostIDs, o.PoolName, o.HostNames = pool, [2]string{host1, host2}, "shared", [2]string{"host-1", "host-2"}
		return o
	}
	a, b := testenv.NewFixture(t, env, shared("xo-a")), testenv.NewFixture(t, env, shared("xo-b"))
	addBoth := func(spec xosim.VMSpec) string {
		spec.ID = a.AddVM(spec)
		b.AddVM(spec)
		return spec.ID
	}
	labels := tagPrefixes
	labels.Region, labels.Zone = node.RegionPoolName, node.ZoneHostName
	requests := &testenv.RequestCounter{}
	mgr := testenv.NewManager(t, requests.Config(env.Config))
	newControllers(mgr.GetClient(), testenv.Estate(a.X, b.X), a.Rec, clock.RealClock{}, labels, node.Ignorer{}).setup(a.Ctx, t, mgr)

	byUUID := addBoth(xosim.VMSpec{NameLabel: "by-uuid", IPs: []string{"10.21.0.1"}, Tags: []string{node.TagLabelPrefix + "example.com/tier=gold"}})
	name := testenv.NodeName(t, "name")
	byName := addBoth(xosim.VMSpec{NameLabel: name, VirtualizationMode: "pvh", IPs: []string{"10.21.0.2"}})
	n1 := testenv.KubeletNode(testenv.NodeName(t, "uuid"), testenv.WithSystemUUID(byUUID))
	env.AddNode(t, n1)
	env.AddNode(t, testenv.KubeletNode(name))
	nodes := map[string]string{n1.Name: byUUID, name: byName}
	testenv.RunManager(a.Ctx, t, mgr)
	testenv.Eventually(t, 10*time.Second, "both Nodes initialized", func() bool { return initialized(t, n1.Name) && initialized(t, name) })
	for n, vm := range nodes {
		if got := env.Node(t, n).Spec.ProviderID; got != node.FormatProviderID(pool, vm) {
			t.Errorf("Node %s: providerID %q, want %q", n, got, node.FormatProviderID(pool, vm))
		}
		wantLabels(t, n, map[string]string{node.LabelRegion: "shared", node.LabelZone: "host-1"})
		if ev := a.Rec.Find(n, nodeevents.ReasonLabelRejected); len(ev) != 0 {
			t.Errorf("Node %s: the same pool through two servers reported as duplicate names: %+v", n, ev)
		}
	}

	// settled waits until no write reaches the Nodes for a while and returns their states.
	settled := func() map[string]nodeState {
		t.Helper()
		writes := func() int { return requests.NodeWrites(n1.Name) + requests.NodeWrites(name) }
		last := -1
		testenv.Eventually(t, 10*time.Second, "the Nodes quiet", func() bool {
			w := writes()
			quiet := w == last
			last = w
			time.Sleep(300 * time.Millisecond)
			return quiet
		})
		out := map[string]nodeState{}
		for n := range nodes {
			out[n] = stateOf(env.Node(t, n))
		}
		return out
	}
	before := settled()
	writes := requests.NodeWrites(n1.Name) + requests.NodeWrites(name)

	// The second server sees changes the first does not (a host renamed, a tag edited: as if
	// its copy lagged behind), and both relist: the first server's copy wins throughout.
	for i := range 4 {
		if err := b.Sim.Rename(host1, fmt.Sprintf("b-view-%d", i)); err != nil {
			t.Fatal(err)
		}
		if err := b.Sim.SetTags(byUUID, []string{node.TagLabelPrefix + fmt.Sprintf("example.com/tier=b%d", i)}); err != nil {
			t.Fatal(err)
		}
		b.WaitInventory("the second server's change", func(s *inventory.Snapshot) bool { return s.Host(host1).NameLabel == fmt.Sprintf("b-view-%d", i) })
		a.Relist()
		b.Relist()
		time.Sleep(100 * time.Millisecond)
	}
	settled()
	if w := requests.NodeWrites(n1.Name) + requests.NodeWrites(name); w != writes {
		t.Errorf("%d writes to the Nodes over relists and the second server's events, want none", w-writes)
	}
	for n := range nodes {
		unchanged(t, "second server's changes", before[n], n)
	}

	// A change both servers see moves the labels once.
	for _, f := range []*testenv.Fixture{a, b} {
		if err := f.Sim.Migrate(byUUID, host2); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 10*time.Second, "the migration on the Node", func() bool { return env.Node(t, n1.Name).Labels[node.LabelZone] == "host-2" })
	moved := settled()
	a.Relist()
	b.Relist()
	time.Sleep(300 * time.Millisecond)
	unchanged(t, "relists after the migration", moved[n1.Name], n1.Name)
}

// TestSamePoolFirstServerStale: one pool reachable through two XO servers, and the first one
// goes down, its inventory stale. Meanwhile, on the second (current) server, a VM halts, a
// VM's tags change and a VM is deleted. The controllers take each of these VMs, and whether
// its pool is connected, from the second server: the halted VM's NotReady Node gets the
// shutdown taint, the tag label follows the second server's tags, and the deleted VM's
// NotReady Node is deleted. The down server's old copies (Running, old tags, present) never
// win over the current server's answers.
func TestSamePoolFirstServerStale(t *testing.T) {
	t.Parallel()
	pool, host1, host2 := "6f0c5b6a-1d2e-4f3a-9b8c-7d6e5f4a3b31", "0b1c2d3e-4f5a-4b6c-8d7e-9f0a1b2c3d51", "0b1c2d3e-4f5a-4b6c-8d7e-9f0a1b2c3d52"
	shared := func(name string) testenv.FixtureOptions {
		o := server(name)
		o.PoolID, o.HostIDs, o.PoolName, o.HostNames = pool, [2]string{host1, host2}, "shared", [2]string{"host-1", "host-2"}
		return o
	}
	first := shared("xo-a")
	first.Inventory.StaleAfter = 500 * time.Millisecond // the second server streams events: it stays current
	a, b := testenv.NewFixture(t, env, first), testenv.NewFixture(t, env, shared("xo-b"))
	cs := newControllers(env.Client, testenv.Estate(a.X, b.X), a.Rec, clock.RealClock{}, tagPrefixes, node.Ignorer{})
	addBoth := func(spec xosim.VMSpec) string {
		spec.ID = a.AddVM(spec)
		b.AddVM(spec)
		return spec.ID
	}
	haltsVM := addBoth(xosim.VMSpec{NameLabel: "halts"})
	taggedVM := addBoth(xosim.VMSpec{NameLabel: "tagged", Tags: []string{node.TagLabelPrefix + "example.com/tier=gold"}})
	goneVM := addBoth(xosim.VMSpec{NameLabel: "gone"})
	halts, tagged, gone := a.CreateNode("halts", haltsVM).Name, a.CreateNode("tagged", taggedVM).Name, a.CreateNode("gone", goneVM).Name
	cs.reconcile(a.Ctx, t, halts, tagged, gone)
	if hasTaint(t, halts, node.TaintShutdown) || env.Node(t, tagged).Labels["example.com/tier"] != "gold" {
		t.Fatal("test setup: Nodes not described before the first server went down")
	}

	restore := a.Refuse()
	defer restore()
	a.X.WaitInventory(t, "xo-a stale", func(s *inventory.Snapshot) bool { return !s.Fresh() })
	if err := b.Sim.SetPowerState(haltsVM, xo.PowerStateHalted); err != nil {
		t.Fatal(err)
	}
	if err := b.Sim.SetTags(taggedVM, []string{node.TagLabelPrefix + "example.com/tier=silver"}); err != nil {
		t.Fatal(err)
	}
	if err := b.Sim.RemoveVM(goneVM); err != nil {
		t.Fatal(err)
	}
	b.WaitInventory("xo-b sees the changes", func(s *inventory.Snapshot) bool {
		return s.VM(haltsVM).PowerState == xo.PowerStateHalted && s.VM(goneVM) == nil &&
			slices.Contains(s.VM(taggedVM).Tags, node.TagLabelPrefix+"example.com/tier=silver")
	})
	a.SetReady(halts, false)
	a.SetReady(gone, false)

	cs.reconcile(a.Ctx, t, halts, tagged, gone)
	if !hasTaint(t, halts, node.TaintShutdown) {
		t.Errorf("NotReady Node of a VM the current server reports Halted not tainted: the down server's copy (Running) was used")
	}
	wantLabels(t, tagged, map[string]string{"example.com/tier": "silver"})
	// The deletion waits for the VM's absence to settle on the current server.
	testenv.Eventually(t, 10*time.Second, "the Node of the VM deleted on the current server deleted", func() bool {
		cs.reconcile(a.Ctx, t, gone)
		return !env.NodeExists(t, gone)
	})
}

// TestIncompleteServerDoesNotHoldBackAnother: a server whose inventory is incomplete (one of
// its pools disconnected, no scope) does not keep label-sync from removing a tag label on a
// Node of another server, whose VM's pool is connected and settled.
func TestIncompleteServerDoesNotHoldBackAnother(t *testing.T) {
	a, b := testenv.NewFixture(t, env, server("xo-a")), testenv.NewFixture(t, env, server("xo-b"))
	cs := newControllers(env.Client, testenv.Estate(a.X, b.X), a.Rec, clock.RealClock{}, tagPrefixes, node.Ignorer{})
	vm := a.AddVM(xosim.VMSpec{NameLabel: "tagged", Tags: []string{node.TagLabelPrefix + "example.com/tier=gold"}})
	n := a.CreateNode("w", vm).Name
	cs.reconcile(a.Ctx, t, n)
	wantLabels(t, n, map[string]string{"example.com/tier": "gold"})

	if err := b.Sim.DisconnectPool(b.Pool); err != nil {
		t.Fatal(err)
	}
	b.WaitInventory("xo-b incomplete", func(s *inventory.Snapshot) bool { return !s.Complete() })
	if err := a.Sim.SetTags(vm, nil); err != nil {
		t.Fatal(err)
	}
	a.WaitInventory("tag removed", func(s *inventory.Snapshot) bool { return len(s.VM(vm).Tags) == 0 })
	cs.reconcile(a.Ctx, t, n)
	wantLabels(t, n, map[string]string{"example.com/tier": ""})
}
