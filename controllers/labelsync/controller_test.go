package labelsync

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"k8s.io/utils/clock"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/controllers/common"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/nodeevents"
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
	f := newFixture(t, testenv.FixtureOptions{})
	vm := f.AddVM(xosim.VMSpec{NameLabel: "web-1"})
	n := f.CreateNode("w", vm).Name
	f.reconcile(n)
	wantLabels(t, f.labels(n), map[string]string{
		node.LabelZone:           f.Host1,
		node.LabelRegion:         f.Pool,
		node.LabelHostID:         f.Host1,
		node.LabelHostName:       "host-1",
		node.LabelPoolID:         f.Pool,
		node.LabelPoolName:       "pool-a",
		node.LabelInstanceType:   "2vCPU-2GB",
		node.LabelVMName:         "web-1",
		node.LabelOriginalHostID: f.Host1,
		node.LabelOriginalPoolID: f.Pool,
	})
	if node.ManagedKeys(f.Get(n).Annotations) == nil {
		t.Error("owned keys not recorded")
	}
}

func TestMigrationChangesZoneAndHost(t *testing.T) {
	f := newFixture(t, testenv.FixtureOptions{})
	vm := f.AddVM(xosim.VMSpec{NameLabel: "mig"})
	n := f.CreateNode("w", vm).Name
	f.reconcile(n)

	if err := f.Sim.Migrate(vm, f.Host2); err != nil {
		t.Fatal(err)
	}
	f.WaitInventory("migration", func(s *inventory.Snapshot) bool { return s.VM(vm).Container == f.Host2 })
	f.reconcile(n)
	wantLabels(t, f.labels(n), map[string]string{
		node.LabelZone:           f.Host2,
		node.LabelHostID:         f.Host2,
		node.LabelHostName:       "host-2",
		node.LabelOriginalHostID: f.Host1,
		node.LabelRegion:         f.Pool,
	})
	ev := f.Rec.Find(n, ReasonNodeZoneChanged)
	if len(ev) != 1 || !strings.Contains(ev[0].Note, f.Host1+" → "+f.Host2) || !strings.Contains(ev[0].Note, "host-2") {
		t.Errorf("want one %s event naming the old and new host, got %+v", ReasonNodeZoneChanged, ev)
	}
	if len(f.Rec.Find(n, ReasonNodeRegionChanged)) != 0 {
		t.Error("region change reported for a move within the pool")
	}
}

// TestHaltedVMKeepsZone: XO reports a halted VM's $container as its pool; the zone must not
// become the pool uuid (the upstream CCM's bug).
func TestHaltedVMKeepsZone(t *testing.T) {
	f := newFixture(t, testenv.FixtureOptions{})
	vm := f.AddVM(xosim.VMSpec{NameLabel: "halt"})
	n := f.CreateNode("w", vm).Name
	f.reconcile(n)
	before := f.labels(n)

	if err := f.Sim.SetPowerState(vm, xo.PowerStateHalted); err != nil {
		t.Fatal(err)
	}
	f.WaitInventory("halted", func(s *inventory.Snapshot) bool { return s.VM(vm).PowerState == xo.PowerStateHalted })
	if c := f.Inventory.Snapshot().VM(vm).Container; c != f.Pool {
		t.Fatalf("simulator: halted VM's $container = %s, want the pool %s", c, f.Pool)
	}
	f.reconcile(n)
	after := f.labels(n)
	for _, k := range []string{node.LabelZone, node.LabelHostID, node.LabelHostName, node.LabelOriginalHostID} {
		if after[k] != before[k] {
			t.Errorf("label %s: %q → %q after the VM halted", k, before[k], after[k])
		}
	}
	if after[node.LabelZone] == f.Pool {
		t.Error("zone rewritten to the pool uuid")
	}
	if len(f.Rec.Find(n, ReasonNodeZoneChanged)) != 0 {
		t.Error("zone change reported for a halted VM")
	}
}

func TestResizeChangesInstanceType(t *testing.T) {
	f := newFixture(t, testenv.FixtureOptions{})
	vm := f.AddVM(xosim.VMSpec{NameLabel: "rs"})
	n := f.CreateNode("w", vm).Name
	f.reconcile(n)
	if err := f.Sim.Resize(vm, 4, 8*xosim.GiB); err != nil {
		t.Fatal(err)
	}
	f.WaitInventory("resize", func(s *inventory.Snapshot) bool { return s.VM(vm).CPUs.Max == 4 })
	f.reconcile(n)
	wantLabels(t, f.labels(n), map[string]string{node.LabelInstanceType: "4vCPU-8GB"})
	ev := f.Rec.Find(n, ReasonNodeInstanceTypeChanged)
	if len(ev) != 1 || !strings.Contains(ev[0].Note, "2vCPU-2GB → 4vCPU-8GB") {
		t.Errorf("want one %s event, got %+v", ReasonNodeInstanceTypeChanged, ev)
	}
}

