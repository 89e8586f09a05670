package charts

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
)

// alertTestsDir holds promtool's unit tests of the chart's alerts, each file naming the rendered
// rules as rules.yaml.
var alertTestsDir = filepath.Join(repoRoot, "charts", "testdata", "alerts")

// defaultRunbookURL is prometheusRule.runbookURL's default.
const defaultRunbookURL = "https://github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/blob/main/docs/runbooks.md"

// rule is one alerting rule of the PrometheusRule.
type rule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// prometheusRule is the part of a rendered PrometheusRule these tests read.
type prometheusRule struct {
	Metadata struct {
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []rule `json:"rules"`
		} `json:"groups"`
	} `json:"spec"`
}

// renderRules renders the PrometheusRule with set and returns it and its alerts.
func renderRules(t *testing.T, set ...string) (*prometheusRule, []rule) {
	t.Helper()
	o := render(t, "", append([]string{"prometheusRule.enabled=true"}, set...)...)
	m := o.find("PrometheusRule", chartName)
	if m == nil {
		t.Fatalf("no PrometheusRule rendered; have %v", o.kinds())
	}
	var pr prometheusRule
	if err := yaml.Unmarshal(m.doc, &pr); err != nil {
		t.Fatal(err)
	}
	var rules []rule
	for _, g := range pr.Spec.Groups {
		rules = append(rules, g.Rules...)
	}
	return &pr, rules
}

// TestAlertRules runs promtool on the chart's PrometheusRule as its default values render it (as
// release xenorchestra-cloud-controller-manager in xo-system, the labels of the tests' series):
// `check rules` on the rules, then `test rules` on every file of testdata/alerts, which hold the
// cases in which each alert fires and those in which it stays silent, among them the healthy
// deployment of several replicas (the inventory's series on every replica, the controllers' on
// the leader only). Every alert must have both kinds of case.
func TestAlertRules(t *testing.T) {
	promtool := testenv.AssetBinary(t, "promtool")
	pr, rules := renderRules(t)
	dir := t.TempDir()
	groups, err := yaml.Marshal(map[string]any{"groups": pr.Spec.Groups})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), groups, 0o600); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(alertTestsDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no promtool tests in %s: %v", alertTestsDir, err)
	}
	fires, silent := map[string]bool{}, map[string]bool{}
	var names []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o600); err != nil {
			t.Fatal(err)
		}
		names = append(names, filepath.Base(f))
		var tests struct {
			Tests []struct {
				AlertRuleTest []struct {
					Alertname string `json:"alertname"`
					ExpAlerts []any  `json:"exp_alerts"`
				} `json:"alert_rule_test"`
			} `json:"tests"`
		}
		if err := yaml.Unmarshal(b, &tests); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, tc := range tests.Tests {
			for _, a := range tc.AlertRuleTest {
				if len(a.ExpAlerts) > 0 {
					fires[a.Alertname] = true
				} else {
					silent[a.Alertname] = true
				}
			}
		}
	}
	for _, r := range rules {
		if !fires[r.Alert] {
			t.Errorf("%s: no promtool test in which it fires", r.Alert)
		}
		if !silent[r.Alert] {
			t.Errorf("%s: no promtool test in which it stays silent", r.Alert)
		}
	}

	run := func(args ...string) {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("check", "rules", "--lint-fatal", "rules.yaml")
	run(append([]string{"test", "rules"}, names...)...)
}

