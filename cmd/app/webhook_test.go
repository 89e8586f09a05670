package app_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/cmd/app"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/xosim"
)

const token = "app-test-token-0123456789abcdefghijklmnopqr"

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestWebhookWaitsForCertificate starts the controller with an empty certificate folder, as
// on a new cluster where cert-manager cannot run before the Nodes are initialized: the
// controllers must run (a Node is initialized without the webhook), the pod must be ready, and
// once the certificate appears the webhook must start and describe Nodes at CREATE.
func TestWebhookWaitsForCertificate(t *testing.T) {
	sim := xosim.New(xosim.Options{Tokens: []string{token}})
	pool, err := sim.AddPool(xosim.PoolSpec{NameLabel: "pool"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sim.AddHost(xosim.HostSpec{PoolID: pool, NameLabel: "host"}); err != nil {
		t.Fatal(err)
	}
	vm1, _ := sim.AddVM(xosim.VMSpec{PoolID: pool, NameLabel: "vm-1", CPUs: 2, Memory: xosim.GiB})
	vm2, _ := sim.AddVM(xosim.VMSpec{PoolID: pool, NameLabel: "vm-2", CPUs: 2, Memory: xosim.GiB})
	xoSrv := httptest.NewServer(sim)
	defer xoSrv.Close()
	defer sim.CloseEventStreams()

	env, err := testenv.Start(testenv.Options{Webhook: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()

	certDir := t.TempDir()
	probe := freeAddr(t)
	o := app.NewOptions()
	wo := env.WebhookInstallOptions
	o.WebhookHost, o.WebhookPort, o.WebhookCertDir = wo.LocalServingHost, wo.LocalServingPort, certDir
	o.LeaderElect, o.MetricsBindAddress, o.HealthProbeBindAddress = false, "0", probe
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- app.Run(ctx, o, env.Config, func(k string) string {
			return map[string]string{"XOA_URL": xoSrv.URL, "XOA_TOKEN": token}[k]
		})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	waitFor(t, "readiness without a certificate", func() bool {
		resp, err := http.Get("http://" + probe + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	c := env.Client
	n1 := testenv.KubeletNode("before-cert", testenv.WithSystemUUID(vm1))
	if err := c.Create(ctx, n1); err != nil {
		t.Fatal(err)
	}
	if n1.Spec.ProviderID != "" {
		t.Fatal("a Node was mutated at CREATE with no webhook certificate")
	}
	waitFor(t, "the Node initialized by the controller", func() bool {
		var n corev1.Node
		return c.Get(ctx, client.ObjectKeyFromObject(n1), &n) == nil &&
			!node.HasTaint(n.Spec.Taints, node.TaintUninitialized, "") && n.Spec.ProviderID != ""
	})

	// cert-manager delivers the certificate (envtest made one the API server trusts).
	for _, f := range []string{"tls.crt", "tls.key"} {
		b, err := os.ReadFile(filepath.Join(wo.LocalServingCertDir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(certDir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "a Node described at CREATE once the certificate is there", func() bool {
		n := testenv.KubeletNode("after-cert-"+time.Now().Format("150405.000000"), testenv.WithSystemUUID(vm2))
		if err := c.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
		return n.Spec.ProviderID == node.FormatProviderID(pool, vm2)
	})
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
