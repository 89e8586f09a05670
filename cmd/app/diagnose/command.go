// Package diagnose is the command's answer to "why is my Node not labelled?": the `check`
// subcommand (before installing with --pre: the API server, XO, the Nodes, cert-manager; after:
// the release's Deployment, webhook, leader, replicas' inventories and the Nodes left
// uninitialized) and `explain node NAME` (what the controller knows about one Node and what it
// will do next). Both use the user's kubeconfig and, for XO, the controller's own config file
// (--config) or its installed Secret, and the same code as the controller: the estate of
// app.NewEstate listed once, inventory.Estate.Find, node.Describe, node.Addresses and
// lifecycle.Decide. The same binary answers as a kubectl plugin (kubectl-xenorchestra).
//
// Output: a line per check, ✔ / ✘ / ‼, grouped by section, the fix under each failure and
// warning, colour on a terminal only; -o json for scripts; exit status 0 only when nothing
// failed. No token is ever printed.
package diagnose

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
)

// PluginName is the name of the binary as a kubectl plugin: `kubectl xenorchestra check` runs
// `kubectl-xenorchestra check`.
const PluginName = "kubectl-xenorchestra"

// Subcommands.
const (
	cmdCheck   = "check"
	cmdExplain = "explain"
)

// Args returns the arguments of a subcommand, the subcommand first, when the process runs one:
// started as kubectl-xenorchestra (every argument is the plugin's), or with check or explain
// as its first argument. ok is false for the controller's own invocation, which takes flags
// only.
func Args(argv []string) (args []string, ok bool) {
	if len(argv) == 0 {
		return nil, false
	}
	base := filepath.Base(argv[0])
	if strings.TrimSuffix(base, filepath.Ext(base)) == PluginName {
		return argv[1:], true
	}
	if len(argv) > 1 && (argv[1] == cmdCheck || argv[1] == cmdExplain) {
		return argv[1:], true
	}
	return nil, false
}

// Usage is the subcommands' help.
const Usage = `Usage:
  xenorchestra-cloud-controller-manager check [--pre] [flags]
  xenorchestra-cloud-controller-manager explain node NAME [flags]
  kubectl xenorchestra check|explain ...   (the same binary installed as kubectl-xenorchestra)

check --pre   before installing: the API server, each XO server of --config (reachable, TLS,
              token, REST features), each Node (started with --cloud-provider=external? which
              VM, by which key, or why none), cert-manager when --webhook-certificates-mode
              needs it.
check         after installing: the same, with the config read from the release's Secret, plus
              the Deployment, the webhook (configuration, CA bundle against the certificate the
              Service serves, ready endpoints, a dry-run Node CREATE), the leader, and each XO
              server's inventory on the running replicas.
explain node NAME
              what the controller knows about the Node and will do next: its VM and by which
              key (or every candidate and why none), desired providerID, labels, taints and
              addresses against the current ones, owned keys, refusals, and the next step of
              cloud-node, cloud-node-label-sync and cloud-node-lifecycle.

Exit status: 0 when nothing failed, 1 when a check failed, 2 for a usage error.
Troubleshooting: docs/troubleshooting.md.

Flags:
`

// Main runs the subcommand args[0] with the rest of args, writes its report to stdout and its
// usage errors to stderr, and returns the exit status: 0 when nothing failed, 1 when a check
// failed, 2 for a usage error. stdin is read for --metrics-token-file=-; terminal says whether
// stdout is a terminal (colour); env reads the environment.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, terminal bool, env func(string) string) int {
	// The controller's packages log through controller-runtime, client-go through klog (a
	// port-forward logs each connection the check closes); a subcommand prints a report.
	ctrl.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())
	o := NewOptions()
	fs := newFlagSet(o)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		_, _ = fmt.Fprint(stderr, Usage)
		fs.PrintDefaults()
	}
	if len(args) == 0 || args[0] != cmdCheck && args[0] != cmdExplain {
		fs.Usage()
		return 2
	}
	cmd := args[0]
	positional, err := parseInterspersed(fs, args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err == nil {
		err = o.validate(cmd, positional)
	}
	if err != nil {
		_, _ = fmt.Fprintln(stderr, "error:", err)
		return 2
	}
	o.Colour = terminal && env("NO_COLOR") == "" && env("TERM") != "dumb"
	o.Env, o.stdin = env, stdin

	var rep *Report
	if cmd == cmdCheck {
		rep = Check(ctx, o)
	} else {
		rep = Explain(ctx, o, positional[1])
	}
	if o.Output == "json" {
		err = rep.WriteJSON(stdout)
	} else {
		err = rep.WriteText(stdout, o.Colour)
	}
	if err != nil {
		_, _ = fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	if rep.Failed > 0 {
		return 1
	}
	return 0
}

// newFlagSet returns the subcommands' flag set, bound to o.
func newFlagSet(o *Options) *flag.FlagSet {
	fs := flag.NewFlagSet(PluginName, flag.ContinueOnError)
	o.AddFlags(fs)
	return fs
}

// parseInterspersed parses flags wherever they are among the arguments, as kubectl does
// (explain node NAME -o json), and returns the positional arguments in order.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return positional, nil
		}
		if args[0] == "--" {
			return append(positional, args[1:]...), nil
		}
		positional, args = append(positional, args[0]), args[1:]
	}
}

