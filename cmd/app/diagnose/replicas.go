package diagnose

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/config"
)

// The inventory's metrics a replica exports for each XO server (docs/metrics.md).
const (
	metricLastSync = "xenorchestra_inventory_last_sync_timestamp_seconds"
	metricStreamUp = "xenorchestra_event_stream_up"
	metricPools    = "xenorchestra_inventory_pools"
)

// metricsPortName is the name of the controller container's metrics port in the chart.
const metricsPortName = "metrics"

// errUnverified marks a metrics endpoint whose certificate could not be verified, and
// errNoToken the lack of a token to send to one that is.
var (
	errUnverified = errors.New("certificate not verified")
	errNoToken    = errors.New("no bearer token")
)

// httpStatus is a metrics endpoint's answer other than 200.
type httpStatus int

func (h httpStatus) Error() string { return fmt.Sprintf("HTTP %d %s", int(h), http.StatusText(int(h))) }

// scraper reads the replicas' metrics: over HTTPS with the user's bearer token, sent only to
// an endpoint whose certificate verifies (unless --insecure-skip-metrics-tls-verify), or over
// plain HTTP without it.
type scraper struct {
	s *session
	// auth adds the user's credentials to a request; nil without a token, and authErr says
	// why.
	auth    func(http.RoundTripper) http.RoundTripper
	authErr error
	// roots verify a replica's certificate, for one of names.
	roots *x509.CertPool
	names []string
}

// checkReplicas reads each running replica's metrics (through a port-forward to its metrics
// port, or at --metrics-endpoints) and checks that its inventory of each XO server is current:
// the webhook on every replica serves from its own.
func (s *session) checkReplicas(ctx context.Context) {
	if s.rel.Flags.MetricsBindAddress == "0" {
		s.rep.warn(secReplicas, "the replicas serve no metrics (--metrics-bind-address=0): their inventories cannot be read", "metrics.enabled: true")
		return
	}
	targets := s.replicaTargets()
	if len(targets) == 0 {
		s.rep.fail(secReplicas, "no replica runs", "see Release above")
		return
	}
	sc := &scraper{s: s}
	sc.authErr = sc.setAuth()
	sc.setRoots(ctx)
	tokenFix := "pass a token: kubectl -n <namespace> create token <serviceaccount> | kubectl xenorchestra check --metrics-token-file=- (a ServiceAccount allowed to get the non-resource URL /metrics)"
	for _, t := range targets {
		fams, how, err := sc.scrape(ctx, t)
		if err != nil {
			l := Line{Status: Warning, Message: fmt.Sprintf("replica %s: cannot read its metrics: %v", t.Name, err)}
			var status httpStatus
			switch {
			case errors.Is(err, errUnverified):
				l.Fix = "make the metrics endpoint's certificate verifiable (docs/metrics.md), or pass --insecure-skip-metrics-tls-verify to send your token anyway"
			case errors.Is(err, errNoToken):
				l.Fix = tokenFix
			case errors.Is(err, errTunnel):
				l.Fix = "a port-forward needs create on pods/portforward in " + t.Namespace + ", and the API server's way to the kubelet (kubectl port-forward fails alike)"
			case errors.As(err, &status) && status == http.StatusUnauthorized:
				l.Fix = "the endpoint reviews bearer tokens with the API server, which did not accept yours (none, expired, or of a deleted ServiceAccount): " + tokenFix
			case errors.As(err, &status) && status == http.StatusInternalServerError:
				l.Fix = "the replica could not reach the API server to review your token: check its log (kubectl logs) and its ServiceAccount's create on tokenreviews and subjectaccessreviews"
			case errors.As(err, &status) && status == http.StatusForbidden:
				l.Fix = "grant your user get on the non-resource URL /metrics (a ClusterRole with nonResourceURLs: [\"/metrics\"], verbs: [\"get\"])"
			}
			s.rep.add(secReplicas, l)
			continue
		}
		if how == "http" {
			s.rep.warn(secReplicas, fmt.Sprintf("replica %s serves its metrics over plain HTTP, without authentication: anyone who reaches the Pod reads them", t.Name),
				"serve the metrics over HTTPS behind authentication (docs/metrics.md)")
		}
		s.inventoryState(t, fams)
	}
}