func TestRenameChangesNameLabel(t *testing.T) {
	f := newFixture(t, testenv.FixtureOptions{})
	vm := f.AddVM(xosim.VMSpec{NameLabel: "old-name"})
	n := f.CreateNode("w", vm).Name
	f.reconcile(n)
	if err := f.Sim.Rename(vm, "new name!"); err != nil {
		t.Fatal(err)
	}
	f.WaitInventory("rename", func(s *inventory.Snapshot) bool { return s.VM(vm).NameLabel == "new name!" })
	f.reconcile(n)
	wantLabels(t, f.labels(n), map[string]string{node.LabelVMName: "new-name"})
	if ev := f.Rec.Find(n, ReasonNodeRenamed); len(ev) != 1 || !strings.Contains(ev[0].Note, "old-name → new-name") {
		t.Errorf("want one %s event, got %+v", ReasonNodeRenamed, ev)
	}
}

func TestPoolRenameChangesPoolNameLabel(t *testing.T) {
	f := newFixture(t, testenv.FixtureOptions{})
	vm := f.AddVM(xosim.VMSpec{NameLabel: "pr"})
	n := f.CreateNode("w", vm).Name
	f.reconcile(n)
	if err := f.Sim.Rename(f.Pool, "pool-renamed"); err != nil {
		t.Fatal(err)
	}
	f.WaitInventory("pool rename", func(s *inventory.Snapshot) bool { return s.Pool(f.Pool).NameLabel == "pool-renamed" })
	f.reconcile(n)
	wantLabels(t, f.labels(n), map[string]string{node.LabelPoolName: "pool-renamed"})
}

func TestCrossPoolMoveChangesRegion(t *testing.T) {
	f := newFixture(t, testenv.FixtureOptions{})
	poolB := f.X.AddPool(t, xosim.PoolSpec{NameLabel: "pool-b"})
	hostB := f.X.AddHost(t, xosim.HostSpec{PoolID: poolB, NameLabel: "host-b"})
	vm := f.AddVM(xosim.VMSpec{NameLabel: "xp"})
	n := f.CreateNode("w", vm).Name
	f.reconcile(n)
	if err := f.Sim.Migrate(vm, hostB); err != nil {
		t.Fatal(err)
	}
	f.WaitInventory("cross-pool move", func(s *inventory.Snapshot) bool { return s.VM(vm).PoolID == poolB })
	f.reconcile(n)
	got := f.Get(n)
	wantLabels(t, got.Labels, map[string]string{
		node.LabelRegion:         poolB,
		node.LabelPoolID:         poolB,
		node.LabelPoolName:       "pool-b",
		node.LabelZone:           hostB,
		node.LabelOriginalPoolID: f.Pool,
		node.LabelOriginalHostID: f.Host1,
	})
	if got.Spec.ProviderID != node.FormatProviderID(f.Pool, vm) {
		t.Errorf("providerID changed: %s", got.Spec.ProviderID)
	}
	if ev := f.Rec.Find(n, ReasonNodeRegionChanged); len(ev) != 1 || ev[0].Type != corev1.EventTypeWarning {
		t.Errorf("want one Warning %s event, got %+v", ReasonNodeRegionChanged, ev)
	}
}

