package e2e_test

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
)

// ccmArgs are the command line of one controller process.
type ccmArgs struct {
	// kubeconfig and config are files; config "" runs without --config.
	kubeconfig string
	config     string
	// webhookPort 0 runs without the webhook (--webhook=false).
	webhookPort int
	certDir     string
	// leaderElect turns leader election on, in kube-system.
	leaderElect bool
	// secureMetrics serves the metrics endpoint as by default, over HTTPS behind the API
	// server's authorization; otherwise over plain HTTP (--metrics-insecure-http), which the
	// tests read without a token (the endpoint's authentication is tested on its own).
	secureMetrics bool
	// extra flags appended last.
	extra []string
}

// ccmProcess is the controller binary running as a subprocess of the test.
type ccmProcess struct {
	name    string
	cmd     *exec.Cmd
	out     *testenv.SyncBuffer // stdout and stderr, interleaved as written
	metrics string              // host:port
	// metricsScheme is https when the metrics endpoint is secure (ccmArgs.secureMetrics), and
	// metricsToken then the bearer token scrape sends there.
	metricsScheme, metricsToken string
	health                      string // host:port
	webhook                     string // host:port, "" without the webhook
	done                        chan struct{}
	waitErr                     error
}

// startCCM starts the controller binary at the most verbose log level, with metrics and
// health probes on free loopback ports. The process is killed when the test ends if it is
// still running.
func startCCM(t *testing.T, name string, a ccmArgs) *ccmProcess {
	t.Helper()
	bin := ccmBinary(t)
	p := &ccmProcess{
		name:    name,
		out:     &testenv.SyncBuffer{},
		metrics: testenv.FreeAddr(t),
		health:  testenv.FreeAddr(t),
		done:    make(chan struct{}),
	}
	args := []string{
		"--kubeconfig=" + a.kubeconfig,
		"--zap-log-level=10", "--zap-devel",
		"--metrics-bind-address=" + p.metrics,
		"--health-probe-bind-address=" + p.health,
		"--leader-elect=" + strconv.FormatBool(a.leaderElect),
	}
	if a.leaderElect {
		args = append(args, "--leader-elect-namespace=kube-system")
	}
	p.metricsScheme = "https"
	if !a.secureMetrics {
		p.metricsScheme = "http"
		args = append(args, "--metrics-insecure-http")
	}
	if a.config != "" {
		args = append(args, "--config="+a.config)
	}
	if a.webhookPort != 0 {
		p.webhook = loopback(a.webhookPort)
		args = append(args, "--webhook=true", "--webhook-host=127.0.0.1",
			"--webhook-port="+strconv.Itoa(a.webhookPort), "--webhook-cert-dir="+a.certDir)
	} else {
		args = append(args, "--webhook=false")
	}
	args = append(args, a.extra...)
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.Env = testenv.CommandEnv()
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		if p.running() {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("--- output of %s (tail) ---\n%s", p.name, tail(p.out.Bytes(), 6000))
		}
	})
	return p
}

func (p *ccmProcess) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// exited waits up to d for the process to exit and returns its exit code; ok is false if it
// is still running.
func (p *ccmProcess) exited(d time.Duration) (code int, ok bool) {
	select {
	case <-p.done:
	case <-time.After(d):
		return 0, false
	}
	var ee *exec.ExitError
	if errors.As(p.waitErr, &ee) {
		return ee.ExitCode(), true
	}
	if p.waitErr != nil {
		return -1, true
	}
	return 0, true
}

// stop sends SIGTERM (the controller's graceful shutdown, which cancels its context) and
// waits for the exit; it kills the process after 20s. It returns the exit code.
func (p *ccmProcess) stop(t *testing.T) int {
	t.Helper()
	if p.running() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	code, ok := p.exited(20 * time.Second)
	if !ok {
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Errorf("%s did not stop within 20s of SIGTERM; killed", p.name)
		return -1
	}
	return code
}

// get returns status and body of a GET on the metrics ("metrics") or health ("health")
// server.
func (p *ccmProcess) get(server, path string) (int, []byte, error) {
	addr := p.metrics
	if server == "health" {
		addr = p.health
	}
	return httpGet("http://" + addr + path)
}

// waitReady waits for /readyz to answer 200, failing early when the process exits.
func (p *ccmProcess) waitReady(t *testing.T, timeout time.Duration) {
	t.Helper()
	testenv.WaitFor(t, timeout, p.name+" /readyz", func() error {
		if !p.running() {
			code, _ := p.exited(0)
			t.Fatalf("%s exited with code %d before it was ready", p.name, code)
		}
		status, body, err := p.get("health", "/readyz?verbose")
		if err != nil {
			return err
		}
		if status != http.StatusOK {
			return fmt.Errorf("status %d: %s", status, body)
		}
		return nil
	})
}

// writeConfig writes an XO config file and returns its path.
func writeConfig(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
