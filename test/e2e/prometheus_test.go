package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/webhook"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/xosim"
)

// promFor is the for of the alerts the test fires, shortened through the chart's values, and
// promRate the window of their rates: the rules are the chart's, rendered with these values.
const (
	promFor  = "5s"
	promRate = "10s"
)

// TestPrometheus runs the controller's monitoring against a real Prometheus (hack/testbin.sh's
// prometheus, beside kube-apiserver): the controller binary with the chart's Deployment flags
// (the webhook's certificate from a folder, as cert-manager mounts it), on a real API server and
// the XO simulator; Prometheus scrapes its metrics endpoint as the chart's ServiceMonitor says
// (HTTPS, the webhook's CA and the server name the ServiceMonitor gives, the bearer token of a
// real ServiceAccount bound to the chart's metrics-reader ClusterRole) and loads the chart's
// PrometheusRule, rendered with the for of the two alerts it fires shortened to 5 s and a rate
// window of 10 s through values. It checks:
//   - every metric named by an alert or a panel of the chart's dashboard, parsed by Prometheus'
//     own parser (its /api/v1/parse_query), is one Prometheus scraped from the controller, and
//     every one of those queries runs;
//   - no alert is pending or firing while all is well;
//   - XO refusing the token: XenOrchestraCCMTokenRefused goes pending, then fires within its for;
//     given the token back, it resolves;
//   - XO's event stream cut: XenOrchestraCCMEventStreamDown the same.
//
// The times of each step are logged (BENCHMARKS.md, "Alerts against a real Prometheus").
func TestPrometheus(t *testing.T) {
	t.Parallel()
	promBin := testenv.AssetBinary(t, "prometheus")
	const ns, fullname = "xoccm-prom", "xoccm"
	objs := renderChart(t, ns, fullname, "metrics.serviceMonitor.enabled=true", "prometheusRule.enabled=true", "dashboard.enabled=true",
		`prometheusRule.rateInterval="`+promRate+`"`,
		`prometheusRule.alerts.XenOrchestraCCMTokenRefused.for="`+promFor+`"`,
		`prometheusRule.alerts.XenOrchestraCCMEventStreamDown.for="`+promFor+`"`)
	find := func(kind, name string) *unstructured.Unstructured {
		for _, o := range objs {
			if o.GetKind() == kind && o.GetName() == name {
				return o
			}
		}
		t.Fatalf("the render has no %s %s", kind, name)
		return nil
	}

	env := testenv.StartTest(t, testenv.Options{})
	ctx := context.Background()
	ensureNamespace(t, env.Client, ns)
	reader := find("ClusterRole", fullname+"-metrics-reader").DeepCopy()
	if err := env.Client.Create(ctx, reader); err != nil {
		t.Fatal(err)
	}

	// The controller, with the Deployment's flags but for what points into the pod.
	token := newToken(t)
	x := newXO(t, token, false)
	vm := x.addVM(t, x.poolA, x.hostA1, "prom-vm", "10.9.9.1")
	server := strings.TrimPrefix(x.URL, "http://") // the label of a server without a name
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "config.yaml", fmt.Sprintf("url: %s\ntoken: %q\ninventory: {settleTime: 1s, pollPeriod: 1s, staleAfter: 3s}\n", x.URL, token))
	svc := fullname + "-webhook"
	serverName := svc + "." + ns + ".svc"
	ca := testenv.NewCA(t, "prom-webhook-ca")
	var extra []string
	for _, a := range deploymentArgs(t, find("Deployment", fullname)) {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch name {
		case "config", "webhook-port", "webhook-cert-dir", "metrics-bind-address", "health-probe-bind-address", "zap-log-level", "shutdown-delay":
		default:
			extra = append(extra, a)
		}
	}
	port := testenv.FreePort(t)
	extra = append(extra, "--webhook-host=127.0.0.1", fmt.Sprintf("--webhook-port=%d", port),
		"--webhook-cert-dir="+ca.CertDir(t, 1, serverName, "localhost"), "--zap-log-level=debug", "--shutdown-delay=0s")
	// The chart's webhook configuration, pointed at this process, with the CA cert-manager's
	// cainjector would put in it.
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(find("MutatingWebhookConfiguration", fullname).Object, mwc); err != nil {
		t.Fatal(err)
	}
	for i := range mwc.Webhooks {
		mwc.Webhooks[i].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: ptr.To(fmt.Sprintf("https://localhost:%d%s", port, webhook.Path)), CABundle: ca.PEM}
	}
	if err := env.Client.Create(ctx, mwc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), mwc) })
	p := startCCM(t, "prom", ccmArgs{kubeconfig: writeKubeconfig(t, env), config: cfg, extra: extra, secureMetrics: true})
	p.waitReady(t, 60*time.Second)

	// Prometheus, configured as prometheus-operator configures it from the ServiceMonitor.
	sm := serviceMonitorEndpoint(t, find("ServiceMonitor", fullname))
	if sm.Scheme != "https" || sm.BearerTokenFile != "/var/run/secrets/kubernetes.io/serviceaccount/token" ||
		sm.TLSConfig.ServerName != serverName || sm.TLSConfig.CA.Secret.Name != svc+"-tls" || sm.TLSConfig.CA.Secret.Key != "ca.crt" {
		t.Fatalf("ServiceMonitor endpoint %+v: want HTTPS, Prometheus' token, the webhook's CA and %s", sm, serverName)
	}
	promDir := t.TempDir()
	// What Prometheus reads in its pod: its ServiceAccount's token, and the CA of the Secret the
	// ServiceMonitor names (what cert-manager puts in ca.crt).
	writeConfig(t, promDir, "token", testenv.ServiceAccountToken(t, env.Config, "monitoring", "prometheus", reader.GetName()))
	writeConfig(t, promDir, "ca.crt", string(ca.PEM))
	rule := find("PrometheusRule", fullname)
	groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
	rulesYAML, err := yaml.Marshal(map[string]any{"groups": groups})
	if err != nil {
		t.Fatal(err)
	}
	writeConfig(t, promDir, "rules.yaml", string(rulesYAML))
	job := fullname + "-metrics" // prometheus-operator's job: the Service's name
	promCfg := map[string]any{
		"global":     map[string]any{"scrape_interval": "1s", "evaluation_interval": "1s"},
		"rule_files": []string{filepath.Join(promDir, "rules.yaml")},
		"scrape_configs": []any{map[string]any{
			"job_name": job, "scheme": sm.Scheme, "metrics_path": sm.Path,
			"authorization": map[string]any{"credentials_file": filepath.Join(promDir, "token")},
			"tls_config":    map[string]any{"ca_file": filepath.Join(promDir, "ca.crt"), "server_name": sm.TLSConfig.ServerName},
			"static_configs": []any{map[string]any{
				"targets": []string{p.metrics},
				"labels":  map[string]string{"namespace": ns, "pod": fullname + "-0", "service": job, "endpoint": sm.Port},
			}},
		}},
	}
	b, err := yaml.Marshal(promCfg)
	if err != nil {
		t.Fatal(err)
	}
	prom := startPrometheus(t, promBin, writeConfig(t, promDir, "prometheus.yml", string(b)), promDir)
	start := time.Now()
	testenv.WaitFor(t, 60*time.Second, "Prometheus scraping the controller", func() error {
		v, err := prom.query(fmt.Sprintf(`up{job=%q}`, job))
		if err != nil {
			return err
		}
		if len(v) != 1 || v[0].Value[1] != "1" {
			return fmt.Errorf("up = %v (%s)", v, prom.targetError())
		}
		return nil
	})
	t.Logf("Prometheus scraping the controller over HTTPS with a ServiceAccount token %s after its start", time.Since(start).Round(100*time.Millisecond))

	// Everything the controller exports once it has worked: a Node through the admission chain
	// (the webhook's series), initialized (the controllers'), an XO event.
	n := testenv.KubeletNode("prom-node", testenv.WithSystemUUID(x.systemUUID(t, vm)))
	env.AddNode(t, n)
	if n.Spec.ProviderID == "" {
		t.Fatal("the Node was not described by the webhook at CREATE")
	}
	testenv.WaitFor(t, 30*time.Second, "the Node initialized", func() error { return initialized(env.Client, n.Name) })
	if err := x.sim.Migrate(vm, x.hostA2); err != nil {
		t.Fatal(err)
	}
	exported := prom.exportedNames(t, job, "xenorchestra_events_total", "xenorchestra_webhook_admissions_total", "leader_election_master_status", "xenorchestra_nodes")

	t.Run("the alerts and the dashboard name only exported metrics", func(t *testing.T) {
		exprs := map[string]string{}
		for _, g := range groups {
			rules, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
			for _, r := range rules {
				r := r.(map[string]any)
				exprs["alert "+r["alert"].(string)] = r["expr"].(string)
			}
		}
		for title, expr := range dashboardQueries(t, find("ConfigMap", fullname+"-dashboard"), map[string]string{"job": job, "namespace": ns, "__rate_interval": "1m"}) {
			exprs["panel "+title] = expr
		}
		if len(exprs) < 30 {
			t.Fatalf("only %d queries", len(exprs))
		}
		// The walk of the syntax tree finds every kind of selector.
		names, err := prom.metricNames(`sum by (x) (rate(a_total{j="1"}[5m])) / on () group_left b or {__name__="c"} or absent(d offset 1m)`)
		slices.Sort(names)
		if err != nil || !slices.Equal(names, []string{"a_total", "b", "c", "d"}) {
			t.Fatalf("names of a test expression: %v %v, want a_total, b, c, d", names, err)
		}
		for what, expr := range exprs {
			names, err := prom.metricNames(expr)
			if err != nil {
				t.Errorf("%s: Prometheus does not parse it: %v\n%s", what, err, expr)
				continue
			}
			for _, name := range names {
				// up is Prometheus' own series of each target.
				if name != "up" && !slices.Contains(exported, name) {
					t.Errorf("%s names %s, which the controller does not export\n%s", what, name, expr)
				}
			}
			if _, err := prom.query(expr); err != nil {
				t.Errorf("%s does not run: %v\n%s", what, err, expr)
			}
		}
	})

	// All is well: no alert pending or firing.
	prom.waitNoAlert(t, "while all is well")

	t.Run("XO refuses the token", func(t *testing.T) {
		prom.fireAndResolve(t, "XenOrchestraCCMTokenRefused", map[string]string{"server": server, "namespace": ns, "severity": "critical"},
			"the token refused", func() {
				// Revoked, and the open event stream cut as an XO restart cuts it: every
				// request of the controller is refused from now on.
				x.sim.RevokeToken(token)
				x.sim.CutEventStreams()
			},
			"it was accepted again", func() { x.sim.AddToken(token) })
		prom.waitNoAlert(t, "once XO accepts the token")
	})

	t.Run("XO's event stream cut", func(t *testing.T) {
		var fault xosim.FaultID
		prom.fireAndResolve(t, "XenOrchestraCCMEventStreamDown", map[string]string{"server": server, "namespace": ns, "pod": fullname + "-0", "severity": "warning"},
			"the cut", func() {
				fault = x.sim.InjectFault(xosim.Fault{Kind: xosim.FaultStatus, Status: http.StatusServiceUnavailable, PathPrefix: "/rest/v0/events"})
				x.sim.CutEventStreams()
			},
			"XO took subscriptions again (the controller reconnects after its backoff)", func() { x.sim.RemoveFault(fault) })
	})
}