func TestTagLabelsAndTaints(t *testing.T) {
	f := newFixture(t, testenv.FixtureOptions{})
	vm := f.AddVM(xosim.VMSpec{NameLabel: "tags"})
	n := f.CreateNode("w", vm, testenv.WithLabels(map[string]string{
		"example.com/owner": "alice", // set by a person, on a key the controller does not own
		"example.com/keep":  "me",
	})).Name
	f.reconcile(n)

	setTags := func(tags ...string) {
		t.Helper()
		if err := f.Sim.SetTags(vm, tags); err != nil {
			t.Fatal(err)
		}
		f.WaitInventory("tags", func(s *inventory.Snapshot) bool { return slices.Equal(s.VM(vm).Tags, tags) })
		f.reconcile(n)
	}

	// Add.
	setTags(node.TagLabelPrefix+"example.com/tier=gold", node.TagTaintPrefix+"example.com/dedicated=db:NoSchedule")
	got := f.Get(n)
	wantLabels(t, got.Labels, map[string]string{"example.com/tier": "gold", "example.com/owner": "alice", "example.com/keep": "me"})
	if !slices.ContainsFunc(got.Spec.Taints, func(t corev1.Taint) bool {
		return t.Key == "example.com/dedicated" && t.Value == "db" && t.Effect == corev1.TaintEffectNoSchedule
	}) {
		t.Errorf("tag taint missing: %v", got.Spec.Taints)
	}

	// Change.
	setTags(node.TagLabelPrefix + "example.com/tier=silver")
	got = f.Get(n)
	wantLabels(t, got.Labels, map[string]string{"example.com/tier": "silver"})
	if node.HasTaint(got.Spec.Taints, "example.com/dedicated", "") {
		t.Errorf("removed tag taint kept: %v", got.Spec.Taints)
	}

	// A tag asking for a key a person set: left alone, with an event.
	setTags(node.TagLabelPrefix+"example.com/tier=silver", node.TagLabelPrefix+"example.com/owner=bob")
	wantLabels(t, f.labels(n), map[string]string{"example.com/owner": "alice", "example.com/tier": "silver"})
	if ev := f.Rec.Find(n, nodeevents.ReasonLabelConflict); len(ev) != 1 || !strings.Contains(ev[0].Note, "example.com/owner") {
		t.Errorf("want one %s event about example.com/owner, got %+v", nodeevents.ReasonLabelConflict, ev)
	}

	// Remove: the controller's label goes, the person's labels stay.
	setTags()
	wantLabels(t, f.labels(n), map[string]string{"example.com/tier": "", "example.com/owner": "alice", "example.com/keep": "me"})
	if !f.Exists(n) {
		t.Fatal("Node gone")
	}
	// The described labels are untouched by tag edits.
	wantLabels(t, f.labels(n), map[string]string{node.LabelZone: f.Host1, node.LabelVMName: "tags"})
}

func TestForbiddenTagKeysRefused(t *testing.T) {
	f := newFixture(t, testenv.FixtureOptions{})
	forbidden := []string{
		node.TagLabelPrefix + "node-role.kubernetes.io/control-plane=",
		node.TagLabelPrefix + "kubernetes.io/hostname=evil",
		node.TagLabelPrefix + "foo.k8s.io/x=y",
		node.TagLabelPrefix + "node-restriction.kubernetes.io/x=y",
		node.TagLabelPrefix + "topology.kubernetes.io/zone=evil",
		node.TagTaintPrefix + "node.kubernetes.io/unschedulable:NoSchedule",
	}
	vm := f.AddVM(xosim.VMSpec{NameLabel: "forbidden", Tags: forbidden})
	n := f.CreateNode("w", vm).Name
	before := testutil.ToFloat64(rejectedTotal.WithLabelValues(string(node.ReasonReservedKey)))
	f.reconcile(n)
	got := f.Get(n)
	for _, k := range []string{"node-role.kubernetes.io/control-plane", "foo.k8s.io/x", "node-restriction.kubernetes.io/x"} {
		if _, ok := got.Labels[k]; ok {
			t.Errorf("forbidden label %s set", k)
		}
	}
	wantLabels(t, got.Labels, map[string]string{corev1.LabelHostname: n, node.LabelZone: f.Host1})
	if node.HasTaint(got.Spec.Taints, "node.kubernetes.io/unschedulable", "") {
		t.Error("forbidden taint set")
	}
	ev := f.Rec.Find(n, nodeevents.ReasonLabelRejected)
	if len(ev) != len(forbidden) {
		t.Errorf("want %d %s events, got %d: %+v", len(forbidden), nodeevents.ReasonLabelRejected, len(ev), ev)
	}
	for _, e := range ev {
		if e.Type != corev1.EventTypeWarning {
			t.Errorf("%s event of type %s", nodeevents.ReasonLabelRejected, e.Type)
		}
	}
	if d := testutil.ToFloat64(rejectedTotal.WithLabelValues(string(node.ReasonReservedKey))) - before; d != float64(len(forbidden)) {
		t.Errorf("rejected metric grew by %v, want %d", d, len(forbidden))
	}
	// A standing refusal is reported once, not at every look (each event is an API write, and
	// a resync that changes nothing writes nothing), and changes nothing.
	rv := got.ResourceVersion
	f.reconcile(n)
	f.reconcile(n)
	if got := len(f.Rec.Find(n, nodeevents.ReasonLabelRejected)); got != len(forbidden) {
		t.Errorf("%d refusal events after three looks, want %d", got, len(forbidden))
	}
	if d := testutil.ToFloat64(rejectedTotal.WithLabelValues(string(node.ReasonReservedKey))) - before; d != float64(len(forbidden)) {
		t.Errorf("rejected metric grew by %v after three looks, want %d", d, len(forbidden))
	}
	if f.Get(n).ResourceVersion != rv {
		t.Error("a standing refusal wrote the Node")
	}
	// A new refusal is reported; the standing ones are not again (nodeevents: once an hour).
	tags := append(slices.Clone(forbidden), node.TagLabelPrefix+"k8s.io/y=z")
	if err := f.Sim.SetTags(vm, tags); err != nil {
		t.Fatal(err)
	}
	f.WaitInventory("tags", func(s *inventory.Snapshot) bool { return slices.Equal(s.VM(vm).Tags, tags) })
	f.reconcile(n)
	f.reconcile(n)
	ev = f.Rec.Find(n, nodeevents.ReasonLabelRejected)
	if len(ev) != len(forbidden)+1 || !strings.Contains(ev[len(ev)-1].Note, "k8s.io/y") {
		t.Errorf("after one more forbidden tag, want %d refusal events, the last about k8s.io/y: %+v", len(forbidden)+1, ev)
	}
}

