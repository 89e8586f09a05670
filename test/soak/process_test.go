package soak_test

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
)

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
	binDir    string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// ccmBinary builds ./cmd/xenorchestra-cloud-controller-manager once per test binary into a
// folder of its own (removed when the tests end, see TestMain) and returns its path, as
// test/e2e does.
func ccmBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "xo-ccm-soak-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binDir = dir
		buildPath, buildErr = testenv.BuildCommand(dir)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildPath
}

// replica is one of the two controller processes. It keeps its ports and its output across
// restarts: the webhook proxy and the metrics scraper find it where it was.
type replica struct {
	name    string
	bin     string
	args    []string
	metrics string
	health  string
	webhook int
	// out holds the output of every incarnation, each preceded by a header line.
	out *logFile

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	started time.Time
	starts  int
	// held: the test stopped it and restarts it itself; otherwise an exit is restarted after
	// a second, as the kubelet restarts a container that exited.
	held bool
	// exits counts the exits the test did not cause, and onExit hears of each.
	exits  int
	onExit func(r *replica, err error)
	closed bool
}

// start starts a new incarnation; the previous one must have exited.
func (r *replica) start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.starts++
	_, _ = fmt.Fprintf(r.out, "\n===== %s incarnation %d started %s =====\n", r.name, r.starts, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(r.bin, r.args...)
	cmd.Stdout, cmd.Stderr = r.out, r.out
	cmd.Env = testenv.CommandEnv()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", r.name, err)
	}
	done := make(chan struct{})
	r.cmd, r.done, r.started, r.held = cmd, done, time.Now(), false
	go func() {
		err := cmd.Wait()
		close(done)
		r.mu.Lock()
		restart := !r.held && !r.closed
		if restart {
			r.exits++
		}
		onExit := r.onExit
		r.mu.Unlock()
		if !restart {
			return
		}
		if onExit != nil {
			onExit(r, err)
		}
		time.Sleep(time.Second)
		r.mu.Lock()
		again := !r.held && !r.closed && r.done == done
		r.mu.Unlock()
		if again {
			_ = r.start()
		}
	}()
	return nil
}

// running reports whether the current incarnation runs.
func (r *replica) running() bool {
	r.mu.Lock()
	done := r.done
	r.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL and waits for the exit.
func (r *replica) kill() {
	r.signal(syscall.SIGKILL, 10*time.Second)
}

// stop sends SIGTERM and waits up to d, then kills.
func (r *replica) stop(d time.Duration) {
	if !r.signal(syscall.SIGTERM, d) {
		r.kill()
	}
}

func (r *replica) signal(sig syscall.Signal, d time.Duration) bool {
	r.mu.Lock()
	r.held = true
	cmd, done := r.cmd, r.done
	r.mu.Unlock()
	if cmd == nil {
		return true
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// ready reports whether /readyz answers 200.
func (r *replica) ready() bool {
	status, _, err := httpGet("http://" + r.health + "/readyz")
	return err == nil && status == http.StatusOK
}

// leading reports whether the replica's metrics say it holds the Lease.
func (r *replica) leading() bool {
	status, body, err := httpGet("http://" + r.metrics + "/metrics")
	if err != nil || status != http.StatusOK {
		return false
	}
	return metricValue(body, "leader_election_master_status") == 1
}

// newReplica prepares (does not start) a replica of the binary.
func newReplica(t *testing.T, name, bin, kubeconfig, config, logDir string) *replica {
	out, err := newLogFile(filepath.Join(logDir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{
		name: name, bin: bin, out: out,
		metrics: testenv.FreeAddr(t), health: testenv.FreeAddr(t), webhook: testenv.FreePort(t),
	}
	r.args = []string{
		"--kubeconfig=" + kubeconfig,
		"--config=" + config,
		// Debug: every resolution and patch (V(1)) and client-go's request lines, not its
		// bodies: an hour at level 10 would be gigabytes.
		"--zap-log-level=5", "--zap-devel",
		// Plain HTTP: the oracle reads which replica leads without a token (the endpoint's
		// authentication is tested in cmd/app and test/e2e).
		"--metrics-bind-address=" + r.metrics, "--metrics-insecure-http",
		"--health-probe-bind-address=" + r.health,
		"--leader-elect=true", "--leader-elect-namespace=kube-system",
		// A crashed leader is replaced within about 6 s instead of 15: the run meets more
		// leader changes. The ratios keep the binary's validation (retry < renew < lease).
		"--leader-elect-lease-duration=6s", "--leader-elect-renew-deadline=4s", "--leader-elect-retry-period=1s",
		"--webhook=true", "--webhook-host=127.0.0.1", "--webhook-port=" + strconv.Itoa(r.webhook),
		"--webhook-certs=self-managed", "--webhook-ca-secret=kube-system/" + caSecretName,
		"--webhook-dns-names=localhost", "--webhook-configuration=" + webhookConfigName,
		// Serving certificates renewed every 20 s: the run rotates them all along.
		"--webhook-cert-duration=30s",
		"--shutdown-delay=1s",
	}
	t.Cleanup(func() {
		r.mu.Lock()
		r.closed = true
		r.mu.Unlock()
		if r.running() {
			r.kill()
		}
	})
	return r
}

// logFile is a process's output on disk, safe for concurrent writers.
type logFile struct {
	mu   sync.Mutex
	f    *os.File
	path string
}

func newLogFile(path string) (*logFile, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &logFile{f: f, path: path}, nil
}

func (l *logFile) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Write(p)
}

// Bytes returns everything written.
func (l *logFile) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, _ := os.ReadFile(l.path)
	return b
}

// Tail returns the last n bytes written.
func (l *logFile) Tail(n int64) []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	fi, err := l.f.Stat()
	if err != nil {
		return nil
	}
	off := max(0, fi.Size()-n)
	b := make([]byte, fi.Size()-off)
	_, _ = l.f.ReadAt(b, off)
	return b
}
