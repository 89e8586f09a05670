package app_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/utils/ptr"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/cmd/app"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/webhook"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/xosim"
)

// TestSelfManagedCertificates runs two replicas with --webhook-certs=self-managed on an API
// server with no cert-manager: the first CA is created, injected into the caBundle, and a Node
// is described at CREATE; both replicas serve a certificate of that CA; the serving certificate
// is renewed several times while Nodes are created without one failed admission; and when the
// CA Secret is deleted, a new CA is made and injected, and admission works again.
func TestSelfManagedCertificates(t *testing.T) {
	t.Parallel()
	x := testenv.NewXO(t, testenv.XOOptions{Token: token})
	pool := x.AddPool(t, xosim.PoolSpec{NameLabel: "pool"})
	x.AddHost(t, xosim.HostSpec{PoolID: pool, NameLabel: "host"})
	vm := x.AddVM(t, xosim.VMSpec{PoolID: pool, NameLabel: "vm", CPUs: 2, Memory: xosim.GiB})

	env := testenv.StartTest(t, testenv.Options{}) // no webhook of envtest's, no cert-manager
	c := env.Client
	ctx := context.Background()
	disco, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := disco.ServerResourcesForGroupVersion("cert-manager.io/v1"); !apierrors.IsNotFound(err) {
		t.Fatalf("cert-manager's API: want none, got %v", err)
	}
	const ns, cfgName = "xoccm", "xoccm-webhook"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	secret := types.NamespacedName{Namespace: ns, Name: "xoccm-webhook-ca"}

	// Two replicas, each with its own port. The configuration the chart renders, with no
	// caBundle, pointing at replica a (envtest has no Services to balance between them).
	ports := []int{testenv.FreePort(t), testenv.FreePort(t)}
	cfg := webhook.Configuration(cfgName, nil, admissionregistrationv1.Ignore, 5)
	cfg.Webhooks[0].ClientConfig.URL = ptr.To(replicaURL(ports[0]))
	if err := c.Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	var probes []string
	for _, port := range ports {
		o := app.NewOptions()
		o.Controllers = "" // the webhook alone: each admission must succeed on its own
		o.WebhookHost, o.WebhookPort = "127.0.0.1", port
		o.WebhookCerts, o.WebhookCASecret, o.WebhookDNSNames, o.WebhookConfiguration = app.CertsSelfManaged, secret.String(), "localhost", cfgName
		o.WebhookCertDuration = 3 * time.Second // renewed every 2 s
		probe := testenv.FreeAddr(t)
		probes = append(probes, probe)
		o.LeaderElect, o.MetricsBindAddress, o.HealthProbeBindAddress = false, "0", probe
		o.ShutdownDelay = 0 // the test's end stops it at once
		runApp(t, o, env, x.URL)
	}
	for _, probe := range probes {
		waitReady(t, probe, "replica ready with its certificate")
	}

	var seq atomic.Int64
	admitted := func() error {
		n := testenv.KubeletNode("self-managed-"+strconv.FormatInt(seq.Add(1), 10), testenv.WithSystemUUID(vm))
		if err := c.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
		if want := node.FormatProviderID(pool, vm); n.Spec.ProviderID != want {
			return fmt.Errorf("Node %s: providerID %q at CREATE, want %q", n.Name, n.Spec.ProviderID, want)
		}
		return nil
	}
	testenv.WaitFor(t, 30*time.Second, "a Node described at CREATE with the injected CA", admitted)

	caPool := func() (*x509.CertPool, []byte) {
		var s corev1.Secret
		if err := c.Get(ctx, secret, &s); err != nil {
			t.Fatal(err)
		}
		p := x509.NewCertPool()
		if !p.AppendCertsFromPEM(s.Data["ca.crt"]) {
			t.Fatalf("no CA certificate in %s", secret)
		}
		return p, s.Data["ca.crt"]
	}
	roots, ca := caPool()
	var got admissionregistrationv1.MutatingWebhookConfiguration
	if err := c.Get(ctx, types.NamespacedName{Name: cfgName}, &got); err != nil {
		t.Fatal(err)
	}
	if string(got.Webhooks[0].ClientConfig.CABundle) != string(ca) {
		t.Fatal("the caBundle is not the CA in the Secret")
	}
	for _, port := range ports {
		if _, err := servedSerial(port, roots); err != nil {
			t.Fatalf("replica on port %d: %v", port, err)
		}
	}

	// Renewal under load: Nodes created back to back for 7 s while each replica renews its
	// serving certificate every 2 s. Not one admission may fail.
	serials := map[int]map[string]bool{ports[0]: {}, ports[1]: {}}
	created, deadline := 0, time.Now().Add(7*time.Second)
	for time.Now().Before(deadline) {
		if err := admitted(); err != nil {
			t.Fatalf("admission failed during renewal after %d Nodes: %v", created, err)
		}
		created++
		for _, port := range ports {
			s, err := servedSerial(port, roots)
			if err != nil {
				t.Fatalf("replica on port %d during renewal: %v", port, err)
			}
			serials[port][s] = true
		}
	}
	for port, s := range serials {
		if len(s) < 3 {
			t.Errorf("replica on port %d served %d certificates in 7 s, want at least 3 (renewed every 2 s)", port, len(s))
		}
	}
	t.Logf("renewal: %d Nodes described at CREATE, 0 failed; serving certificates seen: %d and %d", created, len(serials[ports[0]]), len(serials[ports[1]]))

	// Replica b serves the same CA: point the configuration at it.
	if err := c.Get(ctx, types.NamespacedName{Name: cfgName}, &got); err != nil {
		t.Fatal(err)
	}
	got.Webhooks[0].ClientConfig.URL = ptr.To(replicaURL(ports[1]))
	if err := c.Update(ctx, &got); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, "a Node described at CREATE by replica b", admitted)

	// A lost CA: a new one is made, injected, and served by both replicas.
	start := time.Now()
	if err := c.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secret.Name}}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "a new CA", func() bool {
		var s corev1.Secret
		return c.Get(ctx, secret, &s) == nil && string(s.Data["ca.crt"]) != string(ca)
	})
	testenv.WaitFor(t, 30*time.Second, "a Node described at CREATE with the new CA", admitted)
	roots, _ = caPool()
	for _, port := range ports {
		testenv.WaitFor(t, 10*time.Second, "the new CA served", func() error { _, err := servedSerial(port, roots); return err })
	}
	t.Logf("CA replaced: admission worked again after %s", time.Since(start).Round(time.Millisecond))
}

