package lifecycle

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/controllers/common"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/inventory"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/xosim"
)

const (
	running   = xo.PowerStateRunning
	halted    = xo.PowerStateHalted
	suspended = xo.PowerStateSuspended
	paused    = xo.PowerStatePaused
)

func TestVMDeletedNodeNotReadyIsDeleted(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	vm := f.addVM("gone", running)
	n := f.createNode("w", vm, false)

	f.reconcile(n.Name)
	if !f.exists(n.Name) {
		t.Fatal("Node of a running VM deleted")
	}
	before := testenv.CounterValue(t, deletions)
	if err := f.sim.RemoveVM(vm); err != nil {
		t.Fatal(err)
	}
	f.waitInventory("VM removed", func(s *inventory.Snapshot) bool { return s.VM(vm) == nil })

	f.reconcile(n.Name)
	if f.exists(n.Name) {
		t.Fatal("Node of a deleted VM kept")
	}
	if got := testenv.CounterValue(t, deletions) - before; got != 1 {
		t.Errorf("deletions metric grew by %v, want 1", got)
	}
	if len(f.rec.Find(n.Name, ReasonDeletingNode)) != 1 {
		t.Errorf("want one %s event", ReasonDeletingNode)
	}
	deleted := f.rec.Find(n.Name, ReasonDeletedNode)
	if len(deleted) != 1 || deleted[0].UID != string(n.UID) {
		t.Errorf("want one %s event on the Node's reference (uid %s), got %+v", ReasonDeletedNode, n.UID, deleted)
	}
	if f.sim.RequestCount("GET", "/rest/v0/vms/"+vm) == 0 {
		t.Error("no direct GET of the VM before deleting its Node")
	}
}

func TestVMDeletedNodeReadyIsKept(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	vm := f.addVM("gone-ready", running)
	n := f.createNode("w", vm, true)
	if err := f.sim.RemoveVM(vm); err != nil {
		t.Fatal(err)
	}
	f.waitInventory("VM removed", func(s *inventory.Snapshot) bool { return s.VM(vm) == nil })
	f.sim.ResetCounters()

	for range 3 {
		f.reconcile(n.Name)
	}
	if !f.exists(n.Name) {
		t.Fatal("Ready Node deleted")
	}
	if c := f.sim.RequestCount("GET", "/rest/v0/vms/"+vm); c != 0 {
		t.Errorf("a Ready Node cost %d XO reads", c)
	}

	// Once it goes NotReady, it is deleted.
	f.setReady(n.Name, false)
	f.reconcile(n.Name)
	if f.exists(n.Name) {
		t.Fatal("NotReady Node of a deleted VM kept")
	}
}

func TestPoolDisconnectedNoDeletion(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	var names []string
	var vms []string
	for _, s := range []string{"a", "b", "c"} {
		vm := f.addVM("dis-"+s, running)
		vms = append(vms, vm)
		names = append(names, f.createNode(s, vm, false).Name)
	}
	hvm := f.addVM("dis-halted", halted)
	hn := f.createNode("h", hvm, false).Name
	names = append(names, hn)
	for _, n := range names {
		f.reconcile(n)
	}
	if !f.hasTaint(hn, node.TaintShutdown, corev1.TaintEffectNoSchedule) {
		t.Fatal("halted VM's Node not tainted")
	}
	before := map[string]*corev1.Node{}
	for _, n := range names {
		before[n] = f.get(n)
	}
	refusedBefore := testenv.CounterValue(t, deletionsRefused.WithLabelValues(refusedPoolDisconnected)) +
		testenv.CounterValue(t, deletionsRefused.WithLabelValues(refusedIncomplete))

	if err := f.sim.DisconnectPool(f.pool); err != nil {
		t.Fatal(err)
	}
	f.waitInventory("pool dropped", func(s *inventory.Snapshot) bool {
		return s.VM(vms[0]) == nil && s.VM(hvm) == nil && !s.PoolConnected(f.pool)
	})
	// The trap: XO now answers "no such VM" for VMs that exist.
	if _, err := f.xo.GetVM(f.ctx, vms[0]); !xo.IsNotFound(err) {
		t.Fatalf("simulator: GetVM of a disconnected pool's VM = %v, want not found", err)
	}
	for range 3 {
		for _, n := range names {
			f.reconcile(n)
		}
	}
	for _, n := range names {
		if !f.exists(n) {
			t.Fatalf("Node %s deleted while its pool is disconnected", n)
		}
		if len(f.rec.Find(n, ReasonVMGoneUnconfirmed)) == 0 {
			t.Errorf("no %s event on %s", ReasonVMGoneUnconfirmed, n)
		}
	}
	if !f.hasTaint(hn, node.TaintShutdown, corev1.TaintEffectNoSchedule) {
		t.Fatal("shutdown taint lifted while the pool is disconnected")
	}
	refused := testenv.CounterValue(t, deletionsRefused.WithLabelValues(refusedPoolDisconnected)) +
		testenv.CounterValue(t, deletionsRefused.WithLabelValues(refusedIncomplete)) - refusedBefore
	if refused < float64(len(names)) {
		t.Errorf("refusals counted: %v, want at least %d", refused, len(names))
	}

	if err := f.sim.ReconnectPool(f.pool); err != nil {
		t.Fatal(err)
	}
	f.waitInventory("pool back", func(s *inventory.Snapshot) bool {
		return s.VM(vms[0]) != nil && s.VM(hvm) != nil && s.Complete()
	})
	for _, n := range names {
		f.reconcile(n)
	}
	for _, n := range names {
		after := f.get(n)
		if !slices.EqualFunc(before[n].Spec.Taints, after.Spec.Taints, taintEqual) || !maps.Equal(before[n].Labels, after.Labels) {
			t.Errorf("Node %s changed across the disconnection:\nbefore %v %v\nafter  %v %v", n, before[n].Labels, before[n].Spec.Taints, after.Labels, after.Spec.Taints)
		}
	}
}

