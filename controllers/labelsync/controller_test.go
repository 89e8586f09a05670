package labelsync

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/controllers/common"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/inventory"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/xosim"
)

// wantLabels fails the test unless every given label has the given value ("" = absent).
func wantLabels(t *testing.T, got map[string]string, want map[string]string) {
	t.Helper()
	for k, v := range want {
		g, ok := got[k]
		switch {
		case v == "" && ok:
			t.Errorf("label %s = %q, want absent", k, g)
		case v != "" && g != v:
			t.Errorf("label %s = %q, want %q", k, g, v)
		}
	}
}

func TestSyncDescribesNode(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	vm := f.addVMSpec(xosim.VMSpec{NameLabel: "web-1"})
	n := f.createNode("w", vm).Name
	f.reconcile(n)
	wantLabels(t, f.labels(n), map[string]string{
		node.LabelZone:           f.host1,
		node.LabelRegion:         f.pool,
		node.LabelHostID:         f.host1,
		node.LabelHostName:       "host-1",
		node.LabelPoolID:         f.pool,
		node.LabelPoolName:       "pool-a",
		node.LabelInstanceType:   "2vCPU-2GB",
		node.LabelVMName:         "web-1",
		node.LabelOriginalHostID: f.host1,
		node.LabelOriginalPoolID: f.pool,
	})
	if node.ManagedKeys(f.get(n).Annotations) == nil {
		t.Error("owned keys not recorded")
	}
}

func TestMigrationChangesZoneAndHost(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	vm := f.addVMSpec(xosim.VMSpec{NameLabel: "mig"})
	n := f.createNode("w", vm).Name
	f.reconcile(n)

	if err := f.sim.Migrate(vm, f.host2); err != nil {
		t.Fatal(err)
	}
	f.waitInventory("migration", func(s *inventory.Snapshot) bool { return s.VM(vm).Container == f.host2 })
	f.reconcile(n)
	wantLabels(t, f.labels(n), map[string]string{
		node.LabelZone:           f.host2,
		node.LabelHostID:         f.host2,
		node.LabelHostName:       "host-2",
		node.LabelOriginalHostID: f.host1,
		node.LabelRegion:         f.pool,
	})
	ev := f.rec.Find(n, ReasonNodeZoneChanged)
	if len(ev) != 1 || !strings.Contains(ev[0].Note, f.host1+" → "+f.host2) || !strings.Contains(ev[0].Note, "host-2") {
		t.Errorf("want one %s event naming the old and new host, got %+v", ReasonNodeZoneChanged, ev)
	}
	if len(f.rec.Find(n, ReasonNodeRegionChanged)) != 0 {
		t.Error("region change reported for a move within the pool")
	}
}

// TestHaltedVMKeepsZone: XO reports a halted VM's $container as its pool; the zone must not
// become the pool uuid (the upstream CCM's bug).
func TestHaltedVMKeepsZone(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	vm := f.addVMSpec(xosim.VMSpec{NameLabel: "halt"})
	n := f.createNode("w", vm).Name
	f.reconcile(n)
	before := f.labels(n)

	if err := f.sim.SetPowerState(vm, xo.PowerStateHalted); err != nil {
		t.Fatal(err)
	}
	f.waitInventory("halted", func(s *inventory.Snapshot) bool { return s.VM(vm).PowerState == xo.PowerStateHalted })
	if c := f.inv.Snapshot().VM(vm).Container; c != f.pool {
		t.Fatalf("simulator: halted VM's $container = %s, want the pool %s", c, f.pool)
	}
	f.reconcile(n)
	after := f.labels(n)
	for _, k := range []string{node.LabelZone, node.LabelHostID, node.LabelHostName, node.LabelOriginalHostID} {
		if after[k] != before[k] {
			t.Errorf("label %s: %q → %q after the VM halted", k, before[k], after[k])
		}
	}
	if after[node.LabelZone] == f.pool {
		t.Error("zone rewritten to the pool uuid")
	}
	if len(f.rec.Find(n, ReasonNodeZoneChanged)) != 0 {
		t.Error("zone change reported for a halted VM")
	}
}

