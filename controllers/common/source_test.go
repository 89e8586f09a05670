package common_test

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"
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
	const period = time.Minute
	clk := clocktesting.NewFakeClock(time.Now())
	err := common.SetupNodeController(mgr, common.NodeController{
		Name:      "resync-test",
		Wants:     func(n *corev1.Node) bool { return n.Name != "unwanted" },
		Predicate: predicate.Funcs{},
		Estate:    inventory.NewEstate(0),
		Resync:    period,
		Clock:     clk,
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
	lookCount := func(name string) int {
		mu.Lock()
		defer mu.Unlock()
		return looks[name]
	}

	// The CREATE event is one look; each further one comes from the resync source, once per
	// period (plus up to a tenth of it) of the fake clock, and only then.
	testenv.Eventually(t, 10*time.Second, "the look of the CREATE event", func() bool { return lookCount("wanted") == 1 })
	for want := 2; want <= 4; want++ {
		testenv.Eventually(t, 10*time.Second, "the resync timer", clk.HasWaiters)
		clk.Step(period - time.Second)
		if got := lookCount("wanted"); got != want-1 {
			t.Fatalf("%d looks before a period passed, want %d", got, want-1)
		}
		clk.Step(period/10 + time.Second)
		testenv.Eventually(t, 10*time.Second, "a look once the period passed", func() bool { return lookCount("wanted") == want })
	}
	if n := lookCount("unwanted"); n != 0 {
		t.Fatalf("%d looks at a Node the controller does not want", n)
	}
}