func replicaURL(port int) string {
	return "https://" + net.JoinHostPort("localhost", strconv.Itoa(port)) + webhook.Path
}

// servedSerial returns the serial of the certificate served on port, verified for localhost
// against roots.
func servedSerial(port int, roots *x509.CertPool) (string, error) {
	d := &net.Dialer{Timeout: 2 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		&tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12, ServerName: "localhost"})
	if err != nil {
		return "", err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
}

// waitReady waits for /readyz at the health probe address probe to answer 200.
func waitReady(t *testing.T, probe, what string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, what, func() bool {
		resp, err := http.Get("http://" + probe + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// probeStatus returns the status and body of GET path on the health probe address probe.
func probeStatus(probe, path string) (int, string, error) {
	resp, err := http.Get("http://" + probe + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// runApp runs the command with o against env and the XO simulator at xoURL until the test ends.
// Unless o names a config file, the XO config is xoURL and the test token with the shortest
// settle time, 1 s: a replica is Ready that long after its first listing.
func runApp(t *testing.T, o *app.Options, env *testenv.Env, xoURL string) {
	t.Helper()
	if o.ConfigFile == "" {
		o.ConfigFile = filepath.Join(t.TempDir(), "config.yaml")
		if err := os.WriteFile(o.ConfigFile, fmt.Appendf(nil, "url: %s\ntoken: %s\ninventory: {settleTime: 1s}\n", xoURL, token), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- app.Run(ctx, o, env.Config, func(string) string { return "" })
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
}