func TestResizeChangesInstanceType(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	vm := f.addVMSpec(xosim.VMSpec{NameLabel: "rs"})
	n := f.createNode("w", vm).Name
	f.reconcile(n)
	if err := f.sim.Resize(vm, 4, 8*xosim.GiB); err != nil {
		t.Fatal(err)
	}
	f.waitInventory("resize", func(s *inventory.Snapshot) bool { return s.VM(vm).CPUs.Max == 4 })
	f.reconcile(n)
	wantLabels(t, f.labels(n), map[string]string{node.LabelInstanceType: "4vCPU-8GB"})
	ev := f.rec.Find(n, ReasonNodeInstanceTypeChanged)
	if len(ev) != 1 || !strings.Contains(ev[0].Note, "2vCPU-2GB → 4vCPU-8GB") {
		t.Errorf("want one %s event, got %+v", ReasonNodeInstanceTypeChanged, ev)
	}
}

func TestRenameChangesNameLabel(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	vm := f.addVMSpec(xosim.VMSpec{NameLabel: "old-name"})
	n := f.createNode("w", vm).Name
	f.reconcile(n)
	if err := f.sim.Rename(vm, "new name!"); err != nil {
		t.Fatal(err)
	}
	f.waitInventory("rename", func(s *inventory.Snapshot) bool { return s.VM(vm).NameLabel == "new name!" })
	f.reconcile(n)
	wantLabels(t, f.labels(n), map[string]string{node.LabelVMName: "new-name"})
	if ev := f.rec.Find(n, ReasonNodeRenamed); len(ev) != 1 || !strings.Contains(ev[0].Note, "old-name → new-name") {
		t.Errorf("want one %s event, got %+v", ReasonNodeRenamed, ev)
	}
}

func TestPoolRenameChangesPoolNameLabel(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	vm := f.addVMSpec(xosim.VMSpec{NameLabel: "pr"})
	n := f.createNode("w", vm).Name
	f.reconcile(n)
	if err := f.sim.Rename(f.pool, "pool-renamed"); err != nil {
		t.Fatal(err)
	}
	f.waitInventory("pool rename", func(s *inventory.Snapshot) bool { return s.Pool(f.pool).NameLabel == "pool-renamed" })
	f.reconcile(n)
	wantLabels(t, f.labels(n), map[string]string{node.LabelPoolName: "pool-renamed"})
}

func TestCrossPoolMoveChangesRegion(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	poolB := f.x.AddPool(t, xosim.PoolSpec{NameLabel: "pool-b"})
	hostB := f.x.AddHost(t, xosim.HostSpec{PoolID: poolB, NameLabel: "host-b"})
	vm := f.addVMSpec(xosim.VMSpec{NameLabel: "xp"})
	n := f.createNode("w", vm).Name
	f.reconcile(n)
	if err := f.sim.Migrate(vm, hostB); err != nil {
		t.Fatal(err)
	}
	f.waitInventory("cross-pool move", func(s *inventory.Snapshot) bool { return s.VM(vm).PoolID == poolB })
	f.reconcile(n)
	got := f.get(n)
	wantLabels(t, got.Labels, map[string]string{
		node.LabelRegion:         poolB,
		node.LabelPoolID:         poolB,
		node.LabelPoolName:       "pool-b",
		node.LabelZone:           hostB,
		node.LabelOriginalPoolID: f.pool,
		node.LabelOriginalHostID: f.host1,
	})
	if got.Spec.ProviderID != node.FormatProviderID(f.pool, vm) {
		t.Errorf("providerID changed: %s", got.Spec.ProviderID)
	}
	if ev := f.rec.Find(n, ReasonNodeRegionChanged); len(ev) != 1 || ev[0].Type != corev1.EventTypeWarning {
		t.Errorf("want one Warning %s event, got %+v", ReasonNodeRegionChanged, ev)
	}
}