// TestNoWriteWhenUpToDate: a resync of an up-to-date Node writes nothing.
func TestNoWriteWhenUpToDate(t *testing.T) {
	f := newFixture(t, testenv.FixtureOptions{})
	vm := f.AddVM(xosim.VMSpec{NameLabel: "steady", Tags: []string{node.TagLabelPrefix + "example.com/a=b", node.TagTaintPrefix + "example.com/t:NoSchedule"}})
	n := f.CreateNode("w", vm).Name
	f.reconcile(n)
	rv := f.Get(n).ResourceVersion
	before := testutil.ToFloat64(patches)
	for range 3 {
		res := f.reconcile(n)
		if res != (ctrl.Result{}) {
			t.Errorf("result %+v, want none: the periodic look is the controller's ResyncSource", res)
		}
	}
	if got := f.Get(n).ResourceVersion; got != rv {
		t.Errorf("resync of an up-to-date Node wrote it: resourceVersion %s → %s", rv, got)
	}
	if d := testutil.ToFloat64(patches) - before; d != 0 {
		t.Errorf("%v patches on resync", d)
	}
}

func TestMissingVMRemovesNothing(t *testing.T) {
	f := newFixture(t, testenv.FixtureOptions{})
	vm := f.AddVM(xosim.VMSpec{NameLabel: "missing", Tags: []string{node.TagLabelPrefix + "example.com/a=b"}})
	n := f.CreateNode("w", vm).Name
	f.reconcile(n)
	before := f.Get(n)
	if err := f.Sim.RemoveVM(vm); err != nil {
		t.Fatal(err)
	}
	f.WaitInventory("VM removed", func(s *inventory.Snapshot) bool { return s.VM(vm) == nil })
	f.reconcile(n)
	if after := f.Get(n); after.ResourceVersion != before.ResourceVersion {
		t.Errorf("Node of a missing VM written: labels %v → %v", before.Labels, after.Labels)
	}
}

func TestUninitializedNodeLeftToCloudNode(t *testing.T) {
	f := newFixture(t, testenv.FixtureOptions{})
	vm := f.AddVM(xosim.VMSpec{NameLabel: "uninit"})
	name := testenv.NodeName(t, "u")
	n := testenv.KubeletNode(name, testenv.WithProviderID(node.FormatProviderID(f.Pool, vm)))
	if err := testenv.CreateNode(f.Ctx, env.Client, n); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), n) })
	f.reconcile(name)
	if _, ok := f.labels(name)[node.LabelZone]; ok {
		t.Error("label-sync described an uninitialized Node")
	}
}

