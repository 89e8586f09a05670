package app_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
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

// TestWebhookWaitsForCertificate starts the controller with an empty certificate folder, as
// on a new cluster where cert-manager cannot run before the Nodes are initialized: the
// controllers must run (a Node is initialized without the webhook), the pod must not be Ready
// (the Service would route admissions to a replica that cannot serve them) and must say what
// it waits for, and once the certificate appears the webhook must start, the pod become
// Ready and Nodes be described at CREATE.
func TestWebhookWaitsForCertificate(t *testing.T) {
	t.Parallel()
	x := testenv.NewXO(t, testenv.XOOptions{Token: token})
	pool := x.AddPool(t, xosim.PoolSpec{NameLabel: "pool"})
	x.AddHost(t, xosim.HostSpec{PoolID: pool, NameLabel: "host"})
	vm1 := x.AddVM(t, xosim.VMSpec{PoolID: pool, NameLabel: "vm-1", CPUs: 2, Memory: xosim.GiB, IPs: []string{"10.0.0.1"}})
	vm2 := x.AddVM(t, xosim.VMSpec{PoolID: pool, NameLabel: "vm-2", CPUs: 2, Memory: xosim.GiB, IPs: []string{"10.0.0.2"}})

	env := testenv.StartTest(t, testenv.Options{Webhook: true})

	certDir := t.TempDir()
	probe := testenv.FreeAddr(t)
	o := app.NewOptions()
	wo := env.WebhookInstallOptions
	o.WebhookHost, o.WebhookPort, o.WebhookCertDir = wo.LocalServingHost, wo.LocalServingPort, certDir
	o.LeaderElect, o.MetricsBindAddress, o.HealthProbeBindAddress = false, "0", probe
	o.ShutdownDelay = 0 // the test's end stops it at once
	runApp(t, o, env, x.URL)
	// Everything else ready, the webhook check says what is missing.
	testenv.WaitFor(t, 30*time.Second, "the XO inventory ready", func() error {
		if code, body, err := probeStatus(probe, "/readyz/xo-inventory"); err != nil || code != http.StatusOK {
			return fmt.Errorf("/readyz/xo-inventory: %d %q %v", code, body, err)
		}
		return nil
	})
	want := "waiting for the serving certificate: no tls.crt/tls.key in " + certDir
	for _, path := range []string{"/readyz", "/readyz/webhook"} {
		code, body, err := probeStatus(probe, path)
		if err != nil || code != http.StatusInternalServerError || path == "/readyz/webhook" && !strings.Contains(body, want) {
			t.Fatalf("%s without a certificate: %d %q %v; want 500 saying %q", path, code, body, err, want)
		}
	}
	ctx := context.Background()
	c := env.Client
	n1 := testenv.KubeletNode("before-cert", testenv.WithSystemUUID(vm1))
	if err := c.Create(ctx, n1); err != nil {
		t.Fatal(err)
	}
	if n1.Spec.ProviderID != "" {
		t.Fatal("a Node was mutated at CREATE with no webhook certificate")
	}
	// The webhook's call skipped (failurePolicy Ignore): the taint stays and cloud-node lifts it.
	if !node.HasTaint(n1.Spec.Taints, node.TaintUninitialized, "") {
		t.Fatal("the uninitialized taint lifted at CREATE with no webhook certificate")
	}
	testenv.Eventually(t, 30*time.Second, "the Node initialized by the controller", func() bool {
		var n corev1.Node
		return c.Get(ctx, client.ObjectKeyFromObject(n1), &n) == nil &&
			!node.HasTaint(n.Spec.Taints, node.TaintUninitialized, "") && n.Spec.ProviderID != "" &&
			n.Annotations[node.AnnotationInitializedBy] == node.InitializedByController
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
	waitReady(t, probe, "ready once the certificate is there")
	// Every try creates a Node: 100 ms apart, not Eventually's 10 ms.
	testenv.WaitFor(t, 30*time.Second, "a Node described at CREATE once the certificate is there", func() error {
		n := testenv.KubeletNode("after-cert-"+time.Now().Format("150405.000000"), testenv.WithSystemUUID(vm2))
		if err := c.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
		if want := node.FormatProviderID(pool, vm2); n.Spec.ProviderID != want {
			return fmt.Errorf("providerID %q, want %q", n.Spec.ProviderID, want)
		}
		// Described completely (the VM has an address): born complete.
		if node.HasTaint(n.Spec.Taints, node.TaintUninitialized, "") || n.Annotations[node.AnnotationInitializedBy] != node.InitializedByWebhook {
			t.Fatalf("a Node described completely at CREATE kept its taint: %v %v", n.Spec.Taints, n.Annotations)
		}
		return nil
	})
}