// TestAlertsDocumented checks every alert's labels and annotations and its runbook: a severity
// kubernetes-mixin uses, a summary, a description, a runbook_url pointing to the alert's own
// section of docs/runbooks.md, and that section saying what the alert means, how to confirm it
// and what to do; no section for an alert that does not exist. values.yaml lists every alert.
func TestAlertsDocumented(t *testing.T) {
	_, rules := renderRules(t)
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs", "runbooks.md"))
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]string{}
	for _, s := range strings.Split(string(b), "\n## ")[1:] {
		title, body, _ := strings.Cut(s, "\n")
		sections[title] = body
	}
	var alerts []string
	for _, r := range rules {
		alerts = append(alerts, r.Alert)
		if !slices.Contains([]string{"critical", "warning", "info"}, r.Labels["severity"]) {
			t.Errorf("%s: severity %q", r.Alert, r.Labels["severity"])
		}
		for _, a := range []string{"summary", "description"} {
			if strings.TrimSpace(r.Annotations[a]) == "" {
				t.Errorf("%s: no %s", r.Alert, a)
			}
		}
		if want := defaultRunbookURL + "#" + strings.ToLower(r.Alert); r.Annotations["runbook_url"] != want {
			t.Errorf("%s: runbook_url %q, want %q", r.Alert, r.Annotations["runbook_url"], want)
		}
		body, ok := sections[r.Alert]
		if !ok {
			t.Errorf("%s: no section ## %s in docs/runbooks.md", r.Alert, r.Alert)
			continue
		}
		for _, part := range []string{"**Meaning.**", "**How to confirm.**", "**What to do.**"} {
			if !strings.Contains(body, part) {
				t.Errorf("docs/runbooks.md %s: no %s", r.Alert, part)
			}
		}
		if !strings.Contains(string(b), "- ["+r.Alert+"](#"+strings.ToLower(r.Alert)+")") {
			t.Errorf("docs/runbooks.md does not list %s at its top", r.Alert)
		}
	}
	for title := range sections {
		if !slices.Contains(alerts, title) {
			t.Errorf("docs/runbooks.md has a section for %q, which is no alert of the chart", title)
		}
	}
	var values struct {
		PrometheusRule struct {
			Alerts map[string]any `json:"alerts"`
		} `json:"prometheusRule"`
	}
	vb, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(vb, &values); err != nil {
		t.Fatal(err)
	}
	var listed []string
	for a := range values.PrometheusRule.Alerts {
		listed = append(listed, a)
	}
	slices.Sort(listed)
	slices.Sort(alerts)
	if !slices.Equal(listed, alerts) {
		t.Errorf("values.yaml prometheusRule.alerts %v, rendered alerts %v", listed, alerts)
	}
	metricsDoc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range alerts {
		if !strings.Contains(string(metricsDoc), "[`"+a+"`](runbooks.md#"+strings.ToLower(a)+")") {
			t.Errorf("docs/metrics.md's alerts table has no row for %s linking its runbook", a)
		}
	}
}

// selectorRE finds the label matchers of every series selector of an expression: what follows
// a metric name, up to the closing brace.
var selectorRE = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*\{([^}]*)\}`)

// TestPrometheusRuleValues renders the alerts with every value changed and checks each is
// applied: for, severity and enabled per alert, the extra labels of the alerts and of the
// object, the selector in every series selector, the rate window and the runbooks' URL.
func TestPrometheusRuleValues(t *testing.T) {
	pr, rules := renderRules(t,
		"prometheusRule.alerts.XenOrchestraCCMDown.for=1m", "prometheusRule.alerts.XenOrchestraCCMDown.severity=page",
		"prometheusRule.alerts.XenOrchestraCCMPoolsSettling.enabled=false",
		"prometheusRule.alertLabels.team=infra", "prometheusRule.labels.release=prometheus",
		`prometheusRule.selector=job="xoccm"\,cluster="c1"`, "prometheusRule.rateInterval=2m",
		"prometheusRule.runbookURL=https://wiki.example.com/xoccm")
	if pr.Metadata.Labels["release"] != "prometheus" {
		t.Errorf("PrometheusRule labels %v lack release=prometheus", pr.Metadata.Labels)
	}
	for _, r := range rules {
		switch {
		case r.Alert == "XenOrchestraCCMPoolsSettling":
			t.Error("XenOrchestraCCMPoolsSettling rendered though disabled")
		case r.Alert == "XenOrchestraCCMDown" && (r.For != "1m" || r.Labels["severity"] != "page"):
			t.Errorf("XenOrchestraCCMDown for %s severity %s, want 1m and page", r.For, r.Labels["severity"])
		}
		if r.Labels["team"] != "infra" {
			t.Errorf("%s labels %v lack team=infra", r.Alert, r.Labels)
		}
		if !strings.HasPrefix(r.Annotations["runbook_url"], "https://wiki.example.com/xoccm#") {
			t.Errorf("%s runbook_url %s", r.Alert, r.Annotations["runbook_url"])
		}
		for _, m := range selectorRE.FindAllStringSubmatch(r.Expr, -1) {
			if !strings.HasPrefix(m[1], `job="xoccm",cluster="c1"`) {
				t.Errorf("%s: selector {%s} without prometheusRule.selector", r.Alert, m[1])
			}
		}
		if strings.Contains(r.Expr, "[5m]") {
			t.Errorf("%s: a 5m window with rateInterval 2m:\n%s", r.Alert, r.Expr)
		}
	}
	if len(rules) != 12 {
		t.Errorf("%d alerts rendered, want the 13 less the disabled one", len(rules))
	}

	// The default selector: the metrics Service's job and the release namespace, in every
	// series selector.
	_, rules = renderRules(t)
	for _, r := range rules {
		n := 0
		for _, m := range selectorRE.FindAllStringSubmatch(r.Expr, -1) {
			n++
			if !strings.HasPrefix(m[1], `job="`+metricsService+`",namespace="`+namespace+`"`) {
				t.Errorf("%s: selector {%s} without the default selector", r.Alert, m[1])
			}
		}
		if n == 0 {
			t.Errorf("%s selects no series: %s", r.Alert, r.Expr)
		}
	}
}

// serviceMonitorEndpoint is the part of a ServiceMonitor endpoint these tests read.
type serviceMonitorEndpoint struct {
	Port            string         `json:"port"`
	Path            string         `json:"path"`
	Scheme          string         `json:"scheme"`
	BearerTokenFile string         `json:"bearerTokenFile"`
	Authorization   map[string]any `json:"authorization"`
	TLSConfig       *struct {
		ServerName         string `json:"serverName"`
		InsecureSkipVerify bool   `json:"insecureSkipVerify"`
		CA                 *struct {
			Secret    *corev1.SecretKeySelector    `json:"secret"`
			ConfigMap *corev1.ConfigMapKeySelector `json:"configMap"`
		} `json:"ca"`
	} `json:"tlsConfig"`
}

// endpointOf returns the rendered ServiceMonitor's one endpoint.
func endpointOf(t *testing.T, o objects) serviceMonitorEndpoint {
	t.Helper()
	m := o.find("ServiceMonitor", chartName)
	if m == nil {
		t.Fatalf("no ServiceMonitor; have %v", o.kinds())
	}
	var sm struct {
		Spec struct {
			Endpoints []serviceMonitorEndpoint `json:"endpoints"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(m.doc, &sm); err != nil {
		t.Fatal(err)
	}
	if len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("%d endpoints", len(sm.Spec.Endpoints))
	}
	return sm.Spec.Endpoints[0]
}

