package diagnose

import (
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
)

// metricsEndpoint stands in for a replica's secure metrics endpoint (HTTPS, a bearer token): a
// certificate ca issues for 127.0.0.1, 401 without the token, the body otherwise, so that each
// inventory state check tells apart can be served. It records the Authorization header of every
// request, to show where a token went.
//
// A stand-in rather than the controller's own filter (TokenReview + SubjectAccessReview,
// cmd/app's delegatedAuth): that filter is unexported, and its test export (app.DelegatedAuth,
// cmd/app/export_test.go) is compiled only into cmd/app's own tests, out of this package's
// reach; exporting it from the binary's code for this test alone is not worth it. check against
// the real filter of running replicas is tested in test/e2e (TestCheckHealthyInstall) and in
// the real-kubelet tier (test/kubelet TestChartOnRealNode), the filter itself by cmd/app's
// TestMetricsEndpoint and TestDelegatedAuthCaches.
type metricsEndpoint struct {
	url   string
	mu    sync.Mutex
	auths []string
}

func newMetricsEndpoint(t *testing.T, ca *testenv.CA, token, body string) *metricsEndpoint {
	t.Helper()
	m := &metricsEndpoint{}
	crt, key := ca.Issue(t, 3, "127.0.0.1")
	pair, err := tls.X509KeyPair(crt, key)
	if err != nil {
		t.Fatal(err)
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, ErrorLog: log.New(io.Discard, "", 0),
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			m.mu.Lock()
			m.auths = append(m.auths, r.Header.Get("Authorization"))
			m.mu.Unlock()
			if r.Header.Get("Authorization") != "Bearer "+token {
				http.Error(w, "Unauthorized", http.StatusUnauthorized)
				return
			}
			_, _ = io.WriteString(w, body)
		})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	m.url = "https://" + l.Addr().String()
	return m
}

// authorizations returns the Authorization headers received so far.
func (m *metricsEndpoint) authorizations() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.auths...)
}

// inventoryMetrics is a replica's inventory metrics for one XO server.
func inventoryMetrics(server string, listed time.Time, stream, trusted, settling int) string {
	var b strings.Builder
	b.WriteString("# TYPE xenorchestra_inventory_last_sync_timestamp_seconds gauge\n# TYPE xenorchestra_event_stream_up gauge\n# TYPE xenorchestra_inventory_pools gauge\n")
	if !listed.IsZero() {
		fmt.Fprintf(&b, "xenorchestra_inventory_last_sync_timestamp_seconds{server=%q} %d\n", server, listed.Unix())
	}
	fmt.Fprintf(&b, "xenorchestra_event_stream_up{server=%q} %d\n", server, stream)
	fmt.Fprintf(&b, "xenorchestra_inventory_pools{server=%q,state=\"trusted\"} %d\n", server, trusted)
	fmt.Fprintf(&b, "xenorchestra_inventory_pools{server=%q,state=\"settling\"} %d\n", server, settling)
	return b.String()
}

// TestCheckReplicas: each replica's inventory is read from its metrics over HTTPS with the
// user's bearer token, sent only to an endpoint whose certificate verifies (the webhook's CA
// bundle here); a current, a stale, a never-listed and a settling inventory are told apart;
// a kubeconfig without a token, a refused token and an unverifiable certificate are warnings
// with their fix; --insecure-skip-metrics-tls-verify sends the token anyway.
func TestCheckReplicas(t *testing.T) {
	e := newEstate(t, testenv.XOOptions{})
	const token = "metricsReaderToken0123456789abcdefABCDEF"
	r := installRelease(t, "check-replicas", releaseOptions{config: fmt.Sprintf("url: %s\ntoken: %s\n", e.URL, e.Token), available: true})
	ca := testenv.NewCA(t, "webhook-ca")
	r.webhookConfiguration(t, ca.PEM)
	server := strings.TrimPrefix(e.URL, "http://")
	now := time.Now()
	current := newMetricsEndpoint(t, ca, token, inventoryMetrics(server, now.Add(-20*time.Minute), 1, 1, 0))
	stale := newMetricsEndpoint(t, ca, token, inventoryMetrics(server, now.Add(-10*time.Minute), 0, 1, 0))
	never := newMetricsEndpoint(t, ca, token, inventoryMetrics(server, time.Time{}, 0, 0, 0))
	settling := newMetricsEndpoint(t, ca, token, inventoryMetrics(server, now, 1, 0, 1))
	untrusted := newMetricsEndpoint(t, testenv.NewCA(t, "unknown-ca"), token, inventoryMetrics(server, now, 1, 1, 0))
	endpoints := strings.Join([]string{current.url, stale.url, never.url, settling.url, untrusted.url}, ",")
	kc := kubeconfig(t)

	res := runWithStdin(t, token+"\n", nil, "check", "--kubeconfig="+kc, "--metrics-endpoints="+endpoints, "--metrics-token-file=-")
	res.line(t, "✔", "replica "+current.url+", XO server "+server+": inventory current (event stream up, listed 20m")
	res.failure(t, "XO relist failed", "replica "+stale.url, "the inventory is stale: last listing 10m", "no event stream")
	res.failure(t, "see XO servers above", "replica "+never.url, "never listed")
	res.line(t, "‼", "replica "+settling.url, "1 pool(s) still settling")
	res.line(t, "‼", "replica "+untrusted.url+": cannot read its metrics", "certificate not verified")
	if _, fix := res.line(t, "‼", "replica "+untrusted.url); !strings.Contains(fix, "--insecure-skip-metrics-tls-verify") {
		t.Errorf("the unverified endpoint's fix %q does not name --insecure-skip-metrics-tls-verify", fix)
	}
	if got := untrusted.authorizations(); len(got) != 0 {
		t.Errorf("the endpoint whose certificate does not verify got requests %q: the token must not be sent to it", got)
	}
	if got := current.authorizations(); len(got) != 1 || got[0] != "Bearer "+token {
		t.Errorf("the verified endpoint got the authorizations %q, want the token once", got)
	}
	if strings.Contains(res.out, token) {
		t.Error("the output holds the token")
	}

	// The kubeconfig authenticates with a client certificate: no token to send.
	res = run(t, nil, "check", "--kubeconfig="+kc, "--metrics-endpoints="+current.url)
	res.line(t, "‼", "replica "+current.url+": cannot read its metrics", "your kubeconfig authenticates with a client certificate")
	if _, fix := res.line(t, "‼", "replica "+current.url); !strings.Contains(fix, "--metrics-token-file=-") {
		t.Errorf("the fix %q does not say how to pass a token", fix)
	}
	// A token the endpoint refuses.
	res = runWithStdin(t, "wrong-token-0123456789", nil, "check", "--kubeconfig="+kc, "--metrics-endpoints="+current.url, "--metrics-token-file=-")
	res.line(t, "‼", "replica "+current.url+": cannot read its metrics: HTTP 401")
	// Told to send it anyway.
	res = runWithStdin(t, token, nil, "check", "--kubeconfig="+kc, "--metrics-endpoints="+untrusted.url, "--metrics-token-file=-", "--insecure-skip-metrics-tls-verify")
	res.line(t, "✔", "replica "+untrusted.url+", XO server "+server+": inventory current")
	if got := untrusted.authorizations(); len(got) != 1 {
		t.Errorf("with --insecure-skip-metrics-tls-verify the endpoint got %d requests, want 1", len(got))
	}
}
