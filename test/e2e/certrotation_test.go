package e2e_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/cmd/app"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/webhook"
)

// rotationTimeout bounds the wait for a rewritten certificate to be served. controller-runtime's
// certificate watcher reacts to file events at once and also polls every 10s.
const rotationTimeout = 25 * time.Second

// TestWebhookCertRotation runs the controller's webhook (app.Run, as the binary wires it) on a
// certificate folder, registered with failurePolicy Fail so that a TLS failure refuses the
// Node, and rewrites the folder under the running server: the new certificate must be
// served, without a restart, and Node CREATE through the API server must still be mutated.
// Two ways of rewriting, as they happen in clusters:
//   - files written beside and renamed over tls.key and tls.crt (an atomic file replace);
//   - the Secret-volume way (the kubelet's atomic writer): tls.crt and tls.key are symlinks
//     through ..data, which is swapped to a new timestamped folder in one rename. This one
//     also moves to a new CA, with the webhook's caBundle updated first to trust both, as
//     cert-manager's CA injector does.
func TestWebhookCertRotation(t *testing.T) {
	env := testenv.StartTest(t, testenv.Options{})
	token := newToken(t)
	xo := newXO(t, token, false)
	vms := make([]string, 6)
	for i := range vms {
		vms[i] = xo.addVM(t, xo.poolA, xo.hostA1, "rot-vm-"+strconv.Itoa(i))
	}
	xoEnv := map[string]string{"XOA_URL": xo.URL, "XOA_TOKEN": token}
	c := env.Client
	ctx := context.Background()

	ca1 := testenv.NewCA(t, "rotation-ca-1")
	mwc := webhook.Configuration("e2e-rotation", nil, admissionregistrationv1.Fail, 5)
	registrations := 0
	// register points the API server's webhook at addr, trusting caBundle. Each call makes the
	// bundle's bytes unique (trailing newlines, which PEM ignores): the API server caches one
	// client per client configuration and keeps its connections alive, so only a new
	// configuration proves that a new TLS handshake with the current certificate succeeds.
	register := func(addr string, caBundle []byte) {
		t.Helper()
		registrations++
		url := "https://" + addr + webhook.Path
		bundle := append(bytes.Clone(caBundle), bytes.Repeat([]byte("\n"), registrations)...)
		cc := admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: bundle}
		if registrations == 1 {
			mwc.Webhooks[0].ClientConfig = cc
			if err := c.Create(ctx, mwc); err != nil {
				t.Fatal(err)
			}
			return
		}
		before := mwc.DeepCopy()
		mwc.Webhooks[0].ClientConfig = cc
		if err := c.Patch(ctx, mwc, client.MergeFrom(before)); err != nil {
			t.Fatal(err)
		}
	}
	nodeN := 0
	// admitted creates a Node for vm through the API server and checks the webhook mutated it
	// (providerID in the CREATE answer). The API server takes a moment to apply a changed
	// webhook configuration, so the caller retries.
	admitted := func(vm string) error {
		nodeN++
		n := testenv.KubeletNode("rot-node-"+strconv.Itoa(nodeN), testenv.WithSystemUUID(xo.systemUUID(t, vm)))
		if err := c.Create(ctx, n); err != nil {
			return fmt.Errorf("create Node: %w", err)
		}
		if n.Spec.ProviderID == "" {
			_ = c.Delete(ctx, n)
			return errors.New("Node admitted without the webhook's mutation")
		}
		return nil
	}

	t.Run("rename over the files", func(t *testing.T) {
		roots := x509.NewCertPool()
		roots.AddCert(ca1.Cert)
		dir := ca1.CertDir(t, 100)
		addr := runWebhook(t, env.Config, dir, xoEnv)
		register(addr, ca1.PEM)
		testenv.WaitFor(t, 30*time.Second, "Node CREATE mutated through the first certificate", func() error { return admitted(vms[0]) })
		if s, err := testenv.ServedSerial(addr, roots); err != nil || s != 100 {
			t.Fatalf("served serial %d (%v); want 100", s, err)
		}

		crt, key := ca1.Issue(t, 101)
		// Key first: until the certificate follows, the pair does not match and the server
		// keeps the old one.
		replaceFile(t, filepath.Join(dir, "tls.key"), key)
		replaceFile(t, filepath.Join(dir, "tls.crt"), crt)
		waitServed(t, addr, roots, 101)
		register(addr, ca1.PEM)
		testenv.WaitFor(t, 15*time.Second, "Node CREATE mutated through the renewed certificate", func() error { return admitted(vms[1]) })
	})

	t.Run("secret volume ..data swap to a new CA", func(t *testing.T) {
		ca2 := testenv.NewCA(t, "rotation-ca-2")
		dir := t.TempDir()
		crt, key := ca1.Issue(t, 200)
		testenv.WriteSecretVolume(t, dir, 1, map[string][]byte{"tls.crt": crt, "tls.key": key, "ca.crt": ca1.PEM})
		addr := runWebhook(t, env.Config, dir, xoEnv)
		register(addr, ca1.PEM)
		testenv.WaitFor(t, 30*time.Second, "Node CREATE mutated through the mounted certificate", func() error { return admitted(vms[2]) })
		roots1 := x509.NewCertPool()
		roots1.AddCert(ca1.Cert)
		if s, err := testenv.ServedSerial(addr, roots1); err != nil || s != 200 {
			t.Fatalf("served serial %d (%v); want 200", s, err)
		}

		// The CA injector adds the new CA to the bundle before the certificate changes.
		register(addr, append(append([]byte{}, ca1.PEM...), ca2.PEM...))
		testenv.WaitFor(t, 15*time.Second, "Node CREATE mutated with the two-CA bundle", func() error { return admitted(vms[3]) })

		crt, key = ca2.Issue(t, 300)
		testenv.WriteSecretVolume(t, dir, 2, map[string][]byte{"tls.crt": crt, "tls.key": key, "ca.crt": ca2.PEM})
		roots2 := x509.NewCertPool()
		roots2.AddCert(ca2.Cert)
		waitServed(t, addr, roots2, 300)
		register(addr, append(append([]byte{}, ca1.PEM...), ca2.PEM...))
		testenv.WaitFor(t, 15*time.Second, "Node CREATE mutated through the certificate of the new CA", func() error { return admitted(vms[4]) })

		// Proof that the API server really verifies against the bundle: with only the old CA
		// it can no longer call the webhook, and failurePolicy Fail refuses the Node.
		register(addr, ca1.PEM)
		testenv.WaitFor(t, 15*time.Second, "Node CREATE refused with a bundle that does not trust the new certificate", func() error {
			err := admitted(vms[5])
			if err == nil {
				return errors.New("Node still admitted and mutated")
			}
			return nil
		})
	})
}

