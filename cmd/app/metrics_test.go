package app

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// TestMetricsUncompressed: the metrics handler built with metricsOptions' handler options
// answers a scraper that accepts gzip, as Prometheus does, in plain text.
func TestMetricsUncompressed(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "xenorchestra_test_total", Help: "A test counter."}))
	var opts promhttp.HandlerOpts
	for _, f := range metricsOptions(NewOptions(), &webhookCertificate{}).HandlerOpts {
		f(&opts)
	}
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, opts).ServeHTTP(rec, req)
	if enc := rec.Header().Get("Content-Encoding"); enc != "" {
		t.Errorf("Content-Encoding %q, want none", enc)
	}
	if !strings.Contains(rec.Body.String(), "xenorchestra_test_total 0") {
		t.Errorf("body is not the plain exposition:\n%s", rec.Body.String())
	}
}

// TestValidateMetrics checks the metrics flags' validation: a certificate mode that is none of
// the three, the webhook's certificate without the webhook, and a certificate with plain HTTP
// are refused with the flag named; the defaults with and without the webhook are accepted.
func TestValidateMetrics(t *testing.T) {
	cases := []struct {
		name string
		set  func(*Options)
		want string // "" accepts
	}{
		{"defaults", func(*Options) {}, ""},
		{"no webhook, auto", func(o *Options) { o.Webhook, o.Controllers = false, "*" }, ""},
		{"self-signed", func(o *Options) { o.MetricsCerts = MetricsCertsSelfSigned }, ""},
		{"insecure", func(o *Options) { o.MetricsInsecureHTTP = true }, ""},
		{"unknown mode", func(o *Options) { o.MetricsCerts = "vault" }, `--metrics-certs: "vault" is none of auto, webhook, self-signed`},
		{"webhook without webhook", func(o *Options) { o.Webhook, o.MetricsCerts = false, MetricsCertsWebhook }, "--metrics-certs=webhook: needs --webhook"},
		{"insecure with a certificate", func(o *Options) { o.MetricsInsecureHTTP, o.MetricsCerts = true, MetricsCertsSelfSigned }, "--metrics-certs=self-signed: --metrics-insecure-http serves no certificate"},
		{"insecure with the profiles", func(o *Options) { o.MetricsInsecureHTTP, o.Profiling = true, true }, "--profiling: the profiles are served only behind the metrics endpoint's authentication"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := NewOptions()
			c.set(o)
			err := o.Validate()
			switch {
			case c.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("error %v, want %q", err, c.want)
			}
		})
	}
	if got := NewOptions().MetricsBindAddress; got != ":10258" {
		t.Errorf("default --metrics-bind-address %s, want :10258, the upstream secure port", got)
	}
}
