package e2e_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/cmd/app"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/webhook"
)

// controllerNames are the controller-runtime controller names, as metrics label them.
var controllerNames = app.AllControllers

// leaseDuration is controller-runtime's default LeaseDuration, which the binary keeps (it has
// no flag for it).
const leaseDuration = 15 * time.Second

// TestLeaderElection runs two controller processes (the real binary, leader election on in
// kube-system) against one API server. Only the Lease holder reconciles: its metrics count
// reconciles and show it master, the other's count none, and a new Node is initialized. Both
// serve the webhook (each on its own port; the API server calls the first). When the leader
// stops (SIGTERM cancels its context; it releases the Lease on cancel), the other takes the
// Lease well within the lease duration and initializes the next Node.
//
// Processes rather than two app.Run calls in one test process: controller-runtime refuses two
// controllers of the same name in one process, and metrics live in one global registry, so
// "only one counts reconciles" could not be told apart in process.
func TestLeaderElection(t *testing.T) {
	env := testenv.StartTest(t, testenv.Options{Webhook: true})
	ensureNamespace(t, env.Client, "kube-system")
	kubeconfig := writeKubeconfig(t, env)
	dir := t.TempDir()
	token := newToken(t)
	xo := newXO(t, token, true)
	vm1 := xo.addVM(t, xo.poolA, xo.hostA1, "le-vm-1", "10.0.0.1")
	vm2 := xo.addVM(t, xo.poolA, xo.hostA2, "le-vm-2", "10.0.0.2")
	vm3 := xo.addVM(t, xo.poolB, xo.hostB1, "le-vm-3", "10.0.0.3")
	writeConfig(t, dir, "xo-ca.pem", string(xo.caPEM(t)))
	cfg := writeConfig(t, dir, "config.yaml", fmt.Sprintf("url: %s\ntoken: %s\ncaFile: %s\ninventory: {settleTime: 1s}\n", xo.URL, token, filepath.Join(dir, "xo-ca.pem")))

	wo := env.WebhookInstallOptions
	webhookRoots := x509.NewCertPool()
	if !webhookRoots.AppendCertsFromPEM(wo.LocalServingCAData) {
		t.Fatal("envtest's webhook CA does not parse")
	}
	a := startCCM(t, "manager-a", ccmArgs{kubeconfig: kubeconfig, config: cfg, leaderElect: true,
		webhookPort: wo.LocalServingPort, certDir: wo.LocalServingCertDir})
	testenv.WaitFor(t, 30*time.Second, "manager-a leading", func() error { return isLeader(a, true) })
	a.waitReady(t, 30*time.Second)
	b := startCCM(t, "manager-b", ccmArgs{kubeconfig: kubeconfig, config: cfg, leaderElect: true,
		webhookPort: testenv.FreePort(t), certDir: wo.LocalServingCertDir})
	b.waitReady(t, 30*time.Second)
	firstHolder := leaseHolder(t, env)
	if firstHolder == "" {
		t.Fatal("the Lease has no holder while manager-a leads")
	}

	// Both serve the webhook from their own inventory.
	for _, p := range []*ccmProcess{a, b} {
		review := admissionReview(t, testenv.KubeletNode("probe", testenv.WithSystemUUID(xo.systemUUID(t, vm3))))
		if err := mutates(p.webhook, webhookRoots, review); err != nil {
			t.Errorf("%s webhook: %v", p.name, err)
		}
	}

	c := env.Client
	ctx := context.Background()
	if err := c.Create(ctx, testenv.KubeletNode("le-node-1", testenv.WithSystemUUID(xo.systemUUID(t, vm1)))); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 30*time.Second, "le-node-1 initialized", func() error { return initialized(c, "le-node-1") })
	if n := reconciles(t, a); n == 0 {
		t.Errorf("the leader manager-a counts no reconcile")
	}
	if n := reconciles(t, b); n != 0 {
		t.Errorf("manager-b, not leading, counts %v reconciles; want 0", n)
	}
	if err := isLeader(b, false); err != nil {
		t.Error(err)
	}

	stopped := time.Now()
	if code := a.stop(t); code != 0 {
		t.Errorf("manager-a exited with code %d after SIGTERM; want 0", code)
	}
	testenv.WaitFor(t, leaseDuration, "manager-b taking the Lease over", func() error {
		if err := isLeader(b, true); err != nil {
			return err
		}
		if h := leaseHolder(t, env); h == "" || h == firstHolder {
			return fmt.Errorf("Lease holder %q", h)
		}
		return nil
	})
	t.Logf("manager-b took over %s after manager-a was stopped", time.Since(stopped).Round(time.Millisecond))

	// The registered webhook (manager-a's port) is gone: failurePolicy Ignore admits the Node
	// as the kubelet sent it, and the new leader's controller initializes it.
	n2 := testenv.KubeletNode("le-node-2", testenv.WithSystemUUID(xo.systemUUID(t, vm2)))
	if err := c.Create(ctx, n2); err != nil {
		t.Fatal(err)
	}
	if n2.Spec.ProviderID != "" {
		t.Errorf("le-node-2 was mutated by a webhook that should be gone (providerID %q)", n2.Spec.ProviderID)
	}
	testenv.WaitFor(t, 30*time.Second, "le-node-2 initialized by manager-b", func() error { return initialized(c, "le-node-2") })
	if n := reconciles(t, b); n == 0 {
		t.Errorf("the new leader manager-b counts no reconcile")
	}
	if code := b.stop(t); code != 0 {
		t.Errorf("manager-b exited with code %d after SIGTERM; want 0", code)
	}
}

// isLeader checks the process's leader_election_master_status gauge against want (absent
// counts as not leading).
func isLeader(p *ccmProcess, want bool) error {
	status, body, err := p.get("metrics", "/metrics")
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return fmt.Errorf("%s /metrics: status %d", p.name, status)
	}
	got := metricSum(body, "leader_election_master_status", `name="`+app.LeaseName+`"`) == 1
	if got != want {
		return fmt.Errorf("%s leading: %v, want %v", p.name, got, want)
	}
	return nil
}

// reconciles returns how many reconciles the process's node controllers counted.
func reconciles(t *testing.T, p *ccmProcess) float64 {
	t.Helper()
	status, body, err := p.get("metrics", "/metrics")
	if err != nil || status != http.StatusOK {
		t.Fatalf("%s /metrics: %d %v", p.name, status, err)
	}
	var n float64
	for _, c := range controllerNames {
		n += metricSum(body, "controller_runtime_reconcile_total", `controller="`+c+`"`)
	}
	return n
}

// leaseHolder returns the holder identity of the leader-election Lease, "" when none.
func leaseHolder(t *testing.T, env *testenv.Env) string {
	t.Helper()
	var l coordinationv1.Lease
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: "kube-system", Name: app.LeaseName}, &l); err != nil {
		t.Fatal(err)
	}
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// mutates posts review to the webhook at addr over TLS and checks the answer allows the Node
// with a patch that sets spec.providerID.
func mutates(addr string, roots *x509.CertPool, review []byte) error {
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}
	resp, err := hc.Post("https://"+addr+webhook.Path, "application/json", bytes.NewReader(review))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var got admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		return fmt.Errorf("status %d: %w", resp.StatusCode, err)
	}
	if got.Response == nil || !got.Response.Allowed {
		return fmt.Errorf("not allowed: %+v", got.Response)
	}
	if !bytes.Contains(got.Response.Patch, []byte("/spec/providerID")) {
		return fmt.Errorf("the patch does not set spec.providerID: %s", got.Response.Patch)
	}
	return nil
}
