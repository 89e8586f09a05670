package app

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	certutil "k8s.io/client-go/util/cert"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// Values of --metrics-certs.
const (
	// MetricsCertsAuto is MetricsCertsWebhook with the webhook, MetricsCertsSelfSigned without.
	MetricsCertsAuto = "auto"
	// MetricsCertsWebhook serves the webhook's own certificate (--webhook-certs), which clients
	// verify with the webhook's CA, the caBundle of its MutatingWebhookConfiguration.
	MetricsCertsWebhook = "webhook"
	// MetricsCertsSelfSigned serves a certificate the process makes in memory, signed by a CA
	// made with it and thrown away: encryption without a verifiable identity, as
	// kube-controller-manager does by default.
	MetricsCertsSelfSigned = "self-signed"
)

// DefaultMetricsBindAddress is the metrics endpoint's: k8s.io/cloud-provider's secure port.
const DefaultMetricsBindAddress = ":10258"

// metricsCertSource returns --metrics-certs with auto resolved.
func (o *Options) metricsCertSource() string {
	if o.MetricsCerts != MetricsCertsAuto {
		return o.MetricsCerts
	}
	if o.Webhook {
		return MetricsCertsWebhook
	}
	return MetricsCertsSelfSigned
}

// validateMetrics returns the problems of the metrics flags.
func (o *Options) validateMetrics() []error {
	var errs []error
	switch o.MetricsCerts {
	case MetricsCertsAuto, MetricsCertsSelfSigned:
	case MetricsCertsWebhook:
		if !o.Webhook {
			errs = append(errs, errors.New("--metrics-certs="+MetricsCertsWebhook+": needs --webhook (there is no webhook certificate to serve); use "+MetricsCertsSelfSigned+" or "+MetricsCertsAuto))
		}
	default:
		errs = append(errs, fmt.Errorf("--metrics-certs: %q is none of %s, %s, %s", o.MetricsCerts, MetricsCertsAuto, MetricsCertsWebhook, MetricsCertsSelfSigned))
	}
	if o.MetricsInsecureHTTP && o.MetricsCerts != MetricsCertsAuto {
		errs = append(errs, fmt.Errorf("--metrics-certs=%s: --metrics-insecure-http serves no certificate; remove one of them", o.MetricsCerts))
	}
	if o.MetricsInsecureHTTP && o.Profiling {
		errs = append(errs, errors.New("--profiling: the profiles are served only behind the metrics endpoint's authentication, which --metrics-insecure-http turns off; remove one of them"))
	}
	return errs
}

// metricsOptions returns the options of the metrics server: on o's address, with the pprof
// handlers when profiling is on, answering uncompressed, and, unless --metrics-insecure-http,
// over HTTPS with webhookCert's certificate (or a self-signed one, see servingCertificate) and
// every request authenticated by a TokenReview and authorized by a SubjectAccessReview (verb
// get on the request's path) at the API server, as the core components serve theirs.
//
// Uncompressed: a gzip writer takes 1.3 MB of state; promhttp pools it, but scrapes 15 s or more
// apart find the pool emptied by the collections in between, so every scrape allocated one (5 %
// of the live heap with 5,000 Nodes) to turn 120 KB of text into 14 KB: 7 KB/s more on the wire
// at a 15-s scrape interval.
func metricsOptions(o *Options, webhookCert *webhookCertificate) metricsserver.Options {
	opts := metricsserver.Options{
		BindAddress:   o.MetricsBindAddress,
		ExtraHandlers: profilingHandlers(o.Profiling),
		HandlerOpts:   []func(*promhttp.HandlerOpts){func(h *promhttp.HandlerOpts) { h.DisableCompression = true }},
	}
	if o.MetricsInsecureHTTP || o.MetricsBindAddress == "0" {
		return opts
	}
	cert := newServingCertificate(o.metricsCertSource(), webhookCert)
	opts.SecureServing = true
	opts.FilterProvider = delegatedAuth
	opts.TLSOpts = []func(*tls.Config){func(c *tls.Config) {
		c.MinVersion = tls.VersionTLS12
		c.GetCertificate = cert.GetCertificate
		// A scrape needs no HTTP/2, and without it the server is out of reach of HTTP/2's
		// stream-reset floods (CVE-2023-44487, CVE-2023-39325).
		c.NextProtos = []string{"http/1.1"}
	}}
	return opts
}

// profilingHandlers returns Go's pprof handlers when profiling is on.
func profilingHandlers(on bool) map[string]http.Handler {
	if !on {
		return nil
	}
	return map[string]http.Handler{
		"/debug/pprof/":        http.HandlerFunc(pprof.Index),
		"/debug/pprof/cmdline": http.HandlerFunc(pprof.Cmdline),
		"/debug/pprof/profile": http.HandlerFunc(pprof.Profile),
		"/debug/pprof/symbol":  http.HandlerFunc(pprof.Symbol),
		"/debug/pprof/trace":   http.HandlerFunc(pprof.Trace),
	}
}