func TestTagLabelsAndTaints(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	vm := f.addVMSpec(xosim.VMSpec{NameLabel: "tags"})
	n := f.createNode("w", vm, testenv.WithLabels(map[string]string{
		"example.com/owner": "alice", // set by a person, on a key the controller does not own
		"example.com/keep":  "me",
	})).Name
	f.reconcile(n)

	setTags := func(tags ...string) {
		t.Helper()
		if err := f.sim.SetTags(vm, tags); err != nil {
			t.Fatal(err)
		}
		f.waitInventory("tags", func(s *inventory.Snapshot) bool { return slices.Equal(s.VM(vm).Tags, tags) })
		f.reconcile(n)
	}

	// Add.
	setTags(node.TagLabelPrefix+"example.com/tier=gold", node.TagTaintPrefix+"example.com/dedicated=db:NoSchedule")
	got := f.get(n)
	wantLabels(t, got.Labels, map[string]string{"example.com/tier": "gold", "example.com/owner": "alice", "example.com/keep": "me"})
	if !slices.ContainsFunc(got.Spec.Taints, func(t corev1.Taint) bool {
		return t.Key == "example.com/dedicated" && t.Value == "db" && t.Effect == corev1.TaintEffectNoSchedule
	}) {
		t.Errorf("tag taint missing: %v", got.Spec.Taints)
	}

	// Change.
	setTags(node.TagLabelPrefix + "example.com/tier=silver")
	got = f.get(n)
	wantLabels(t, got.Labels, map[string]string{"example.com/tier": "silver"})
	if node.HasTaint(got.Spec.Taints, "example.com/dedicated", "") {
		t.Errorf("removed tag taint kept: %v", got.Spec.Taints)
	}

	// A tag asking for a key a person set: left alone, with an event.
	setTags(node.TagLabelPrefix+"example.com/tier=silver", node.TagLabelPrefix+"example.com/owner=bob")
	wantLabels(t, f.labels(n), map[string]string{"example.com/owner": "alice", "example.com/tier": "silver"})
	if ev := f.rec.Find(n, ReasonLabelConflict); len(ev) != 1 || !strings.Contains(ev[0].Note, "example.com/owner") {
		t.Errorf("want one %s event about example.com/owner, got %+v", ReasonLabelConflict, ev)
	}

	// Remove: the controller's label goes, the person's labels stay.
	setTags()
	wantLabels(t, f.labels(n), map[string]string{"example.com/tier": "", "example.com/owner": "alice", "example.com/keep": "me"})
	if !f.exists(n) {
		t.Fatal("Node gone")
	}
	// The described labels are untouched by tag edits.
	wantLabels(t, f.labels(n), map[string]string{node.LabelZone: f.host1, node.LabelVMName: "tags"})
}

func TestForbiddenTagKeysRefused(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	forbidden := []string{
		node.TagLabelPrefix + "node-role.kubernetes.io/control-plane=",
		node.TagLabelPrefix + "kubernetes.io/hostname=evil",
		node.TagLabelPrefix + "foo.k8s.io/x=y",
		node.TagLabelPrefix + "node-restriction.kubernetes.io/x=y",
		node.TagLabelPrefix + "topology.kubernetes.io/zone=evil",
		node.TagTaintPrefix + "node.kubernetes.io/unschedulable:NoSchedule",
	}
	vm := f.addVMSpec(xosim.VMSpec{NameLabel: "forbidden", Tags: forbidden})
	n := f.createNode("w", vm).Name
	before := testenv.CounterValue(t, rejectedTotal.WithLabelValues(string(node.ReasonReservedKey)))
	f.reconcile(n)
	got := f.get(n)
	for _, k := range []string{"node-role.kubernetes.io/control-plane", "foo.k8s.io/x", "node-restriction.kubernetes.io/x"} {
		if _, ok := got.Labels[k]; ok {
			t.Errorf("forbidden label %s set", k)
		}
	}
	wantLabels(t, got.Labels, map[string]string{corev1.LabelHostname: n, node.LabelZone: f.host1})
	if node.HasTaint(got.Spec.Taints, "node.kubernetes.io/unschedulable", "") {
		t.Error("forbidden taint set")
	}
	ev := f.rec.Find(n, ReasonLabelRejected)
	if len(ev) != len(forbidden) {
		t.Errorf("want %d %s events, got %d: %+v", len(forbidden), ReasonLabelRejected, len(ev), ev)
	}
	for _, e := range ev {
		if e.Type != corev1.EventTypeWarning {
			t.Errorf("%s event of type %s", ReasonLabelRejected, e.Type)
		}
	}
	if d := testenv.CounterValue(t, rejectedTotal.WithLabelValues(string(node.ReasonReservedKey))) - before; d != float64(len(forbidden)) {
		t.Errorf("rejected metric grew by %v, want %d", d, len(forbidden))
	}
	// A standing refusal is reported once, not at every resync.
	f.reconcile(n)
	f.reconcile(n)
	if got := len(f.rec.Find(n, ReasonLabelRejected)); got != len(forbidden) {
		t.Errorf("refusals reported again: %d events", got)
	}
}