func TestPoolDisconnectedRemovesNothing(t *testing.T) {
	f := newFixture(t, testenv.FixtureOptions{})
	vm := f.AddVM(xosim.VMSpec{NameLabel: "dis", Tags: []string{node.TagLabelPrefix + "example.com/a=b", node.TagTaintPrefix + "example.com/t:NoSchedule"}})
	n := f.CreateNode("w", vm).Name
	f.reconcile(n)
	before := f.Get(n)
	if err := f.Sim.DisconnectPool(f.Pool); err != nil {
		t.Fatal(err)
	}
	f.WaitInventory("pool dropped", func(s *inventory.Snapshot) bool { return s.VM(vm) == nil && !s.PoolConnected(f.Pool) })
	f.reconcile(n)
	if err := f.Sim.ReconnectPool(f.Pool); err != nil {
		t.Fatal(err)
	}
	f.WaitInventory("pool back", func(s *inventory.Snapshot) bool { return s.VM(vm) != nil && s.Complete() })
	f.reconcile(n)
	if after := f.Get(n); after.ResourceVersion != before.ResourceVersion {
		t.Errorf("Node written across a pool disconnection: labels %v → %v, taints %v → %v", before.Labels, after.Labels, before.Spec.Taints, after.Spec.Taints)
	}
}

