// Package soak_test is the chaos soak of issue 24: a seeded, randomized run of every fault at
// once, with an oracle.
//
// What runs: the real binary (built from ./cmd/xenorchestra-cloud-controller-manager) as two
// replicas, leader election on (Lease in kube-system, 6 s lease, 4 s renew deadline, 1 s retry,
// so that a killed leader is replaced within seconds), each serving the webhook with
// --webhook-certs=self-managed (serving certificates renewed every 20 s all along); a TCP proxy
// plays the webhook Service, sending each new connection to the next replica that accepts it
// (TLS passes through, so the API server checks the replicas' own certificates) and recycling
// connections after 2 s so that admissions spread over both. A real kube-apiserver and etcd
// (internal/testenv) call the webhook; the binaries reach the API server through a second
// proxy that can answer 429 to a share of their requests. Two simulated XO servers
// (xo/xosim via testenv.NewXO) hold five pools: xo1 two, xo2 three, the last outside xo2's
// pools scope. The config (clusters form) sets inventory.settleTime 3s, pollPeriod 2s,
// staleAfter 10s and nodes.ignoreSelector.
//
// The schedule (schedule_test.go) is generated from the seed alone: Node churn (kubelet
// registrations by systemUUID raw and byte-swapped, name only, address only, --provider-id;
// deletions and re-registrations; Ready/NotReady flaps and the kubelet following its VM's
// power; ignored Nodes by label and by selector; another provider's Nodes; someone editing a
// label the controller does not own), VM churn (create, delete, live migration within and
// across pools of one XO, halt/start/suspend/pause, rename, resize, tag edits giving labels and
// taints, a halted VM moved to another pool, name twins in the pool outside the scope), XO
// faults (5xx, hangs, connections refused, the token revoked and restored, event streams cut in
// the middle of a message, truncated ndjson listings, a pool dropped and reconnected in stages,
// a /servers entry disabled or removed and back, the pool outside the scope among them) and
// Kubernetes faults (the leader SIGKILLed and restarted, the other replica likewise,
// kube-apiserver itself restarted, 429s, the self-managed CA Secret deleted so that a new CA
// is made and injected). A replica that exits on its own is restarted a second later, as the
// kubelet would.
//
// The oracle (oracle_test.go) records every change the test makes to a VM, with the time XO
// shows it (a change to a VM of a pool XO does not hold shows when the pool is back), and the
// VM each Node belongs to; a Node watch straight to the API server hands it every change:
//  1. no Node is deleted while its VM exists in any XO server (connected or not), nor while
//     Ready, nor an ignored or foreign one;
//  2. an owned label (computed keys, tag labels) or tag taint only takes a value the VM had at
//     some moment of the last settleTime + 10 s (the stated tolerance: event delivery, caches,
//     retries after an XO fault of up to 6 s), or the one XO still shows while its pool is
//     away; the test's own labels and taints, and ignored and foreign Nodes, are never touched;
//  3. the uninitialized taint goes only with providerID, region, instance type and an IP
//     address set (and the zone if the VM ran throughout the window);
//  4. a providerID names the Node's own VM, in a pool that VM was in;
//  5. at each quiet step (the end of the run, and every 10 minutes of a long one) every Node
//     matches the truth within settleTime + 10 s of the last fault or change, and all along a
//     Node deletable (VM gone as XO shows it, NotReady, providerID) for longer than that with
//     no fault of any kind meanwhile is a violation;
//  6. the XO tokens appear in no output of the binaries and no Event; the goroutines and the
//     resident memory of a replica that lived two minutes or more do not grow (last sample at
//     most 1.5 times the first plus 50 goroutines, twice the first plus 64 MiB).
//
// Two bounds keep the soak inside what the controller documents: XO loads a reconnected
// pool's VMs within SOAK_POOL_LOAD (default 2 s) of showing the pool object, under settleTime
// (the controller trusts a pool's absences one settle time after XO shows it; with 5 s loads it
// deletes Nodes whose VMs XO has not loaded yet); and the API server's own faults stop 90 s
// before each quiet step (client-go's reflector backoff keeps a watch down up to a minute after
// them, longer than the convergence bound). VMs also move while XO does not hold one of the
// pools (a move made with XAPI); SOAK_MOVE_HIDDEN=0 moves them only between pools XO holds, as
// XO migrates them (the controller deleted Nodes of VMs that moved into a pool XO had lost
// until it required the whole inventory for a deletion).
//
//	go -C test test ./soak/                                        # the CI run: seed 24, 5 minutes
//	make soak SEED=42 DURATION=60m                                 # any seed and duration
//	SOAK_LOGDIR=/tmp/soak SOAK_REPORT=/tmp/soak/report.txt make soak  # keep the logs and figures
//
// A violation is printed when it happens, with the seed, the replay command, the objects
// involved and, for the first, the last steps executed; the run goes on (SOAK_STOP_ON_VIOLATION
// stops it) and fails at the end. steps.log in SOAK_LOGDIR lists every step executed with the
// test's notes. The same seed, duration, SOAK_POOL_LOAD and SOAK_MOVE_HIDDEN give the same
// schedule (the replay command printed includes them); the timing
// of the system under test is not deterministic, so a replay meets the same steps at the same
// offsets, not necessarily the same interleaving with the controller.
package soak_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/webhook"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/xosim"
)

const (
	caSecretName      = "soak-webhook-ca"
	webhookConfigName = "soak-webhook"
	// settleTime is the inventory's settle time in the binaries' config: short, so that the
	// convergence checks fit in the run.
	settleTime = 3 * time.Second
	// tolerance is added to settleTime for invariant 2's window: event delivery, informer and
	// cache lag, retries with backoff after an XO fault of up to 6 s.
	tolerance = 10 * time.Second
	// convergeWithin is invariant 5's bound after the faults stop.
	convergeWithin = settleTime + 10*time.Second
	// ciSeed and ciDuration are the run of go test without SOAK_SEED / SOAK_DURATION.
	ciSeed     = 24
	ciDuration = 5 * time.Minute
)

// estate is the simulated XO side: two servers, their pools and hosts (ids in poolDefs
// order and hostDefs order).
type estate struct {
	xos     []*testenv.XO
	tokens  []string
	poolIDs []string
	hostIDs []string
}

func (e *estate) sim(pool int) *xosim.Server { return e.xos[poolDefs[pool].server].Sim }

func (e *estate) poolOf(id string) int { return slices.Index(e.poolIDs, id) }