// TestServiceMonitorScrapesSecurely renders the ServiceMonitor in each certificate mode and checks
// it scrapes as the endpoint serves: over HTTPS with Prometheus' ServiceAccount token (or the
// Secret of metrics.serviceMonitor.authorization), verifying the webhook's certificate with its
// CA and a name the certificate carries, or skipping verification of a self-signed one; over
// HTTP without credentials only with metrics.insecureHTTP. The binary's flags say the same.
func TestServiceMonitorScrapesSecurely(t *testing.T) {
	ca := testenv.NewCA(t, "webhook-ca")
	caBundle := base64.StdEncoding.EncodeToString(ca.PEM)
	wantName := webhookService + "." + namespace + ".svc"
	sm := "metrics.serviceMonitor.enabled=true"
	cases := map[string]struct {
		set []string
		// flag is --metrics-certs, or "insecure" for --metrics-insecure-http.
		flag string
		// caSecret, caConfigMap: where the CA comes from; skipVerify: none.
		caSecret, caConfigMap string
		skipVerify            bool
	}{
		"cert-manager":       {set: []string{sm}, flag: "webhook", caSecret: servingSecret},
		"self-managed":       {set: []string{sm, "webhook.certificates.mode=selfManaged"}, flag: "webhook", caSecret: chartName + "-webhook-ca"},
		"existing Secret":    {set: []string{sm, "webhook.certificates.mode=existingSecret", "webhook.certificates.existingSecret.name=tls", "webhook.certificates.existingSecret.caBundle=" + caBundle}, flag: "webhook", caConfigMap: chartName + "-metrics-ca"},
		"without webhook":    {set: []string{sm, "webhook.enabled=false"}, flag: "self-signed", skipVerify: true},
		"self-signed chosen": {set: []string{sm, "metrics.certificate=selfSigned"}, flag: "self-signed", skipVerify: true},
		"webhook chosen":     {set: []string{sm, "metrics.certificate=webhook"}, flag: "webhook", caSecret: servingSecret},
		"insecure":           {set: []string{sm, "metrics.insecureHTTP=true"}, flag: "insecure"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			o := render(t, "", c.set...)
			_, ctr := deployment(t, o)
			certs, secure := flagValue(t, ctr.Args, "metrics-certs")
			insecure, _ := flagValue(t, ctr.Args, "metrics-insecure-http")
			e := endpointOf(t, o)
			if e.Port != "metrics" || e.Path != "/metrics" {
				t.Errorf("endpoint port %s path %s", e.Port, e.Path)
			}
			if c.flag == "insecure" {
				if insecure != "true" || secure || e.Scheme != "http" || e.TLSConfig != nil || e.BearerTokenFile != "" || e.Authorization != nil {
					t.Errorf("--metrics-insecure-http=%s --metrics-certs=%s; endpoint %+v, want plain HTTP without credentials", insecure, certs, e)
				}
				for _, n := range []string{chartName + "-metrics-auth", chartName + "-metrics-reader"} {
					if o.find("ClusterRole", n) != nil {
						t.Errorf("ClusterRole %s rendered for an endpoint without authorization", n)
					}
				}
				return
			}
			if certs != c.flag || insecure != "" {
				t.Errorf("--metrics-certs=%s --metrics-insecure-http=%q, want %s", certs, insecure, c.flag)
			}
			if e.Scheme != "https" || e.BearerTokenFile != "/var/run/secrets/kubernetes.io/serviceaccount/token" || e.Authorization != nil || e.TLSConfig == nil {
				t.Fatalf("endpoint %+v, want HTTPS with Prometheus' ServiceAccount token", e)
			}
			tc := e.TLSConfig
			if c.skipVerify {
				if !tc.InsecureSkipVerify || tc.CA != nil {
					t.Errorf("tlsConfig %+v, want insecureSkipVerify for a self-signed certificate", tc)
				}
				return
			}
			if tc.InsecureSkipVerify || tc.ServerName != wantName || tc.CA == nil {
				t.Fatalf("tlsConfig %+v, want the CA and serverName %s", tc, wantName)
			}
			switch {
			case c.caSecret != "":
				if tc.CA.Secret == nil || tc.CA.Secret.Name != c.caSecret || tc.CA.Secret.Key != "ca.crt" {
					t.Errorf("tlsConfig.ca %+v, want Secret %s key ca.crt", tc.CA, c.caSecret)
				}
			default:
				if tc.CA.ConfigMap == nil || tc.CA.ConfigMap.Name != c.caConfigMap || tc.CA.ConfigMap.Key != "ca.crt" {
					t.Fatalf("tlsConfig.ca %+v, want ConfigMap %s key ca.crt", tc.CA, c.caConfigMap)
				}
				cm := decode[corev1.ConfigMap](t, o, "ConfigMap", c.caConfigMap)
				if cm.Data["ca.crt"] != string(ca.PEM) {
					t.Errorf("ConfigMap %s ca.crt:\n%s\nwant the caBundle's PEM:\n%s", cm.Name, cm.Data["ca.crt"], ca.PEM)
				}
			}
			// The name is one the webhook's certificate carries.
			var names []string
			if cert := o.find("Certificate", servingCertName); cert != nil {
				names, _, _ = unstructured.NestedStringSlice(cert.obj.Object, "spec", "dnsNames")
			} else if v, ok := flagValue(t, ctr.Args, "webhook-dns-names"); ok {
				names = strings.Split(v, ",")
			}
			if names != nil && !slices.Contains(names, wantName) {
				t.Errorf("serverName %s is not among the certificate's names %v", wantName, names)
			}
		})
	}

	t.Run("authorization and tlsConfig from values", func(t *testing.T) {
		o := render(t, "", sm, "metrics.serviceMonitor.authorization.credentials.name=metrics-token",
			"metrics.serviceMonitor.authorization.credentials.key=token", "metrics.serviceMonitor.tlsConfig.insecureSkipVerify=true")
		e := endpointOf(t, o)
		want := map[string]any{"credentials": map[string]any{"name": "metrics-token", "key": "token"}}
		if e.BearerTokenFile != "" || !reflect.DeepEqual(e.Authorization, want) {
			t.Errorf("bearerTokenFile %q authorization %v, want only %v", e.BearerTokenFile, e.Authorization, want)
		}
		if e.TLSConfig == nil || !e.TLSConfig.InsecureSkipVerify || e.TLSConfig.CA != nil || e.TLSConfig.ServerName != "" {
			t.Errorf("tlsConfig %+v, want the values' own", e.TLSConfig)
		}
	})
}