// TestIncompleteInventoryStillRemoves: another pool being disconnected (the inventory
// incomplete) does not hold back the removals of a VM whose own pool is connected and settled:
// its data is current.
func TestIncompleteInventoryStillRemoves(t *testing.T) {
	f := newFixture(t, testenv.FixtureOptions{})
	poolB := f.X.AddPool(t, xosim.PoolSpec{NameLabel: "pool-b"})
	f.X.AddHost(t, xosim.HostSpec{PoolID: poolB, NameLabel: "host-b"})
	tagL, tagT := node.TagLabelPrefix+"example.com/a=b", node.TagTaintPrefix+"example.com/t:NoSchedule"
	vm := f.AddVM(xosim.VMSpec{NameLabel: "inc", Tags: []string{tagL, tagT}})
	n := f.CreateNode("w", vm).Name
	f.reconcile(n)

	if err := f.Sim.DisconnectPool(poolB); err != nil {
		t.Fatal(err)
	}
	f.WaitInventory("incomplete", func(s *inventory.Snapshot) bool { return !s.Complete() })
	if err := f.Sim.SetTags(vm, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.Sim.Migrate(vm, f.Host2); err != nil {
		t.Fatal(err)
	}
	f.WaitInventory("changes", func(s *inventory.Snapshot) bool { v := s.VM(vm); return len(v.Tags) == 0 && v.Container == f.Host2 })
	f.reconcile(n)
	got := f.Get(n)
	wantLabels(t, got.Labels, map[string]string{"example.com/a": "", node.LabelZone: f.Host2})
	if node.HasTaint(got.Spec.Taints, "example.com/t", "") {
		t.Error("tag taint kept although the VM's own pool is connected and settled")
	}
}

// faultScenario checks that while a fault is active no label or taint is removed or changed,
// and that changes made in XO after it clears reach the Node.
func faultScenario(t *testing.T, o testenv.FixtureOptions, inject func(f *fixture, vm string) (clear func())) {
	f := newFixture(t, o)
	tagL, tagT := node.TagLabelPrefix+"example.com/a=b", node.TagTaintPrefix+"example.com/t:NoSchedule"
	vm := f.AddVM(xosim.VMSpec{NameLabel: "fault", Tags: []string{tagL, tagT}})
	n := f.CreateNode("w", vm).Name
	f.reconcile(n)
	before := f.Get(n)
	if before.Labels["example.com/a"] != "b" || !node.HasTaint(before.Spec.Taints, "example.com/t", "") {
		t.Fatal("Node not described before the fault")
	}

	clear := inject(f, vm)
	if v := f.Inventory.Snapshot().VM(vm); v == nil || len(v.Tags) != 2 {
		t.Fatalf("the fault changed the inventory's copy of the VM: %+v", v)
	}
	for range 3 {
		f.reconcile(n)
	}
	after := f.Get(n)
	if !maps.Equal(before.Labels, after.Labels) || !slices.EqualFunc(before.Spec.Taints, after.Spec.Taints, taintEqual) {
		t.Errorf("Node changed during the fault:\nbefore %v %v\nafter  %v %v", before.Labels, before.Spec.Taints, after.Labels, after.Spec.Taints)
	}

	clear()
	if err := f.Sim.Migrate(vm, f.Host2); err != nil {
		t.Fatal(err)
	}
	if err := f.Sim.SetTags(vm, []string{tagT}); err != nil {
		t.Fatal(err)
	}
	if !testenv.Poll(15*time.Second, func() bool {
		f.reconcile(n)
		l := f.labels(n)
		_, has := l["example.com/a"]
		return l[node.LabelZone] == f.Host2 && !has
	}) {
		t.Fatalf("changes after the fault not synced: %v", f.labels(n))
	}
}

// relistFails checks that the injected fault is active: a listing fails.
func relistFails(f *fixture) {
	f.T.Helper()
	if err := f.Inventory.Relist(f.Ctx); err == nil {
		f.T.Fatal("a listing succeeded during the fault: the fault is not active")
	}
}

func taintEqual(a, b corev1.Taint) bool {
	return a.Key == b.Key && a.Value == b.Value && a.Effect == b.Effect
}

func TestFaultServerErrors(t *testing.T) {
	faultScenario(t, testenv.FixtureOptions{}, func(f *fixture, _ string) func() {
		id := f.Sim.InjectFault(xosim.Fault{Kind: xosim.FaultStatus, Status: http.StatusInternalServerError})
		relistFails(f)
		return func() { f.Sim.RemoveFault(id) }
	})
}

func TestFaultTimeouts(t *testing.T) {
	faultScenario(t, testenv.FixtureOptions{}, func(f *fixture, _ string) func() {
		id := f.Sim.InjectFault(xosim.Fault{Kind: xosim.FaultLatency, Latency: 3 * time.Second})
		relistFails(f)
		return func() { f.Sim.RemoveFault(id) }
	})
}

func TestFaultConnectionRefused(t *testing.T) {
	faultScenario(t, testenv.FixtureOptions{}, func(f *fixture, _ string) func() {
		clear := f.Refuse()
		relistFails(f)
		return clear
	})
}

func TestFaultTokenRevoked(t *testing.T) {
	faultScenario(t, testenv.FixtureOptions{}, func(f *fixture, _ string) func() {
		f.Sim.RevokeToken(testToken)
		relistFails(f)
		return func() { f.Sim.AddToken(testToken) }
	})
}

func TestFaultTruncatedListing(t *testing.T) {
	faultScenario(t, testenv.FixtureOptions{}, func(f *fixture, _ string) func() {
		id := f.Sim.InjectFault(xosim.Fault{Kind: xosim.FaultTruncate, PathPrefix: "/rest/v0/vms", Lines: 0})
		relistFails(f)
		if f.Inventory.Snapshot().Len() == 0 {
			f.T.Error("a truncated listing emptied the inventory")
		}
		return func() { f.Sim.RemoveFault(id) }
	})
}

func TestFaultStalledEventStream(t *testing.T) {
	faultScenario(t, testenv.FixtureOptions{}, func(f *fixture, vm string) func() {
		id := f.Sim.InjectFault(xosim.Fault{Kind: xosim.FaultStall, PathPrefix: "/rest/v0/events"})
		// A change made while the stream is stalled must not arrive: the Node stays as it was
		// until a listing, which comes after the fault here.
		if err := f.Sim.SetTags(vm, []string{node.TagTaintPrefix + "example.com/t:NoSchedule"}); err != nil {
			f.T.Fatal(err)
		}
		// A change that must not arrive has no moment to wait for: give it the time the stream
		// takes to deliver one (milliseconds here).
		time.Sleep(300 * time.Millisecond)
		return func() { f.Sim.RemoveFault(id) }
	})
}

// TestManagerMigrationThroughEvents runs the controller in a real manager with the event stream
// on: a live migration in XO reaches the zone label through XO's event, without a listing. (How
// fast: the bench's migration target, BENCHMARKS.md.)
func TestManagerMigrationThroughEvents(t *testing.T) {
	f := newFixture(t, testenv.FixtureOptions{})
	vm := f.AddVM(xosim.VMSpec{NameLabel: "live"})
	n := f.CreateNode("w", vm).Name

	mgr := testenv.NewManager(t, env.Config)
	if err := common.SetupIndexes(f.Ctx, mgr); err != nil {
		t.Fatal(err)
	}
	if err := New(mgr.GetClient(), f.Estate, f.Rec, clock.RealClock{}, f.opts).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	testenv.RunManager(f.Ctx, t, mgr)

	if !testenv.Poll(10*time.Second, func() bool { return f.labels(n)[node.LabelZone] == f.Host1 }) {
		t.Fatal("Node not described by the running controller")
	}
	if !f.Inventory.Streaming() {
		t.Fatal("test setup: the event stream is not up")
	}
	lists := f.Sim.RequestCount(http.MethodGet, xosim.BasePath+"/vms")
	if err := f.Sim.Migrate(vm, f.Host2); err != nil {
		t.Fatal(err)
	}
	if !testenv.Poll(10*time.Second, func() bool { return f.labels(n)[node.LabelZone] == f.Host2 }) {
		t.Fatal("migration never reached the zone label")
	}
	if got := f.Sim.RequestCount(http.MethodGet, xosim.BasePath+"/vms"); got != lists {
		t.Errorf("%d VM listings before the zone label changed, want none: the event alone must carry the migration", got-lists)
	}
	if got := f.labels(n)[node.LabelHostName]; got != "host-2" {
		t.Errorf("host name label %q, want host-2", got)
	}
}

// TestSkipsForeignNodes: a Node of another provider is never touched.
func TestSkipsForeignNodes(t *testing.T) {
	f := newFixture(t, testenv.FixtureOptions{})
	name := testenv.NodeName(t, "aws")
	n := testenv.KubeletNode(name, testenv.WithProviderID("aws:///eu-west-1a/i-0123456789"), testenv.Initialized())
	if err := testenv.CreateNode(f.Ctx, env.Client, n); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), n) })
	rv := f.Get(name).ResourceVersion
	f.reconcile(name)
	if f.Get(name).ResourceVersion != rv {
		t.Error("foreign Node written")
	}
}