func taintEqual(a, b corev1.Taint) bool {
	return a.Key == b.Key && a.Value == b.Value && a.Effect == b.Effect
}

// TestPoolLostBeforeTheInventoryKnows: the VM left the inventory earlier; XO then loses the
// pool while the event stream is stalled, so the inventory still believes the pool connected.
// XO's "no such VM" must not be enough: the direct pool check refuses.
func TestPoolLostBeforeTheInventoryKnows(t *testing.T) {
	f := newFixture(t, fixtureOptions{idleTimeout: time.Minute})
	vm := f.addVM("lost", running)
	n := f.createNode("w", vm, false)
	if err := f.sim.RemoveVM(vm); err != nil {
		t.Fatal(err)
	}
	f.waitInventory("VM removed", func(s *inventory.Snapshot) bool { return s.VM(vm) == nil })

	stall := f.sim.InjectFault(xosim.Fault{Kind: xosim.FaultStall, PathPrefix: "/rest/v0/events"})
	if err := f.sim.DisconnectPool(f.pool); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if s := f.inv.Snapshot(); !s.PoolConnected(f.pool) || !s.Complete() {
		t.Fatal("test setup: the inventory already knows the pool is lost")
	}
	f.reconcile(n.Name)
	if !f.exists(n.Name) {
		t.Fatal("Node deleted on XO's 'no such VM' for a pool XO lost")
	}
	if f.sim.RequestCount("GET", "/rest/v0/pools/"+f.pool) == 0 {
		t.Error("the pool was not checked directly")
	}
	ev := f.rec.Find(n.Name, ReasonVMGoneUnconfirmed)
	if len(ev) == 0 || ev[0].Type != corev1.EventTypeWarning {
		t.Fatalf("want a Warning %s event, got %+v", ReasonVMGoneUnconfirmed, ev)
	}

	// Recovery: the stream resumes, the pool comes back, the VM is still gone: deleted.
	f.sim.RemoveFault(stall)
	if err := f.sim.ReconnectPool(f.pool); err != nil {
		t.Fatal(err)
	}
	f.waitInventory("pool back", func(s *inventory.Snapshot) bool { return s.PoolConnected(f.pool) && s.Complete() })
	if !testenv.Poll(5*time.Second, func() bool { f.reconcile(n.Name); return !f.exists(n.Name) }) {
		t.Fatal("Node of a deleted VM kept after the pool came back")
	}
}

// serversDown reports every XO server as disconnected, whatever the simulator says.
type serversDown struct{ common.XO }

func (s serversDown) ListServers(ctx context.Context, fn func(*xo.Server)) error {
	return s.XO.ListServers(ctx, func(sv *xo.Server) {
		c := *sv
		c.Status = xo.ServerDisconnected
		fn(&c)
	})
}