// Options are the subcommands' flags.
type Options struct {
	Kubeconfig string
	Context    string
	// Namespace and Release name the installed release; empty: the one found.
	Namespace string
	Release   string
	// ConfigFile is the controller's XO config file; empty: the release's Secret.
	ConfigFile string
	// Pre checks a cluster before the install.
	Pre bool
	// WebhookCertificatesMode is, with Pre, the certificate mode the install will use: a value
	// of the chart's webhook.certificates.mode.
	WebhookCertificatesMode string
	Output                  string
	// Timeout bounds each request to the API server, XO or a replica.
	Timeout time.Duration
	// MetricsTokenFile holds the bearer token sent to the replicas' metrics endpoints ("-":
	// stdin); empty: the kubeconfig's.
	MetricsTokenFile string
	// MetricsEndpoints replaces the port-forward to the release's Pods: the base URLs of
	// replicas that run outside the cluster's Pods.
	MetricsEndpoints string
	// InsecureMetrics sends the token to a replica whose certificate cannot be verified.
	InsecureMetrics bool
	// Colour and Env are not flags: Main sets them (Env: the environment, XOA_* and NO_COLOR;
	// none by default).
	Colour bool
	Env    func(string) string
	// stdin is where --metrics-token-file=- reads (Main sets it).
	stdin io.Reader
}

// Certificate modes of --webhook-certificates-mode: the values of the chart's
// webhook.certificates.mode, which the flag is named after (the controller's own
// --webhook-certs takes dir or self-managed, what the chart makes of them).
const (
	certsCertManager    = "certManager"
	certsSelfManaged    = "selfManaged"
	certsExistingSecret = "existingSecret"
)

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{WebhookCertificatesMode: certsCertManager, Output: "text", Timeout: 20 * time.Second, Env: func(string) string { return "" }}
}

// AddFlags binds the options to fs.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Path of the kubeconfig; empty: KUBECONFIG, then ~/.kube/config, then the in-cluster config (client-go's loading rules).")
	fs.StringVar(&o.Context, "context", o.Context, "Kubeconfig context to use; empty: the current one.")
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, "Namespace of the installed release; empty: the one holding it (every namespace is searched, or kube-system when you may not list them all).")
	fs.StringVar(&o.Namespace, "n", o.Namespace, "Short for --namespace.")
	fs.StringVar(&o.Release, "release", o.Release, "Name of the installed release (label app.kubernetes.io/instance); empty: the only one found.")
	fs.StringVar(&o.ConfigFile, "config", o.ConfigFile, "The controller's XO config file (url, token or tokenFile, ...); empty: read from the release's Secret with your own permissions (before installing: XOA_URL, XOA_TOKEN, XOA_INSECURE).")
	fs.BoolVar(&o.Pre, "pre", o.Pre, "check: check the cluster before installing (no release yet).")
	fs.StringVar(&o.WebhookCertificatesMode, "webhook-certificates-mode", o.WebhookCertificatesMode, "check --pre: the chart's webhook.certificates.mode of the install to come (certManager, selfManaged or existingSecret), to check that cert-manager is present when it is needed.")
	fs.StringVar(&o.Output, "output", o.Output, "Output format: text or json.")
	fs.StringVar(&o.Output, "o", o.Output, "Short for --output.")
	fs.DurationVar(&o.Timeout, "timeout", o.Timeout, "Bound of each request to the API server, an XO server (a whole listing has the config's listTimeout) or a replica.")
	fs.StringVar(&o.MetricsTokenFile, "metrics-token-file", o.MetricsTokenFile, "File holding the bearer token to read the replicas' metrics with (- for stdin, e.g. kubectl create token ... | ... --metrics-token-file=-); empty: the kubeconfig's token. Needed when the kubeconfig authenticates with a client certificate.")
	fs.StringVar(&o.MetricsEndpoints, "metrics-endpoints", o.MetricsEndpoints, "Comma-separated base URLs of the replicas' metrics endpoints (https://host:port), instead of a port-forward to the release's Pods: for replicas that do not run in the cluster's Pods.")
	fs.BoolVar(&o.InsecureMetrics, "insecure-skip-metrics-tls-verify", o.InsecureMetrics, "Send the token to a replica's metrics endpoint even when its certificate cannot be verified (by the webhook configuration's CA bundle or the system roots). Insecure: anyone on the path may take the token.")
}

// validate checks the flags and the positional arguments of cmd.
func (o *Options) validate(cmd string, positional []string) error {
	var errs []error
	switch {
	case cmd == cmdCheck && len(positional) > 0:
		errs = append(errs, fmt.Errorf("check takes no argument, got %q", positional))
	case cmd == cmdExplain && (len(positional) != 2 || positional[0] != "node" && positional[0] != "nodes" && positional[0] != "no"):
		errs = append(errs, fmt.Errorf("usage: explain node NAME, got %q", positional))
	}
	if !slices.Contains([]string{"text", "json"}, o.Output) {
		errs = append(errs, fmt.Errorf("--output: %q is neither text nor json", o.Output))
	}
	if !slices.Contains([]string{certsCertManager, certsSelfManaged, certsExistingSecret}, o.WebhookCertificatesMode) {
		errs = append(errs, fmt.Errorf("--webhook-certificates-mode: %q is none of %s, %s, %s", o.WebhookCertificatesMode, certsCertManager, certsSelfManaged, certsExistingSecret))
	}
	if o.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("--timeout: %s must be positive", o.Timeout))
	}
	if o.Pre && cmd != cmdCheck {
		errs = append(errs, errors.New("--pre: check only"))
	}
	return errors.Join(errs...)
}
