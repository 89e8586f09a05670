package diagnose

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/xosim"
)

// env is the API server every test of this package shares (a real kube-apiserver and etcd).
// The tests run one at a time and remove the cluster-scoped objects they make.
var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, testenv.Options{}, &env)) }

// kubeconfig writes the shared API server's kubeconfig (a client certificate of
// system:masters) for --kubeconfig.
func kubeconfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, env.KubeConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// result is what a subcommand printed and its exit status.
type result struct {
	out, errOut string
	code        int
}

// run runs the command's Main with args (the subcommand first) and the given environment, as
// a user's shell would, with text output.
func run(t *testing.T, environ map[string]string, args ...string) result {
	t.Helper()
	return runWithStdin(t, "", environ, args...)
}

// runWithStdin is run with stdin as the standard input.
func runWithStdin(t *testing.T, stdin string, environ map[string]string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Main(context.Background(), args, strings.NewReader(stdin), &out, &errOut, false, func(k string) string { return environ[k] })
	t.Logf("%s → exit %d\n%s%s", strings.Join(args, " "), code, out.String(), errOut.String())
	return result{out: out.String(), errOut: errOut.String(), code: code}
}

// line finds the output line of a check with this mark holding every one of parts, and
// returns it with the fix printed under it ("" when none).
func (r result) line(t *testing.T, mark string, parts ...string) (msg, fix string) {
	t.Helper()
	lines := strings.Split(r.out, "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, "  "+mark+" ") {
			continue
		}
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(l, p)
		}
		if !ok {
			continue
		}
		if i+1 < len(lines) && strings.HasPrefix(lines[i+1], "      fix: ") {
			fix = strings.TrimPrefix(lines[i+1], "      fix: ")
		}
		return l, fix
	}
	t.Errorf("no line %q with %q in the output", mark, parts)
	return "", ""
}

// failure asserts a ✘ line holding parts, with a fix holding fixPart.
func (r result) failure(t *testing.T, fixPart string, parts ...string) {
	t.Helper()
	if _, fix := r.line(t, "✘", parts...); !strings.Contains(fix, fixPart) {
		t.Errorf("the failure %q has the fix %q, want one with %q", parts, fix, fixPart)
	}
}

// none asserts that no line with this mark holds every one of parts.
func (r result) none(t *testing.T, mark string, parts ...string) {
	t.Helper()
	for _, l := range strings.Split(r.out, "\n") {
		if !strings.HasPrefix(l, "  "+mark+" ") {
			continue
		}
		all := true
		for _, p := range parts {
			all = all && strings.Contains(l, p)
		}
		if all {
			t.Errorf("unexpected line %q", l)
		}
	}
}

// estate is a simulated XO server with one pool of two hosts.
type estate struct {
	*testenv.XO
	pool, host1, host2 string
}

func newEstate(t *testing.T, o testenv.XOOptions) *estate {
	t.Helper()
	x := testenv.NewXO(t, o)
	e := &estate{XO: x}
	e.pool = x.AddPool(t, xosim.PoolSpec{NameLabel: "pool-a"})
	e.host1 = x.AddHost(t, xosim.HostSpec{PoolID: e.pool, NameLabel: "xcp-1"})
	e.host2 = x.AddHost(t, xosim.HostSpec{PoolID: e.pool, NameLabel: "xcp-2"})
	return e
}

// vm adds a running VM and returns its uuid.
func (e *estate) vm(t *testing.T, name string, ips ...string) string {
	t.Helper()
	return e.AddVM(t, xosim.VMSpec{PoolID: e.pool, HostID: e.host1, NameLabel: name, CPUs: 2, Memory: xosim.GiB, IPs: ips})
}

// config writes the controller's config file for the simulator, with extra YAML appended.
func (e *estate) config(t *testing.T, token, extra string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	body := fmt.Sprintf("url: %s\ntoken: %s\n%s", e.URL, token, extra)
	if e.CA != nil {
		ca := filepath.Join(t.TempDir(), "xo-ca.pem")
		if err := os.WriteFile(ca, e.CA.PEM, 0o600); err != nil {
			t.Fatal(err)
		}
		body += "caFile: " + ca + "\n"
	}
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// addNode creates a Node and deletes it when the test ends.
func addNode(t *testing.T, n *corev1.Node) { t.Helper(); env.AddNode(t, n) }

// create creates an object and deletes it when the test ends.
func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := env.Client.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Client.Delete(context.Background(), obj); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete %T %s: %v", obj, obj.GetName(), err)
		}
	})
}

// namespace creates a namespace for one test.
func namespace(t *testing.T, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := env.Client.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return name
}