func TestServerListedDisconnectedNoDeletion(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	vm := f.addVM("srv", running)
	n := f.createNode("w", vm, false)
	if err := f.sim.RemoveVM(vm); err != nil {
		t.Fatal(err)
	}
	f.waitInventory("VM removed", func(s *inventory.Snapshot) bool { return s.VM(vm) == nil })
	f.deps.XO = serversDown{f.xo}
	f.r = New(f.deps)
	f.reconcile(n.Name)
	if !f.exists(n.Name) {
		t.Fatal("Node deleted though XO lists its pool's server as disconnected")
	}
	f.deps.XO = f.xo
	f.r = New(f.deps)
	f.reconcile(n.Name)
	if f.exists(n.Name) {
		t.Fatal("Node kept after the pool's server is connected again")
	}
}

// faultScenario checks that while a fault is active nothing is deleted, no taint is lifted and
// no label removed, and that everything proceeds once it clears. inject starts the fault and
// returns what ends it.
func faultScenario(t *testing.T, o fixtureOptions, inject func(f *fixture) (clear func())) {
	o.outOfService = true
	f := newFixture(t, o)
	goneVM := f.addVM("gone", running)
	haltedVM := f.addVM("halted", halted)
	okVM := f.addVM("ok", running)
	gone := f.createNode("gone", goneVM, false).Name
	hn := f.createNode("halted", haltedVM, false).Name
	ok := f.createNode("ok", okVM, true, testenv.WithLabels(map[string]string{"example.com/team": "a"})).Name
	for _, n := range []string{gone, hn, ok} {
		f.reconcile(n)
	}
	if !f.hasTaint(hn, node.TaintShutdown, corev1.TaintEffectNoSchedule) || !f.hasTaint(hn, node.TaintOutOfService, corev1.TaintEffectNoExecute) {
		t.Fatal("halted VM's Node not tainted before the fault")
	}
	before := map[string]*corev1.Node{hn: f.get(hn), ok: f.get(ok)}

	clear := inject(f)
	if err := f.sim.RemoveVM(goneVM); err != nil {
		t.Fatal(err)
	}
	// Let the inventory see what it can see of the removal.
	seen := testenv.Poll(time.Second, func() bool { return f.inv.Snapshot().VM(goneVM) == nil })
	t.Logf("removal seen by the inventory during the fault: %v", seen)
	for range 3 {
		for _, n := range []string{gone, hn, ok} {
			f.reconcile(n)
		}
	}
	if !f.exists(gone) {
		t.Fatal("Node deleted during the XO fault")
	}
	if seen && len(f.rec.Find(gone, ReasonVMGoneUnconfirmed)) == 0 {
		t.Errorf("no %s event while XO fails", ReasonVMGoneUnconfirmed)
	}
	for _, n := range []string{hn, ok} {
		after := f.get(n)
		if !slices.EqualFunc(before[n].Spec.Taints, after.Spec.Taints, taintEqual) || !maps.Equal(before[n].Labels, after.Labels) {
			t.Errorf("Node %s changed during the fault:\nbefore %v %v\nafter  %v %v", n, before[n].Labels, before[n].Spec.Taints, after.Labels, after.Spec.Taints)
		}
	}

	clear()
	if !testenv.Poll(15*time.Second, func() bool { f.reconcile(gone); return !f.exists(gone) }) {
		t.Fatal("Node of the deleted VM not deleted once the fault cleared")
	}
	if err := f.sim.SetPowerState(haltedVM, running); err != nil {
		t.Fatal(err)
	}
	if !testenv.Poll(15*time.Second, func() bool {
		f.reconcile(hn)
		n := f.get(hn)
		return !node.HasTaint(n.Spec.Taints, node.TaintShutdown, "") && !node.HasTaint(n.Spec.Taints, node.TaintOutOfService, "")
	}) {
		t.Fatal("taints not lifted once the VM runs after the fault")
	}
	if !f.exists(ok) {
		t.Fatal("Ready Node deleted")
	}
}

func TestFaultServerErrors(t *testing.T) {
	faultScenario(t, fixtureOptions{}, func(f *fixture) func() {
		id := f.sim.InjectFault(xosim.Fault{Kind: xosim.FaultStatus, Status: http.StatusInternalServerError})
		return func() { f.sim.RemoveFault(id) }
	})
}