// replicaTargets returns the replicas' metrics endpoints: --metrics-endpoints, else the
// metrics port of each running Pod of the release.
func (s *session) replicaTargets() []target {
	var out []target
	if s.o.MetricsEndpoints != "" {
		for _, e := range strings.Split(s.o.MetricsEndpoints, ",") {
			if e = strings.TrimSpace(e); e == "" {
				continue
			}
			u, err := url.Parse(e)
			host := e
			if err == nil && u.Host != "" {
				host = u.Host
			}
			out = append(out, target{Name: e, Addr: host})
		}
		return out
	}
	port := int32(0)
	if _, p, err := net.SplitHostPort(s.rel.Flags.MetricsBindAddress); err == nil {
		if n, err := strconv.Atoi(p); err == nil {
			port = int32(n)
		}
	}
	for _, p := range s.rel.Pods {
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			continue
		}
		pp := port
		if c := managerContainer(&p.Spec); c != nil {
			for _, cp := range c.Ports {
				if cp.Name == metricsPortName {
					pp = cp.ContainerPort
				}
			}
		}
		out = append(out, target{Name: p.Name, Namespace: p.Namespace, Pod: p.Name, Port: pp})
	}
	return out
}

// setAuth sets the credentials sent to the replicas: --metrics-token-file, else the
// kubeconfig's bearer token (a token, a token file, an exec or auth provider plugin). A client
// certificate cannot be sent: the endpoint reviews tokens.
func (sc *scraper) setAuth() error {
	s := sc.s
	if f := s.o.MetricsTokenFile; f != "" {
		var b []byte
		var err error
		if f == "-" {
			in := s.o.stdin
			if in == nil {
				in = os.Stdin
			}
			b, err = io.ReadAll(io.LimitReader(in, 1<<20))
		} else {
			b, err = os.ReadFile(f)
		}
		token := strings.TrimSpace(string(b))
		if err == nil && token == "" {
			err = errors.New("empty")
		}
		if err != nil {
			return fmt.Errorf("%w: --metrics-token-file: %w", errNoToken, err)
		}
		s.rep.hide(token)
		sc.auth = func(rt http.RoundTripper) http.RoundTripper {
			return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
				r = r.Clone(r.Context())
				r.Header.Set("Authorization", "Bearer "+token)
				return rt.RoundTrip(r)
			})
		}
		return nil
	}
	c := s.rest
	if c.BearerToken == "" && c.BearerTokenFile == "" && c.ExecProvider == nil && c.AuthProvider == nil {
		return fmt.Errorf("%w: your kubeconfig authenticates with a client certificate, and a metrics endpoint reviews bearer tokens", errNoToken)
	}
	s.rep.hide(c.BearerToken)
	// Only the token: no basic auth, no impersonation.
	tokenOnly := &rest.Config{Host: c.Host, BearerToken: c.BearerToken, BearerTokenFile: c.BearerTokenFile,
		ExecProvider: c.ExecProvider, AuthProvider: c.AuthProvider, AuthConfigPersister: c.AuthConfigPersister}
	sc.auth = func(rt http.RoundTripper) http.RoundTripper {
		w, err := rest.HTTPWrappersForConfig(tokenOnly, rt)
		if err != nil {
			return roundTripperFunc(func(*http.Request) (*http.Response, error) { return nil, err })
		}
		return w
	}
	return nil
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// setRoots sets what verifies a replica's certificate: the system's roots and the webhook's CA
// bundle (the certificate may be the webhook's), for the names of the release's Services
// (<service>.<namespace>.svc) or the host of --metrics-endpoints.
func (sc *scraper) setRoots(ctx context.Context) {
	s := sc.s
	roots, err := x509.SystemCertPool()
	if err != nil || roots == nil {
		roots = x509.NewCertPool()
	}
	if _, hook, err := s.findWebhook(ctx); err == nil && hook != nil {
		roots.AppendCertsFromPEM(hook.ClientConfig.CABundle)
	}
	sc.roots = roots
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	if svcs, err := s.cs.CoreV1().Services(s.rel.Namespace).List(ctx, metav1.ListOptions{LabelSelector: labelInstance + "=" + s.rel.Name}); err == nil {
		for _, svc := range svcs.Items {
			sc.names = append(sc.names, svc.Name+"."+svc.Namespace+".svc")
		}
	}
}

