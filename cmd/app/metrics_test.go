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
	for _, f := range metricsOptions(NewOptions()).HandlerOpts {
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
