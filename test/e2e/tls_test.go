package e2e_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/webhook"
)

// insecureWarning is the start of the warning the controller logs when insecure is true.
const insecureWarning = "insecure is true: XO's TLS certificate is not verified"

// TestWebhookTLS checks both TLS ends of the process:
//   - the webhook refuses TLS 1.0 and 1.1 handshakes and plaintext HTTP, and serves
//     AdmissionReviews over TLS 1.2 and 1.3;
//   - the XO client refuses an XO whose certificate it cannot verify (no request reaches XO,
//     the inventory never syncs, the process is not ready), trusts it through caFile, and
//     with insecure: true connects and logs the warning.
func TestWebhookTLS(t *testing.T) {
	env := testenv.StartTest(t, testenv.Options{})
	kubeconfig := writeKubeconfig(t, env)
	dir := t.TempDir()
	token := newToken(t)

	// Two XOs with certificates nobody but the test can verify: one for the refusing
	// process (so that "no request reached it" is its alone), one for the others.
	badXO := newXO(t, token, true)
	badXO.addVM(t, badXO.poolA, badXO.hostA1, "vm-1")
	goodXO := newXO(t, token, true)
	goodXO.addVM(t, goodXO.poolA, goodXO.hostA1, "vm-1")
	caFile := filepath.Join(dir, "xo-ca.pem")
	writeConfig(t, dir, "xo-ca.pem", string(goodXO.caPEM(t)))

	verify := writeConfig(t, dir, "verify.yaml", fmt.Sprintf("url: %s\ntoken: %s\ninventory: {settleTime: 1s}\n", badXO.URL, token))
	insecure := writeConfig(t, dir, "insecure.yaml", fmt.Sprintf("url: %s\ntoken: %s\ninsecure: true\ninventory: {settleTime: 1s}\n", goodXO.URL, token))
	withCA := writeConfig(t, dir, "ca.yaml", fmt.Sprintf("url: %s\ntoken: %s\ncaFile: %s\ninventory: {settleTime: 1s}\n", goodXO.URL, token, caFile))

	ca := testenv.NewCA(t, "webhook-ca")
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	whPort := testenv.FreePort(t)
	// One quiet controller: the processes without a webhook must run something, and there are
	// no Nodes for label-sync to touch.
	noControllers, oneController := []string{"--controllers="}, []string{"--controllers=cloud-node-label-sync"}
	refusing := startCCM(t, "verify", ccmArgs{kubeconfig: kubeconfig, config: verify, webhookPort: whPort, certDir: ca.CertDir(t, 10), extra: noControllers})
	trusting := startCCM(t, "insecure", ccmArgs{kubeconfig: kubeconfig, config: insecure, extra: oneController})
	pinned := startCCM(t, "caFile", ccmArgs{kubeconfig: kubeconfig, config: withCA, extra: oneController})

	t.Run("xo insecure connects and warns", func(t *testing.T) {
		trusting.waitReady(t, 30*time.Second)
		if !bytes.Contains(trusting.out.Bytes(), []byte(insecureWarning)) {
			t.Errorf("insecure: true: no %q line in the log", insecureWarning)
		}
	})
	t.Run("xo caFile verifies without warning", func(t *testing.T) {
		pinned.waitReady(t, 30*time.Second)
		if bytes.Contains(pinned.out.Bytes(), []byte(insecureWarning)) {
			t.Errorf("caFile: the insecure warning was logged although insecure is false")
		}
	})
	t.Run("xo unverifiable certificate refused", func(t *testing.T) {
		testenv.WaitFor(t, 30*time.Second, "a certificate verification error in the log", func() error {
			if !bytes.Contains(refusing.out.Bytes(), []byte("certificate signed by unknown authority")) {
				return errNotYet
			}
			return nil
		})
		status, body, err := refusing.get("health", "/readyz?verbose")
		if err != nil {
			t.Fatal(err)
		}
		if status == http.StatusOK || !strings.Contains(string(body), "xo-inventory") {
			t.Errorf("/readyz = %d %q; want not ready because of xo-inventory", status, body)
		}
		if n := badXO.totalRequests(); n != 0 {
			t.Errorf("%d requests reached the XO whose certificate cannot be verified; want 0", n)
		}
		if bytes.Contains(refusing.out.Bytes(), []byte(insecureWarning)) {
			t.Errorf("the insecure warning was logged although insecure is false")
		}
	})

	addr := loopback(whPort)
	testenv.WaitFor(t, 30*time.Second, "the webhook serving TLS", func() error {
		_, err := testenv.ServedSerial(addr, roots)
		return err
	})
	t.Run("webhook TLS versions", func(t *testing.T) {
		for _, tc := range []struct {
			name    string
			version uint16
			ok      bool
		}{
			{"TLS 1.0", tls.VersionTLS10, false},
			{"TLS 1.1", tls.VersionTLS11, false},
			{"TLS 1.2", tls.VersionTLS12, true},
			{"TLS 1.3", tls.VersionTLS13, true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{
					RootCAs: roots, ServerName: "127.0.0.1",
					MinVersion: tc.version, MaxVersion: tc.version, //nolint:gosec // probing old versions on purpose
				})
				if err == nil {
					got := conn.ConnectionState().Version
					conn.Close()
					if !tc.ok {
						t.Fatalf("handshake with %s succeeded (negotiated %s); want refused", tc.name, tls.VersionName(got))
					}
					if got != tc.version {
						t.Fatalf("negotiated %s, want %s", tls.VersionName(got), tc.name)
					}
					return
				}
				if tc.ok {
					t.Fatalf("handshake with %s: %v", tc.name, err)
				}
				// Refused by the server's version check, not for another reason.
				if !strings.Contains(err.Error(), "protocol version") {
					t.Errorf("handshake with %s failed with %v; want a protocol version alert", tc.name, err)
				}
			})
		}
	})
	t.Run("webhook plaintext refused", func(t *testing.T) {
		review := admissionReview(t, testenv.KubeletNode("plaintext-node"))
		// Positive control: the same request over TLS is answered.
		tlsClient := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		}}
		resp, err := tlsClient.Post("https://"+addr+webhook.Path, "application/json", bytes.NewReader(review))
		if err != nil {
			t.Fatal(err)
		}
		var got admissionv1.AdmissionReview
		err = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || got.Response == nil || got.Response.UID != "e2e-uid" {
			t.Fatalf("AdmissionReview over TLS: status %d, %+v, %v; want an answer for uid e2e-uid", resp.StatusCode, got.Response, err)
		}

		plain := &http.Client{Timeout: 5 * time.Second}
		resp, err = plain.Post("http://"+addr+webhook.Path, "application/json", bytes.NewReader(review))
		if err != nil {
			return // connection refused or closed: refused
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || bytes.Contains(body, []byte("AdmissionReview")) {
			t.Errorf("plaintext POST: status %d, body %q; want 400 and no AdmissionReview", resp.StatusCode, body)
		}
	})

	for _, p := range []*ccmProcess{refusing, trusting, pinned} {
		if code := p.stop(t); code != 0 {
			t.Errorf("%s exited with code %d after SIGTERM; want 0", p.name, code)
		}
	}
}

// admissionReview returns an AdmissionReview v1 request (uid e2e-uid) for the CREATE of n.
func admissionReview(t *testing.T, n *corev1.Node) []byte {
	t.Helper()
	n = n.DeepCopy()
	n.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}
	raw, err := json.Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(&admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       types.UID("e2e-uid"),
			Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Node"},
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "nodes"},
			Name:      n.Name,
			Operation: admissionv1.Create,
			Object:    runtime.RawExtension{Raw: raw},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}