// scrape reads a replica's metrics, over HTTPS when it speaks TLS, else plain HTTP; how is
// "https" or "http".
func (sc *scraper) scrape(ctx context.Context, t target) (map[string]*dto.MetricFamily, string, error) {
	ctx, cancel := context.WithTimeout(ctx, sc.s.o.Timeout)
	defer cancel()
	tun, err := sc.s.open(ctx, t)
	if err != nil {
		return nil, "", err
	}
	defer tun.Close()
	names := sc.names
	if t.Addr != "" {
		host, _, _ := net.SplitHostPort(t.Addr)
		names = []string{host}
	}
	tlsConfig := &tls.Config{
		MinVersion: tls.VersionTLS12,
		// Verified by VerifyConnection: for any of the release's Service names.
		InsecureSkipVerify: true, //nolint:gosec // see VerifyConnection
		VerifyConnection: func(cs tls.ConnectionState) error {
			if sc.s.o.InsecureMetrics {
				return nil
			}
			last := errors.New("no name to verify it for")
			for _, n := range names {
				if last = verifyChain(cs.PeerCertificates, sc.roots, n); last == nil {
					return nil
				}
			}
			return fmt.Errorf("%w: %w", errUnverified, last)
		},
	}
	how := "https"
	d := tls.Dialer{Config: tlsConfig}
	conn, err := d.DialContext(ctx, "tcp", tun.Addr)
	var rh tls.RecordHeaderError
	switch {
	case errors.As(err, &rh):
		how = "http"
	case err != nil:
		return nil, "", tun.explain(err)
	default:
		_ = conn.Close()
	}
	var rt http.RoundTripper = &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", tun.Addr)
		},
		TLSClientConfig: tlsConfig,
	}
	if how == "https" {
		if sc.auth == nil {
			return nil, how, fmt.Errorf("it serves HTTPS behind authentication: %w", sc.authErr)
		}
		rt = sc.auth(rt)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, how+"://"+tun.Addr+"/metrics", nil)
	if err != nil {
		return nil, how, err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := (&http.Client{Transport: rt}).Do(req)
	if err != nil {
		return nil, how, tun.explain(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, how, httpStatus(resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, how, fmt.Errorf("the metrics do not parse: %w", err)
	}
	return fams, how, nil
}

// inventoryState checks, from one replica's metrics, that its inventory of each XO server is
// current: listed, and kept current by the event stream or listed less than
// inventory.staleAfter ago; and says which pools still settle.
func (s *session) inventoryState(t target, fams map[string]*dto.MetricFamily) {
	replica, logs := t.Name, "the replica's log"
	if t.Pod != "" {
		logs = "kubectl -n " + t.Namespace + " logs " + t.Pod
	}
	byServer := func(name string) map[string]float64 {
		out := map[string]float64{}
		if f := fams[name]; f != nil {
			for _, m := range f.Metric {
				switch {
				case m.Gauge != nil:
					out[label(m, "server")+"/"+label(m, "state")] = m.Gauge.GetValue()
				case m.Untyped != nil: // an exposition without # TYPE lines
					out[label(m, "server")+"/"+label(m, "state")] = m.Untyped.GetValue()
				}
			}
		}
		return out
	}
	sync, stream, pools := byServer(metricLastSync), byServer(metricStreamUp), byServer(metricPools)
	var servers []string
	staleAfter := config.DefaultStaleAfter
	if s.cfg != nil {
		staleAfter = s.cfg.Inventory.StaleAfter
		for _, c := range s.cfg.Clusters {
			if c.IsEnabled() {
				servers = append(servers, c.Name)
			}
		}
	} else {
		for k := range stream {
			servers = append(servers, strings.TrimSuffix(k, "/"))
		}
		slices.Sort(servers)
	}
	if len(servers) == 0 {
		s.rep.warn(secReplicas, "replica "+replica+" exports no inventory metrics", "is it this project's controller? (metric "+metricStreamUp+")")
	}
	for _, name := range servers {
		who := fmt.Sprintf("replica %s, XO server %s", replica, name)
		ts, listed := sync[name+"/"]
		if !listed {
			s.rep.fail(secReplicas, who+": never listed: the replica is not Ready, and its webhook cannot describe this server's Nodes",
				"see XO servers above; the replica's log says why (XO relist failed): "+logs)
			continue
		}
		age := time.Since(time.Unix(int64(ts), 0)).Round(time.Second)
		settling, trusted := pools[name+"/settling"], pools[name+"/trusted"]
		switch {
		case stream[name+"/"] != 1 && age > staleAfter:
			s.rep.fail(secReplicas, fmt.Sprintf("%s: the inventory is stale: last listing %s ago and no event stream (inventory.staleAfter %s): matches by name or address, taints and deletions wait", who, age, staleAfter),
				"the replica's log says why (XO relist failed, XO event stream broken): "+logs)
		case settling > 0:
			s.rep.warn(secReplicas, fmt.Sprintf("%s: %g pool(s) still settling after a (re)connection (inventory.settleTime): matches by name or address and deletions wait for them", who, settling),
				"they settle by themselves within the settle time; a pool settling for long is reconnecting again and again (XO's logs)")
		case stream[name+"/"] == 1:
			s.rep.ok(secReplicas, "%s: inventory current (event stream up, listed %s ago), %g pool(s) trusted", who, age, trusted)
		default:
			s.rep.ok(secReplicas, "%s: inventory current (listed %s ago, no event stream), %g pool(s) trusted", who, age, trusted)
		}
	}
}

// label returns the value of a metric's label.
func label(m *dto.Metric, name string) string {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
