package labelsync

import (
	"os"
	"testing"

	"k8s.io/utils/clock"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
)

// env is the package's API server, shared by every test (each test uses its own Node names).
var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, testenv.Options{}, &env)) }

// testToken is the simulator's token.
const testToken = "labelsync-test-token"

// fixture is one test's XO (testenv.Fixture: a simulator with a pool of two hosts, a real
// client and inventory) and the controller built on it.
type fixture struct {
	*testenv.Fixture
	opts Options
	r    *Reconciler
}

// newFixture builds the fixture; o configures the simulator, its client and inventory.
func newFixture(t *testing.T, o testenv.FixtureOptions) *fixture {
	t.Helper()
	o.Token = testToken
	f := &fixture{Fixture: testenv.NewFixture(t, env, o)}
	f.opts = Options{
		Workers: 4,
		Labels: node.LabelOptions{
			TagLabelPrefixes: []string{"example.com/", "team"},
			TagTaintPrefixes: []string{"example.com/"},
		},
	}
	f.r = New(env.Client, f.Estate, f.Rec, clock.RealClock{}, f.opts)
	return f
}

// setLabelOptions rebuilds the controller with other label options, as a restart with
// another configuration would.
func (f *fixture) setLabelOptions(o node.LabelOptions) {
	f.opts.Labels = o
	f.r = New(env.Client, f.Estate, f.Rec, clock.RealClock{}, f.opts)
}

// reconcile runs one Reconcile of the Node.
func (f *fixture) reconcile(name string) ctrl.Result {
	f.T.Helper()
	return testenv.Reconcile(f.Ctx, f.T, f.r, name)
}

// labels returns the stored Node's labels.
func (f *fixture) labels(name string) map[string]string {
	f.T.Helper()
	return f.Get(name).Labels
}