// runner executes the schedule and holds everything the run uses.
type runner struct {
	t        *testing.T
	sched    *Schedule
	est      *estate
	env      *testenv.Env
	kube     client.Client
	o        *oracle
	replicas []*replica
	api      *apiProxy
	hook     *webhookProxy
	start    time.Time

	mu      sync.Mutex
	done    []string // the steps executed, with their real time
	counts  map[string]int
	faults  map[string]xosim.FaultID
	hidden  map[int]bool // pools whose objects XO does not hold (model of the executor)
	killed  map[string]*replica
	failed  bool
	samples []sample
	// logDir holds the replicas' output and steps.log, the steps executed.
	logDir string
	// admissions counts, per replica, the admissions it served: described at creation, and
	// admitted unchanged (read from its log).
	admissions [][2]int
	// watchGaps are the Node watch outages of the replicas (nodeWatchGaps).
	watchGaps []time.Duration
	// apiBack is closed once the proxy is back after a restart.
	apiBack chan struct{}
	// apiRestart is closed when a kube-apiserver restart under way ends (the restart reports
	// its own error).
	apiRestart chan struct{}
	// convergences are the times to convergence after each quiet step (invariant 5).
	convergences []time.Duration
	// lastStepAt is when the last step before the quiet one ended: the faults stopped then.
	lastStepAt time.Time
	// lastChecked counts the Nodes of the last convergence check by outcome.
	lastChecked map[string]int
}

type sample struct {
	at         time.Duration
	replica    string
	start      int
	goroutines float64
	rss        float64
	leading    bool
}

// ciOptions are the schedule options of every run unless SOAK_POOL_LOAD or SOAK_MOVE_HIDDEN
// say otherwise.
var ciOptions = Options{PoolLoad: defaultPoolLoad, MoveHidden: true}

func envDuration(t *testing.T) (uint64, time.Duration, Options) {
	seed, d, o := uint64(ciSeed), ciDuration, ciOptions
	if s := os.Getenv("SOAK_POOL_LOAD"); s != "" {
		v, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("SOAK_POOL_LOAD=%q: %v", s, err)
		}
		o.PoolLoad = v
	}
	o.MoveHidden = os.Getenv("SOAK_MOVE_HIDDEN") != "0"
	if s := os.Getenv("SOAK_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("SOAK_SEED=%q: %v", s, err)
		}
		seed = v
	}
	if s := os.Getenv("SOAK_DURATION"); s != "" {
		v, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("SOAK_DURATION=%q: %v", s, err)
		}
		d = v
	}
	return seed, d, o
}

func TestSoak(t *testing.T) {
	seed, dur, opts := envDuration(t)
	if testing.Short() && os.Getenv("SOAK_SEED") == "" {
		t.Skip("the soak takes minutes; -short skips it")
	}
	sched := Generate(seed, dur, opts)
	t.Logf("soak: seed %d, duration %s, XO loads a reconnected pool within %s, VMs move between pools XO does not hold: %v, %d steps (replay: %s)",
		seed, dur, opts.PoolLoad, opts.MoveHidden, len(sched.Steps), sched.replay())
	if os.Getenv("SOAK_PRINT") != "" {
		for _, s := range sched.Steps {
			t.Log(s)
		}
	}
	r := setup(t, sched)
	t.Cleanup(r.writeSteps)
	r.run()
	r.finish()
	r.report()
}

// setup starts the API server, the XO simulators, the proxies and the two replicas.
func setup(t *testing.T, sched *Schedule) *runner {
	ctrl.SetLogger(logr.Discard())
	bin := ccmBinary(t)
	// A certificate folder of the test's, so that kube-apiserver can be restarted.
	env := testenv.StartTest(t, testenv.Options{APIServerCertDir: t.TempDir()})
	ctx := context.Background()
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	r := &runner{t: t, sched: sched, env: env, kube: env.Client, counts: map[string]int{}, faults: map[string]xosim.FaultID{},
		hidden: map[int]bool{}, killed: map[string]*replica{}}
	r.o = newOracle(settleTime + tolerance)
	r.o.onViol = r.violation

	// XO: ids drawn from the seed too, so that a replay has the same estate.
	idr := mrand.New(mrand.NewPCG(sched.Seed, 0xe57a7e))
	est := &estate{}
	for i := range numServers {
		tok := "soakTok" + strconv.Itoa(i) + randHex(t, 20)
		est.tokens = append(est.tokens, tok)
		est.xos = append(est.xos, testenv.NewXO(t, testenv.XOOptions{Token: tok}))
	}
	for _, pd := range poolDefs {
		id := uuidFrom(idr)
		est.poolIDs = append(est.poolIDs, est.xos[pd.server].AddPool(t, xosim.PoolSpec{ID: id, NameLabel: pd.name}))
	}
	for h, p := range hostDefs() {
		id := uuidFrom(idr)
		est.hostIDs = append(est.hostIDs, est.xos[poolDefs[p].server].AddHost(t, xosim.HostSpec{
			ID: id, PoolID: est.poolIDs[p], NameLabel: fmt.Sprintf("%s-h%d", poolDefs[p].name, h), Address: fmt.Sprintf("192.168.%d.%d", p, h+10)}))
	}
	r.est = est
	for i := range sched.Initial {
		r.createVM(i)
	}

	// The binaries' config: both XO servers, the second scoped to its pools but the last.
	dir := t.TempDir()
	var scope []string
	for p, pd := range poolDefs {
		if pd.server == 1 && pd.inScope {
			scope = append(scope, est.poolIDs[p])
		}
	}
	cfg := fmt.Sprintf(`requestTimeout: 2s
listTimeout: 10s
clusters:
  - name: xo1
    url: %s
    token: %s
  - name: xo2
    url: %s
    token: %s
    pools: [%s]
inventory:
  settleTime: %s
  pollPeriod: 2s
  staleAfter: 10s
  resyncPeriod: 30s
nodes:
  ignoreSelector: %q
`, est.xos[0].URL, est.tokens[0], est.xos[1].URL, est.tokens[1], strings.Join(scope, ", "), settleTime, ignoreSelectorKv)
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}

	// The API proxy and the binaries' kubeconfig, which trusts only the proxy's certificate.
	certPEM, pair := selfSigned(t)
	api, err := newAPIProxy(env.Config, pair)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(api.close)
	r.api = api
	kubeconfig := filepath.Join(dir, "kubeconfig")
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: soak
  cluster:
    server: https://%s
    certificate-authority-data: %s
contexts:
- name: soak
  context: {cluster: soak, user: soak}
current-context: soak
users:
- name: soak
  user: {}