// TestNoWriteWhenUpToDate: a resync of an up-to-date Node writes nothing.
func TestNoWriteWhenUpToDate(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	vm := f.addVMSpec(xosim.VMSpec{NameLabel: "steady", Tags: []string{node.TagLabelPrefix + "example.com/a=b", node.TagTaintPrefix + "example.com/t:NoSchedule"}})
	n := f.createNode("w", vm).Name
	f.reconcile(n)
	rv := f.get(n).ResourceVersion
	before := testenv.CounterValue(t, patches)
	for range 3 {
		res := f.reconcile(n)
		if res.RequeueAfter < DefaultResyncPeriod {
			t.Errorf("requeue after %v, want the resync period", res.RequeueAfter)
		}
	}
	if got := f.get(n).ResourceVersion; got != rv {
		t.Errorf("resync of an up-to-date Node wrote it: resourceVersion %s → %s", rv, got)
	}
	if d := testenv.CounterValue(t, patches) - before; d != 0 {
		t.Errorf("%v patches on resync", d)
	}
}

func TestMissingVMRemovesNothing(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	vm := f.addVMSpec(xosim.VMSpec{NameLabel: "missing", Tags: []string{node.TagLabelPrefix + "example.com/a=b"}})
	n := f.createNode("w", vm).Name
	f.reconcile(n)
	before := f.get(n)
	if err := f.sim.RemoveVM(vm); err != nil {
		t.Fatal(err)
	}
	f.waitInventory("VM removed", func(s *inventory.Snapshot) bool { return s.VM(vm) == nil })
	f.reconcile(n)
	if after := f.get(n); after.ResourceVersion != before.ResourceVersion {
		t.Errorf("Node of a missing VM written: labels %v → %v", before.Labels, after.Labels)
	}
}

func TestUninitializedNodeLeftToCloudNode(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	vm := f.addVMSpec(xosim.VMSpec{NameLabel: "uninit"})
	name := testenv.NodeName(t, "u")
	n := testenv.KubeletNode(name, testenv.WithProviderID(node.FormatProviderID(f.pool, vm)))
	if err := testenv.CreateNode(f.ctx, env.Client, n); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), n) })
	f.reconcile(name)
	if _, ok := f.labels(name)[node.LabelZone]; ok {
		t.Error("label-sync described an uninitialized Node")
	}
}

func TestPoolDisconnectedRemovesNothing(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	vm := f.addVMSpec(xosim.VMSpec{NameLabel: "dis", Tags: []string{node.TagLabelPrefix + "example.com/a=b", node.TagTaintPrefix + "example.com/t:NoSchedule"}})
	n := f.createNode("w", vm).Name
	f.reconcile(n)
	before := f.get(n)
	if err := f.sim.DisconnectPool(f.pool); err != nil {
		t.Fatal(err)
	}
	f.waitInventory("pool dropped", func(s *inventory.Snapshot) bool { return s.VM(vm) == nil && !s.PoolConnected(f.pool) })
	f.reconcile(n)
	if err := f.sim.ReconnectPool(f.pool); err != nil {
		t.Fatal(err)
	}
	f.waitInventory("pool back", func(s *inventory.Snapshot) bool { return s.VM(vm) != nil && s.Complete() })
	f.reconcile(n)
	if after := f.get(n); after.ResourceVersion != before.ResourceVersion {
		t.Errorf("Node written across a pool disconnection: labels %v → %v, taints %v → %v", before.Labels, after.Labels, before.Spec.Taints, after.Spec.Taints)
	}
}

