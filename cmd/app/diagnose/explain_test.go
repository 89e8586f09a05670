package diagnose

import (
	"context"
	"testing"

	clock "k8s.io/utils/clock"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/cmd/app"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/config"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/controllers/cloudnode"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/inventory"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/xosim"
)

// explainFixture is an XO server, its config file (settle time 10m, so that a deletion stays
// pending while the test looks), and the real cloud-node reconciler to initialize Nodes with.
type explainFixture struct {
	*estate
	cfg       string
	kc        string
	cloudNode *cloudnode.Reconciler
}

func newExplainFixture(t *testing.T) *explainFixture {
	t.Helper()
	e := newEstate(t, testenv.XOOptions{})
	f := &explainFixture{estate: e, cfg: e.config(t, e.Token, "inventory: {settleTime: 10m}\n"), kc: kubeconfig(t)}
	cfg, err := config.Load(f.cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.StartInventory(t, inventory.Options{})
	f.cloudNode = cloudnode.New(env.Client, testenv.Estate(e.XO), &testenv.Recorder{}, clock.RealClock{},
		cloudnode.Options{Labels: app.LabelOptions(cfg), Addresses: app.AddressOptions(cfg)})
	return f
}

// initialized adds a VM and its Node, which the real cloud-node reconciler initializes.
func (f *explainFixture) initialized(t *testing.T, name string) string {
	t.Helper()
	vm := f.vm(t, name, "10.20.0.1")
	f.WaitInventory(t, "the VM listed", func(s *inventory.Snapshot) bool { return s.VM(vm) != nil })
	addNode(t, testenv.KubeletNode(name))
	testenv.Reconcile(context.Background(), t, f.cloudNode, name)
	if n := env.Node(t, name); node.HasTaint(n.Spec.Taints, node.TaintUninitialized, "") {
		t.Fatalf("cloud-node did not initialize %s", name)
	}
	return vm
}

func (f *explainFixture) explain(t *testing.T, name string) result {
	t.Helper()
	return run(t, nil, "explain", "node", name, "--kubeconfig="+f.kc, "--config="+f.cfg)
}

// TestExplainStates: explain tells, for a Node in each state, what the controller knows and
// does next, with the same rules as the controllers (node.Describe, node.Addresses,
// lifecycle.Decide).
func TestExplainStates(t *testing.T) {
	f := newExplainFixture(t)
	ctx := context.Background()

	t.Run("Initialized", func(t *testing.T) {
		vm := f.initialized(t, "explain-ok")
		r := f.explain(t, "explain-ok")
		if r.code != 0 {
			t.Errorf("exit status %d, want 0", r.code)
		}
		r.line(t, "✔", "resolves to VM "+vm, "by its providerID")
		r.line(t, "✔", "providerID "+node.FormatProviderID(f.pool, vm))
		r.line(t, "✔", "label "+node.LabelZone+"="+f.host1)
		r.line(t, "✔", "addresses InternalIP 10.20.0.1")
		r.line(t, "·", "labels the controller owns", node.LabelRegion)
		r.line(t, "✔", "cloud-node: nothing to do")
		r.line(t, "✔", "cloud-node-label-sync: nothing to do")
		r.line(t, "✔", "cloud-node-lifecycle: nothing to do: the Node is Ready")
		r.none(t, "‼", "to set")
	})

	t.Run("UninitializedAmbiguous", func(t *testing.T) {
		a, b := f.vm(t, "explain-twin"), f.vm(t, "explain-twin")
		addNode(t, testenv.KubeletNode("explain-twin"))
		r := f.explain(t, "explain-twin")
		if r.code != 1 {
			t.Errorf("exit status %d, want 1", r.code)
		}
		r.failure(t, "give the VMs distinct names", "ambiguous", "several VMs have the node's name")
		r.line(t, "·", "candidate: VM "+a)
		r.line(t, "·", "candidate: VM "+b)
		r.failure(t, "see VM above", "cloud-node: keeps the uninitialized taint and retries", "ambiguous by name")
		r.line(t, "·", "cloud-node-lifecycle: nothing until the Node has a providerID")
	})

	t.Run("KubeletWithoutCloudProvider", func(t *testing.T) {
		f.vm(t, "explain-noflag", "10.20.0.7")
		addNode(t, testenv.KubeletNode("explain-noflag", testenv.Initialized()))
		r := f.explain(t, "explain-noflag")
		r.failure(t, "restart its kubelet with --cloud-provider=external", "registered by a kubelet without --cloud-provider=external")
		r.line(t, "‼", "providerID to set")
	})

	t.Run("UninitializedResolvable", func(t *testing.T) {
		vm := f.vm(t, "explain-new", "10.20.0.9")
		addNode(t, testenv.KubeletNode("explain-new"))
		r := f.explain(t, "explain-new")
		r.line(t, "‼", "providerID to set: "+node.FormatProviderID(f.pool, vm))
		r.line(t, "‼", "label "+node.LabelInstanceType+"=2vCPU-1GB to set")
		r.line(t, "‼", "addresses to change from none to InternalIP 10.20.0.9")
		r.line(t, "‼", "cloud-node: initializes it")
	})

	t.Run("Shutdown", func(t *testing.T) {
		vm := f.initialized(t, "explain-halted")
		if err := f.Sim.SetPowerState(vm, xo.PowerStateHalted); err != nil {
			t.Fatal(err)
		}
		if err := testenv.SetReady(ctx, env.Client, "explain-halted", false); err != nil {
			t.Fatal(err)
		}
		r := f.explain(t, "explain-halted")
		r.line(t, "‼", "cloud-node-lifecycle: taints it "+node.TaintShutdown, "NotReady and its VM is Halted")
	})

	t.Run("DeletionPending", func(t *testing.T) {
		vm := f.initialized(t, "explain-gone")
		if err := testenv.SetReady(ctx, env.Client, "explain-gone", false); err != nil {
			t.Fatal(err)
		}
		if err := f.Sim.RemoveVM(vm); err != nil {
			t.Fatal(err)
		}
		r := f.explain(t, "explain-gone")
		r.line(t, "‼", "the VM named by the providerID is not in the inventory")
		r.line(t, "‼", "cloud-node-lifecycle: deletes the Node within", "inventory.settleTime (10m0s)")
	})

	t.Run("DeletionRefused", func(t *testing.T) {
		pool := f.AddPool(t, xosim.PoolSpec{NameLabel: "pool-b"})
		host := f.AddHost(t, xosim.HostSpec{PoolID: pool, NameLabel: "xcp-b"})
		vm := f.AddVM(t, xosim.VMSpec{PoolID: pool, HostID: host, NameLabel: "explain-lost", CPUs: 1, Memory: xosim.GiB, IPs: []string{"10.20.1.1"}})
		f.WaitInventory(t, "the VM listed", func(s *inventory.Snapshot) bool { return s.VM(vm) != nil && s.PoolConnected(pool) })
		addNode(t, testenv.KubeletNode("explain-lost"))
		testenv.Reconcile(ctx, t, f.cloudNode, "explain-lost")
		if node.HasTaint(env.Node(t, "explain-lost").Spec.Taints, node.TaintUninitialized, "") {
			t.Fatal("cloud-node did not initialize explain-lost")
		}
		if err := testenv.SetReady(ctx, env.Client, "explain-lost", false); err != nil {
			t.Fatal(err)
		}
		if err := f.Sim.DisconnectPool(pool); err != nil {
			t.Fatal(err)
		}
		r := f.explain(t, "explain-lost")
		msg, fix := r.line(t, "‼", "cloud-node-lifecycle: keeps the Node", "deletion refused (pool_disconnected)", pool)
		if msg != "" && fix == "" {
			t.Error("the refusal has no fix")
		}
		r.line(t, "✘", "the inventory is incomplete")
		r.line(t, "‼", "the VM named by the providerID is not in the inventory", "its pool is not connected")
	})
}