// checkMetricsRBAC checks the grants of the metrics endpoint: with authentication and
// authorization, a ClusterRole bound to the pods' ServiceAccount with exactly the two reviews,
// and the metrics-reader ClusterRole with exactly get on /metrics; none without.
func checkMetricsRBAC(t *testing.T, o objects, sa string, c *corev1.Container) {
	auth, reader := chartName+"-metrics-auth", chartName+"-metrics-reader"
	addr, _ := flagValue(t, c.Args, "metrics-bind-address")
	insecure, _ := flagValue(t, c.Args, "metrics-insecure-http")
	if addr == "0" || insecure == "true" {
		for _, n := range []string{auth, reader} {
			if o.find("ClusterRole", n) != nil {
				t.Errorf("ClusterRole %s rendered without an authorized metrics endpoint", n)
			}
		}
		return
	}
	cr := decode[rbacv1.ClusterRole](t, o, "ClusterRole", auth)
	want := []rbacv1.PolicyRule{
		{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
		{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
	}
	if !reflect.DeepEqual(cr.Rules, want) {
		t.Errorf("ClusterRole %s rules:\n%s\nwant:\n%s", auth, toYAML(t, cr.Rules), toYAML(t, want))
	}
	crb := decode[rbacv1.ClusterRoleBinding](t, o, "ClusterRoleBinding", auth)
	if crb.RoleRef != (rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: auth}) ||
		!reflect.DeepEqual(crb.Subjects, []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: namespace}}) {
		t.Errorf("ClusterRoleBinding %s = %+v %+v", auth, crb.RoleRef, crb.Subjects)
	}
	r := decode[rbacv1.ClusterRole](t, o, "ClusterRole", reader)
	if want := []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}; !reflect.DeepEqual(r.Rules, want) {
		t.Errorf("ClusterRole %s rules:\n%s\nwant:\n%s", reader, toYAML(t, r.Rules), toYAML(t, want))
	}
}