// TestIncompleteInventoryRemovesNothing: while another pool is disconnected, label changes go
// through but nothing is removed; once the inventory is whole the removal follows.
func TestIncompleteInventoryRemovesNothing(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	poolB := f.x.AddPool(t, xosim.PoolSpec{NameLabel: "pool-b"})
	f.x.AddHost(t, xosim.HostSpec{PoolID: poolB, NameLabel: "host-b"})
	tagL, tagT := node.TagLabelPrefix+"example.com/a=b", node.TagTaintPrefix+"example.com/t:NoSchedule"
	vm := f.addVMSpec(xosim.VMSpec{NameLabel: "inc", Tags: []string{tagL, tagT}})
	n := f.createNode("w", vm).Name
	f.reconcile(n)

	if err := f.sim.DisconnectPool(poolB); err != nil {
		t.Fatal(err)
	}
	f.waitInventory("incomplete", func(s *inventory.Snapshot) bool { return !s.Complete() })
	if err := f.sim.SetTags(vm, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.sim.Migrate(vm, f.host2); err != nil {
		t.Fatal(err)
	}
	f.waitInventory("changes", func(s *inventory.Snapshot) bool { v := s.VM(vm); return len(v.Tags) == 0 && v.Container == f.host2 })
	f.reconcile(n)
	got := f.get(n)
	wantLabels(t, got.Labels, map[string]string{"example.com/a": "b", node.LabelZone: f.host2})
	if !node.HasTaint(got.Spec.Taints, "example.com/t", corev1.TaintEffectNoSchedule) {
		t.Error("tag taint removed on an incomplete inventory")
	}

	if err := f.sim.ReconnectPool(poolB); err != nil {
		t.Fatal(err)
	}
	f.waitInventory("complete", func(s *inventory.Snapshot) bool { return s.Complete() })
	f.reconcile(n)
	got = f.get(n)
	wantLabels(t, got.Labels, map[string]string{"example.com/a": "", node.LabelZone: f.host2})
	if node.HasTaint(got.Spec.Taints, "example.com/t", "") {
		t.Error("tag taint kept once the inventory is complete")
	}
}

// faultScenario checks that while a fault is active no label or taint is removed or changed,
// and that changes made in XO after it clears reach the Node.
func faultScenario(t *testing.T, o fixtureOptions, inject func(f *fixture) (clear func())) {
	f := newFixture(t, o)
	tagL, tagT := node.TagLabelPrefix+"example.com/a=b", node.TagTaintPrefix+"example.com/t:NoSchedule"
	vm := f.addVMSpec(xosim.VMSpec{NameLabel: "fault", Tags: []string{tagL, tagT}})
	n := f.createNode("w", vm).Name
	f.reconcile(n)
	before := f.get(n)
	if before.Labels["example.com/a"] != "b" || !node.HasTaint(before.Spec.Taints, "example.com/t", "") {
		t.Fatal("Node not described before the fault")
	}

	clear := inject(f)
	time.Sleep(300 * time.Millisecond) // let the fault reach the inventory
	for range 3 {
		f.reconcile(n)
	}
	after := f.get(n)
	if !maps.Equal(before.Labels, after.Labels) || !slices.EqualFunc(before.Spec.Taints, after.Spec.Taints, taintEqual) {
		t.Errorf("Node changed during the fault:\nbefore %v %v\nafter  %v %v", before.Labels, before.Spec.Taints, after.Labels, after.Spec.Taints)
	}

	clear()
	if err := f.sim.Migrate(vm, f.host2); err != nil {
		t.Fatal(err)
	}
	if err := f.sim.SetTags(vm, []string{tagT}); err != nil {
		t.Fatal(err)
	}
	if !testenv.Poll(15*time.Second, func() bool {
		f.reconcile(n)
		l := f.labels(n)
		_, has := l["example.com/a"]
		return l[node.LabelZone] == f.host2 && !has
	}) {
		t.Fatalf("changes after the fault not synced: %v", f.labels(n))
	}
}

func taintEqual(a, b corev1.Taint) bool {
	return a.Key == b.Key && a.Value == b.Value && a.Effect == b.Effect
}

func TestFaultServerErrors(t *testing.T) {
	faultScenario(t, fixtureOptions{}, func(f *fixture) func() {
		id := f.sim.InjectFault(xosim.Fault{Kind: xosim.FaultStatus, Status: http.StatusInternalServerError})
		_ = f.inv.Relist(f.ctx) // fails, as the test wants
		return func() { f.sim.RemoveFault(id) }
	})
}

func TestFaultTimeouts(t *testing.T) {
	faultScenario(t, fixtureOptions{}, func(f *fixture) func() {
		id := f.sim.InjectFault(xosim.Fault{Kind: xosim.FaultLatency, Latency: 3 * time.Second})
		_ = f.inv.Relist(f.ctx) // fails, as the test wants
		return func() { f.sim.RemoveFault(id) }
	})
}

func TestFaultConnectionRefused(t *testing.T) {
	faultScenario(t, fixtureOptions{}, func(f *fixture) func() { return f.refuse() })
}

func TestFaultTokenRevoked(t *testing.T) {
	faultScenario(t, fixtureOptions{}, func(f *fixture) func() {
		f.sim.RevokeToken(testToken)
		_ = f.inv.Relist(f.ctx) // fails, as the test wants
		return func() { f.sim.AddToken(testToken) }
	})
}

func TestFaultTruncatedListing(t *testing.T) {
	faultScenario(t, fixtureOptions{}, func(f *fixture) func() {
		id := f.sim.InjectFault(xosim.Fault{Kind: xosim.FaultTruncate, PathPrefix: "/rest/v0/vms", Lines: 0})
		if err := f.inv.Relist(f.ctx); err == nil {
			f.t.Error("a truncated listing was accepted")
		}
		if f.inv.Snapshot().Len() == 0 {
			f.t.Error("a truncated listing emptied the inventory")
		}
		return func() { f.sim.RemoveFault(id) }
	})
}

func TestFaultStalledEventStream(t *testing.T) {
	faultScenario(t, fixtureOptions{}, func(f *fixture) func() {
		id := f.sim.InjectFault(xosim.Fault{Kind: xosim.FaultStall, PathPrefix: "/rest/v0/events"})
		return func() { f.sim.RemoveFault(id) }
	})
}

// TestManagerMigrationWithin2s runs the controller in a real manager with the event stream on: a
// live migration in XO shows in the zone label within 2 s.
func TestManagerMigrationWithin2s(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	vm := f.addVMSpec(xosim.VMSpec{NameLabel: "live"})
	n := f.createNode("w", vm).Name

	mgr := testenv.NewManager(t, env.Config)
	if err := common.SetupIndexes(f.ctx, mgr); err != nil {
		t.Fatal(err)
	}
	deps := f.deps
	deps.Client = mgr.GetClient()
	if err := New(deps).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	testenv.RunManager(f.ctx, t, mgr)

	if !testenv.Poll(10*time.Second, func() bool { return f.labels(n)[node.LabelZone] == f.host1 }) {
		t.Fatal("Node not described by the running controller")
	}
	if !f.inv.Streaming() {
		t.Fatal("test setup: the event stream is not up")
	}
	start := time.Now()
	if err := f.sim.Migrate(vm, f.host2); err != nil {
		t.Fatal(err)
	}
	if !testenv.Poll(10*time.Second, func() bool { return f.labels(n)[node.LabelZone] == f.host2 }) {
		t.Fatal("migration never reached the zone label")
	}
	d := time.Since(start)
	t.Logf("migration → zone label: %v", d)
	if d > 2*time.Second {
		t.Errorf("migration → zone label took %v, want < 2s", d)
	}
	if got := f.labels(n)[node.LabelHostName]; got != "host-2" {
		t.Errorf("host name label %q, want host-2", got)
	}
}

// TestSkipsForeignNodes: a Node of another provider is never touched.
func TestSkipsForeignNodes(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	name := testenv.NodeName(t, "aws")
	n := testenv.KubeletNode(name, testenv.WithProviderID("aws:///eu-west-1a/i-0123456789"), testenv.Initialized())
	if err := testenv.CreateNode(f.ctx, env.Client, n); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), n) })
	rv := f.get(name).ResourceVersion
	f.reconcile(name)
	if f.get(name).ResourceVersion != rv {
		t.Error("foreign Node written")
	}
}
