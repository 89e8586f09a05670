package common_test

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/controllers/common"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/inventory"
)

// TestResyncSourceLooksAgain: with a resync period, a controller looks at every Node it wants
// again, without any event and without its reconciler asking for a requeue, and never at the
// Nodes it does not want.
func TestResyncSourceLooksAgain(t *testing.T) {
	env := testenv.StartTest(t, testenv.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	mgr := testenv.NewManager(t, env.Config)

	var mu sync.Mutex
	looks := map[string]int{}
	r := reconcile.Func(func(_ context.Context, req ctrl.Request) (ctrl.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		looks[req.Name]++
		return ctrl.Result{}, nil
	})
	const period = 200 * time.Millisecond
	err := common.SetupNodeController(mgr, common.NodeController{
		Name:      "resync-test",
		Wants:     func(n *corev1.Node) bool { return n.Name != "unwanted" },
		Predicate: predicate.Funcs{},
		Estate:    inventory.NewEstate(0),
		Resync:    period,
	}, r)
	if err != nil {
		t.Fatal(err)
	}
	testenv.RunManager(ctx, t, mgr)
	for _, name := range []string{"wanted", "unwanted"} {
		if err := env.Client.Create(ctx, testenv.KubeletNode(name)); err != nil {
			t.Fatal(err)
		}
	}

	// The CREATE event is one look; every further one comes from the resync source.
	deadline := time.Now().Add(30 * period)
	for {
		mu.Lock()
		wanted, unwanted := looks["wanted"], looks["unwanted"]
		mu.Unlock()
		if unwanted != 0 {
			t.Fatalf("%d looks at a Node the controller does not want", unwanted)
		}
		if wanted >= 4 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d looks at the wanted Node in %s with a %s resync period, want at least 4", wanted, 30*period, period)
		}
		time.Sleep(period / 4)
	}
}
