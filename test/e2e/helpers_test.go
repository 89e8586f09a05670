package e2e_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/xosim"
)

// syncBuffer is a bytes.Buffer safe for concurrent writers (a process's stdout and stderr).
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// Bytes returns a copy of what was written.
func (b *syncBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

// Len returns how many bytes were written.
func (b *syncBuffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Len()
}

// tail returns the last n bytes written, for failure messages.
func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// loopback returns 127.0.0.1:port.
func loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// waitFor polls cond every 100ms until it holds, failing the test after timeout with the
// last error cond returned.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s: %v", timeout, what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

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

// startEnv starts etcd and kube-apiserver, stopped when the test ends.
func startEnv(t *testing.T, o testenv.Options) *testenv.Env {
	t.Helper()
	env, err := testenv.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop envtest: %v", err)
		}
	})
	return env
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
	sim    *xosim.Server
	srv    *httptest.Server
	token  string
	poolA  string
	poolB  string
	hostA1 string
	hostA2 string
	hostB1 string
}

// newXO starts the simulator over HTTPS (httptest's self-signed certificate, which only the
// test trusts) or plain HTTP.
func newXO(t *testing.T, token string, useTLS bool) *xoFixture {
	t.Helper()
	sim := xosim.New(xosim.Options{Tokens: []string{token}})
	f := &xoFixture{sim: sim, token: token}
	var err error
	if f.poolA, err = sim.AddPool(xosim.PoolSpec{NameLabel: "pool-a"}); err != nil {
		t.Fatal(err)
	}
	if f.poolB, err = sim.AddPool(xosim.PoolSpec{NameLabel: "pool-b"}); err != nil {
		t.Fatal(err)
	}
	for _, h := range []struct {
		id   *string
		pool string
		name string
	}{{&f.hostA1, f.poolA, "xcp-a-1"}, {&f.hostA2, f.poolA, "xcp-a-2"}, {&f.hostB1, f.poolB, "xcp-b-1"}} {
		if *h.id, err = sim.AddHost(xosim.HostSpec{PoolID: h.pool, NameLabel: h.name}); err != nil {
			t.Fatal(err)
		}
	}
	f.srv = httptest.NewUnstartedServer(sim)
	// Refused handshakes are what some tests are about: not news for the test log.
	f.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	if useTLS {
		f.srv.StartTLS()
	} else {
		f.srv.Start()
	}
	t.Cleanup(func() {
		sim.CloseEventStreams()
		f.srv.CloseClientConnections()
		f.srv.Close()
	})
	return f
}

// addVM adds a running VM on host in pool and returns its id.
func (f *xoFixture) addVM(t *testing.T, pool, host, name string, ips ...string) string {
	t.Helper()
	id, err := f.sim.AddVM(xosim.VMSpec{PoolID: pool, HostID: host, NameLabel: name, CPUs: 2, Memory: 2 * xosim.GiB, IPs: ips})
	if err != nil {
		t.Fatal(err)
	}
	return id
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

// caPEM returns the PEM of the simulator's TLS certificate (self-signed).
func (f *xoFixture) caPEM(t *testing.T) []byte {
	t.Helper()
	if f.srv.Certificate() == nil {
		t.Fatal("the simulator does not serve TLS")
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.srv.Certificate().Raw})
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

// getNode returns the Node or an error.
func getNode(c client.Client, name string) (*corev1.Node, error) {
	var n corev1.Node
	if err := c.Get(context.Background(), types.NamespacedName{Name: name}, &n); err != nil {
		return nil, err
	}
	return &n, nil
}

// initialized reports, as an error, what keeps a Node from being initialized by this
// controller: the uninitialized taint, or a missing providerID or zone label.
func initialized(c client.Client, name string) error {
	n, err := getNode(c, name)
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

// setReady plays the kubelet reporting the Ready condition.
func setReady(t *testing.T, c client.Client, name string, ready bool) {
	t.Helper()
	n, err := getNode(c, name)
	if err != nil {
		t.Fatal(err)
	}
	before := n.DeepCopy()
	testenv.WithReady(ready)(n)
	if err := c.Status().Patch(context.Background(), n, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
}

// --- certificates ----------------------------------------------------------------------------

// testCA issues serving certificates.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns the PEM certificate and key of a serving certificate for 127.0.0.1 and
// localhost, with a fresh key and the given serial.
func (ca *testCA) issue(t *testing.T, serial int64) (crt, key []byte) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "xenorchestra-cloud-controller-manager"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &k.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}

// certDir returns a new folder holding tls.crt and tls.key issued by ca.
func (ca *testCA) certDir(t *testing.T, serial int64) string {
	t.Helper()
	dir := t.TempDir()
	crt, key := ca.issue(t, serial)
	for name, b := range map[string][]byte{"tls.crt": crt, "tls.key": key} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// servedSerial returns the serial of the certificate the TLS server at addr presents,
// verified against roots.
func servedSerial(addr string, roots *x509.CertPool) (int64, error) {
	d := &net.Dialer{Timeout: 2 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12, ServerName: "127.0.0.1"})
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64(), nil
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