// servingCertificate is the metrics endpoint's certificate: the webhook's when there is one
// and the mode asks for it, else a self-signed one. The webhook's may come later than the
// metrics endpoint (cert-manager issues it once this controller has initialized the Nodes):
// meanwhile the self-signed one is served, so that metrics are there from the start.
type servingCertificate struct {
	webhook *webhookCertificate // nil: self-signed only
	// selfSigned is made at the first handshake that needs it: with the webhook's certificate
	// at hand, an RSA key generated at every start for nothing would delay it.
	selfSigned func() (*tls.Certificate, error)
}

// newServingCertificate returns the certificate of mode (MetricsCertsWebhook or
// MetricsCertsSelfSigned).
func newServingCertificate(mode string, webhook *webhookCertificate) *servingCertificate {
	s := &servingCertificate{selfSigned: sync.OnceValues(selfSignedCertificate)}
	if mode == MetricsCertsWebhook {
		s.webhook = webhook
	}
	return s
}

// selfSignedCertificate returns client-go's self-signed pair, as controller-runtime's metrics
// server makes when it has no certificate: a CA and a certificate for localhost and 127.0.0.1
// signed by it.
func selfSignedCertificate() (*tls.Certificate, error) {
	crt, key, err := certutil.GenerateSelfSignedCertKey("localhost", []net.IP{net.IPv4(127, 0, 0, 1)}, nil)
	if err != nil {
		return nil, fmt.Errorf("metrics endpoint: self-signed certificate: %w", err)
	}
	pair, err := tls.X509KeyPair(crt, key)
	if err != nil {
		return nil, fmt.Errorf("metrics endpoint: self-signed certificate: %w", err)
	}
	return &pair, nil
}

// GetCertificate is the TLS server's tls.Config.GetCertificate.
func (s *servingCertificate) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if s.webhook != nil {
		if c, err := s.webhook.current(); err == nil {
			return c, nil
		}
	}
	return s.selfSigned()
}

// certificateGetter is a tls.Config.GetCertificate.
type certificateGetter func(*tls.ClientHelloInfo) (*tls.Certificate, error)

// webhookCertificate is the webhook's current serving certificate, for the metrics endpoint and
// the certificate metrics; it has none until its source is set (self-managed: at start; from
// --webhook-cert-dir: once the files are there, watchDir).
type webhookCertificate struct {
	get atomic.Pointer[certificateGetter]
}

// set makes get the source of the certificate.
func (w *webhookCertificate) set(get certificateGetter) { w.get.Store(&get) }

// current returns the certificate, or an error when there is none yet.
func (w *webhookCertificate) current() (*tls.Certificate, error) {
	get := w.get.Load()
	if get == nil {
		return nil, errors.New("no webhook certificate yet")
	}
	c, err := (*get)(&tls.ClientHelloInfo{})
	if err == nil && c == nil {
		err = errors.New("no webhook certificate yet")
	}
	return c, err
}

// watchDir returns a runnable (on every replica) that waits for tls.crt and tls.key in dir,
// then serves them through w, reloaded when they change (controller-runtime's certwatcher, as
// the webhook server reads them), until ctx ends.
func (w *webhookCertificate) watchDir(dir string) everyReplica {
	return func(ctx context.Context) error {
		for logged := false; ; {
			if !waitForCerts(ctx, dir) {
				return nil
			}
			cw, err := certwatcher.New(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
			if err == nil {
				w.set(cw.GetCertificate)
				return cw.Start(ctx)
			}
			// A pair read while it is written (a rotation): the self-signed certificate stays
			// until the next look; the failure is said once.
			if !logged {
				ctrl.Log.WithName("metrics").Error(err, "Cannot read the webhook's certificate; the metrics endpoint keeps its self-signed one and looks again", "certDir", dir, "every", certPollInterval)
				logged = true
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(certPollInterval):
			}
		}
	}
}

// servedCertificate is the webhook certificate of the running command (nil when it serves no
// webhook), which certificateCollector reports; a package variable because a collector is
// registered once per process, and the tests run the command several times in one.
var servedCertificate atomic.Pointer[webhookCertificate]

var (
	certNotAfter = prometheus.NewDesc("xenorchestra_webhook_certificate_not_after_timestamp_seconds",
		"Unix time at which the webhook's serving certificate expires (its NotAfter).", nil, nil)
	certNotBefore = prometheus.NewDesc("xenorchestra_webhook_certificate_not_before_timestamp_seconds",
		"Unix time from which the webhook's serving certificate is valid (its NotBefore); with the NotAfter, its lifetime.", nil, nil)
)

// certificateCollector reports the validity of the webhook's serving certificate at each
// scrape, whatever its source: the same certificate the webhook serves, read again.
type certificateCollector struct{}

func (certificateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- certNotAfter
	ch <- certNotBefore
}

func (certificateCollector) Collect(ch chan<- prometheus.Metric) {
	w := servedCertificate.Load()
	if w == nil {
		return
	}
	c, err := w.current()
	if err != nil || len(c.Certificate) == 0 {
		return
	}
	leaf := c.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
			return
		}
	}
	ch <- prometheus.MustNewConstMetric(certNotAfter, prometheus.GaugeValue, float64(leaf.NotAfter.Unix()))
	ch <- prometheus.MustNewConstMetric(certNotBefore, prometheus.GaugeValue, float64(leaf.NotBefore.Unix()))
}

func init() {
	metrics.Registry.MustRegister(certificateCollector{})
}