// byName is the topology by names: region the pool name, zone the host name.
func byName(o node.LabelOptions) node.LabelOptions {
	o.Region, o.Zone = node.RegionPoolName, node.ZoneHostName
	return o
}

// TestTopologyByName: with names for the topology, the zone follows a live migration and a
// host rename, the region a pool rename; names are sanitized like other label values.
func TestTopologyByName(t *testing.T) {
	f := newFixture(t, testenv.FixtureOptions{})
	f.setLabelOptions(byName(f.opts.Labels))
	vm := f.AddVM(xosim.VMSpec{NameLabel: "topo"})
	n := f.CreateNode("w", vm).Name
	f.reconcile(n)
	wantLabels(t, f.labels(n), map[string]string{node.LabelZone: "host-1", node.LabelRegion: "pool-a", node.LabelHostID: f.Host1, node.LabelPoolID: f.Pool})

	if err := f.Sim.Migrate(vm, f.Host2); err != nil {
		t.Fatal(err)
	}
	f.WaitInventory("migration", func(s *inventory.Snapshot) bool { return s.VM(vm).Container == f.Host2 })
	f.reconcile(n)
	wantLabels(t, f.labels(n), map[string]string{node.LabelZone: "host-2", node.LabelHostID: f.Host2, node.LabelRegion: "pool-a"})
	if ev := f.Rec.Find(n, ReasonNodeZoneChanged); len(ev) != 1 || !strings.Contains(ev[0].Note, "host-1 → host-2") {
		t.Errorf("want one %s event host-1 → host-2, got %+v", ReasonNodeZoneChanged, ev)
	}

	if err := f.Sim.Rename(f.Host2, "rack 7/host"); err != nil {
		t.Fatal(err)
	}
	f.WaitInventory("host rename", func(s *inventory.Snapshot) bool { return s.Host(f.Host2).NameLabel == "rack 7/host" })
	f.reconcile(n)
	wantLabels(t, f.labels(n), map[string]string{node.LabelZone: "rack-7-host", node.LabelHostName: "rack-7-host", node.LabelHostID: f.Host2})

	if err := f.Sim.Rename(f.Pool, "Site B"); err != nil {
		t.Fatal(err)
	}
	f.WaitInventory("pool rename", func(s *inventory.Snapshot) bool { return s.Pool(f.Pool).NameLabel == "Site B" })
	f.reconcile(n)
	wantLabels(t, f.labels(n), map[string]string{node.LabelRegion: "Site-B", node.LabelPoolName: "Site-B", node.LabelPoolID: f.Pool})
	if got := f.Get(n).Spec.ProviderID; got != node.FormatProviderID(f.Pool, vm) {
		t.Errorf("providerID changed: %s", got)
	}
}

