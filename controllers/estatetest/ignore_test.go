package estatetest

import (
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/xosim"
)

// TestIgnoredNodesAreNeverWritten runs the three controllers in a manager over a burst of XO
// changes (tags, live migration, halt, deletion) to the VMs of ignored Nodes, by label and by
// the configured selector, initialized or not: no API request writes them, no event names them
// and XO is never asked about their VMs, while a Node that is not ignored goes through the
// same changes (relabelled, tainted, deleted).
func TestIgnoredNodesAreNeverWritten(t *testing.T) {
	t.Parallel()
	f := testenv.NewFixture(t, env, testenv.FixtureOptions{})
	ignore, err := node.NewIgnorer("example.com/unmanaged=true")
	if err != nil {
		t.Fatal(err)
	}
	requests := &testenv.RequestCounter{}
	mgr := testenv.NewManager(t, requests.Config(env.Config))
	newControllers(mgr.GetClient(), f.Estate, f.Rec, clock.RealClock{}, tagPrefixes, ignore).setup(f.Ctx, t, mgr)

	vm := func(name string) string { return f.AddVM(xosim.VMSpec{NameLabel: name, IPs: []string{"10.1.0.1"}}) }
	byLabel, bySelector, uninit, control := vm("by-label"), vm("by-selector"), vm("uninit"), vm("control")
	notReady := testenv.WithReady(false)
	labelled := f.CreateNode("label", byLabel, notReady, testenv.WithLabels(map[string]string{node.LabelIgnore: "true"})).Name
	selected := f.CreateNode("selector", bySelector, notReady, testenv.WithLabels(map[string]string{"example.com/unmanaged": "true"})).Name
	// A kubelet's Node, uninitialized, whose system uuid names a VM: cloud-node could finish it.
	un := testenv.KubeletNode(testenv.NodeName(t, "uninit"), testenv.WithSystemUUID(uninit), notReady, testenv.WithLabels(map[string]string{node.LabelIgnore: "true"}))
	env.AddNode(t, un)
	ignored := map[string]string{labelled: byLabel, selected: bySelector, un.Name: uninit} // Node → VM
	ctl := f.CreateNode("control", control, notReady).Name
	rvs := map[string]string{}
	for n := range ignored {
		rvs[n] = f.Get(n).ResourceVersion
	}

	testenv.RunManager(f.Ctx, t, mgr)
	testenv.Eventually(t, 10*time.Second, "the control Node described", func() bool { return f.Get(ctl).Labels[node.LabelZone] == f.Host1 })
	f.Sim.ResetCounters()

	for _, id := range []string{byLabel, bySelector, uninit, control} {
		if err := f.Sim.SetTags(id, []string{node.TagLabelPrefix + "example.com/tier=gold", node.TagTaintPrefix + "example.com/dedicated=db:NoSchedule"}); err != nil {
			t.Fatal(err)
		}
		if err := f.Sim.Migrate(id, f.Host2); err != nil {
			t.Fatal(err)
		}
		if err := f.Sim.SetAddresses(id, map[string]string{"0/ipv4/0": "10.1.0.2"}); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 10*time.Second, "the control Node relabelled", func() bool {
		n := f.Get(ctl)
		return n.Labels[node.LabelZone] == f.Host2 && n.Labels["example.com/tier"] == "gold"
	})
	for _, id := range []string{byLabel, bySelector, uninit, control} {
		if err := f.Sim.SetPowerState(id, xo.PowerStateHalted); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 10*time.Second, "the control Node tainted", func() bool { return f.HasTaint(ctl, node.TaintShutdown, corev1.TaintEffectNoSchedule) })
	f.Relist()
	for _, id := range []string{byLabel, bySelector, uninit, control} {
		if err := f.Sim.RemoveVM(id); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 10*time.Second, "the control Node deleted", func() bool { return !f.Exists(ctl) })
	// Whatever the change source would still enqueue has had time to arrive.
	time.Sleep(3 * f.SettleTime)

	for n, vmID := range ignored {
		if w := requests.NodeWrites(n); w != 0 {
			t.Errorf("ignored Node %s: %d write requests", n, w)
		}
		if !f.Exists(n) {
			t.Errorf("ignored Node %s deleted", n)
			continue
		}
		if rv := f.Get(n).ResourceVersion; rv != rvs[n] {
			t.Errorf("ignored Node %s changed: resourceVersion %s → %s", n, rvs[n], rv)
		}
		if ev := f.Rec.All(n); len(ev) != 0 {
			t.Errorf("events about ignored Node %s: %+v", n, ev)
		}
		if c := f.Sim.RequestCount(http.MethodGet, xosim.BasePath+"/vms/"+vmID); c != 0 {
			t.Errorf("XO asked %d times about the VM of ignored Node %s", c, n)
		}
	}
	if requests.NodeWrites(ctl) == 0 || f.Sim.RequestCount(http.MethodGet, xosim.BasePath+"/vms/"+control) == 0 {
		t.Error("test setup: the control Node was neither written nor looked up")
	}
}
