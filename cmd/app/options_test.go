package app

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/config"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
)

// parseOptions parses args into fresh Options with Parse.
func parseOptions(args []string) (*Options, error) {
	o := NewOptions()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.AddFlags(fs)
	return o, Parse(fs, args)
}

func TestOptionsValidate(t *testing.T) {
	cases := []struct {
		args         []string
		outOfCluster bool
		want         []string // substrings of the error; none means valid
	}{
		{args: nil},
		{args: []string{"--controllers=cloud-node,cloud-node-label-sync"}},
		{args: []string{"--controllers=", "--webhook=true"}},
		{args: []string{"--controllers=cloud-node", "--webhook=false"}},
		{args: []string{"--controllers=", "--webhook=false"}, want: []string{"--controllers is empty and --webhook=false"}},
		{args: []string{"--controllers=cloud-node,nope", "--workers=0", "--kube-api-qps=0", "--webhook-port=70000"},
			want: []string{`unknown controller "nope"`, "--workers", "--kube-api-qps", "--webhook-port"}},
		{args: []string{"--kube-api-qps=NaN"}, want: []string{"--kube-api-qps: NaN must be a positive finite number"}},
		{args: []string{"--kube-api-qps=Inf"}, want: []string{"--kube-api-qps: +Inf"}},
		{args: []string{"--kube-api-qps=-Inf"}, want: []string{"--kube-api-qps: -Inf"}},
		{args: []string{"--kube-api-qps=1e39"}, want: []string{"--kube-api-qps"}}, // infinite as a float32
		{args: []string{"--kube-api-qps=0.5"}},
		{args: []string{"--leader-elect-renew-deadline=20s"}, want: []string{"--leader-elect-*"}},
		{args: []string{"--leader-elect=false", "--leader-elect-renew-deadline=20s"}},
		{args: []string{"--webhook-lookup-timeout=30s"}, want: []string{"--webhook-lookup-timeout"}},
		{args: []string{"--webhook-lookup-timeout=0s"}, want: []string{"--webhook-lookup-timeout"}},
		{args: []string{"--webhook-lookup-timeout=10s"}},
		{args: []string{"--shutdown-delay=-1s"}, want: []string{"--shutdown-delay: -1s must not be negative"}},
		{args: []string{"--shutdown-delay=0"}},
		{args: []string{"--shutdown-delay=1m"}},
		{args: []string{"--webhook-certs=vault"}, want: []string{`--webhook-certs: "vault" is neither dir nor self-managed`}},
		{args: []string{"--webhook-certs=self-managed"}, want: []string{`--webhook-ca-secret: "": want namespace/name`, "no DNS name", "no MutatingWebhookConfiguration"}},
		{args: []string{"--webhook-certs=self-managed", "--webhook-ca-secret=noslash", "--webhook-dns-names=svc", "--webhook-configuration=c"}, want: []string{`--webhook-ca-secret: "noslash": want namespace/name`}},
		{args: []string{"--webhook-certs=self-managed", "--webhook-ca-secret=ns/", "--webhook-dns-names=svc", "--webhook-configuration=c"}, want: []string{`--webhook-ca-secret: "ns/": want namespace/name`}},
		{args: []string{"--webhook-certs=self-managed", "--webhook-ca-secret=ns/ca", "--webhook-dns-names=svc", "--webhook-configuration=c", "--webhook-cert-duration=9000h"},
			want: []string{"want 0 < certificate lifetime (9000h0m0s) < CA lifetime (8760h0m0s)"}},
		{args: []string{"--webhook-certs=self-managed", "--webhook-ca-secret=ns/ca", "--webhook-dns-names=svc.ns.svc, svc", "--webhook-configuration=c"}},
		{args: []string{"--webhook-certs=self-managed", "--webhook=false"}}, // the certificate flags do not matter then
		// Out of cluster, the Lease has no pod namespace to default to.
		{args: nil, outOfCluster: true, want: []string{"--leader-elect-namespace: required outside a cluster"}},
		{args: []string{"--leader-elect-namespace=kube-system"}, outOfCluster: true},
		{args: []string{"--leader-elect=false"}, outOfCluster: true},
	}
	for _, tc := range cases {
		o, err := parseOptions(tc.args)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		o.OutOfCluster = tc.outOfCluster
		err = o.Validate()
		if len(tc.want) == 0 {
			if err != nil {
				t.Errorf("%v (out of cluster %v): %v", tc.args, tc.outOfCluster, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%v (out of cluster %v): no error", tc.args, tc.outOfCluster)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: error %q does not name %q", tc.args, err, w)
			}
		}
	}
}

