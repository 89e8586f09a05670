package e2e_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/xosim"
)

// faultWindow is how long each XO fault lasts: with pollPeriod 1s the inventory relists
// about every second while the event stream is down, so every fault is met several times.
const faultWindow = 2500 * time.Millisecond

// TestTokenNeverLeaks runs the real binary at the most verbose log level (--zap-log-level=10
// --zap-devel) against the API server and the XO simulator, drives it through every XO error
// path, and then looks for the token in everything the process exposes: its stdout and
// stderr, every Event in the cluster (core/v1 and events.k8s.io/v1), the Nodes, /metrics,
// /healthz, /readyz and any /debug endpoint of its three servers. It also runs the tokenFile
// variant, an XO whose certificate cannot be verified, and invalid configurations (which must
// exit non-zero naming every bad key, without the token).
func TestTokenNeverLeaks(t *testing.T) {
	env := testenv.StartTest(t, testenv.Options{Webhook: true})
	ensureNamespace(t, env.Client, "kube-system")
	kubeconfig := writeKubeconfig(t, env)
	dir := t.TempDir()
	c := env.Client
	ctx := context.Background()

	token := newToken(t)
	x := newXO(t, token, true)
	good := x.addVM(t, x.poolA, x.hostA1, "tok-good", "10.1.0.1")
	x.addVM(t, x.poolA, x.hostA1, "tok-twin", "10.1.0.2")
	x.addVM(t, x.poolA, x.hostA2, "tok-twin", "10.1.0.3")
	inB := x.addVM(t, x.poolB, x.hostB1, "tok-in-b", "10.1.0.4")
	doomed := x.addVM(t, x.poolA, x.hostA2, "tok-doomed", "10.1.0.5")
	caFile := filepath.Join(dir, "xo-ca.pem")
	writeConfig(t, dir, "xo-ca.pem", string(x.caPEM(t)))
	cfg := writeConfig(t, dir, "config.yaml", fmt.Sprintf(`url: %s
token: %s
caFile: %s
requestTimeout: 2s
inventory:
  pollPeriod: 1s
  staleAfter: 5s
  settleTime: 1s
`, x.URL, token, caFile))

	wo := env.WebhookInstallOptions
	// --profiling, so that the pprof handlers are scanned too: served only behind the metrics
	// endpoint's authentication, read with the token of a ServiceAccount allowed them.
	p := startCCM(t, "token-inline", ccmArgs{kubeconfig: kubeconfig, config: cfg, leaderElect: true,
		webhookPort: wo.LocalServingPort, certDir: wo.LocalServingCertDir, secureMetrics: true, extra: []string{"--profiling"}})
	mustCreate(t, c, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "token-scan-metrics-and-profiles"},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics", "/debug/*"}, Verbs: []string{"get"}}}})
	p.metricsToken = testenv.ServiceAccountToken(t, env.Config, "kube-system", "token-scanner", "token-scan-metrics-and-profiles")
	p.waitReady(t, 30*time.Second)
	exposed := &bytes.Buffer{}
	scrape(t, p, exposed)
	if want := "/debug/pprof/goroutine?debug=2: 200"; !strings.Contains(exposed.String(), want) {
		t.Fatalf("profiling is on but no %q among the scraped answers", want)
	}

	create := func(n *corev1.Node) {
		t.Helper()
		if err := c.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	uuid := func(vm string) testenv.NodeOption { return testenv.WithSystemUUID(x.systemUUID(t, vm)) }
	create(testenv.KubeletNode("tok-good", uuid(good)))
	create(testenv.KubeletNode("tok-in-b", uuid(inB)))
	create(testenv.KubeletNode("tok-doomed", uuid(doomed)))
	// Unknown VM: a uuid XO does not have, a name no VM has, an address no VM has.
	create(testenv.KubeletNode("tok-unknown", testenv.WithSystemUUID("7e57f00d-0000-4000-8000-000000000001"), testenv.WithNodeIP("10.9.9.9")))
	// Ambiguous: a PV guest (no system uuid) named like two VMs.
	create(testenv.KubeletNode("tok-twin"))
	testenv.WaitFor(t, 30*time.Second, "tok-good initialized", func() error { return initialized(c, "tok-good") })

	// phase injects a fault, breaks the event stream (unless the fault is the stream's) so
	// that the inventory relists into it, runs during while the fault holds, waits out
	// faultWindow and checks XO was called meanwhile: the fault was met, not merely declared.
	phase := func(name string, breakStream bool, inject func(), during func()) {
		t.Helper()
		start, before := time.Now(), x.totalRequests()
		inject()
		if breakStream {
			x.sim.CloseEventStreams()
		}
		if during != nil {
			during()
		}
		time.Sleep(faultWindow - time.Since(start))
		if x.totalRequests() == before {
			t.Errorf("phase %s: no request reached XO during the fault", name)
		}
	}
	// lateNode adds a VM the inventory cannot see yet (its stream is down or stalled) and
	// registers its Node: the webhook asks XO directly, into the fault.
	late := 0
	lateNode := func(name string) {
		t.Helper()
		late++
		vm := x.addVM(t, x.poolA, x.hostA1, name, fmt.Sprintf("10.1.1.%d", late))
		create(testenv.KubeletNode(name, uuid(vm)))
	}
	fault := func(f xosim.Fault) func() {
		return func() { f.Duration = faultWindow; x.sim.InjectFault(f) }
	}

	phase("401 revoked token", true, func() { x.sim.RevokeToken(token) }, func() {
		lateNode("tok-late-401")
		scrape(t, p, exposed) // what the endpoints say while XO refuses the token
	})
	x.sim.AddToken(token)
	phase("500 everywhere", true, fault(xosim.Fault{Kind: xosim.FaultStatus, Status: http.StatusInternalServerError, PathPrefix: "/rest/v0/"}),
		func() { lateNode("tok-late-500") })
	phase("503 with a message", true, fault(xosim.Fault{Kind: xosim.FaultStatus, Status: http.StatusServiceUnavailable, Message: "pool master unreachable", PathPrefix: "/rest/v0/"}), nil)
	phase("connection resets", true, fault(xosim.Fault{Kind: xosim.FaultReset, PathPrefix: "/rest/v0/"}),
		func() { lateNode("tok-late-reset") })
	phase("truncated listing", true, fault(xosim.Fault{Kind: xosim.FaultTruncate, Method: http.MethodGet, PathPrefix: "/rest/v0/vms", Lines: 1}),
		func() { lateNode("tok-late-truncated") })
	phase("error body echoing the cookie", true, fault(xosim.Fault{Kind: xosim.FaultStatus, Status: http.StatusBadRequest,
		Message: "bad request: cookie authenticationToken=" + token + " rejected", PathPrefix: "/rest/v0/"}),
		func() { lateNode("tok-late-echo") })
	// The stream must be up again before it can stall.
	testenv.WaitFor(t, 30*time.Second, "the event stream back", func() error {
		if x.sim.EventStreams() == 0 {
			return errNotYet
		}
		return nil
	})
	phase("stalled event stream", false, fault(xosim.Fault{Kind: xosim.FaultStall, PathPrefix: "/rest/v0/events"}), func() {
		lateNode("tok-late-stall")
		if err := x.sim.SetPowerState(good, xo.PowerStateHalted); err != nil {
			t.Fatal(err)
		}
		if err := x.sim.SetPowerState(good, xo.PowerStateRunning); err != nil {
			t.Fatal(err)
		}
	})
	scrape(t, p, exposed)

	// A disconnected pool: XO answers "no such VM" for a VM that exists; its Node, NotReady,
	// must stay.
	if err := testenv.SetReady(ctx, c, "tok-in-b", false); err != nil {
		t.Fatal(err)
	}
	phase("pool disconnected", false, func() {
		if err := x.sim.DisconnectPool(x.poolB); err != nil {
			t.Fatal(err)
		}
	}, nil)
	if _, err := testenv.GetNode(ctx, c, "tok-in-b"); err != nil {
		t.Errorf("Node tok-in-b of the disconnected pool: %v; want kept", err)
	}
	if err := x.sim.ReconnectPool(x.poolB); err != nil {
		t.Fatal(err)
	}

	// A VM really deleted: its NotReady Node is deleted, with events.
	if err := testenv.SetReady(ctx, c, "tok-doomed", false); err != nil {
		t.Fatal(err)
	}
	if err := x.sim.RemoveVM(doomed); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 20*time.Second, "Node tok-doomed deleted", func() error {
		_, err := testenv.GetNode(ctx, c, "tok-doomed")
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
	// Recovered from every fault: the Nodes registered into faults are initialized.
	for _, name := range []string{"tok-late-401", "tok-late-500", "tok-late-reset", "tok-late-truncated", "tok-late-stall", "tok-late-echo"} {
		testenv.WaitFor(t, 30*time.Second, name+" initialized after the faults", func() error { return initialized(c, name) })
	}
	p.waitReady(t, 30*time.Second)
	scrape(t, p, exposed)
	if code := p.stop(t); code != 0 {
		t.Errorf("exit code %d after SIGTERM; want 0", code)
	}

	out := p.out.Bytes()
	// The scan means something only if the process spoke about the faults, verbosely.
	for _, want := range []string{"HTTP 400", "HTTP 401", "HTTP 500", "HTTP 503", "cut short", "XO relist failed", "XO event stream broken", "DEBUG"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("the log never mentions %q: the error path was not exercised", want)
		}
	}
	assertNoToken(t, token, "stdout+stderr of the process", out)
	// At this verbosity client-go hex-dumps request and response bodies, 16 bytes a line.
	dumps := hexDumps(out)
	if len(dumps) == 0 {
		t.Error("no hex dump in the log at --zap-log-level=10; the dump scan scanned nothing")
	}
	assertNoToken(t, token, "hex dumps in the log, decoded", dumps)
	assertNoToken(t, token, "metrics, health and debug endpoints", exposed.Bytes())
	evs := clusterEvents(t, env)
	// The error paths on the Node side were taken, as the events tell.
	for _, want := range []struct{ node, reason, note string }{
		{"tok-unknown", "VMNotResolved", "no VM matches"},
		{"tok-twin", "VMNotResolved", "ambiguous"},
		{"tok-in-b", "VMGoneUnconfirmed", "Node kept"},
		{"tok-doomed", "DeletedNode", ""},
	} {
		if !hasEvent(t, env, want.node, want.reason, want.note) {
			t.Errorf("no %s event about Node %s (note with %q)", want.reason, want.node, want.note)
		}
	}
	assertNoToken(t, token, "Events", evs)
	assertNoToken(t, token, "Nodes", clusterNodes(t, env))

	t.Run("tokenFile and unverifiable XO", func(t *testing.T) {
		testTokenFileAndBadTLS(t, kubeconfig, env)
	})
	t.Run("invalid config", func(t *testing.T) {
		testInvalidConfig(t, kubeconfig)
	})
}

// testTokenFileAndBadTLS runs, side by side, a process reading its token from tokenFile
// (through a revoked token and an unknown Node) and one facing an XO whose certificate
// cannot be verified, and scans their outputs and endpoints.
func testTokenFileAndBadTLS(t *testing.T, kubeconfig string, env *testenv.Env) {
	dir := t.TempDir()
	fileToken := newToken(t)
	plain := newXO(t, fileToken, false)
	plain.addVM(t, plain.poolA, plain.hostA1, "tf-vm")
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(fileToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tfCfg := writeConfig(t, dir, "tokenfile.yaml", fmt.Sprintf("url: %s\ntokenFile: token\ninventory: {pollPeriod: 1s, staleAfter: 5s, settleTime: 1s}\n", plain.URL))

	tlsToken := newToken(t)
	unverified := newXO(t, tlsToken, true)
	unverified.addVM(t, unverified.poolA, unverified.hostA1, "tls-vm")
	tlsCfg := writeConfig(t, dir, "badtls.yaml", fmt.Sprintf("url: %s\ntoken: %s\ninventory: {settleTime: 1s}\n", unverified.URL, tlsToken))

	ca := testenv.NewCA(t, "variant-webhook-ca")
	tf := startCCM(t, "token-file", ccmArgs{kubeconfig: kubeconfig, config: tfCfg, webhookPort: testenv.FreePort(t), certDir: ca.CertDir(t, 2)})
	bad := startCCM(t, "unverifiable-xo", ccmArgs{kubeconfig: kubeconfig, config: tlsCfg, webhookPort: testenv.FreePort(t), certDir: ca.CertDir(t, 3)})

	tf.waitReady(t, 30*time.Second)
	plain.sim.RevokeToken(fileToken)
	plain.sim.CloseEventStreams()
	if err := env.Client.Create(context.Background(), testenv.KubeletNode("tf-unknown", testenv.WithSystemUUID("7e57f00d-0000-4000-8000-000000000002"))); err != nil {
		t.Fatal(err)
	}
	time.Sleep(faultWindow)
	plain.sim.AddToken(fileToken)
	tf.waitReady(t, 30*time.Second)

	testenv.WaitFor(t, 30*time.Second, "the certificate error in the log", func() error {
		if !bytes.Contains(bad.out.Bytes(), []byte("certificate signed by unknown authority")) {
			return errNotYet
		}
		return nil
	})
	if n := unverified.totalRequests(); n != 0 {
		t.Errorf("%d requests reached the XO whose certificate cannot be verified", n)
	}

	for _, v := range []struct {
		p     *ccmProcess
		token string
	}{{tf, fileToken}, {bad, tlsToken}} {
		exposed := &bytes.Buffer{}
		scrape(t, v.p, exposed)
		if code := v.p.stop(t); code != 0 {
			t.Errorf("%s: exit code %d after SIGTERM; want 0", v.p.name, code)
		}
		assertNoToken(t, v.token, v.p.name+" stdout+stderr", v.p.out.Bytes())
		assertNoToken(t, v.token, v.p.name+" endpoints", exposed.Bytes())
		evs := clusterEvents(t, env)
		assertNoToken(t, v.token, "Events", evs)
	}
	if !bytes.Contains(tf.out.Bytes(), []byte("HTTP 401")) {
		t.Errorf("token-file: the log never mentions the 401")
	}
	// Expected failures are one line each, with what is kept and the next retry: no stack
	// trace, and no age of an inventory there never was.
	if !regexp.MustCompile(`XO relist failed\t\{"server": "[^"]+", "keeping": "nothing: XO has not been listed yet", "retryIn": "\d+s", "error": "relist `).Match(bad.out.Bytes()) {
		t.Errorf("unverifiable-xo: no one-line relist failure saying nothing is kept:\n%s", tail(bad.out.Bytes(), 2000))
	}
	// The processes run with --zap-devel (console lines): a stack trace is a frame's file on a
	// line of its own.
	frame := regexp.MustCompile(`\n\t/\S+\.go:\d+\n`)
	for _, p := range []*ccmProcess{tf, bad} {
		if loc := frame.FindIndex(p.out.Bytes()); loc != nil {
			t.Errorf("%s: an expected failure logged a stack trace: %s", p.name, tail(p.out.Bytes()[:loc[1]], 600))
		}
	}
}

// testInvalidConfig runs the binary on invalid configurations: each must exit non-zero before
// serving, name every bad key, and never print the token.
func testInvalidConfig(t *testing.T, kubeconfig string) {
	token := newToken(t)
	for _, tc := range []struct {
		name   string
		config string
		keys   []string
		secret string // what must not appear; the token by default
	}{{
		name: "every bad key listed",
		config: `url: ftp://xo.example.com
token: ` + token + `
requestTimeout: 1ms
inventory:
  pollPeriod: 0s
  bogus: 1
labels:
  tagLabelPrefixes: ["kubernetes.io/"]
addresses:
  internalCIDRs: ["10.0.0.1/8"]
unknownKey: 1
`,
		keys: []string{"url", "requestTimeout", "inventory.pollPeriod", "inventory.bogus", "labels.tagLabelPrefixes[0]", "addresses.internalCIDRs[0]", "unknownKey"},
	}, {
		name:   "token a cookie cannot carry",
		config: "url: https://xo.example.com\ntoken: \"" + token + " with; spaces\"\n",
		keys:   []string{"token"},
		secret: token,
	}, {
		name:   "token and tokenFile",
		config: "url: https://xo.example.com\ntoken: " + token + "\ntokenFile: /nonexistent/token\n",
		keys:   []string{"tokenFile"},
	}, {
		name:   "the token under tokenFile",
		config: "url: https://xo.example.com\ntokenFile: " + token + "\n",
		keys:   []string{"tokenFile"},
	}, {
		name:   "the token under caFile",
		config: "url: https://xo.example.com\ntokenFile: /nonexistent/token\ncaFile: " + token + "\n",
		keys:   []string{"tokenFile", "caFile"},
	}, {
		name:   "YAML broken on the token line",
		config: "url: https://xo.example.com\ntoken: \"" + token + "\n  bad: [\n",
		keys:   []string{"invalid YAML"},
	}, {
		name:   "username and password",
		config: "url: https://xo.example.com\nusername: admin\npassword: " + token + "\n",
		keys:   []string{"username", "password", "token"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			secret := tc.secret
			if secret == "" {
				secret = token
			}
			cfg := writeConfig(t, t.TempDir(), "config.yaml", tc.config)
			p := startCCM(t, "invalid-config", ccmArgs{kubeconfig: kubeconfig, config: cfg, webhookPort: testenv.FreePort(t), certDir: t.TempDir()})
			code, ok := p.exited(15 * time.Second)
			if !ok {
				t.Fatal("still running 15s after start with an invalid config")
			}
			out := p.out.Bytes()
			if code == 0 {
				t.Errorf("exit code 0 with an invalid config; output:\n%s", out)
			}
			for _, k := range tc.keys {
				if !bytes.Contains(out, []byte(k+": ")) {
					t.Errorf("the error does not name %q:\n%s", k, out)
				}
			}
			if n := len(tc.keys); n > 1 && !bytes.Contains(out, fmt.Appendf(nil, "(%d problems)", n)) {
				t.Errorf("the error does not count %d problems:\n%s", n, out)
			}
			if bytes.Contains(out, []byte("starting server")) || bytes.Contains(out, []byte("Starting webhook server")) {
				t.Errorf("servers started before the config was rejected:\n%s", out)
			}
			assertNoToken(t, secret, "output", out)
		})
	}
}

// scrape appends to w the answers of every endpoint the process serves over HTTP: metrics,
// health and readiness (verbose), and the /debug paths a Go or controller-runtime server may
// expose, on the metrics, health and webhook servers.
func scrape(t *testing.T, p *ccmProcess, w *bytes.Buffer) {
	t.Helper()
	get := func(url string, c *http.Client) {
		resp, err := c.Get(url)
		if err != nil {
			fmt.Fprintf(w, "GET %s: %v\n", url, err)
			return
		}
		defer resp.Body.Close()
		fmt.Fprintf(w, "GET %s: %d\n", url, resp.StatusCode)
		_, _ = w.ReadFrom(resp.Body)
		w.WriteString("\n")
	}
	plain := &http.Client{Timeout: 10 * time.Second}
	debug := []string{"/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/goroutine?debug=2", "/debug/pprof/heap?debug=1", "/debug/vars", "/debug/flags/v"}
	metrics := testenv.MetricsClient(nil, "") // our own test server's certificate
	for _, path := range append([]string{"/metrics"}, debug...) {
		url := p.metricsScheme + "://" + p.metrics + path
		code, body, err := testenv.Scrape(metrics, url, p.metricsToken)
		if err != nil {
			fmt.Fprintf(w, "GET %s: %v\n", url, err)
			continue
		}
		fmt.Fprintf(w, "GET %s: %d\n%s\n", url, code, body)
	}
	for _, path := range append([]string{"/healthz?verbose", "/readyz?verbose", "/healthz/ping", "/readyz/xo-inventory"}, debug...) {
		get("http://"+p.health+path, plain)
	}
	if p.webhook != "" {
		insecure := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, //nolint:gosec // reading our own test server
		}}
		for _, path := range append([]string{"/", "/metrics"}, debug...) {
			get("https://"+p.webhook+path, insecure)
		}
	}
	if !strings.Contains(w.String(), "xenorchestra_build_info") {
		t.Errorf("%s: /metrics did not answer with the controller's metrics", p.name)
	}
}

// hexLine is one line of a hex dump as client-go logs bodies: offset, then up to 16 bytes.
var hexLine = regexp.MustCompile(`[0-9a-f]{8}((?:  ?[0-9a-f]{2}){1,16})`)

// hexDumps decodes every hex dump in a log into the bytes it shows, concatenated, so that a
// token split across dump lines is found.
func hexDumps(log []byte) []byte {
	var out []byte
	for _, m := range hexLine.FindAllSubmatch(log, -1) {
		b, err := hex.DecodeString(strings.ReplaceAll(string(m[1]), " ", ""))
		if err == nil {
			out = append(out, b...)
		}
	}
	return out
}

// clusterEvents returns every Event of the cluster, core/v1 and events.k8s.io/v1, as JSON.
func clusterEvents(t *testing.T, env *testenv.Env) []byte {
	t.Helper()
	var core corev1.EventList
	if err := env.Client.List(context.Background(), &core); err != nil {
		t.Fatal(err)
	}
	var ev eventsv1.EventList
	if err := env.Client.List(context.Background(), &ev); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal([]any{core, ev})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// hasEvent reports whether an events.k8s.io Event about the Node has the reason and a note
// containing note.
func hasEvent(t *testing.T, env *testenv.Env, node, reason, note string) bool {
	t.Helper()
	var list eventsv1.EventList
	if err := env.Client.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	for _, e := range list.Items {
		if e.Regarding.Kind == "Node" && e.Regarding.Name == node && e.Reason == reason && strings.Contains(e.Note, note) {
			return true
		}
	}
	return false
}

// clusterNodes returns every Node as JSON.
func clusterNodes(t *testing.T, env *testenv.Env) []byte {
	t.Helper()
	var nodes corev1.NodeList
	if err := env.Client.List(context.Background(), &nodes); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(nodes)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// assertNoToken fails if data holds the token, either half of it (a truncated or partly
// masked token still gives it away) or its base64 form.
func assertNoToken(t *testing.T, token, where string, data []byte) {
	t.Helper()
	if len(data) == 0 {
		t.Errorf("%s: nothing to scan", where)
		return
	}
	for _, i := range findToken(token, data) {
		from, to := max(i-200, 0), min(i+len(token)+200, len(data))
		t.Errorf("%s: the token (or part of it) appears at byte %d: ...%s...", where, i, data[from:to])
	}
}

// findToken returns the offsets in data of the token, of either half of it, and of its
// base64 form.
func findToken(token string, data []byte) []int {
	half := len(token) / 2
	var at []int
	for _, needle := range []string{token, token[:half], token[half:], base64.StdEncoding.EncodeToString([]byte(token))} {
		if i := bytes.Index(data, []byte(needle)); i >= 0 {
			at = append(at, i)
		}
	}
	return at
}
