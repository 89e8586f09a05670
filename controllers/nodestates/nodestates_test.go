package nodestates

import (
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/inventory"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/xosim"
)

// TestStates counts Nodes of every state on a real API server against a real inventory of the
// XO simulator: one of each state, a Node of another provider and an ignored Node not counted.
// It checks State (and Classify beneath it) one Node at a time, then the collector's count over
// the API server's Nodes.
func TestStates(t *testing.T) {
	x := testenv.NewXO(t, testenv.XOOptions{})
	pool := x.AddPool(t, xosim.PoolSpec{NameLabel: "pool"})
	host := x.AddHost(t, xosim.HostSpec{PoolID: pool, NameLabel: "host"})
	vm := func(name string) string {
		return x.AddVM(t, xosim.VMSpec{PoolID: pool, HostID: host, NameLabel: name, CPUs: 2, Memory: xosim.GiB})
	}
	running, halted, fresh := vm("running"), vm("halted"), vm("fresh")
	if err := x.Sim.SetPowerState(halted, "Halted"); err != nil {
		t.Fatal(err)
	}
	x.StartInventory(t, inventory.Options{})
	estate := testenv.Estate(x)
	const gone = "0f0e0d0c-0b0a-4908-8706-050403020100" // no such VM in XO
	taint := func(key string) testenv.NodeOption {
		return testenv.WithTaints(corev1.Taint{Key: key, Effect: corev1.TaintEffectNoSchedule})
	}
	ignore, err := node.NewIgnorer("example.com/not-xo")
	if err != nil {
		t.Fatal(err)
	}

	ignored := testenv.WithLabels(map[string]string{"example.com/not-xo": "true"})
	cases := []struct {
		name    string
		opts    []testenv.NodeOption
		class   Class
		want    string
		managed bool
	}{
		// A kubelet without --cloud-provider=external: no providerID, no uninitialized taint,
		// although its VM resolves by system UUID: never initialized, so never "initialized".
		{"no-cloud-provider", []testenv.NodeOption{testenv.WithSystemUUID(running), testenv.Initialized()}, ClassNoCloudProvider, StateNoCloudProvider, true},
		{"uninitialized", []testenv.NodeOption{testenv.WithSystemUUID(fresh)}, ClassUninitialized, StateUninitialized, true},
		{"vm-not-resolved", []testenv.NodeOption{testenv.WithSystemUUID(gone)}, ClassUninitialized, StateVMNotResolved, true},
		{"uninitialized-gone", []testenv.NodeOption{testenv.WithProviderID(node.FormatProviderID(pool, gone))}, ClassUninitialized, StateVMNotResolved, true},
		{"initialized", []testenv.NodeOption{testenv.WithProviderID(node.FormatProviderID(pool, running)), testenv.Initialized()}, ClassInitialized, StateInitialized, true},
		{"shutdown", []testenv.NodeOption{testenv.WithProviderID(node.FormatProviderID(pool, halted)), testenv.Initialized(), testenv.WithReady(false), taint(node.TaintShutdown)}, ClassInitialized, StateShutdown, true},
		{"deletion-pending", []testenv.NodeOption{testenv.WithProviderID(node.FormatProviderID(pool, gone)), testenv.Initialized(), testenv.WithReady(false)}, ClassInitialized, StateDeletionPending, true},
		// Ready: the lifecycle controller deletes no Ready Node.
		{"ready-vm-missing", []testenv.NodeOption{testenv.WithProviderID(node.FormatProviderID(pool, gone)), testenv.Initialized()}, ClassInitialized, StateInitialized, true},
		// A malformed providerID: the lifecycle controller leaves the Node alone (Decide fails).
		{"malformed-not-ready", []testenv.NodeOption{testenv.WithProviderID("xenorchestra://not-a-pool/" + gone), testenv.Initialized(), testenv.WithReady(false)}, ClassInitialized, StateInitialized, true},
		{"foreign", []testenv.NodeOption{testenv.WithProviderID("aws:///eu-west-1a/i-0123456789abcdef0"), testenv.Initialized()}, ClassForeign, "", false},
		// Ignored whatever else it is: a kubelet without the flag, here.
		{"ignored", []testenv.NodeOption{ignored, testenv.Initialized()}, ClassIgnored, "", false},
	}
	env := testenv.StartTest(t, testenv.Options{})
	want := map[string]int{}
	for _, tc := range cases {
		n := testenv.KubeletNode(tc.name, tc.opts...)
		if got := Classify(n, ignore); got != tc.class {
			t.Errorf("%s: Classify = %d, want %d", tc.name, got, tc.class)
		}
		got, managed := State(n, ignore, estate.View())
		if got != tc.want || managed != tc.managed {
			t.Errorf("%s: State = %q, %v; want %q, %v", tc.name, got, managed, tc.want, tc.managed)
		}
		env.AddNode(t, n)
		if managed {
			want[got]++
		}
	}
	env.AddNode(t, testenv.KubeletNode("ignored-tainted", ignored))

	c := &counter{nodes: env.Client, estate: estate, ignore: ignore}
	got, err := c.count()
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, want) {
		t.Errorf("count = %v, want %v", got, want)
	}
	for _, s := range States {
		if want[s] == 0 {
			t.Errorf("no case of state %s", s)
		}
	}

	// The collector exports nothing unless this process leads, then every state.
	if n := testutil.CollectAndCount(collector{}); n != 0 {
		t.Errorf("%d samples while not leading", n)
	}
	leading.Store(c)
	defer leading.Store(nil)
	var exposition strings.Builder
	exposition.WriteString("# HELP xenorchestra_nodes Nodes this controller is responsible for (not ignored, no other provider's providerID), by state (no_cloud_provider, vm_not_resolved, uninitialized, deletion_pending, shutdown, initialized); exported by the leader only.\n# TYPE xenorchestra_nodes gauge\n")
	for _, s := range States {
		fmt.Fprintf(&exposition, "xenorchestra_nodes{state=%q} %d\n", s, want[s])
	}
	if err := testutil.CollectAndCompare(collector{}, strings.NewReader(exposition.String())); err != nil {
		t.Error(err)
	}
}