// fireAndResolve causes the trouble of alert name, waits until it fires with labels among its
// own (pending first, see waitAlert), then cures the trouble and waits until the alert
// resolves; it logs how long each took. How long the alert stays pending is Prometheus' `for`
// semantics, not ours: logged, not asserted.
func (p *prometheus) fireAndResolve(t *testing.T, name string, labels map[string]string, trouble string, cause func(), cured string, cure func()) {
	t.Helper()
	t0 := time.Now()
	cause()
	pending, firing := p.waitAlert(t, name, labels)
	t1 := time.Now()
	cure()
	resolved := p.waitResolved(t, name)
	t.Logf("%s (for %s, rate window %s): pending %s after %s, firing %s after, resolved %s after %s",
		name, promFor, promRate, pending.Sub(t0).Round(100*time.Millisecond), trouble, firing.Sub(t0).Round(100*time.Millisecond),
		resolved.Sub(t1).Round(100*time.Millisecond), cured)
}

// waitNoAlert waits until no alert is pending or firing.
func (p *prometheus) waitNoAlert(t *testing.T, when string) {
	t.Helper()
	testenv.WaitFor(t, 60*time.Second, "no alert "+when, func() error {
		if a := p.alerts(t); len(a) != 0 {
			return fmt.Errorf("alerts %v", a)
		}
		return nil
	})
}

