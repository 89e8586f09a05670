package app_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/cmd/app"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/xosim"
)

// webhookName is the DNS name of the webhook's certificate in these tests, as the chart's
// Service <fullname>-webhook in namespace xoccm gives it.
const webhookName = "xoccm-webhook.xoccm.svc"

// TestMetricsEndpoint runs the command against a real API server and scrapes its metrics
// endpoint as Prometheus does, with real ServiceAccount tokens: the endpoint's authentication and
// authorization (TokenReview, SubjectAccessReview), the profiles behind them, and the certificate
// it presents in each mode: the webhook's from --webhook-cert-dir (a self-signed one until the
// files are there), the self-managed webhook certificate, a self-signed one without the webhook;
// and plain HTTP only with --metrics-insecure-http. The runs follow one another: the command's
// certificate metrics are the process's.
func TestMetricsEndpoint(t *testing.T) {
	x := testenv.NewXO(t, testenv.XOOptions{Token: token})
	pool := x.AddPool(t, xosim.PoolSpec{NameLabel: "pool"})
	x.AddHost(t, xosim.HostSpec{PoolID: pool, NameLabel: "host"})
	env := testenv.StartTest(t, testenv.Options{})
	ctx := context.Background()
	c := env.Client

	for _, cr := range []*rbacv1.ClusterRole{
		{ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader"}, Rules: testenv.MetricsReaderRules},
		{ObjectMeta: metav1.ObjectMeta{Name: "profile-reader"}, Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/debug/pprof/*"}, Verbs: []string{"get"}}}},
	} {
		if err := c.Create(ctx, cr); err != nil {
			t.Fatal(err)
		}
	}
	reader := testenv.ServiceAccountToken(t, env.Config, "monitoring", "prometheus", "metrics-reader")
	profiler := testenv.ServiceAccountToken(t, env.Config, "monitoring", "profiler", "profile-reader")
	nobody := testenv.ServiceAccountToken(t, env.Config, "monitoring", "nobody")

	// start runs the command with the webhook's certificate from certDir ("" without the
	// webhook) and extra settings, and returns the metrics URL.
	start := func(t *testing.T, certDir string, set func(*app.Options)) string {
		o := app.NewOptions()
		o.Controllers = ""
		o.LeaderElect, o.ShutdownDelay = false, 0
		o.MetricsBindAddress, o.HealthProbeBindAddress = testenv.FreeAddr(t), testenv.FreeAddr(t)
		o.Webhook = certDir != ""
		if o.Webhook {
			o.WebhookHost, o.WebhookPort, o.WebhookCertDir = "127.0.0.1", testenv.FreePort(t), certDir
		} else {
			o.Controllers = "cloud-node"
		}
		if set != nil {
			set(o)
		}
		runApp(t, o, env, x.URL)
		return "https://" + o.MetricsBindAddress + "/metrics"
	}

	t.Run("authentication and authorization", func(t *testing.T) {
		ca := testenv.NewCA(t, "webhook-ca")
		dir := ca.CertDir(t, 7, webhookName, "localhost")
		url := start(t, dir, func(o *app.Options) { o.Profiling = true })
		verified := testenv.MetricsClient(ca.Pool(), webhookName)
		waitStatus(t, verified, url, reader, http.StatusOK)

		for _, tc := range []struct {
			who, token, path string
			want             int
		}{
			{"anonymous", "", "/metrics", http.StatusUnauthorized},
			{"a token the API server does not know", "not-a-token", "/metrics", http.StatusUnauthorized},
			{"a ServiceAccount without the role", nobody, "/metrics", http.StatusForbidden},
			{"the metrics reader", reader, "/metrics", http.StatusOK},
			{"anonymous, a profile", "", "/debug/pprof/cmdline", http.StatusUnauthorized},
			{"the metrics reader, a profile", reader, "/debug/pprof/cmdline", http.StatusForbidden},
			{"the profile reader, a profile", profiler, "/debug/pprof/cmdline", http.StatusOK},
			{"the profile reader, the metrics", profiler, "/metrics", http.StatusForbidden},
		} {
			code, body, err := testenv.Scrape(verified, strings.TrimSuffix(url, "/metrics")+tc.path, tc.token)
			if err != nil || code != tc.want {
				t.Errorf("%s, GET %s: %d %.200s %v, want %d", tc.who, tc.path, code, body, err, tc.want)
			}
		}

		// Over HTTP/1.1, and the certificate's validity is a metric.
		resp, err := verified.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.Proto != "HTTP/1.1" {
			t.Errorf("protocol %s, want HTTP/1.1", resp.Proto)
		}
		_, body, err := testenv.Scrape(verified, url, reader)
		if err != nil {
			t.Fatal(err)
		}
		leaf := certificateIn(t, filepath.Join(dir, "tls.crt"))
		for name, want := range map[string]time.Time{
			"xenorchestra_webhook_certificate_not_after_timestamp_seconds":  leaf.NotAfter,
			"xenorchestra_webhook_certificate_not_before_timestamp_seconds": leaf.NotBefore,
		} {
			if got, ok := sample(body, name); !ok || got != float64(want.Unix()) {
				t.Errorf("%s = %v (found %v), want %d", name, got, ok, want.Unix())
			}
		}
	})

	t.Run("the webhook's certificate once it is there", func(t *testing.T) {
		dir := t.TempDir()
		url := start(t, dir, nil)
		unverified := testenv.MetricsClient(nil, "")
		waitStatus(t, unverified, url, reader, http.StatusOK)
		ca := testenv.NewCA(t, "webhook-ca")
		verified := testenv.MetricsClient(ca.Pool(), webhookName)
		var unverifiable *tls.CertificateVerificationError
		if _, _, err := testenv.Scrape(verified, url, reader); !errors.As(err, &unverifiable) {
			t.Fatalf("before the webhook's certificate: %v, want a certificate the webhook's CA does not verify", err)
		}
		crt, key := ca.Issue(t, 9, webhookName)
		for name, b := range map[string][]byte{"tls.crt": crt, "tls.key": key} {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		waitStatus(t, verified, url, reader, http.StatusOK)
	})

	t.Run("the self-managed certificate", func(t *testing.T) {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "xoccm"}}); err != nil {
			t.Fatal(err)
		}
		secret := types.NamespacedName{Namespace: "xoccm", Name: "xoccm-webhook-ca"}
		url := start(t, "unused", func(o *app.Options) {
			o.WebhookCerts, o.WebhookCASecret, o.WebhookDNSNames, o.WebhookConfiguration = app.CertsSelfManaged, secret.String(), webhookName, "xoccm"
		})
		testenv.WaitFor(t, 30*time.Second, "the CA Secret", func() error {
			var s corev1.Secret
			if err := c.Get(ctx, secret, &s); err != nil {
				return err
			}
			roots := x509.NewCertPool()
			if !roots.AppendCertsFromPEM(s.Data["ca.crt"]) {
				return errors.New("no ca.crt")
			}
			code, body, err := testenv.Scrape(testenv.MetricsClient(roots, webhookName), url, reader)
			if err != nil || code != http.StatusOK {
				return fmt.Errorf("%d %.100s %w", code, body, err)
			}
			return nil
		})
	})

	t.Run("self-signed without the webhook", func(t *testing.T) {
		url := start(t, "", nil)
		waitStatus(t, testenv.MetricsClient(nil, ""), url, reader, http.StatusOK)
		code, _, err := testenv.Scrape(testenv.MetricsClient(nil, ""), url, "")
		if err != nil || code != http.StatusUnauthorized {
			t.Errorf("anonymous: %d %v, want 401", code, err)
		}
	})

	t.Run("plain HTTP when asked, to anyone", func(t *testing.T) {
		url := start(t, "", func(o *app.Options) { o.MetricsInsecureHTTP = true })
		url = "http://" + strings.TrimPrefix(url, "https://")
		waitStatus(t, &http.Client{Timeout: 10 * time.Second}, url, "", http.StatusOK)
	})
}

// waitStatus waits until a GET of url with token answers want.
func waitStatus(t *testing.T, c *http.Client, url, token string, want int) {
	t.Helper()
	testenv.WaitFor(t, 30*time.Second, fmt.Sprintf("GET %s answering %d", url, want), func() error {
		code, body, err := testenv.Scrape(c, url, token)
		if err != nil {
			return err
		}
		if code != want {
			return fmt.Errorf("%d %.200s", code, body)
		}
		return nil
	})
}

// sample returns the value of the sample of a metric without labels in a text exposition.
func sample(body []byte, name string) (float64, bool) {
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f, err == nil
		}
	}
	return 0, false
}

// certificateIn parses the first certificate of a PEM file.
func certificateIn(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("%s: no PEM", path)
	}
	crt, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return crt
}

// TestDelegatedAuthCaches: the metrics filter reviews a token and its access with the API server
// once, then answers from its cache; a request without a token costs no review.
func TestDelegatedAuthCaches(t *testing.T) {
	env := testenv.StartTest(t, testenv.Options{})
	if err := env.Client.Create(context.Background(), &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader"}, Rules: testenv.MetricsReaderRules}); err != nil {
		t.Fatal(err)
	}
	reader := testenv.ServiceAccountToken(t, env.Config, "monitoring", "prometheus", "metrics-reader")
	nobody := testenv.ServiceAccountToken(t, env.Config, "monitoring", "nobody")

	var reviews testenv.RequestCounter
	cfg := reviews.Config(env.Config)
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	filter, err := app.DelegatedAuth(cfg, hc)
	if err != nil {
		t.Fatal(err)
	}
	h, err := filter(logr.Discard(), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("metrics")) }))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	count := func() int {
		return reviews.Requests(http.MethodPost, "/apis/authentication.k8s.io/v1/tokenreviews") +
			reviews.Requests(http.MethodPost, "/apis/authorization.k8s.io/v1/subjectaccessreviews")
	}
	for _, tc := range []struct {
		who, token, path string
		want, reviews    int
	}{
		{"anonymous", "", "/metrics", http.StatusUnauthorized, 0},
		{"the metrics reader", reader, "/metrics", http.StatusOK, 2},
		{"the metrics reader again", reader, "/metrics", http.StatusOK, 0},
		{"the metrics reader, another path", reader, "/debug/pprof/", http.StatusForbidden, 2},
		{"no role", nobody, "/metrics", http.StatusForbidden, 2},
		{"no role again", nobody, "/metrics", http.StatusForbidden, 0},
		{"a token the API server does not know", "not-a-token", "/metrics", http.StatusUnauthorized, 1},
	} {
		before := count()
		code, _, err := testenv.Scrape(srv.Client(), srv.URL+tc.path, tc.token)
		if err != nil || code != tc.want {
			t.Errorf("%s: %d, %v; want %d", tc.who, code, err, tc.want)
		}
		if got := count() - before; got != tc.reviews {
			t.Errorf("%s: %d reviews at the API server, want %d", tc.who, got, tc.reviews)
		}
	}
}