// runWebhook runs app.Run in this process with the webhook only (no controllers, no leader
// election) on a free loopback port with the certificates in certDir, XO configured from
// xoEnv (XOA_URL, XOA_TOKEN) in a config file with a settle time of 1 s, until the test ends. It returns the webhook's address once the manager is ready.
func runWebhook(t *testing.T, restConfig *rest.Config, certDir string, xoEnv map[string]string) string {
	t.Helper()
	o := app.NewOptions()
	o.Controllers = ""
	o.LeaderElect = false
	o.MetricsBindAddress = "0"
	o.HealthProbeBindAddress = testenv.FreeAddr(t)
	o.WebhookHost = "127.0.0.1"
	o.WebhookPort = testenv.FreePort(t)
	o.WebhookCertDir = certDir
	o.ConfigFile = writeConfig(t, t.TempDir(), "config.yaml",
		fmt.Sprintf("url: %s\ntoken: %s\ninventory: {settleTime: 1s}\n", xoEnv["XOA_URL"], xoEnv["XOA_TOKEN"]))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, o, restConfig, func(string) string { return "" }) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("app.Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("app.Run did not return within 30s of its context's end")
		}
		if t.Failed() {
			t.Logf("--- in-process log (tail) ---\n%s", tail(inProcessLog.Bytes(), 6000))
		}
	})
	testenv.WaitFor(t, 30*time.Second, "the in-process manager ready", func() error {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("app.Run returned before it was ready: %v", err)
		default:
		}
		status, body, err := httpGet("http://" + o.HealthProbeBindAddress + "/readyz?verbose")
		if err != nil {
			return err
		}
		if status != http.StatusOK {
			return fmt.Errorf("status %d: %s", status, body)
		}
		return nil
	})
	// The server must keep running through every rotation: a restart would be a return.
	t.Cleanup(func() {
		select {
		case err := <-done:
			done <- err
			t.Errorf("app.Run returned before the test ended: %v", err)
		default:
		}
	})
	return loopback(o.WebhookPort)
}

// waitServed waits until the server at addr presents the certificate with serial, verified
// against roots.
func waitServed(t *testing.T, addr string, roots *x509.CertPool, serial int64) {
	t.Helper()
	start := time.Now()
	testenv.WaitFor(t, rotationTimeout, fmt.Sprintf("certificate serial %d served", serial), func() error {
		s, err := testenv.ServedSerial(addr, roots)
		if err == nil && s != serial {
			err = fmt.Errorf("still serving serial %d", s)
		}
		return err
	})
	t.Logf("certificate serial %d served %s after the rewrite", serial, time.Since(start).Round(time.Millisecond))
}

// replaceFile replaces path atomically: the content goes to a temporary file in the same
// folder, which is renamed over path.
func replaceFile(t *testing.T, path string, content []byte) {
	t.Helper()
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(content); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		t.Fatal(err)
	}
}