// TestSwitchToNamesRelabelsOwnedKeysOnly: switching the topology from uuids to names on a
// running cluster rewrites the zone and region, and nothing else: a person's labels and the
// other owned labels stay as they are.
func TestSwitchToNamesRelabelsOwnedKeysOnly(t *testing.T) {
	f := newFixture(t, testenv.FixtureOptions{})
	vm := f.AddVM(xosim.VMSpec{NameLabel: "switch", Tags: []string{node.TagLabelPrefix + "example.com/tier=gold"}})
	n := f.CreateNode("w", vm, testenv.WithLabels(map[string]string{"example.com/rack": "r1", "team": "storage"})).Name
	f.reconcile(n)
	before := f.Get(n)
	wantLabels(t, before.Labels, map[string]string{node.LabelZone: f.Host1, node.LabelRegion: f.Pool, "example.com/tier": "gold"})

	f.setLabelOptions(byName(f.opts.Labels))
	f.reconcile(n)
	after := f.Get(n)
	wantLabels(t, after.Labels, map[string]string{node.LabelZone: "host-1", node.LabelRegion: "pool-a"})
	for k, v := range before.Labels {
		if k != node.LabelZone && k != node.LabelRegion && after.Labels[k] != v {
			t.Errorf("label %s: %q → %q by the switch", k, v, after.Labels[k])
		}
	}
	if len(after.Labels) != len(before.Labels) {
		t.Errorf("labels added or removed by the switch: %v → %v", before.Labels, after.Labels)
	}
	if !maps.Equal(before.Annotations, after.Annotations) {
		t.Errorf("annotations changed by the switch: %v → %v", before.Annotations, after.Annotations)
	}
	if slices.Contains(node.ManagedKeys(after.Annotations), "example.com/rack") {
		t.Error("a person's label became owned")
	}

	// And back: the uuids return.
	f.setLabelOptions(node.LabelOptions{TagLabelPrefixes: f.opts.Labels.TagLabelPrefixes, TagTaintPrefixes: f.opts.Labels.TagTaintPrefixes})
	f.reconcile(n)
	if got := f.labels(n); !maps.Equal(got, before.Labels) {
		t.Errorf("labels after switching back: %v, want %v", got, before.Labels)
	}
}

// TestDuplicateNamesFallBackToUUIDs: two hosts (pools) with the same name are never merged
// into one zone (region): the uuid is written and a LabelRejected event says why.
func TestDuplicateNamesFallBackToUUIDs(t *testing.T) {
	f := newFixture(t, testenv.FixtureOptions{})
	f.setLabelOptions(byName(f.opts.Labels))
	vm := f.AddVM(xosim.VMSpec{NameLabel: "dup"})
	n := f.CreateNode("w", vm).Name
	f.reconcile(n)
	wantLabels(t, f.labels(n), map[string]string{node.LabelZone: "host-1", node.LabelRegion: "pool-a"})
	rejected := rejectedTotal.WithLabelValues(string(node.ReasonDuplicateName))
	before := testutil.ToFloat64(rejected)

	if err := f.Sim.Rename(f.Host2, "host-1"); err != nil {
		t.Fatal(err)
	}
	f.WaitInventory("host rename", func(s *inventory.Snapshot) bool { return s.HostNameCount("host-1") == 2 })
	f.reconcile(n)
	wantLabels(t, f.labels(n), map[string]string{node.LabelZone: f.Host1, node.LabelHostName: "host-1", node.LabelRegion: "pool-a"})
	ev := f.Rec.Find(n, nodeevents.ReasonLabelRejected)
	if len(ev) != 1 || ev[0].Type != corev1.EventTypeWarning || !strings.Contains(ev[0].Note, node.LabelZone) || !strings.Contains(ev[0].Note, "shared") {
		t.Errorf("want one Warning %s event about the zone's shared name, got %+v", nodeevents.ReasonLabelRejected, ev)
	}
	if d := testutil.ToFloat64(rejected) - before; d != 1 {
		t.Errorf("%s rejections grew by %v, want 1", node.ReasonDuplicateName, d)
	}

	poolB := f.X.AddPool(t, xosim.PoolSpec{NameLabel: "pool-a"})
	f.WaitInventory("second pool-a", func(s *inventory.Snapshot) bool { return s.Pool(poolB) != nil })
	f.reconcile(n)
	wantLabels(t, f.labels(n), map[string]string{node.LabelZone: f.Host1, node.LabelRegion: f.Pool})

	// The names unique again: back to names.
	if err := f.Sim.Rename(f.Host2, "host-2"); err != nil {
		t.Fatal(err)
	}
	if err := f.Sim.Rename(poolB, "pool-b"); err != nil {
		t.Fatal(err)
	}
	f.WaitInventory("renames", func(s *inventory.Snapshot) bool {
		return s.HostNameCount("host-1") == 1 && s.PoolNameCount("pool-a") == 1
	})
	f.reconcile(n)
	wantLabels(t, f.labels(n), map[string]string{node.LabelZone: "host-1", node.LabelRegion: "pool-a"})
}