func TestFaultTimeouts(t *testing.T) {
	faultScenario(t, fixtureOptions{}, func(f *fixture) func() {
		id := f.sim.InjectFault(xosim.Fault{Kind: xosim.FaultLatency, Latency: 3 * time.Second, PathPrefix: "/rest/v0/vms/"})
		id2 := f.sim.InjectFault(xosim.Fault{Kind: xosim.FaultLatency, Latency: 3 * time.Second, PathPrefix: "/rest/v0/servers"})
		return func() { f.sim.RemoveFault(id); f.sim.RemoveFault(id2) }
	})
}

func TestFaultConnectionRefused(t *testing.T) {
	faultScenario(t, fixtureOptions{}, func(f *fixture) func() { return f.refuse() })
}

func TestFaultTokenRevoked(t *testing.T) {
	faultScenario(t, fixtureOptions{}, func(f *fixture) func() {
		f.sim.RevokeToken(testToken)
		return func() { f.sim.AddToken(testToken) }
	})
}

func TestFaultTruncatedListing(t *testing.T) {
	faultScenario(t, fixtureOptions{}, func(f *fixture) func() {
		id := f.sim.InjectFault(xosim.Fault{Kind: xosim.FaultTruncate, PathPrefix: "/rest/v0/servers", Lines: 0})
		return func() { f.sim.RemoveFault(id) }
	})
}

func TestFaultStalledEventStream(t *testing.T) {
	// A long idle timeout: the stall goes unnoticed for the whole fault.
	faultScenario(t, fixtureOptions{idleTimeout: time.Minute}, func(f *fixture) func() {
		id := f.sim.InjectFault(xosim.Fault{Kind: xosim.FaultStall, PathPrefix: "/rest/v0/events"})
		return func() { f.sim.RemoveFault(id) }
	})
}

func TestShutdownTaint(t *testing.T) {
	for _, state := range []string{halted, suspended, paused} {
		t.Run(state, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{})
			vm := f.addVM("sd", running)
			n := f.createNode("w", vm, false).Name
			f.reconcile(n)
			if f.hasTaint(n, node.TaintShutdown, "") {
				t.Fatal("running VM's Node tainted")
			}
			if err := f.sim.SetPowerState(vm, state); err != nil {
				t.Fatal(err)
			}
			f.waitInventory("power state", func(s *inventory.Snapshot) bool { return s.VM(vm).PowerState == state })
			f.reconcile(n)
			if !f.hasTaint(n, node.TaintShutdown, corev1.TaintEffectNoSchedule) {
				t.Fatalf("%s VM's NotReady Node not tainted", state)
			}
			if f.hasTaint(n, node.TaintOutOfService, "") {
				t.Fatal("out-of-service taint without the opt-in")
			}
			if len(f.rec.Find(n, ReasonNodeShutdown)) != 1 {
				t.Errorf("want one %s event", ReasonNodeShutdown)
			}
			// Idempotent: no second write.
			rv := f.get(n).ResourceVersion
			f.reconcile(n)
			if f.get(n).ResourceVersion != rv {
				t.Error("second reconcile wrote the Node")
			}

			if err := f.sim.SetPowerState(vm, running); err != nil {
				t.Fatal(err)
			}
			f.waitInventory("running", func(s *inventory.Snapshot) bool { return s.VM(vm).PowerState == running })
			f.reconcile(n)
			if f.hasTaint(n, node.TaintShutdown, "") {
				t.Fatal("taint kept after the VM started")
			}
			if len(f.rec.Find(n, ReasonNodeRunning)) != 1 {
				t.Errorf("want one %s event", ReasonNodeRunning)
			}
		})
	}
}

func TestShutdownTaintReadyNode(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	vm := f.addVM("ready-halted", halted)
	n := f.createNode("w", vm, true).Name
	f.reconcile(n)
	if f.hasTaint(n, node.TaintShutdown, "") {
		t.Fatal("Ready Node tainted")
	}
	f.setReady(n, false)
	f.reconcile(n)
	if !f.hasTaint(n, node.TaintShutdown, corev1.TaintEffectNoSchedule) {
		t.Fatal("NotReady Node of a halted VM not tainted")
	}
	// As in k8s.io/cloud-provider: the taint goes once the Node is Ready, whatever XO says.
	f.setReady(n, true)
	f.reconcile(n)
	if f.hasTaint(n, node.TaintShutdown, "") {
		t.Fatal("taint kept on a Ready Node")
	}
}