func TestOptionsParseRefusesPositionalArguments(t *testing.T) {
	cases := []struct {
		args []string
		want string // substring of the error; "" means accepted
	}{
		{args: []string{"--webhook=false", "--workers=8"}},
		{args: []string{"--webhook", "--workers=8"}}, // a bare boolean is true
		{args: []string{"--webhook", "false", "--workers=8"}, want: `unexpected argument "false" (ignoring ["--workers=8"]`},
		{args: []string{"--config", "x.yaml", "extra"}, want: `unexpected argument "extra"`},
		{args: []string{"--", "--workers=8"}, want: `unexpected argument "--workers=8"`},
		{args: []string{"run"}, want: `unexpected argument "run"`},
	}
	for _, tc := range cases {
		o, err := parseOptions(tc.args)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%q: %v", tc.args, err)
			} else if o.Workers != 8 {
				t.Errorf("%q: --workers=%d, want 8", tc.args, o.Workers)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want it to contain %q", tc.args, err, tc.want)
		}
	}
}

// testToken is the token of the configs below; it must never be printed.
const testToken = "tok-0123456789abcdefghijklmnopqrstuvwxyz"

// writeFile writes a file under dir and returns its path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestOptionsCheckConfig(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "token", testToken+"\n")
	cases := map[string]struct {
		file    string // config file content; "" means no --config
		env     map[string]string
		want    map[string]any // keys of the printed server (clusters[0]) and their values
		warn    string         // a warning comment in the output
		wantErr string
	}{
		"file": {
			file: "url: https://xoa.example.com\ntoken: " + testToken + "\nlistTimeout: 5m\n",
			want: map[string]any{"url": "https://xoa.example.com", "token": config.Redacted, "listTimeout": "5m0s", "requestTimeout": "10s"},
		},
		"token file": {
			file: "url: https://xoa.example.com\ntokenFile: token\n",
			want: map[string]any{"url": "https://xoa.example.com", "tokenFile": filepath.Join(dir, "token")},
		},
		"environment only": {
			env:  map[string]string{config.EnvURL: "https://env.example.com", config.EnvToken: testToken},
			want: map[string]any{"url": "https://env.example.com", "token": config.Redacted},
		},
		"insecure is warned": {
			file: "url: https://xoa.example.com\ninsecure: true\ntoken: " + testToken + "\n",
			want: map[string]any{"insecure": true},
			warn: "insecure is true: XO's TLS certificate is not verified",
		},
		"invalid": {
			file:    "url: ftp://xoa.example.com\ntoken: " + testToken + "\nlistTimeoutt: 5m\n",
			wantErr: "url",
		},
		"missing file": {
			file:    "-",
			wantErr: "config",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var args []string
			switch tc.file {
			case "":
			case "-":
				args = append(args, "--config="+filepath.Join(dir, "absent.yaml"))
			default:
				args = append(args, "--config="+writeFile(t, dir, strings.ReplaceAll(name, " ", "-")+".yaml", tc.file))
			}
			o, err := parseOptions(append(args, "--check-config"))
			if err != nil {
				t.Fatal(err)
			}
			if !o.CheckConfig {
				t.Fatal("--check-config not set")
			}
			cfg, err := o.LoadConfig(func(k string) string { return tc.env[k] })
			var out bytes.Buffer
			if err == nil {
				err = PrintConfig(&out, cfg)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want it to contain %q", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), testToken) {
					t.Errorf("error holds the token: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(out.String(), testToken) {
				t.Fatalf("printed config holds the token:\n%s", out.String())
			}
			var printed struct{ Clusters []map[string]any }
			if err := yaml.Unmarshal(out.Bytes(), &printed); err != nil || len(printed.Clusters) != 1 {
				t.Fatalf("printed config is not YAML with one server: %v\n%s", err, out.String())
			}
			got := printed.Clusters[0]
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s = %#v, want %#v\n%s", k, got[k], v, out.String())
				}
			}
			if !strings.Contains(out.String(), tc.warn) {
				t.Errorf("output lacks %q:\n%s", tc.warn, out.String())
			}
		})
	}
}

func TestEnabledControllers(t *testing.T) {
	o := NewOptions()
	if got := o.EnabledControllers(); len(got) != 3 {
		t.Fatalf("* gave %v", got)
	}
	o.Controllers = " cloud-node , cloud-node ,"
	if got := o.EnabledControllers(); len(got) != 1 || got[0] != "cloud-node" {
		t.Fatalf("got %v", got)
	}
}

var (
	commandOnce sync.Once
	commandPath string
	commandErr  error
)

// command builds the xenorchestra-cloud-controller-manager binary once.
func command(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	commandOnce.Do(func() {
		dir, err := os.MkdirTemp("", "xoccm-command")
		if err != nil {
			commandErr = err
			return
		}
		commandPath, commandErr = testenv.BuildCommand(dir)
	})
	if commandErr != nil {
		t.Fatal(commandErr)
	}
	return commandPath
}