`, api.addr, base64.StdEncoding.EncodeToString(certPEM))
	if err := os.WriteFile(kubeconfig, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}

	hook, err := newWebhookProxy()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hook.close)
	r.hook = hook
	logDir := os.Getenv("SOAK_LOGDIR")
	if logDir == "" {
		logDir = t.TempDir()
	} else {
		if t.Name() != "TestSoak" {
			logDir = filepath.Join(logDir, t.Name())
		}
		if err := os.MkdirAll(logDir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("soak: the replicas' output and the steps executed go to %s", logDir)
	r.logDir = logDir
	a := newReplica(t, "replica-a", bin, kubeconfig, cfgPath, logDir)
	b := newReplica(t, "replica-b", bin, kubeconfig, cfgPath, logDir)
	r.replicas = []*replica{a, b}
	for _, rp := range r.replicas {
		rp.onExit = func(rp *replica, err error) {
			r.note("%s exited on its own (%v): restarted in 1 s, as the kubelet would", rp.name, err)
			r.o.faultBlip(10 * time.Second)
			r.mu.Lock()
			r.counts["replica-exit "+rp.name]++
			r.mu.Unlock()
		}
	}
	hook.start([]string{loopback(a.webhook), loopback(b.webhook)})
	mwc := webhook.Configuration(webhookConfigName, nil, admissionregistrationv1.Ignore, 5)
	mwc.Webhooks[0].ClientConfig.URL = ptr.To("https://" + net.JoinHostPort("localhost", strconv.Itoa(hook.port())) + webhook.Path)
	if err := env.Client.Create(ctx, mwc); err != nil {
		t.Fatal(err)
	}

	// Watch the Nodes before any exists.
	r.watchNodes()
	// Nodes the cluster had before the controller was installed.
	for i := range sched.InitialN {
		r.registerNode(i, sched.Nodes[i].ready)
	}
	for _, rp := range r.replicas {
		if err := rp.start(); err != nil {
			t.Fatal(err)
		}
	}
	testenv.WaitFor(t, 2*time.Minute, "both replicas ready and one leading", func() error {
		for _, rp := range r.replicas {
			// One that exits is restarted, as the kubelet would.
			if !rp.ready() {
				return fmt.Errorf("%s not ready", rp.name)
			}
		}
		if !a.leading() && !b.leading() {
			return fmt.Errorf("no leader")
		}
		return nil
	})
	t.Cleanup(func() {
		if t.Failed() {
			for _, rp := range r.replicas {
				t.Logf("--- output of %s (tail) ---\n%s", rp.name, string(rp.out.Tail(8000)))
			}
		}
	})
	return r
}

func loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

func randHex(t *testing.T, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", b)
}

// selfSigned returns a serving certificate for 127.0.0.1 valid for a day (testenv's CA issues
// for two hours, less than a long soak), PEM and as a tls.Certificate.
func selfSigned(t *testing.T) ([]byte, tls.Certificate) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "soak-api-proxy"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	pair, err := tls.X509KeyPair(certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}))
	if err != nil {
		t.Fatal(err)
	}
	return certPEM, pair
}

// --- truth ----------------------------------------------------------------------------------

// stateOf reads VM i's state from its simulator (whether or not XO shows it).
func (r *runner) stateOf(i int) vmState {
	gv := r.sched.VMs[i]
	for _, x := range r.est.xos {
		spec, ok := x.Sim.VM(gv.id)
		if !ok {
			continue
		}
		p := r.est.poolOf(spec.PoolID)
		st := vmState{exists: true, pool: spec.PoolID, poolName: poolDefs[p].name, power: spec.PowerState, name: spec.NameLabel,
			instType: fmt.Sprintf("%dvCPU-%dGB", max(spec.CPUsMax, spec.CPUs), spec.Memory/xosim.GiB), ip: gv.ip}
		if spec.PowerState == "Running" || spec.PowerState == "Paused" {
			st.host = spec.HostID
			if h, ok := x.Sim.Host(spec.HostID); ok {
				st.hostName = h.NameLabel
			}
		}
		st.tagLabels, st.tagTaints = tagsToLabels(spec.Tags)
		return st
	}
	return vmState{}
}

// tagsToLabels reads the label and taint tags under the allowed prefix, as the controller's
// documented convention has them (docs/configuration.md), without its code.
func tagsToLabels(tags []string) (map[string]string, []corev1.Taint) {
	labels := map[string]string{}
	var taints []corev1.Taint
	for _, tag := range tags {
		switch {
		case strings.HasPrefix(tag, tagLabelPrefix):
			kv := strings.TrimPrefix(tag, tagLabelPrefix)
			k, v, _ := strings.Cut(kv, "=")
			if isTagKey(k) {
				labels[k] = v
			}
		case strings.HasPrefix(tag, tagTaintPrefix):
			kv := strings.TrimPrefix(tag, tagTaintPrefix)
			i := strings.LastIndex(kv, ":")
			if i < 0 {
				continue
			}
			k, v, _ := strings.Cut(kv[:i], "=")
			if isTagKey(k) {
				taints = append(taints, corev1.Taint{Key: k, Value: v, Effect: corev1.TaintEffect(kv[i+1:])})
			}
		}
	}
	return labels, taints
}

// recordVM records VM i's current state in the oracle; XO shows it unless its pool is hidden.
func (r *runner) recordVM(i int, extraHidden ...int) {
	st := r.stateOf(i)
	visible := true
	r.mu.Lock()
	if st.exists && r.hidden[r.est.poolOf(st.pool)] {
		visible = false
	}
	for _, p := range extraHidden {
		if r.hidden[p] {
			visible = false
		}
	}
	r.mu.Unlock()
	r.o.record(r.sched.VMs[i].id, st, visible)
}

func (r *runner) setHidden(p int, hidden bool) {
	r.mu.Lock()
	r.hidden[p] = hidden
	r.mu.Unlock()
	if !hidden {
		id := r.est.poolIDs[p]
		r.o.reveal(func(_ string, st vmState) bool { return !st.exists || st.pool == id })
	}
}

// vmExists reports whether a VM exists in any XO server, its pool connected or not, for the
// deletion of Node n: in a pool whose server entry is enabled, or in the pool n's providerID or
// pool label names. A VM that moved, unseen, into a pool whose entry is disabled or removed is
// out of XO: an administrator told XO to forget that pool and its VMs, and the controller
// deletes such a Node like a destroyed VM's (docs/troubleshooting.md).
func (r *runner) vmExists(id string, n *corev1.Node) bool {
	known := map[string]bool{strings.ToLower(n.Labels[node.LabelPoolID]): true}
	if pool, _, err := node.ParseProviderID(n.Spec.ProviderID); err == nil {
		known[strings.ToLower(pool)] = true
	}
	for _, x := range r.est.xos {
		if vm, ok := x.Sim.VM(id); ok && (x.Sim.ServerHeld(vm.PoolID) || known[strings.ToLower(vm.PoolID)]) {
			return true
		}
	}
	return false
}

// --- actions --------------------------------------------------------------------------------

func (r *runner) createVM(i int) {
	gv := r.sched.VMs[i]
	fw := "bios"
	if gv.uefi {
		fw = "uefi"
	}
	spec := xosim.VMSpec{ID: gv.id, PoolID: r.est.poolIDs[gv.pool], HostID: r.est.hostIDs[gv.host], NameLabel: gv.name,
		PowerState: "Running", CPUs: gv.cpus, Memory: int64(gv.memGiB) * xosim.GiB, Tags: slices.Clone(gv.tags), IPs: []string{gv.ip}, Firmware: fw}
	if _, err := r.est.sim(gv.pool).AddVM(spec); err != nil {
		r.t.Fatalf("add VM %d: %v", i, err)
	}
	r.recordVM(i)
}

// registerNode creates Node i as its kubelet (or whoever) registers it.
func (r *runner) registerNode(i int, ready bool) {
	gn := r.sched.Nodes[i]
	gv := r.sched.VMs[gn.vm]
	foreign := map[string]string{foreignLabelKey: "initial"}
	var opts []testenv.NodeOption
	switch gn.kind {
	case kindUUID:
		opts = append(opts, testenv.WithSystemUUID(gv.id))
	case kindSwapped:
		opts = append(opts, testenv.WithSystemUUID(xosim.SwapUUID(gv.id)))
	case kindName:
	case kindAddress:
		opts = append(opts, testenv.WithNodeIP(gv.ip))
	case kindProviderID:
		st := r.stateOf(gn.vm)
		pool := st.pool
		if pool == "" {
			pool = r.est.poolIDs[gv.pool]
		}
		opts = append(opts, testenv.WithProviderID(node.FormatProviderID(pool, gv.id)), testenv.WithSystemUUID(gv.id))
	case kindIgnored:
		opts = append(opts, testenv.WithSystemUUID(gv.id), testenv.WithLabels(map[string]string{node.LabelIgnore: "true"}))
	case kindIgnoredSel:
		opts = append(opts, testenv.WithSystemUUID(gv.id), testenv.WithLabels(map[string]string{ignoreSelectorKv: "true"}))
	case kindForeign:
		opts = append(opts, testenv.WithSystemUUID(gv.id), testenv.WithProviderID("aws:///eu-west-3a/i-0"+gv.id[:8]))
	}
	opts = append(opts, testenv.WithLabels(foreign), testenv.WithReady(ready),
		testenv.WithTaints(corev1.Taint{Key: foreignTaintKey, Value: "infra", Effect: corev1.TaintEffectNoSchedule}))
	n := testenv.KubeletNode(gn.name, opts...)
	// WithTaints replaces: keep the kubelet's uninitialized taint first.
	n.Spec.Taints = append([]corev1.Taint{{Key: testenv.TaintUninitialized, Value: "true", Effect: corev1.TaintEffectNoSchedule}},
		corev1.Taint{Key: foreignTaintKey, Value: "infra", Effect: corev1.TaintEffectNoSchedule})
	created := n.DeepCopy()
	r.o.mu.Lock()
	prev := r.o.nodes[gn.name]
	rec := &nodeRec{name: gn.name, vm: gv.id, vmIdx: gn.vm, kind: gn.kind, created: created,
		foreign: map[string]map[string]time.Time{foreignLabelKey: {"initial": {}}}, exists: true, ready: ready, byTest: map[string]bool{}, createdAt: time.Now()}
	if prev != nil {
		rec.byTest = prev.byTest
	}
	r.o.nodes[gn.name] = rec
	r.o.mu.Unlock()
	err := r.kube.Create(context.Background(), n)
	r.o.mu.Lock()
	defer r.o.mu.Unlock()
	if err != nil {
		// Not created (the API server away, or the name still taken by a Node the test could
		// not delete): the oracle goes on with what it knew of the name.
		if prev != nil {
			r.o.nodes[gn.name] = prev
		} else {
			delete(r.o.nodes, gn.name)
		}
		r.note("register Node %s: %v", gn.name, err)
		return
	}
	rec.uid = string(n.UID)
}

func (r *runner) note(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.done = append(r.done, fmt.Sprintf("    %s note: %s", time.Since(r.start).Round(time.Millisecond), fmt.Sprintf(format, args...)))
}

func (r *runner) deleteNode(i int) {
	name := r.sched.Nodes[i].name
	n := &corev1.Node{}
	if err := r.kube.Get(context.Background(), types.NamespacedName{Name: name}, n); err != nil {
		r.note("delete Node %s: %v", name, err)
		return
	}
	r.o.mu.Lock()
	if rec := r.o.nodes[name]; rec != nil {
		rec.byTest[string(n.UID)] = true
		rec.exists = false
	}
	r.o.mu.Unlock()
	uid := n.UID
	if err := r.kube.Delete(context.Background(), n, client.Preconditions{UID: &uid}); err != nil {
		r.note("delete Node %s: %v", name, err)
		if !apierrors.IsNotFound(err) {
			// Not deleted (the API server away): the oracle keeps watching it.
			r.o.mu.Lock()
			if rec := r.o.nodes[name]; rec != nil && rec.uid == string(uid) {
				delete(rec.byTest, string(uid))
				rec.exists = true
				// A request that failed may still have been applied.
				rec.maybeByTest = string(uid)
			}
			r.o.mu.Unlock()
		}
	}
}

func (r *runner) setReady(i int, ready bool) {
	name := r.sched.Nodes[i].name
	if err := testenv.SetReady(context.Background(), r.kube, name, ready); err != nil {
		r.note("%v", err)
		return
	}
	r.o.mu.Lock()
	if rec := r.o.nodes[name]; rec != nil {
		rec.ready = ready
	}
	r.o.mu.Unlock()
}

func (r *runner) setForeign(i int, value string) {
	name := r.sched.Nodes[i].name
	undo := r.o.setForeign(name, foreignLabelKey, value)
	patch := []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, foreignLabelKey, value))
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := r.kube.Patch(context.Background(), n, client.RawPatch(types.MergePatchType, patch)); err != nil {
		r.note("label Node %s: %v", name, err)
		if !apierrors.IsNotFound(err) {
			undo() // a failed request may still have been applied: both values stay allowed a while
		}
	}
}

// leader returns the replica that leads and the other one; nil when none leads.
func (r *runner) leader() (lead, other *replica) {
	for i, rp := range r.replicas {
		if rp.running() && rp.leading() {
			return rp, r.replicas[1-i]
		}
	}
	return nil, nil
}

func (r *runner) xoFaultKey(s Step) string { return fmt.Sprintf("%s/%d", s.Kind, s.Server) }

// markFault records the fault windows in the oracle, for invariant 5's continuous check: a
// deletion is only due within the bound when nothing at all went wrong meanwhile. The tails
// are how long a fault's effects outlast it (backoff after an XO error, a Lease to expire).
func (r *runner) markFault(s Step) {
	key := fmt.Sprintf("%s/%d/%d", s.Kind, s.Server, s.Pool)
	onOff := func(tail time.Duration) {
		if s.End {
			r.o.faultOff(key, tail)
		} else {
			r.o.faultOn(key)
		}
	}
	switch s.Kind {
	case actXO5xx, actXOHang, actXORefuse, actXO401:
		onOff(5 * time.Second)
	case actServerDisable, actServerRemove:
		key = fmt.Sprintf("pool/%d", s.Pool)
		onOff(0)
	case actPoolDrop:
		r.o.faultOn(fmt.Sprintf("pool/%d", s.Pool))
	case actPoolReconnect:
		r.o.faultOff(fmt.Sprintf("pool/%d", s.Pool), 0)
	case actKillLeader, actKillOther:
		onOff(10 * time.Second)
	case actAPI429, actAPIRestart:
		onOff(5 * time.Second)
	case actXOStreamCut, actXOTruncate:
		r.o.faultBlip(5 * time.Second)
	case actCARotate:
		r.o.faultBlip(10 * time.Second)
	}
}

// exec runs one step.
func (r *runner) exec(s Step) {
	ctx := context.Background()
	r.markFault(s)
	x := r.est.xos[s.Server]
	var err error
	switch s.Kind {
	case actNodeRegister:
		r.registerNode(s.Node, s.Arg != "false")
	case actNodeIgnored, actNodeForeign:
		r.registerNode(s.Node, true)
	case actNodeDelete:
		r.deleteNode(s.Node)
	case actNodeReady:
		r.setReady(s.Node, s.Arg == "true")
	case actNodeForeignSet:
		r.setForeign(s.Node, s.Arg)
	case actVMCreate:
		r.createVM(s.VM)
	case actVMDelete:
		gv := r.sched.VMs[s.VM]
		for _, xx := range r.est.xos {
			if _, ok := xx.Sim.VM(gv.id); ok {
				err = xx.Sim.RemoveVM(gv.id)
			}
		}
		r.recordVM(s.VM)
	case actVMMigrate, actVMMove:
		gv := r.sched.VMs[s.VM]
		from := r.est.poolOf(r.stateOf(s.VM).pool)
		err = r.est.sim(hostDefs()[s.N]).Migrate(gv.id, r.est.hostIDs[s.N])
		r.recordVM(s.VM, from)
	case actVMPower:
		gv := r.sched.VMs[s.VM]
		err = r.simOfVM(gv.id).SetPowerState(gv.id, s.Arg)
		r.recordVM(s.VM)
	case actVMRename:
		gv := r.sched.VMs[s.VM]
		err = r.simOfVM(gv.id).Rename(gv.id, s.Arg)
		r.recordVM(s.VM)
	case actVMResize:
		gv := r.sched.VMs[s.VM]
		gib, _ := strconv.Atoi(s.Arg)
		err = r.simOfVM(gv.id).Resize(gv.id, s.N, int64(gib)*xosim.GiB)
		r.recordVM(s.VM)
	case actVMTags:
		gv := r.sched.VMs[s.VM]
		var tags []string
		if s.Arg != "" {
			tags = strings.Split(s.Arg, "|")
		}
		err = r.simOfVM(gv.id).SetTags(gv.id, tags)
		r.recordVM(s.VM)
	case actXO5xx:
		if s.End {
			x.Sim.RemoveFault(r.faults[r.xoFaultKey(s)])
		} else {
			r.faults[r.xoFaultKey(s)] = x.Sim.InjectFault(xosim.Fault{Kind: xosim.FaultStatus, Status: s.N, PathPrefix: s.Arg})
		}
	case actXOHang:
		if s.End {
			x.Sim.RemoveFault(r.faults[r.xoFaultKey(s)])
		} else {
			r.faults[r.xoFaultKey(s)] = x.Sim.InjectFault(xosim.Fault{Kind: xosim.FaultLatency, Latency: 30 * time.Second, PathPrefix: s.Arg})
		}
	case actXORefuse:
		if s.End {
			x.Reopen(r.t)
		} else {
			x.Close()
		}
	case actXO401:
		if s.End {
			x.Sim.AddToken(r.est.tokens[s.Server])
		} else {
			x.Sim.RevokeToken(r.est.tokens[s.Server])
		}
	case actXOStreamCut:
		r.note("%d event streams cut", x.Sim.CutEventStreams())
	case actXOTruncate:
		x.Sim.InjectFault(xosim.Fault{Kind: xosim.FaultTruncate, PathPrefix: "/rest/v0/vms", Count: s.N, Lines: 2})
	case actPoolDrop:
		sim, id := r.est.sim(s.Pool), r.est.poolIDs[s.Pool]
		r.setHidden(s.Pool, true)
		if err = sim.BeginDisconnect(id); err == nil {
			time.Sleep(100 * time.Millisecond)
			err = sim.FinishDisconnect(id)
		}
	case actPoolBegin:
		err = r.est.sim(s.Pool).BeginReconnect(r.est.poolIDs[s.Pool])
	case actPoolReveal:
		err = r.est.sim(s.Pool).RevealPool(r.est.poolIDs[s.Pool])
	case actPoolRevealVMs:
		_, err = r.est.sim(s.Pool).RevealVMs(r.est.poolIDs[s.Pool], s.N)
	case actPoolReconnect:
		if err = r.est.sim(s.Pool).ReconnectPool(r.est.poolIDs[s.Pool]); err == nil {
			r.setHidden(s.Pool, false)
		}
	case actServerDisable:
		if !s.End {
			r.setHidden(s.Pool, true)
		}
		err = r.est.sim(s.Pool).SetServerEnabled(r.est.poolIDs[s.Pool], s.End)
		if s.End && err == nil {
			r.setHidden(s.Pool, false)
		}
	case actServerRemove:
		if s.End {
			if _, err = r.est.sim(s.Pool).AddServer(r.est.poolIDs[s.Pool]); err == nil {
				r.setHidden(s.Pool, false)
			}
		} else {
			r.setHidden(s.Pool, true)
			err = r.est.sim(s.Pool).RemoveServer(r.est.poolIDs[s.Pool])
		}
	case actKillLeader, actKillOther:
		if s.End {
			if rp := r.killed[s.Kind]; rp != nil {
				err = rp.start()
				delete(r.killed, s.Kind)
				r.note("restarted %s", rp.name)
			}
			break
		}
		lead, other := r.leader()
		if lead == nil {
			r.note("no replica leads at this moment: nothing killed")
			break
		}
		victim := lead
		if s.Kind == actKillOther {
			victim = other
		}
		if !victim.running() {
			r.note("%s is not running: nothing killed", victim.name)
			break
		}
		victim.kill()
		r.killed[s.Kind] = victim
		r.note("SIGKILL %s", victim.name)
	case actAPI429:
		if s.End {
			r.api.setThrottle(0)
		} else {
			r.api.setThrottle(s.N)
		}
	case actAPIRestart:
		// kube-apiserver itself restarts (same etcd, port and certificates); the proxy refuses
		// the binaries' connections meanwhile, as a stopped API server does, instead of
		// answering 502 for it.
		if s.End {
			// The proxy comes back once kube-apiserver is up again, without holding up the
			// schedule.
			restart := r.apiRestart
			r.apiRestart = nil
			r.apiBack = make(chan struct{})
			back := r.apiBack
			go func() {
				defer close(back)
				if restart != nil {
					select {
					case <-restart:
					case <-time.After(2 * time.Minute):
						r.t.Errorf("kube-apiserver did not come back within 2 minutes")
					}
				}
				if err := r.api.comeBack(); err != nil {
					r.t.Errorf("API proxy back: %v", err)
				}
			}()
			break
		}
		if r.apiBack != nil {
			<-r.apiBack // the previous restart is over
		}
		r.api.goAway()
		done := make(chan struct{})
		r.apiRestart = done
		began := time.Now()
		go func() {
			stopErr, err := r.env.RestartAPIServer(0)
			r.note("kube-apiserver restarted in %s (stop: %v; start: %v)", time.Since(began).Round(time.Millisecond), stopErr, err)
			if stopErr != nil {
				r.mu.Lock()
				r.counts["api-restart killed after the stop timeout"]++
				r.mu.Unlock()
			}
			if err != nil {
				r.t.Errorf("kube-apiserver restart: %v", err)
			}
			close(done)
		}()
	case actCARotate:
		err = r.kube.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: caSecretName}})
	case actQuiet:
	}
	if err != nil {
		r.note("%s: %v", s, err)
	}
}

// waitAPIRestart waits for a kube-apiserver restart under way to end (the restart reports its
// own error); an error if it does not within 2 minutes.
func (r *runner) waitAPIRestart() error {
	if r.apiRestart == nil {
		return nil
	}
	select {
	case <-r.apiRestart:
		r.apiRestart = nil
		return nil
	case <-time.After(2 * time.Minute):
		return errors.New("kube-apiserver did not come back within 2 minutes")
	}
}

func (r *runner) simOfVM(id string) *xosim.Server {
	for _, x := range r.est.xos {
		if _, ok := x.Sim.VM(id); ok {
			return x.Sim
		}
	}
	return r.est.xos[0].Sim
}

// run executes the schedule in real time, sampling the replicas' metrics every 10 s.
func (r *runner) run() {
	r.start = time.Now()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(10 * time.Second)
		defer tick.Stop()
		r.sampleMetrics()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				r.sampleMetrics()
			}
		}
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				r.o.checkLate(convergeWithin)
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	lastLog := time.Now()
	for _, s := range r.sched.Steps {
		// The quiet step is taken at once: the convergence is watched from the last step on.
		if d := time.Until(r.start.Add(s.At)); d > 0 && s.Kind != actQuiet {
			time.Sleep(d)
		}
		if r.isFailed() && os.Getenv("SOAK_STOP_ON_VIOLATION") != "" {
			r.t.Logf("soak: stopped at step %d/%d after a violation", s.Seq, len(r.sched.Steps))
			return
		}
		r.mu.Lock()
		r.done = append(r.done, fmt.Sprintf("%s (at +%s)", s, time.Since(r.start).Round(time.Millisecond)))
		k := s.Kind
		if s.End {
			k += " END"
		}
		r.counts[k]++
		r.mu.Unlock()
		r.exec(s)
		if s.Kind != actQuiet {
			r.mu.Lock()
			r.lastStepAt = time.Now()
			r.mu.Unlock()
		}
		if time.Since(lastLog) > time.Minute {
			lastLog = time.Now()
			r.t.Logf("soak: +%s step %d/%d", time.Since(r.start).Round(time.Second), s.Seq, len(r.sched.Steps))
		}
		if s.Kind == actQuiet {
			r.converge()
		}
	}
}

func (r *runner) isFailed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

// violation prints a violation at once (with the seed and the schedule up to it) and fails
// the run.
func (r *runner) violation(v Violation) {
	r.mu.Lock()
	first := !r.failed
	r.failed = true
	done := slices.Clone(r.done)
	r.mu.Unlock()
	msg := fmt.Sprintf("VIOLATION of invariant %d at +%s: %s\n  seed %d, duration %s: replay with %s\n%s",
		v.Invariant, v.At.Sub(r.start).Round(time.Millisecond), v.What, r.sched.Seed, r.sched.Duration, r.sched.replay(), v.Objects)
	if first {
		from := max(0, len(done)-60)
		msg += fmt.Sprintf("\n  schedule up to it (last %d of %d steps executed):\n    %s", len(done)-from, len(done), strings.Join(done[from:], "\n    "))
	}
	r.t.Error(msg)
}

// converge heals what is left (nothing, if the schedule ended every fault), waits until both
// replicas run, and checks invariant 5 against the truth.
func (r *runner) converge() {
	t := r.t
	r.mu.Lock()
	quietAt := r.lastStepAt
	r.mu.Unlock()
	// Every fault window has ended in the schedule; make sure of it.
	for _, x := range r.est.xos {
		x.Sim.ClearFaults()
	}
	for _, rp := range r.killed {
		_ = rp.start()
	}
	// A pool a failed step left away comes back (none should: the schedule ends every fault).
	for p := range poolDefs {
		r.mu.Lock()
		hidden := r.hidden[p]
		r.mu.Unlock()
		if !hidden {
			continue
		}
		sim, id := r.est.sim(p), r.est.poolIDs[p]
		_, _ = sim.AddServer(id)
		_ = sim.SetServerEnabled(id, true)
		err := sim.ReconnectPool(id)
		r.note("quiet: pool %d was still away; reconnected (%v)", p, err)
		r.setHidden(p, false)
	}
	r.api.setThrottle(0)
	if err := r.waitAPIRestart(); err != nil {
		t.Errorf("kube-apiserver restart: %v", err)
	}
	if r.apiBack != nil {
		<-r.apiBack
	}
	_ = r.api.comeBack()
	// Polled from the quiet step on: a first poll that already matches only bounds the time
	// (the quiet step comes some seconds after the last step).
	var converged time.Duration
	var atBound string
	first, ok, upper := true, false, false
	for deadline := quietAt.Add(convergeWithin + 30*time.Second); ; first = false {
		p := r.convergenceProblems()
		now := time.Now()
		if p == "" {
			converged, ok, upper = now.Sub(quietAt), true, first
			break
		}
		if atBound == "" && now.After(quietAt.Add(convergeWithin)) {
			atBound = p
		}
		if now.After(deadline) {
			atBound = p
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	switch {
	case !ok:
		r.o.mu.Lock()
		r.o.violate(5, fmt.Sprintf("no convergence %s after the last fault or change", convergeWithin+30*time.Second), atBound)
		r.o.mu.Unlock()
	case converged > convergeWithin && !upper:
		r.o.mu.Lock()
		r.o.violate(5, fmt.Sprintf("convergence took %s after the last fault or change, more than %s; what differed at %s:", converged.Round(time.Millisecond), convergeWithin, convergeWithin), atBound)
		r.o.mu.Unlock()
	}
	what := "converged"
	if upper {
		what = "converged at the first look, at most"
	}
	r.mu.Lock()
	r.convergences = append(r.convergences, converged)
	r.mu.Unlock()
	t.Logf("soak: %s %s after the last fault or change (bound %s); Nodes checked: %v", what, converged.Round(time.Millisecond), convergeWithin, r.lastChecked)
}

// convergenceProblems lists what differs from the truth now ("" when nothing).
func (r *runner) convergenceProblems() string {
	var list corev1.NodeList
	if err := r.kube.List(context.Background(), &list); err != nil {
		return err.Error()
	}
	r.o.mu.Lock()
	defer r.o.mu.Unlock()
	// Names and addresses unique among the VMs in scope, as the truth has them.
	names, ips := map[string]int{}, map[string]int{}
	for i := range r.sched.VMs {
		st, ok := r.o.current(r.sched.VMs[i].id)
		if !ok || !st.exists || !poolDefs[r.est.poolOf(st.pool)].inScope {
			continue
		}
		names[st.name]++
		if st.host != "" {
			ips[st.ip]++
		}
	}
	unique := func(st vmState, kind string) bool {
		if kind == kindName {
			return names[st.name] == 1
		}
		return st.host != "" && ips[st.ip] == 1
	}
	var problems []string
	checked := map[string]int{}
	defer func() { r.lastChecked = checked }()
	for i := range list.Items {
		n := &list.Items[i]
		rec := r.o.nodes[n.Name]
		if rec == nil || rec.uid != string(n.UID) || rec.kind == kindIgnored || rec.kind == kindIgnoredSel || rec.kind == kindForeign {
			continue
		}
		if rec.kind == kindName {
			st, _ := r.o.current(rec.vm)
			if st.name != n.Name {
				// Renamed since it registered: only a match made before counts.
				if n.Spec.ProviderID == "" {
					continue
				}
			}
		}
		p, gone := r.o.expectation(rec, n, unique)
		switch {
		case gone:
			checked["to delete"]++
		case n.Spec.ProviderID != "":
			checked["matched"]++
		default:
			checked["unmatched"]++
		}
		if p != "" {
			problems = append(problems, fmt.Sprintf("Node %s (VM %s, %s): %s", n.Name, rec.vm, rec.kind, p))
		}
	}
	slices.Sort(problems)
	return strings.Join(problems, "\n")
}

// --- watch ----------------------------------------------------------------------------------

// watchNodes runs an informer on Nodes (the test's own client, straight to the API server) and
// hands every change to the oracle.
func (r *runner) watchNodes() {
	cs, err := kubernetes.NewForConfig(r.env.Config)
	if err != nil {
		r.t.Fatal(err)
	}
	lw := cache.NewListWatchFromClient(cs.CoreV1().RESTClient(), "nodes", "", fieldsEverything())
	inf := cache.NewSharedIndexInformer(lw, &corev1.Node{}, 0, cache.Indexers{})
	_, err = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if n, ok := obj.(*corev1.Node); ok {
				r.o.observe(nil, n)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*corev1.Node)
			n, ok2 := newObj.(*corev1.Node)
			if ok1 && ok2 {
				r.o.observe(o, n)
			}
		},
		DeleteFunc: func(obj any) {
			// A deletion the watch missed (it was down: kube-apiserver restarting) comes as a
			// tombstone holding the last state the watch saw, which may be older than the
			// Node's last state.
			tombstone := false
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj, tombstone = d.Obj, true
			}
			if n, ok := obj.(*corev1.Node); ok {
				r.o.deleted(n, tombstone, r.vmExists)
			}
		},
	})
	if err != nil {
		r.t.Fatal(err)
	}
	stop := make(chan struct{})
	r.t.Cleanup(func() { close(stop) })
	go inf.Run(stop)
	if !cache.WaitForCacheSync(stop, inf.HasSynced) {
		r.t.Fatal("node informer did not sync")
	}
}

// --- metrics and the end --------------------------------------------------------------------

func (r *runner) sampleMetrics() {
	for _, rp := range r.replicas {
		if !rp.running() {
			continue
		}
		status, body, err := httpGet("http://" + rp.metrics + "/metrics")
		if err != nil || status != http.StatusOK {
			continue
		}
		rp.mu.Lock()
		starts := rp.starts
		rp.mu.Unlock()
		r.mu.Lock()
		r.samples = append(r.samples, sample{at: time.Since(r.start), replica: rp.name, start: starts,
			goroutines: metricValue(body, "go_goroutines"), rss: metricValue(body, "process_resident_memory_bytes"),
			leading: metricValue(body, "leader_election_master_status") == 1})
		r.mu.Unlock()
	}
}

// finish stops the replicas and checks invariant 6 and the growth of goroutines and memory,
// then prints the figures.
func (r *runner) finish() {
	r.sampleMetrics()
	for _, rp := range r.replicas {
		rp.stop(20 * time.Second)
	}
	// (6) the tokens never appear in any output or Event.
	events := r.clusterEvents()
	r.o.mu.Lock()
	defer r.o.mu.Unlock()
	for _, tok := range r.est.tokens {
		for _, rp := range r.replicas {
			if at := findToken(tok, rp.out.Bytes()); len(at) > 0 {
				out := rp.out.Bytes()
				r.o.violate(6, fmt.Sprintf("token found in the output of %s", rp.name), string(out[max(0, at[0]-200):min(len(out), at[0]+200)]))
			}
		}
		if len(findToken(tok, events)) > 0 {
			r.o.violate(6, "token found in an Event", "")
		}
	}
	r.checkGrowth()
	r.watchGaps = nodeWatchGaps(r.replicas)
	for _, rp := range r.replicas {
		out := rp.out.Bytes()
		r.admissions = append(r.admissions, [2]int{
			bytes.Count(out, []byte("\tNode described at creation\t")), bytes.Count(out, []byte("\tNode admitted unchanged\t"))})
	}
}

// nodeWatchGaps reads, in the replicas' logs, how long each Node watch stayed down: from a
// "Watch closed" or "Failed to watch" of *v1.Node to the next "Listing and watching" of it
// (client-go's reflector waits its backoff in between). Seconds, as the log's timestamps.
func nodeWatchGaps(rs []*replica) []time.Duration {
	var gaps []time.Duration
	for _, rp := range rs {
		var down time.Time
		for _, line := range strings.Split(string(rp.out.Bytes()), "\n") {
			if strings.HasPrefix(line, "===== ") {
				down = time.Time{} // a new incarnation
				continue
			}
			if !strings.Contains(line, `"type": "*v1.Node"`) && !strings.Contains(line, "*v1.Node:") {
				continue
			}
			ts, err := time.Parse(time.RFC3339, strings.SplitN(line, "\t", 2)[0])
			if err != nil {
				continue
			}
			switch {
			case strings.Contains(line, "Watch closed") || strings.Contains(line, "Failed to watch"):
				if down.IsZero() {
					down = ts
				}
			case strings.Contains(line, "Listing and watching") && !down.IsZero():
				gaps = append(gaps, ts.Sub(down))
				down = time.Time{}
			case strings.Contains(line, "====="):
				down = time.Time{}
			}
		}
	}
	slices.Sort(gaps)
	return gaps
}

// writeSteps writes the steps executed, with the notes, to steps.log, and the metric samples
// to metrics.csv.
func (r *runner) writeSteps() {
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = os.WriteFile(filepath.Join(r.logDir, "steps.log"), []byte(strings.Join(r.done, "\n")+"\n"), 0o644)
	var b strings.Builder
	b.WriteString("seconds,replica,incarnation,leading,go_goroutines,process_resident_memory_bytes\n")
	for _, s := range r.samples {
		fmt.Fprintf(&b, "%.0f,%s,%d,%v,%.0f,%.0f\n", s.at.Seconds(), s.replica, s.start, s.leading, s.goroutines, s.rss)
	}
	_ = os.WriteFile(filepath.Join(r.logDir, "metrics.csv"), []byte(b.String()), 0o644)
}

func (r *runner) clusterEvents() []byte {
	var core corev1.EventList
	var ev eventsv1.EventList
	_ = r.kube.List(context.Background(), &core)
	_ = r.kube.List(context.Background(), &ev)
	b, _ := json.Marshal([]any{core, ev})
	return b
}

// findToken returns where the token, either half of it, or its base64 appears in data.
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

// checkGrowth compares, for each incarnation of a replica, its first and last samples in the
// role it ended in (a replica that becomes leader starts its controllers' workers: a step of a
// few hundred goroutines that is no growth), when they are two minutes apart or more.
func (r *runner) checkGrowth() {
	type span struct{ first, last *sample }
	spans := map[string]*span{}
	var keys []string
	for i := range r.samples {
		s := &r.samples[i]
		k := fmt.Sprintf("%s#%d", s.replica, s.start)
		sp := spans[k]
		if sp == nil {
			sp = &span{}
			spans[k] = sp
			keys = append(keys, k)
		}
		if sp.first == nil || sp.first.leading != s.leading {
			sp.first = s // a new role starts the comparison over
		}
		sp.last = s
	}
	for _, k := range keys {
		sp := spans[k]
		if sp.last.at-sp.first.at < 2*time.Minute {
			continue
		}
		if sp.last.goroutines > 1.5*sp.first.goroutines+50 {
			r.o.violate(6, fmt.Sprintf("%s: goroutines grew from %.0f to %.0f in %s (leading: %v)", k, sp.first.goroutines, sp.last.goroutines, sp.last.at-sp.first.at, sp.last.leading), "")
		}
		if sp.last.rss > 2*sp.first.rss+64<<20 {
			r.o.violate(6, fmt.Sprintf("%s: RSS grew from %.0f MiB to %.0f MiB in %s", k, sp.first.rss/(1<<20), sp.last.rss/(1<<20), sp.last.at-sp.first.at), "")
		}
	}
}

func (r *runner) report() {
	t := r.t
	r.o.mu.Lock()
	defer r.o.mu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	keys := make([]string, 0, len(r.counts))
	for k := range r.counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "soak figures: seed %d, duration %s, %d steps, %d violations\n", r.sched.Seed, r.sched.Duration, len(r.sched.Steps), len(r.o.viol))
	for _, k := range keys {
		fmt.Fprintf(&b, "  %-28s %d\n", k, r.counts[k])
	}
	var conv []string
	slowest := time.Duration(0)
	for _, c := range r.convergences {
		conv = append(conv, c.Round(time.Millisecond).String())
		slowest = max(slowest, c)
	}
	fmt.Fprintf(&b, "  convergence after the last fault or change, per quiet step: %s (slowest %s, bound %s)\n", strings.Join(conv, ", "), slowest.Round(time.Millisecond), convergeWithin)
	var lat []time.Duration
	var maxFree time.Duration
	for _, d := range r.o.deletions {
		lat = append(lat, d.latency)
		if d.faultFree {
			maxFree = max(maxFree, d.latency)
		}
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		fmt.Fprintf(&b, "  Nodes deleted by the controller: %d; time from deletable (VM gone as XO shows it, NotReady, providerID) to deleted: median %s, max %s; max with no fault meanwhile %s\n",
			len(lat), lat[len(lat)/2].Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond), maxFree.Round(time.Millisecond))
	}
	if g := r.watchGaps; len(g) > 0 {
		fmt.Fprintf(&b, "  Node watch outages of the replicas (client-go reflector backoff after API faults): %d, median %s, max %s\n", len(g), g[len(g)/2], g[len(g)-1])
	}
	fmt.Fprintf(&b, "  api proxy: %d requests, %d answered 429\n", r.api.requests.Load(), r.api.throttled.Load())
	fmt.Fprintf(&b, "  webhook proxy connections: %d to replica-a, %d to replica-b\n", r.hook.connsTo(0), r.hook.connsTo(1))
	for i, a := range r.admissions {
		fmt.Fprintf(&b, "  admissions served by %s: %d Nodes described at creation, %d admitted unchanged\n", r.replicas[i].name, a[0], a[1])
	}
	for _, rp := range r.replicas {
		var first, last *sample
		for i := range r.samples {
			if r.samples[i].replica == rp.name {
				if first == nil {
					first = &r.samples[i]
				}
				last = &r.samples[i]
			}
		}
		if first != nil {
			fmt.Fprintf(&b, "  %s: %d starts; first sample goroutines %.0f RSS %.1f MiB; last (incarnation %d, +%s) goroutines %.0f RSS %.1f MiB\n",
				rp.name, rp.starts, first.goroutines, first.rss/(1<<20), last.start, last.at.Round(time.Second), last.goroutines, last.rss/(1<<20))
		}
		// The longest-lived incarnation, first and last sample.
		var lf, ll *sample
		for i := range r.samples {
			si := &r.samples[i]
			if si.replica != rp.name {
				continue
			}
			f := si
			for j := i; j >= 0; j-- {
				if r.samples[j].replica == rp.name && r.samples[j].start == si.start {
					f = &r.samples[j]
				}
			}
			if lf == nil || si.at-f.at > ll.at-lf.at {
				lf, ll = f, si
			}
		}
		if lf != nil {
			fmt.Fprintf(&b, "  %s longest incarnation (#%d, %s): goroutines %.0f → %.0f, RSS %.1f → %.1f MiB\n",
				rp.name, lf.start, (ll.at - lf.at).Round(time.Second), lf.goroutines, ll.goroutines, lf.rss/(1<<20), ll.rss/(1<<20))
		}
	}
	for _, d := range r.o.deletions {
		fmt.Fprintf(&b, "  deleted %s %s after it was deletable (no fault meanwhile: %v; VM gone while XO lost its pool, deletable from the reconnection: %v)\n",
			d.node, d.latency.Round(time.Millisecond), d.faultFree, d.afterReconnect)
	}
	t.Log(b.String())
	if f := os.Getenv("SOAK_REPORT"); f != "" {
		_ = os.WriteFile(f, []byte(b.String()), 0o644)
	}
}

// replay is the command that runs the same schedule.
func (s *Schedule) replay() string {
	cmd := fmt.Sprintf("make soak SEED=%d DURATION=%s", s.Seed, s.Duration)
	if !s.Options.MoveHidden {
		cmd = "SOAK_MOVE_HIDDEN=0 " + cmd
	}
	if s.Options.PoolLoad != defaultPoolLoad {
		cmd = fmt.Sprintf("SOAK_POOL_LOAD=%s %s", s.Options.PoolLoad, cmd)
	}
	return cmd
}

// --- small helpers --------------------------------------------------------------------------

func httpGet(url string) (int, []byte, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url) //nolint:gosec // loopback test endpoints
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	return resp.StatusCode, b, err
}

// metricValue returns the value of the first sample of an unlabelled (or singly labelled)
// metric in a Prometheus text exposition; 0 when absent.
func metricValue(text []byte, name string) float64 {
	for _, line := range strings.Split(string(text), "\n") {
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		if strings.HasPrefix(rest, "{") {
			end := strings.Index(rest, "}")
			if end < 0 {
				continue
			}
			rest = rest[end+1:]
		} else if !strings.HasPrefix(rest, " ") {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err == nil {
			return v
		}
	}
	return 0
}

// dump renders an object for a violation report.
func dump(x any) string {
	switch v := x.(type) {
	case string:
		return v
	case nil:
		return "<nil>"
	case *corev1.Node:
		if v == nil {
			return "<nil Node>"
		}
		c := v.DeepCopy()
		c.ManagedFields = nil
		b, _ := json.MarshalIndent(map[string]any{"name": c.Name, "uid": c.UID, "rv": c.ResourceVersion, "providerID": c.Spec.ProviderID,
			"labels": c.Labels, "annotations": c.Annotations, "taints": c.Spec.Taints, "ready": isReady(c), "addresses": c.Status.Addresses}, "  ", "  ")
		return "  Node " + string(b)
	}
	b, _ := json.Marshal(x)
	return string(b)
}

func fieldsEverything() fields.Selector { return fields.Everything() }
