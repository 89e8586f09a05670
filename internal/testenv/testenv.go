// Package testenv starts a real etcd and kube-apiserver (controller-runtime's envtest) for
// integration tests, with the binaries hack/testbin.sh builds, and optionally registers the
// Node webhook so that the API server's admission chain calls it over TLS.
//
// It also holds what the tests of several packages share: kubelet-like Nodes (KubeletNode),
// a simulated XO on a real listener with a client and an inventory (NewXO), certificates
// (NewCA, WriteSecretVolume), an event recorder, managers and webhook servers run for one test,
// and small helpers (free ports, polling, a concurrency-safe buffer).
package testenv

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/webhook"
)

// Options configures Start.
type Options struct {
	// Webhook registers the Node webhook, served by the test at WebhookHost:WebhookPort
	// with the certificate in WebhookCertDir.
	Webhook bool
	// FailurePolicy of the webhook; default Ignore, as the chart installs it.
	FailurePolicy admissionregistrationv1.FailurePolicyType
	// TimeoutSeconds of the webhook; default 5, as the chart installs it.
	TimeoutSeconds int32
	// APIServerArgs are extra kube-apiserver flags (name without dashes → values).
	APIServerArgs map[string][]string
	// CRDPaths are CRD files or folders to install.
	CRDPaths []string
	// APIServerCertDir, when set, is kube-apiserver's working folder (its serving certificate
	// and the client CA), kept when it stops: RestartAPIServer then brings it back with the
	// same certificates, so that every client's configuration still works. Empty: a temporary
	// folder, as envtest makes, and no restart.
	APIServerCertDir string
}

// Env is a running control plane.
type Env struct {
	*envtest.Environment
	Config *rest.Config
	Client client.Client

	stableCerts bool
}

// AssetsDir returns the folder holding kube-apiserver and etcd: $KUBEBUILDER_ASSETS, else the
// cache folder of hack/testbin.sh. It fails, saying how to fix it, when they are missing.
func AssetsDir() (string, error) {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		out, err := exec.Command("bash", filepath.Join(RepoRoot(), "hack", "testbin.sh"), "--path").Output()
		if err != nil {
			return "", fmt.Errorf("hack/testbin.sh --path: %w", err)
		}
		dir = strings.TrimSpace(string(out))
	}
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return "", fmt.Errorf("%s missing in %s: run `make testbin` (or hack/testbin.sh) first", b, dir)
		}
	}
	return dir, nil
}

// AssetBinary returns the path of hack/testbin.sh's binary name, beside kube-apiserver in
// AssetsDir, and fails t, saying how to build it, when it is missing.
func AssetBinary(t testing.TB, name string) string {
	t.Helper()
	dir, err := AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s missing in %s: run `make testbin` (or hack/testbin.sh %s) first: %v", name, dir, name, err)
	}
	return p
}

// RepoRoot returns the repository's root folder: two folders above this source file, or, in a
// build with -trimpath (make test compiles as make build does, see the Makefile), where the
// file's path is relative to the module, the nearest folder above the working directory (which
// go test sets to the package's folder) whose go.mod is the controller's module's, not the test
// module's (test/go.mod).
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	if filepath.IsAbs(file) {
		return filepath.Join(filepath.Dir(file), "..", "..")
	}
	dir, err := os.Getwd()
	if err != nil {
		panic(fmt.Sprintf("testenv: the repository's root: %v", err))
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && rootModule.Match(b) {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			panic("testenv: the repository's root: no go.mod of the controller's module above the working directory")
		}
		dir = parent
	}
}

// rootModule matches the module line of the controller's module's go.mod.
var rootModule = regexp.MustCompile(`(?m)^module\s+github\.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager\s*$`)

// Start starts etcd and kube-apiserver.
func Start(o Options) (*Env, error) {
	dir, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: dir,
		CRDDirectoryPaths:     o.CRDPaths,
		ErrorIfCRDPathMissing: true,
	}
	api := env.ControlPlane.GetAPIServer()
	api.CertDir = o.APIServerCertDir
	if o.APIServerCertDir != "" {
		// RestartAPIServer kills a kube-apiserver still draining after this, rather than
		// envtest's 20 s: the tests restart it to see clients survive, not to time its drain.
		// (envtest copies this into each component's stop timeout at Start.)
		env.ControlPlaneStopTimeout = restartStopTimeout
	}
	for k, vs := range o.APIServerArgs {
		api.Configure().Set(k, vs...)
	}
	if o.Webhook {
		fp := o.FailurePolicy
		if fp == "" {
			fp = admissionregistrationv1.Ignore
		}
		timeout := o.TimeoutSeconds
		if timeout == 0 {
			timeout = 5
		}
		path := webhook.Path
		cfg := webhook.Configuration("xenorchestra-cloud-controller-manager", &admissionregistrationv1.ServiceReference{
			Name: "xenorchestra-cloud-controller-manager", Namespace: "kube-system", Path: &path,
		}, fp, timeout)
		env.WebhookInstallOptions.MutatingWebhooks = []*admissionregistrationv1.MutatingWebhookConfiguration{cfg}
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("start envtest: %w", err)
	}
	// Bursts of hundreds of Nodes in tests must not wait on client-side throttling.
	cfg.QPS, cfg.Burst = 2000, 4000
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, errors.Join(err, env.Stop())
	}
	return &Env{Environment: env, Config: cfg, Client: c, stableCerts: o.APIServerCertDir != ""}, nil
}

// restartStopTimeout bounds the graceful stop of a kube-apiserver that RestartAPIServer may
// restart; after it the process is killed.
const restartStopTimeout = 3 * time.Second

// RestartAPIServer stops kube-apiserver (SIGTERM, as a rolling restart of the control plane
// does) and starts it again on the same port and etcd, with the same certificates. It needs
// Options.APIServerCertDir: without it envtest would make new certificates and users, and no
// client configuration would survive. down is how long it stays stopped. A kube-apiserver
// still draining requests 3 s after SIGTERM is killed (envtest's way past its stop timeout),
// as a crashed one; the restart then waits for its port to be free. It returns how the stop went (stopErr, nil for
// a clean stop) apart from whether the restart worked (err).
func (e *Env) RestartAPIServer(down time.Duration) (stopErr, err error) {
	api := e.ControlPlane.GetAPIServer()
	if api.CertDir == "" || !e.stableCerts {
		return nil, errors.New("restart kube-apiserver: Options.APIServerCertDir is not set")
	}
	if stopErr = api.Stop(); stopErr != nil {
		// Killed: wait for the port to refuse connections.
		addr := net.JoinHostPort(api.Address, api.Port)
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
			if err != nil {
				break
			}
			_ = c.Close()
		}
	}
	time.Sleep(down)
	if err := api.Start(); err != nil {
		return stopErr, fmt.Errorf("start kube-apiserver again: %w", err)
	}
	return stopErr, nil
}