// grafanaVariable matches a Grafana variable in a query: $name or ${name}.
var grafanaVariable = regexp.MustCompile(`\$\{?(\w+)\}?`)

// TestDashboard renders the dashboard's ConfigMap with its values and checks the JSON: a
// dashboard with a stable uid, the data source a variable, every panel with a query, every
// query's series selected by the job and namespace variables, and no variable the dashboard does
// not define. (test/e2e parses every query with Prometheus and checks the metrics it names
// against a real scrape.)
func TestDashboard(t *testing.T) {
	if o := render(t, ""); len(o.ofKind("ConfigMap")) != 0 {
		t.Errorf("ConfigMaps rendered by default: %v", o.ofKind("ConfigMap").kinds())
	}
	o := render(t, "", "dashboard.enabled=true", "dashboard.labels.grafana_dashboard=yes", "dashboard.annotations.grafana_folder=Platform")
	cm := decode[corev1.ConfigMap](t, o, "ConfigMap", chartName+"-dashboard")
	if cm.Labels["grafana_dashboard"] != "yes" || cm.Annotations["grafana_folder"] != "Platform" || cm.Namespace != namespace {
		t.Errorf("ConfigMap labels %v annotations %v namespace %s", cm.Labels, cm.Annotations, cm.Namespace)
	}
	if len(cm.Data) != 1 {
		t.Fatalf("ConfigMap data keys %d, want 1", len(cm.Data))
	}
	var d struct {
		UID        string `json:"uid"`
		Templating struct {
			List []struct{ Name, Type string } `json:"list"`
		} `json:"templating"`
		Panels []struct {
			Type, Title string
			Datasource  map[string]string `json:"datasource"`
			Targets     []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal([]byte(cm.Data["xenorchestra-cloud-controller-manager.json"]), &d); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	if d.UID == "" {
		t.Error("no uid: Grafana would make a new dashboard at each load")
	}
	vars := map[string]bool{"__rate_interval": true}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
	}
	if !vars["datasource"] || !vars["job"] || !vars["namespace"] {
		t.Errorf("variables %v, want datasource, job and namespace", vars)
	}
	queries := 0
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		if p.Datasource["uid"] != "${datasource}" || len(p.Targets) == 0 {
			t.Errorf("panel %q: data source %v, %d queries", p.Title, p.Datasource, len(p.Targets))
		}
		for _, q := range p.Targets {
			queries++
			for _, m := range selectorRE.FindAllStringSubmatch(q.Expr, -1) {
				if !strings.HasPrefix(m[1], `job="$job",namespace="$namespace"`) {
					t.Errorf("panel %q: selector {%s} without the job and namespace variables", p.Title, m[1])
				}
			}
			for _, m := range grafanaVariable.FindAllStringSubmatch(q.Expr, -1) {
				if !vars[m[1]] {
					t.Errorf("panel %q uses $%s, which the dashboard does not define", p.Title, m[1])
				}
			}
		}
	}
	if queries < 20 {
		t.Errorf("%d queries", queries)
	}
	o = render(t, "", "dashboard.enabled=true", "dashboard.namespace=monitoring")
	if cm := decode[corev1.ConfigMap](t, o, "ConfigMap", chartName+"-dashboard"); cm.Namespace != "monitoring" {
		t.Errorf("dashboard in namespace %s, want dashboard.namespace", cm.Namespace)
	}
}
