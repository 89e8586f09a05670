package estatetest

import (
	"testing"
	"time"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/inventory"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/xosim"
)

// TestStagedReconnection: XO reconnects a pool the way xo-server does: the server entry says
// connected first, then the pool and its hosts appear, then the VMs one by one. Until the pool
// has settled, none of the three controllers deletes, relabels, untaints or matches by name;
// once it has, the changes made while XO had lost the pool reach the Nodes, and a VM really
// deleted afterwards still deletes its Node.
func TestStagedReconnection(t *testing.T) {
	t.Parallel()
	f := testenv.NewFixture(t, env, testenv.FixtureOptions{FakeClock: true, Inventory: inventory.Options{SettleTime: time.Minute}})
	cs := newControllers(env.Client, f.Estate, f.Rec, f.Clock, tagPrefixes, node.Ignorer{})
	notReady := testenv.WithReady(false)

	var keep []string // NotReady Nodes of VMs that stay: never to be deleted
	for _, s := range []string{"a", "b", "c"} {
		keep = append(keep, f.CreateNode(s, f.AddVM(xosim.VMSpec{NameLabel: "keep-" + s}), notReady).Name)
	}
	haltedVM := f.AddVM(xosim.VMSpec{NameLabel: "halted", PowerState: xo.PowerStateHalted})
	halted := f.CreateNode("halted", haltedVM, notReady).Name
	taggedVM := f.AddVM(xosim.VMSpec{NameLabel: "tagged", Tags: []string{node.TagLabelPrefix + "example.com/tier=gold"}})
	tagged := f.CreateNode("tagged", taggedVM).Name
	goneVM := f.AddVM(xosim.VMSpec{NameLabel: "gone"})
	gone := f.CreateNode("gone", goneVM, notReady).Name
	laterVM := f.AddVM(xosim.VMSpec{NameLabel: "later"})
	later := f.CreateNode("later", laterVM, notReady).Name
	all := append([]string{halted, tagged, gone, later}, keep...)
	cs.reconcile(f.Ctx, t, all...)
	if !hasTaint(t, halted, node.TaintShutdown) || env.Node(t, tagged).Labels["example.com/tier"] != "gold" {
		t.Fatal("test setup: Nodes not described before the disconnection")
	}

	// XO loses the pool; meanwhile the halted VM starts, the tag goes, a VM is deleted, and a
	// VM named like a new Node (no system uuid) is created.
	if err := f.Sim.DisconnectPool(f.Pool); err != nil {
		t.Fatal(err)
	}
	f.WaitInventory("pool dropped", func(s *inventory.Snapshot) bool { return s.Pool(f.Pool) == nil && s.VM(goneVM) == nil })
	if err := f.Sim.SetPowerState(haltedVM, xo.PowerStateRunning); err != nil {
		t.Fatal(err)
	}
	if err := f.Sim.SetTags(taggedVM, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.Sim.RemoveVM(goneVM); err != nil {
		t.Fatal(err)
	}
	byName := testenv.NodeName(t, "by-name")
	byNameVM := f.AddVMQuietly(xosim.VMSpec{NameLabel: byName, VirtualizationMode: "pvh", IPs: []string{"10.22.0.1"}})
	env.AddNode(t, testenv.KubeletNode(byName))
	all = append(all, byName)
	cs.reconcile(f.Ctx, t, all...)
	before := map[string]nodeState{}
	for _, n := range all {
		before[n] = stateOf(env.Node(t, n))
	}
	// look reconciles every Node with the three controllers, after a listing of XO at the
	// worst moment, and checks that nothing changed. The exception is the Node of the VM that
	// started during the outage: once XO has loaded that VM, label-sync may add the zone and
	// host labels it now has (labels are added and updated from loaded VMs, only removals wait
	// for the pool to settle), but nothing may be removed or changed, and no taint lifted.
	look := func(stage string) {
		t.Helper()
		f.Relist()
		cs.reconcile(f.Ctx, t, all...)
		for _, n := range all {
			if n != halted {
				unchanged(t, stage, before[n], n)
				continue
			}
			after := stateOf(env.Node(t, n))
			for k, v := range before[n].labels {
				if after.labels[k] != v {
					t.Errorf("%s: label %s of Node %s: %q → %q", stage, k, n, v, after.labels[k])
				}
			}
			for _, tt := range before[n].taints {
				if !node.HasTaint(after.taints, tt.Key, tt.Effect) {
					t.Errorf("%s: taint %s lifted from Node %s", stage, tt.ToString(), n)
				}
			}
		}
	}
	look("pool lost")

	if err := f.Sim.BeginReconnect(f.Pool); err != nil {
		t.Fatal(err)
	}
	look("server connected, nothing loaded")
	if !f.Inventory.Snapshot().Settling() {
		t.Fatal("test setup: the inventory has not seen the server connected")
	}
	if err := f.Sim.RevealPool(f.Pool); err != nil {
		t.Fatal(err)
	}
	f.WaitInventory("pool and hosts back", func(s *inventory.Snapshot) bool { return s.Pool(f.Pool) != nil && s.Host(f.Host1) != nil })
	look("pool and hosts loaded")
	// The VMs one by one, within the settle time.
	for {
		n, err := f.Sim.RevealVMs(f.Pool, 1)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		f.Step(f.SettleTime / 10)
		look("VMs loading")
	}
	f.WaitInventory("every VM back", func(s *inventory.Snapshot) bool { return s.VM(byNameVM) != nil && s.VM(haltedVM) != nil })
	look("every VM loaded, the pool settling")
	if env.Node(t, byName).Spec.ProviderID != "" {
		t.Fatal("Node matched by name while the pool settles")
	}

	// Settled: the changes made while XO had lost the pool arrive.
	f.Settle(f.Pool)
	cs.reconcile(f.Ctx, t, all...)
	if hasTaint(t, halted, node.TaintShutdown) {
		t.Error("shutdown taint kept once the pool settled")
	}
	wantLabels(t, tagged, map[string]string{"example.com/tier": ""})
	if !initialized(t, byName) || env.Node(t, byName).Spec.ProviderID != node.FormatProviderID(f.Pool, byNameVM) {
		t.Errorf("Node not matched by name once the pool settled: %+v", env.Node(t, byName).Spec)
	}
	// The VM deleted during the outage: its absence counts from the event that showed the
	// pool back, so its Node goes at the listing that trusts the pool, a settle time later.
	if env.NodeExists(t, gone) {
		t.Error("Node of the VM deleted during the outage kept once the pool settled")
	}

	// A VM really deleted afterwards.
	if err := f.Sim.RemoveVM(laterVM); err != nil {
		t.Fatal(err)
	}
	f.WaitInventory("VM removed", func(s *inventory.Snapshot) bool { return s.VM(laterVM) == nil })
	cs.reconcile(f.Ctx, t, later)
	if !env.NodeExists(t, later) {
		t.Fatal("Node deleted before its VM's absence settled")
	}
	f.Step(f.SettleTime)
	cs.reconcile(f.Ctx, t, later)
	if env.NodeExists(t, later) {
		t.Error("Node of a VM deleted after the reconnection kept")
	}
	for _, n := range keep {
		if !env.NodeExists(t, n) {
			t.Errorf("Node %s deleted", n)
		}
	}
}
