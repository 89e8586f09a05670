package charts

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"gomodules.xyz/jsonpatch/v2"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/webhook"
)

// testCA is a CA that issues serving certificates, as the chart's cert-manager CA Issuer does.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
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

// issue returns tls.crt and tls.key of a serving certificate for 127.0.0.1 with a fresh key,
// as cert-manager renews with rotationPolicy Always.
func (ca *testCA) issue(t *testing.T, serial int64) (crt, key []byte) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "webhook"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &k.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}

// writeSecretVolume updates dir the way the kubelet updates a Secret volume (its atomic
// writer): the files go to a new timestamped folder, the ..data symlink is swapped to it in
// one rename, and each key is a symlink through ..data. This is what the webhook sees when
// cert-manager renews the certificate in the Secret the chart mounts.
func writeSecretVolume(t *testing.T, dir string, gen int, files map[string][]byte) {
	t.Helper()
	ts := filepath.Join(dir, "..gen"+strconv.Itoa(gen))
	if err := os.Mkdir(ts, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(ts, name), b, 0o444); err != nil {
			t.Fatal(err)
		}
	}
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
		t.Fatal(err)
	}
	old, _ := os.Readlink(filepath.Join(dir, "..data"))
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for name := range files {
		link := filepath.Join(dir, name)
		if _, err := os.Lstat(link); errors.Is(err, os.ErrNotExist) {
			if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
				t.Fatal(err)
			}
		}
	}
	if old != "" {
		if err := os.RemoveAll(filepath.Join(dir, old)); err != nil {
			t.Fatal(err)
		}
	}
}

// servedSerial returns the serial of the certificate the server at addr presents.
func servedSerial(addr string, roots *x509.CertPool) (int64, error) {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", addr, &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12})
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64(), nil
}

// TestWebhookReloadsRotatedCertificate runs a webhook server on a cert dir laid out like the
// chart's mounted Secret, with the real API server calling it (failurePolicy Fail, so a TLS
// failure would refuse the Node), then renews the certificate the way the kubelet propagates a
// renewed Secret: the server must present the new certificate without a restart, and the API
// server must keep admitting Nodes through it.
func TestWebhookReloadsRotatedCertificate(t *testing.T) {
	ca := newTestCA(t)
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	certDir := t.TempDir()
	crt, key := ca.issue(t, 100)
	writeSecretVolume(t, certDir, 1, map[string][]byte{"tls.crt": crt, "tls.key": key, "ca.crt": ca.pem})

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	srv := ctrlwebhook.NewServer(ctrlwebhook.Options{Host: "127.0.0.1", Port: port, CertDir: certDir})
	srv.Register(webhook.Path, &admission.Webhook{Handler: admission.HandlerFunc(func(_ context.Context, req admission.Request) admission.Response {
		return admission.Patched("", jsonpatch.NewOperation("add", "/metadata/labels", map[string]string{"rotation.test/served": "true"}))
	})})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("webhook server: %v", err)
		}
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	deadline := time.Now().Add(20 * time.Second)
	for srv.StartedChecker()(&http.Request{}) != nil {
		if time.Now().After(deadline) {
			t.Fatal("webhook server did not start")
		}
		time.Sleep(50 * time.Millisecond)
	}

	env, err := testenv.Start(testenv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop envtest: %v", err)
		}
	})
	url := "https://" + addr + webhook.Path
	mwc := webhook.Configuration("rotation-test", nil, admissionregistrationv1.Fail, 5)
	mwc.Webhooks[0].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: ca.pem}
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
	retry := func(what string, f func() error) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			err := f()
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %v", what, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	i := 0
	retry("admission through the first certificate", func() error { i++; return createNode("before-" + strconv.Itoa(i)) })
	if s, err := servedSerial(addr, roots); err != nil || s != 100 {
		t.Fatalf("served serial %d, %v; want 100", s, err)
	}

	crt2, key2 := ca.issue(t, 200)
	writeSecretVolume(t, certDir, 2, map[string][]byte{"tls.crt": crt2, "tls.key": key2, "ca.crt": ca.pem})
	retry("reload of the renewed certificate", func() error {
		s, err := servedSerial(addr, roots)
		if err == nil && s != 200 {
			err = fmt.Errorf("still serving serial %d", s)
		}
		return err
	})
	if err := createNode("after"); err != nil {
		t.Fatalf("admission through the renewed certificate: %v", err)
	}
	select {
	case err := <-done:
		t.Fatalf("webhook server stopped during the rotation: %v", err)
	default:
	}
}