// TestTaintKeptWhileInventoryIncomplete: a VM that runs again does not lift the taint while
// another pool is disconnected (the inventory is not complete); it does once it is whole.
func TestTaintKeptWhileInventoryIncomplete(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	other := f.x.AddPool(t, xosim.PoolSpec{NameLabel: "pool-b"})
	f.x.AddHost(t, xosim.HostSpec{PoolID: other, NameLabel: "host-b"})
	vm := f.addVM("inc", halted)
	n := f.createNode("w", vm, false).Name
	f.reconcile(n)
	if !f.hasTaint(n, node.TaintShutdown, "") {
		t.Fatal("not tainted")
	}
	if err := f.sim.DisconnectPool(other); err != nil {
		t.Fatal(err)
	}
	f.waitInventory("pool-b dropped", func(s *inventory.Snapshot) bool { return !s.Complete() })
	if err := f.sim.SetPowerState(vm, running); err != nil {
		t.Fatal(err)
	}
	f.waitInventory("running", func(s *inventory.Snapshot) bool { return s.VM(vm).PowerState == running })
	f.reconcile(n)
	if !f.hasTaint(n, node.TaintShutdown, "") {
		t.Fatal("taint lifted on an incomplete inventory")
	}
	if err := f.sim.ReconnectPool(other); err != nil {
		t.Fatal(err)
	}
	f.waitInventory("complete", func(s *inventory.Snapshot) bool { return s.Complete() })
	f.reconcile(n)
	if f.hasTaint(n, node.TaintShutdown, "") {
		t.Fatal("taint kept once the inventory is complete")
	}
}

func TestOutOfServiceTaint(t *testing.T) {
	f := newFixture(t, fixtureOptions{outOfService: true})
	vm := f.addVM("oos", running)
	n := f.createNode("w", vm, false).Name
	if err := f.sim.SetPowerState(vm, halted); err != nil {
		t.Fatal(err)
	}
	f.waitInventory("halted", func(s *inventory.Snapshot) bool { return s.VM(vm).PowerState == halted })
	f.reconcile(n)
	got := f.get(n)
	i := slices.IndexFunc(got.Spec.Taints, func(t corev1.Taint) bool { return t.Key == node.TaintOutOfService })
	if i < 0 || got.Spec.Taints[i].Value != OutOfServiceValue || got.Spec.Taints[i].Effect != corev1.TaintEffectNoExecute {
		t.Fatalf("want %s=%s:NoExecute, got %v", node.TaintOutOfService, OutOfServiceValue, got.Spec.Taints)
	}
	if got.Annotations[AnnotationOutOfService] == "" {
		t.Fatal("ownership of the out-of-service taint not recorded")
	}
	if err := f.sim.SetPowerState(vm, running); err != nil {
		t.Fatal(err)
	}
	f.waitInventory("running", func(s *inventory.Snapshot) bool { return s.VM(vm).PowerState == running })
	f.reconcile(n)
	got = f.get(n)
	if node.HasTaint(got.Spec.Taints, node.TaintOutOfService, "") || node.HasTaint(got.Spec.Taints, node.TaintShutdown, "") {
		t.Fatalf("taints kept after the VM started: %v", got.Spec.Taints)
	}
	if _, ok := got.Annotations[AnnotationOutOfService]; ok {
		t.Fatal("ownership annotation kept")
	}
}

func TestOutOfServiceTaintNotForSuspended(t *testing.T) {
	f := newFixture(t, fixtureOptions{outOfService: true})
	vm := f.addVM("oos-susp", suspended)
	n := f.createNode("w", vm, false).Name
	f.reconcile(n)
	if !f.hasTaint(n, node.TaintShutdown, "") || f.hasTaint(n, node.TaintOutOfService, "") {
		t.Fatalf("suspended VM: want only the shutdown taint, got %v", f.get(n).Spec.Taints)
	}
}

func TestOutOfServiceTaintOptOut(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	vm := f.addVM("oos-off", halted)
	n := f.createNode("w", vm, false).Name
	f.reconcile(n)
	if !f.hasTaint(n, node.TaintShutdown, "") || f.hasTaint(n, node.TaintOutOfService, "") {
		t.Fatalf("opt-in off: want only the shutdown taint, got %v", f.get(n).Spec.Taints)
	}
}

