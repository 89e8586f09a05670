package e2e_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/xosim"
)

// tail returns the last n bytes written, for failure messages.
func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// loopback returns 127.0.0.1:port.
func loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// newToken returns a random XO token, long enough that any half of it found in an output is a
// leak and not a coincidence.
func newToken(t *testing.T) string {
	t.Helper()
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "e2eTok" + hex.EncodeToString(b)
}

// writeKubeconfig writes env's kubeconfig to a file for the binary's --kubeconfig.
func writeKubeconfig(t *testing.T, env *testenv.Env) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, env.KubeConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// ensureNamespace creates a namespace unless it exists.
func ensureNamespace(t *testing.T, c client.Client, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// --- XO simulator ----------------------------------------------------------------------------

// xoFixture is a simulated XO with two pools: pool A (two hosts) and pool B (one host).
type xoFixture struct {
	*testenv.XO
	sim    *xosim.Server
	poolA  string
	poolB  string
	hostA1 string
	hostA2 string
	hostB1 string
}

// newXO starts the simulator over HTTPS (with a certificate only the test trusts) or plain
// HTTP.
func newXO(t *testing.T, token string, useTLS bool) *xoFixture {
	t.Helper()
	x := testenv.NewXO(t, testenv.XOOptions{Token: token, TLS: useTLS})
	f := &xoFixture{XO: x, sim: x.Sim}
	f.poolA = x.AddPool(t, xosim.PoolSpec{NameLabel: "pool-a"})
	f.poolB = x.AddPool(t, xosim.PoolSpec{NameLabel: "pool-b"})
	f.hostA1 = x.AddHost(t, xosim.HostSpec{PoolID: f.poolA, NameLabel: "xcp-a-1"})
	f.hostA2 = x.AddHost(t, xosim.HostSpec{PoolID: f.poolA, NameLabel: "xcp-a-2"})
	f.hostB1 = x.AddHost(t, xosim.HostSpec{PoolID: f.poolB, NameLabel: "xcp-b-1"})
	return f
}

// addVM adds a running VM on host in pool and returns its id.
func (f *xoFixture) addVM(t *testing.T, pool, host, name string, ips ...string) string {
	t.Helper()
	return f.AddVM(t, xosim.VMSpec{PoolID: pool, HostID: host, NameLabel: name, CPUs: 2, Memory: 2 * xosim.GiB, IPs: ips})
}

// systemUUID is what the VM's guest reports as status.nodeInfo.systemUUID.
func (f *xoFixture) systemUUID(t *testing.T, vm string) string {
	t.Helper()
	u, ok := f.sim.GuestSystemUUID(vm)
	if !ok {
		t.Fatalf("no VM %s", vm)
	}
	return u
}

// caPEM returns the PEM of the CA that issued the simulator's TLS certificate.
func (f *xoFixture) caPEM(t *testing.T) []byte {
	t.Helper()
	if f.CA == nil {
		t.Fatal("the simulator does not serve TLS")
	}
	return f.CA.PEM
}

// totalRequests sums the simulator's request counters.
func (f *xoFixture) totalRequests() int64 {
	var n int64
	for _, c := range f.sim.RequestCounts() {
		n += c
	}
	return n
}

// --- Nodes -----------------------------------------------------------------------------------

// initialized reports, as an error, what keeps a Node from being initialized by this
// controller: the uninitialized taint, or a missing providerID or zone label.
func initialized(c client.Client, name string) error {
	n, err := testenv.GetNode(context.Background(), c, name)
	if err != nil {
		return err
	}
	switch {
	case node.HasTaint(n.Spec.Taints, node.TaintUninitialized, ""):
		return fmt.Errorf("node %s still has the %s taint", name, node.TaintUninitialized)
	case n.Spec.ProviderID == "":
		return fmt.Errorf("node %s has no providerID", name)
	case n.Labels[node.LabelZone] == "":
		return fmt.Errorf("node %s has no %s label", name, node.LabelZone)
	}
	return nil
}

// httpGet returns the status and body of a GET, or an error.
func httpGet(url string) (int, []byte, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url) //nolint:gosec // loopback test endpoints
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	return resp.StatusCode, b, err
}

// metricSum sums the samples of the metric name whose label set contains every one of labels
// (each written `key="value"`) in a Prometheus text exposition.
func metricSum(text []byte, name string, labels ...string) float64 {
	var sum float64
	for _, line := range strings.Split(string(text), "\n") {
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		var lbls string
		switch {
		case strings.HasPrefix(rest, "{"):
			end := strings.Index(rest, "}")
			if end < 0 {
				continue
			}
			lbls, rest = rest[1:end], rest[end+1:]
		case strings.HasPrefix(rest, " "):
		default:
			continue // another metric sharing the prefix
		}
		ok := true
		for _, l := range labels {
			if !strings.Contains(lbls, l) {
				ok = false
			}
		}
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		if v, err := strconv.ParseFloat(fields[0], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// errNotYet is a generic "condition not met yet" for waitFor.
var errNotYet = errors.New("not yet")