// deploymentArgs returns the args of a rendered Deployment's manager container.
func deploymentArgs(t *testing.T, d *unstructured.Unstructured) []string {
	t.Helper()
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	for _, c := range containers {
		if c, _ := c.(map[string]any); c["name"] == "manager" {
			args, _, _ := unstructured.NestedStringSlice(c, "args")
			return args
		}
	}
	t.Fatal("no manager container")
	return nil
}

// smEndpoint is the part of a ServiceMonitor's endpoint the test translates into Prometheus'
// configuration.
type smEndpoint struct {
	Port, Path, Scheme, BearerTokenFile string
	TLSConfig                           struct {
		ServerName string
		CA         struct{ Secret struct{ Name, Key string } }
	}
}

// serviceMonitorEndpoint returns the one endpoint of a rendered ServiceMonitor.
func serviceMonitorEndpoint(t *testing.T, sm *unstructured.Unstructured) smEndpoint {
	t.Helper()
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(endpoints) != 1 {
		t.Fatalf("ServiceMonitor has %d endpoints", len(endpoints))
	}
	b, err := json.Marshal(endpoints[0])
	if err != nil {
		t.Fatal(err)
	}
	var e smEndpoint
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatal(err)
	}
	return e
}

// grafanaVar is a variable in a Grafana query: $name or ${name}.
var grafanaVar = regexp.MustCompile(`\$\{?(\w+)\}?`)