// TestOptionsCommandLine runs the built command the way an operator would, outside any
// cluster: what can be checked without one (flags, then the XO config) fails first, plainly,
// and --check-config needs no cluster at all.
func TestOptionsCommandLine(t *testing.T) {
	t.Parallel()
	bin := command(t)
	dir := t.TempDir()
	good := writeFile(t, dir, "good.yaml", "url: https://xoa.example.com\ntoken: "+testToken+"\n")
	bad := writeFile(t, dir, "bad.yaml", "url: https://xoa.example.com\ntoken: "+testToken+"\nusername: admin\n")
	cases := map[string]struct {
		args       []string
		inCluster  bool // the case only holds outside a pod
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		"positional argument":            {args: []string{"--config=" + good, "--webhook", "false", "--leader-elect=false"}, wantCode: 1, wantStderr: `unexpected argument "false"`},
		"NaN QPS":                        {args: []string{"--config=" + good, "--kube-api-qps=NaN"}, wantCode: 1, wantStderr: "--kube-api-qps"},
		"nothing to run":                 {args: []string{"--config=" + good, "--controllers=", "--webhook=false"}, wantCode: 1, wantStderr: "nothing to run"},
		"lease namespace out of cluster": {args: []string{"--config=" + good}, inCluster: true, wantCode: 1, wantStderr: "--leader-elect-namespace"},
		"config before kubeconfig":       {args: []string{"--config=" + bad, "--leader-elect=false"}, wantCode: 1, wantStderr: "error: config " + bad},
		"then the kubeconfig":            {args: []string{"--config=" + good, "--leader-elect=false"}, wantCode: 1, wantStderr: "error: kubeconfig"},
		"check-config":                   {args: []string{"--config=" + good, "--check-config"}, wantStdout: "token: " + config.Redacted},
		"check-config, bad config":       {args: []string{"--config=" + bad, "--check-config"}, wantCode: 1, wantStderr: "username"},
		"check-config, bad flags": {args: []string{"--config=" + good, "--check-config", "--workers=0", "--controllers=bogus", "--kube-api-qps=-1"},
			wantCode: 1, wantStderr: "error: --controllers: unknown controller \"bogus\" (known: cloud-node, cloud-node-lifecycle, cloud-node-label-sync, or *)\n" +
				"--kube-api-qps: -1 must be a positive finite number\n--workers: 0 must be in [1, 1024]\n"},
		"check-config, bad flags and config": {args: []string{"--config=" + bad, "--check-config", "--leader-elect-lease-duration=1s"},
			wantCode: 1, wantStderr: "--leader-elect-*: want 0 < retry-period (2s) < renew-deadline (10s) < lease-duration (1s)\nconfig " + bad},
		// --help says what the command is, where the docs are, and the log defaults in effect.
		"help":               {args: []string{"--help"}, wantStderr: Description + "  -check-config"},
		"help, log defaults": {args: []string{"--help"}, wantStderr: "Default 'rfc3339'."},
		// As a pod runs it: the Lease's namespace is the pod's.
		"check-config out of cluster": {args: []string{"--config=" + good, "--check-config"}, inCluster: true, wantStdout: "token: " + config.Redacted},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if tc.inCluster && InCluster() {
				t.Skip("runs in a pod")
			}
			cmd := exec.Command(bin, tc.args...)
			// No cluster: no kubeconfig anywhere, no in-cluster service.
			cmd.Env = []string{"HOME=" + t.TempDir(), "KUBECONFIG=" + filepath.Join(t.TempDir(), "none"), "PATH=" + os.Getenv("PATH")}
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := 0
			var exitErr *exec.ExitError
			if errors.As(err, &exitErr) {
				code = exitErr.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.wantCode {
				t.Errorf("exit code %d, want %d\nstdout: %s\nstderr: %s", code, tc.wantCode, stdout.String(), stderr.String())
			}
			if !strings.Contains(stdout.String(), tc.wantStdout) || !strings.Contains(stderr.String(), tc.wantStderr) {
				t.Errorf("stdout %q, want %q; stderr %q, want %q", stdout.String(), tc.wantStdout, stderr.String(), tc.wantStderr)
			}
			all := stdout.String() + stderr.String()
			if strings.Contains(all, testToken) {
				t.Errorf("the token was printed:\n%s", all)
			}
			if strings.Contains(all, "Defaults to") {
				t.Errorf("a flag's help gives controller-runtime's default, not the one in effect:\n%s", all)
			}
			// Plain messages: no stack trace, no log lines.
			if strings.Contains(stderr.String(), ".go:") || strings.Contains(stderr.String(), "goroutine ") || strings.Contains(stderr.String(), `"level"`) {
				t.Errorf("stderr is not plain:\n%s", stderr.String())
			}
		})
	}
}
