// Package estatetest tests the three Node controllers together on real XO estates: several XO
// servers in one Estate (one down, hung or refusing the token; the same pool behind two),
// a pool reconnecting in stages, and Nodes the controllers must leave alone.
package estatetest

import (
	"context"
	"os"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/controllers/cloudnode"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/controllers/common"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/controllers/labelsync"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/controllers/lifecycle"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/inventory"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
)

// env is the package's API server, shared by every test (each test uses its own Node names).
var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, testenv.Options{}, &env)) }

// tagPrefixes are the tag label and taint prefixes the controllers accept in these tests.
var tagPrefixes = node.LabelOptions{TagLabelPrefixes: []string{"example.com/"}, TagTaintPrefixes: []string{"example.com/"}}

// controllers are the three Node controllers on one Estate.
type controllers struct {
	cloudNode *cloudnode.Reconciler
	lifecycle *lifecycle.Reconciler
	labelSync *labelsync.Reconciler
}

// newControllers builds the three controllers calling the API server through c.
func newControllers(c client.Client, estate *inventory.Estate, rec events.EventRecorder, clk clock.PassiveClock, labels node.LabelOptions, ignore node.Ignorer) controllers {
	return controllers{
		cloudNode: cloudnode.New(c, estate, rec, clk, cloudnode.Options{Labels: labels, Ignore: ignore, Workers: 4}),
		lifecycle: lifecycle.New(c, estate, rec, clk, lifecycle.Options{OutOfServiceTaint: true, Ignore: ignore, Workers: 4}),
		labelSync: labelsync.New(c, estate, rec, clk, labelsync.Options{Labels: labels, Ignore: ignore, Workers: 4}),
	}
}

// setup registers the Node indexes and the three controllers on mgr.
func (cs controllers) setup(ctx context.Context, t *testing.T, mgr ctrl.Manager) {
	t.Helper()
	if err := common.SetupIndexes(ctx, mgr); err != nil {
		t.Fatal(err)
	}
	for _, r := range []interface{ SetupWithManager(ctrl.Manager) error }{cs.cloudNode, cs.lifecycle, cs.labelSync} {
		if err := r.SetupWithManager(mgr); err != nil {
			t.Fatal(err)
		}
	}
}

// reconcile runs cloud-node, then lifecycle, then label-sync once on each Node still there,
// as the manager would on a change of each.
func (cs controllers) reconcile(ctx context.Context, t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		if !env.NodeExists(t, n) {
			continue
		}
		testenv.Reconcile(ctx, t, cs.cloudNode, n)
		testenv.Reconcile(ctx, t, cs.lifecycle, n)
		testenv.Reconcile(ctx, t, cs.labelSync, n)
	}
}

// nodeState is what the controllers may change on a Node.
type nodeState struct {
	rv         string
	providerID string
	labels     map[string]string
	taints     []corev1.Taint
	addresses  []corev1.NodeAddress
}

func stateOf(n *corev1.Node) nodeState {
	return nodeState{n.ResourceVersion, n.Spec.ProviderID, n.Labels, n.Spec.Taints, n.Status.Addresses}
}

// unchanged fails the test unless the Node is still there as it was.
func unchanged(t *testing.T, why string, before nodeState, name string) {
	t.Helper()
	if !env.NodeExists(t, name) {
		t.Fatalf("%s: Node %s deleted", why, name)
	}
	after := stateOf(env.Node(t, name))
	if after.rv == before.rv {
		return
	}
	t.Errorf("%s: Node %s written:\n providerID %q → %q\n labels %v\n     → %v\n taints %v → %v\n addresses %v → %v", why, name,
		before.providerID, after.providerID, before.labels, after.labels, before.taints, after.taints, before.addresses, after.addresses)
}

// wantLabels fails the test unless every given label has the given value ("" = absent).
func wantLabels(t *testing.T, name string, want map[string]string) {
	t.Helper()
	got := env.Node(t, name).Labels
	for k, v := range want {
		g, ok := got[k]
		switch {
		case v == "" && ok:
			t.Errorf("Node %s: label %s = %q, want absent", name, k, g)
		case v != "" && g != v:
			t.Errorf("Node %s: label %s = %q, want %q", name, k, g, v)
		}
	}
}

// initialized reports whether the Node lost the uninitialized taint.
func initialized(t *testing.T, name string) bool {
	t.Helper()
	return !node.HasTaint(env.Node(t, name).Spec.Taints, node.TaintUninitialized, "")
}

// hasTaint reports whether the stored Node has a taint with this key.
func hasTaint(t *testing.T, name, key string) bool {
	t.Helper()
	return slices.ContainsFunc(env.Node(t, name).Spec.Taints, func(tt corev1.Taint) bool { return tt.Key == key })
}