// dashboardQueries returns the queries of the dashboard in a rendered ConfigMap, by panel title
// and query number, with the Grafana variables replaced by vars.
func dashboardQueries(t *testing.T, cm *unstructured.Unstructured, vars map[string]string) map[string]string {
	t.Helper()
	data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
	var d struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal([]byte(data["xenorchestra-cloud-controller-manager.json"]), &d); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range d.Panels {
		for i, q := range p.Targets {
			out[fmt.Sprintf("%s #%d", p.Title, i+1)] = grafanaVar.ReplaceAllStringFunc(q.Expr, func(v string) string {
				name := grafanaVar.FindStringSubmatch(v)[1]
				val, ok := vars[name]
				if !ok {
					t.Errorf("panel %q uses $%s", p.Title, name)
				}
				return val
			})
		}
	}
	return out
}

// prometheus is a Prometheus server run for one test.
type prometheus struct {
	url string
	out *testenv.SyncBuffer
}

// startPrometheus runs the prometheus binary with the configuration file and a data folder of
// its own until the test ends, and waits until it is ready.
func startPrometheus(t *testing.T, bin, config, dir string) *prometheus {
	t.Helper()
	addr := testenv.FreeAddr(t)
	p := &prometheus{url: "http://" + addr, out: &testenv.SyncBuffer{}}
	cmd := exec.Command(bin, "--config.file="+config, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("--- prometheus (tail) ---\n%s", tail(p.out.Bytes(), 4000))
		}
	})
	testenv.WaitFor(t, 60*time.Second, "Prometheus ready", func() error {
		select {
		case <-done:
			t.Fatalf("prometheus exited:\n%s", p.out.String())
		default:
		}
		status, body, err := httpGet(p.url + "/-/ready")
		if err != nil || status != http.StatusOK {
			return fmt.Errorf("%d %s %v", status, body, err)
		}
		return nil
	})
	return p
}

// api GETs a Prometheus API path with query parameters and decodes its data into out.
func (p *prometheus) api(path string, params url.Values, out any) error {
	resp, err := http.Get(p.url + path + "?" + params.Encode()) //nolint:gosec // the test's own Prometheus
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var r struct {
		Status, Error string
		Data          json.RawMessage
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("%s: %w: %s", path, err, b)
	}
	if r.Status != "success" {
		return fmt.Errorf("%s: %s", path, r.Error)
	}
	return json.Unmarshal(r.Data, out)
}

// sample is one element of an instant vector.
type sample struct {
	Metric map[string]string
	Value  [2]any
}

