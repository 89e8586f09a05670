package charts

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"gomodules.xyz/jsonpatch/v2"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/webhook"
)

// TestWebhookReloadsRotatedCertificate runs a webhook server on a cert dir laid out like the
// chart's mounted Secret, with the real API server calling it (failurePolicy Fail, so a TLS
// failure would refuse the Node), then renews the certificate the way the kubelet propagates a
// renewed Secret: the server must present the new certificate without a restart, and the API
// server must keep admitting Nodes through it.
func TestWebhookReloadsRotatedCertificate(t *testing.T) {
	ca := testenv.NewCA(t, "test-ca")
	roots := ca.Pool()
	certDir := t.TempDir()
	crt, key := ca.Issue(t, 100, "127.0.0.1")
	testenv.WriteSecretVolume(t, certDir, 1, map[string][]byte{"tls.crt": crt, "tls.key": key, "ca.crt": ca.PEM})

	srv := testenv.ServeWebhook(t, certDir, &admission.Webhook{Handler: admission.HandlerFunc(func(_ context.Context, req admission.Request) admission.Response {
		return admission.Patched("", jsonpatch.NewOperation("add", "/metadata/labels", map[string]string{"rotation.test/served": "true"}))
	})})
	addr := srv.Addr
	ctx := t.Context()

	env := testenv.StartTest(t, testenv.Options{})
	url := srv.URL()
	mwc := webhook.Configuration("rotation-test", nil, admissionregistrationv1.Fail, 5)
	mwc.Webhooks[0].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: ca.PEM}
	if err := env.Client.Create(ctx, mwc); err != nil {
		t.Fatal(err)
	}

	// createNode creates a Node and reports whether the webhook labelled it; the API server
	// takes a moment to see a new webhook configuration.
	createNode := func(name string) error {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if err := env.Client.Create(ctx, n); err != nil {
			return fmt.Errorf("create Node %s: %w", name, err)
		}
		if n.Labels["rotation.test/served"] != "true" {
			_ = env.Client.Delete(ctx, n)
			return fmt.Errorf("Node %s admitted without the webhook", name)
		}
		return nil
	}
	i := 0
	testenv.WaitFor(t, 30*time.Second, "admission through the first certificate", func() error { i++; return createNode("before-" + strconv.Itoa(i)) })
	if s, err := testenv.ServedSerial(addr, roots); err != nil || s != 100 {
		t.Fatalf("served serial %d, %v; want 100", s, err)
	}

	crt2, key2 := ca.Issue(t, 200, "127.0.0.1")
	testenv.WriteSecretVolume(t, certDir, 2, map[string][]byte{"tls.crt": crt2, "tls.key": key2, "ca.crt": ca.PEM})
	testenv.WaitFor(t, 30*time.Second, "reload of the renewed certificate", func() error {
		s, err := testenv.ServedSerial(addr, roots)
		if err == nil && s != 200 {
			err = fmt.Errorf("still serving serial %d", s)
		}
		return err
	})
	if err := createNode("after"); err != nil {
		t.Fatalf("admission through the renewed certificate: %v", err)
	}
	if stopped, err := srv.Stopped(); stopped {
		t.Fatalf("webhook server stopped during the rotation: %v", err)
	}
}