// TestOutOfServiceTaintSetByAPerson: a person's out-of-service taint is never lifted.
func TestOutOfServiceTaintSetByAPerson(t *testing.T) {
	f := newFixture(t, fixtureOptions{outOfService: true})
	vm := f.addVM("oos-human", halted)
	human := corev1.Taint{Key: node.TaintOutOfService, Value: "maintenance", Effect: corev1.TaintEffectNoExecute}
	n := f.createNode("w", vm, false, testenv.WithTaints(human)).Name
	f.reconcile(n)
	got := f.get(n)
	if _, ok := got.Annotations[AnnotationOutOfService]; ok {
		t.Fatal("took ownership of a person's taint")
	}
	if err := f.sim.SetPowerState(vm, running); err != nil {
		t.Fatal(err)
	}
	f.waitInventory("running", func(s *inventory.Snapshot) bool { return s.VM(vm).PowerState == running })
	f.reconcile(n)
	f.setReady(n, true)
	f.reconcile(n)
	got = f.get(n)
	i := slices.IndexFunc(got.Spec.Taints, func(t corev1.Taint) bool { return t.Key == node.TaintOutOfService })
	if i < 0 || got.Spec.Taints[i].Value != "maintenance" {
		t.Fatalf("a person's out-of-service taint was changed or lifted: %v", got.Spec.Taints)
	}
	if node.HasTaint(got.Spec.Taints, node.TaintShutdown, "") {
		t.Fatal("shutdown taint kept")
	}
}

func TestForeignAndMissingProviderIDIgnored(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	foreign := testenv.KubeletNode(testenv.NodeName(t, "aws"), testenv.WithProviderID("aws:///eu-west-1a/i-0123456789"), testenv.Initialized(), testenv.WithReady(false))
	none := testenv.KubeletNode(testenv.NodeName(t, "none"), testenv.Initialized(), testenv.WithReady(false))
	for _, n := range []*corev1.Node{foreign, none} {
		if err := testenv.CreateNode(f.ctx, env.Client, n); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), n) })
		f.reconcile(n.Name)
		if !f.exists(n.Name) {
			t.Fatalf("Node %s deleted", n.Name)
		}
	}
	f.sim.ResetCounters()
	f.reconcile(foreign.Name)
	for k, c := range f.sim.RequestCounts() {
		if c != 0 && !strings.HasPrefix(k, "GET /rest/v0/events") {
			t.Errorf("XO asked about a foreign Node: %s %d times", k, c)
		}
	}
}

// TestManagerReactsToXOEvents runs the controller in a real manager: a VM halted in XO taints
// its NotReady Node through the inventory's change feed, a VM started lifts it, and a deleted
// VM's Node goes.
func TestManagerReactsToXOEvents(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	vm := f.addVM("mgr", running)
	gone := f.addVM("mgr-gone", running)
	n := f.createNode("w", vm, false).Name
	gn := f.createNode("g", gone, false).Name

	mgr := testenv.NewManager(t, env.Config)
	if err := common.SetupIndexes(f.ctx, mgr); err != nil {
		t.Fatal(err)
	}
	deps := f.deps
	deps.Client = mgr.GetClient()
	deps.Clock = clock.RealClock{}
	if err := New(deps).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	testenv.RunManager(f.ctx, t, mgr)

	start := time.Now()
	if err := f.sim.SetPowerState(vm, halted); err != nil {
		t.Fatal(err)
	}
	if !testenv.Poll(10*time.Second, func() bool { return f.hasTaint(n, node.TaintShutdown, corev1.TaintEffectNoSchedule) }) {
		t.Fatal("halted VM's Node not tainted")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("halt → taint took %v, want < 2s", d)
	}
	if err := f.sim.SetPowerState(vm, running); err != nil {
		t.Fatal(err)
	}
	if !testenv.Poll(10*time.Second, func() bool { return !f.hasTaint(n, node.TaintShutdown, "") }) {
		t.Fatal("taint not lifted after the VM started")
	}
	start = time.Now()
	if err := f.sim.RemoveVM(gone); err != nil {
		t.Fatal(err)
	}
	if !testenv.Poll(10*time.Second, func() bool { return !f.exists(gn) }) {
		t.Fatal("deleted VM's Node kept")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("VM removed → Node deleted took %v, want < 2s", d)
	}
}