// query evaluates an instant query.
func (p *prometheus) query(q string) ([]sample, error) {
	var r struct {
		ResultType string
		Result     json.RawMessage
	}
	if err := p.api("/api/v1/query", url.Values{"query": {q}}, &r); err != nil {
		return nil, err
	}
	var v []sample
	if r.ResultType == "vector" {
		if err := json.Unmarshal(r.Result, &v); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// targetError returns the last scrape error of every target, for failure messages.
func (p *prometheus) targetError() string {
	var r struct {
		ActiveTargets []struct{ ScrapeURL, LastError, Health string }
	}
	if err := p.api("/api/v1/targets", nil, &r); err != nil {
		return err.Error()
	}
	return fmt.Sprint(r.ActiveTargets)
}

// exportedNames waits until Prometheus has scraped each of want from job, and returns the
// names of every series it scraped from job.
func (p *prometheus) exportedNames(t *testing.T, job string, want ...string) []string {
	t.Helper()
	var names []string
	testenv.WaitFor(t, 60*time.Second, "Prometheus holding "+strings.Join(want, ", "), func() error {
		if err := p.api("/api/v1/label/__name__/values", url.Values{"match[]": {fmt.Sprintf(`{job=%q}`, job)}}, &names); err != nil {
			return err
		}
		for _, w := range want {
			if !slices.Contains(names, w) {
				return fmt.Errorf("no %s among %d names", w, len(names))
			}
		}
		return nil
	})
	return names
}

// metricNames returns the metric names an expression selects, from the syntax tree Prometheus'
// own parser gives (/api/v1/parse_query).
func (p *prometheus) metricNames(expr string) ([]string, error) {
	var tree any
	if err := p.api("/api/v1/parse_query", url.Values{"query": {expr}}, &tree); err != nil {
		return nil, err
	}
	var names []string
	var walk func(any)
	walk = func(n any) {
		switch n := n.(type) {
		case map[string]any:
			if n["type"] == "vectorSelector" || n["type"] == "matrixSelector" {
				name, _ := n["name"].(string)
				if name == "" {
					// {__name__="..."}
					ms, _ := n["matchers"].([]any)
					for _, m := range ms {
						if m, _ := m.(map[string]any); m["name"] == "__name__" {
							name, _ = m["value"].(string)
						}
					}
				}
				if name == "" {
					names = append(names, "(a selector without a metric name)")
				} else if !slices.Contains(names, name) {
					names = append(names, name)
				}
			}
			for _, v := range n {
				walk(v)
			}
		case []any:
			for _, v := range n {
				walk(v)
			}
		}
	}
	walk(tree)
	if len(names) == 0 {
		return nil, errors.New("the expression selects no series")
	}
	return names, nil
}

// alert is one of Prometheus' active alerts.
type alert struct {
	Labels   map[string]string
	State    string
	ActiveAt time.Time
}

func (a alert) String() string { return a.Labels["alertname"] + "(" + a.State + ")" }

// alerts returns the pending and firing alerts.
func (p *prometheus) alerts(t *testing.T) []alert {
	t.Helper()
	var r struct{ Alerts []alert }
	if err := p.api("/api/v1/alerts", nil, &r); err != nil {
		t.Fatal(err)
	}
	return r.Alerts
}

// waitAlert waits until the alert name fires with labels among its own, and returns when it
// became pending (Prometheus' activeAt) and when the test saw it firing. It fails when the test
// never saw it pending first.
func (p *prometheus) waitAlert(t *testing.T, name string, labels map[string]string) (pending, firing time.Time) {
	t.Helper()
	seenPending := false
	testenv.WaitFor(t, 90*time.Second, name+" firing", func() error {
		for _, a := range p.alerts(t) {
			if a.Labels["alertname"] != name {
				continue
			}
			for k, v := range labels {
				if a.Labels[k] != v {
					t.Fatalf("%s has labels %v, want %v among them", name, a.Labels, labels)
				}
			}
			pending = a.ActiveAt
			if a.State != "firing" {
				seenPending = true
				return errors.New("pending")
			}
			firing = time.Now()
			return nil
		}
		return errors.New("inactive")
	})
	if !seenPending {
		t.Errorf("%s was never seen pending before it fired", name)
	}
	return pending, firing
}

// waitResolved waits until the alert name is neither pending nor firing, and returns when.
func (p *prometheus) waitResolved(t *testing.T, name string) time.Time {
	t.Helper()
	testenv.WaitFor(t, 90*time.Second, name+" resolved", func() error {
		for _, a := range p.alerts(t) {
			if a.Labels["alertname"] == name {
				return fmt.Errorf("still %s", a.State)
			}
		}
		return nil
	})
	return time.Now()
}
