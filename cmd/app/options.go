// Package app is the xenorchestra-cloud-controller-manager command: options, Manager wiring,
// run.
package app

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/config"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/controllers/cloudnode"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/controllers/labelsync"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/controllers/lifecycle"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/webhook/certs"
)

// AllControllers lists every controller by the name --controllers takes, in start order.
var AllControllers = []string{cloudnode.Name, lifecycle.Name, labelsync.Name}

// LeaseName is the leader-election Lease; the chart's RBAC narrows lease access to it.
const LeaseName = "xenorchestra-cloud-controller-manager"

// NamespaceFile is where a pod finds its namespace (its ServiceAccount's mount). Leader
// election puts the Lease there when --leader-elect-namespace is empty.
const NamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// InCluster reports whether the process runs in a pod, by the presence of NamespaceFile (the
// file controller-runtime's leader election reads).
func InCluster() bool {
	_, err := os.Stat(NamespaceFile)
	return err == nil
}

// Options are the command's flags.
type Options struct {
	// ConfigFile is the XO config file (url, token, ...); empty means environment only.
	ConfigFile string
	// Controllers selects controllers by name, or "*".
	Controllers string
	Webhook     bool
	WebhookPort int
	// WebhookCertDir holds tls.crt and tls.key, reloaded when they change (WebhookCerts dir).
	WebhookCertDir string
	// WebhookCerts is where the serving certificate comes from: CertsDir (WebhookCertDir,
	// filled by cert-manager or the operator) or CertsSelfManaged (package webhook/certs).
	WebhookCerts string
	// WebhookCASecret (namespace/name), WebhookDNSNames, WebhookConfiguration and the two
	// lifetimes configure the self-managed certificates (see certs.Options).
	WebhookCASecret      string
	WebhookDNSNames      string
	WebhookConfiguration string
	WebhookCADuration    time.Duration
	WebhookCertDuration  time.Duration
	// WebhookHost is the address the webhook listens on; empty means every interface.
	WebhookHost string
	// WebhookLookupTimeout bounds the one XO read the webhook may make per Node.
	WebhookLookupTimeout time.Duration
	// WebhookInitialize lets the webhook lift the uninitialized taint of a Node it describes
	// completely at CREATE (webhook.NodeDefaulter.Initialize).
	WebhookInitialize bool
	// MetricsBindAddress is the metrics endpoint's address: HTTPS, each request authenticated
	// and authorized by the API server, unless MetricsInsecureHTTP; "0" disables it.
	MetricsBindAddress string
	// MetricsCerts is where the metrics endpoint's certificate comes from: MetricsCertsAuto,
	// MetricsCertsWebhook or MetricsCertsSelfSigned.
	MetricsCerts string
	// MetricsInsecureHTTP serves the metrics endpoint over plain HTTP to anyone.
	MetricsInsecureHTTP    bool
	HealthProbeBindAddress string
	// Profiling serves Go's pprof handlers under /debug/pprof/ on the metrics endpoint, behind
	// its authentication and authorization.
	Profiling            bool
	LeaderElect          bool
	LeaderElectNamespace string
	// LeaderElectLeaseDuration, LeaderElectRenewDeadline and LeaderElectRetryPeriod are the
	// Lease timings: a crashed leader is replaced within about LeaseDuration + RetryPeriod.
	LeaderElectLeaseDuration time.Duration
	LeaderElectRenewDeadline time.Duration
	LeaderElectRetryPeriod   time.Duration
	// KubeAPIQPS and KubeAPIBurst are the Kubernetes client's rate limits; the defaults let a
	// burst of thousands of Nodes initialize within seconds.
	KubeAPIQPS   float64
	KubeAPIBurst int
	// Workers is the number of Nodes each controller reconciles at once.
	Workers int
	// ShutdownDelay is how long the process keeps serving, not Ready, after its context ends
	// (the first SIGTERM or SIGINT) before it stops: the API server may route admissions to
	// it until the endpoint's removal has propagated. 0 stops at once.
	ShutdownDelay time.Duration
	// ShutdownClock is not a flag: the clock of ShutdownDelay (nil: the real one); tests
	// drive it.
	ShutdownClock clock.WithTicker
	Zap           zap.Options
	// CheckConfig makes the command load and validate the XO config, print it and exit,
	// without a cluster.
	CheckConfig bool
	// OutOfCluster is not a flag: the caller sets it when the process runs outside a pod (see
	// InCluster), where leader election has no namespace to default to.
	OutOfCluster bool
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{
		Controllers:              "*",
		Webhook:                  true,
		WebhookPort:              9443,
		WebhookCertDir:           "/etc/xenorchestra-cloud-controller-manager/tls",
		WebhookCerts:             CertsDir,
		WebhookCADuration:        certs.DefaultCADuration,
		WebhookCertDuration:      certs.DefaultCertDuration,
		WebhookLookupTimeout:     time.Second,
		WebhookInitialize:        true,
		MetricsBindAddress:       DefaultMetricsBindAddress,
		MetricsCerts:             MetricsCertsAuto,
		HealthProbeBindAddress:   ":8081",
		LeaderElect:              true,
		LeaderElectLeaseDuration: 15 * time.Second,
		LeaderElectRenewDeadline: 10 * time.Second,
		LeaderElectRetryPeriod:   2 * time.Second,
		KubeAPIQPS:               500,
		KubeAPIBurst:             1000,
		Workers:                  64,
		ShutdownDelay:            5 * time.Second,
		// Expected errors (XO down, a revoked token) log one line each; a bug panics, with its
		// stack. controller-runtime's default adds a stack trace to every error line.
		Zap: zap.Options{StacktraceLevel: zapcore.PanicLevel},
	}
}

// Description heads --help.
const Description = `xenorchestra-cloud-controller-manager describes Kubernetes Nodes that run on Xen Orchestra VMs:
a mutating admission webhook sets providerID, topology and instance-type labels at Node CREATE,
and controllers lift the uninitialized taint, keep addresses and labels current, taint Nodes whose
VM is shut down and delete Nodes whose VM is gone.

Configuration file: docs/configuration.md; flags: docs/configuration.md#flags;
troubleshooting: docs/troubleshooting.md.

Subcommands (also as the kubectl plugin kubectl-xenorchestra): check [--pre] checks a cluster
before or after the install, explain node NAME tells what the controller knows and will do
about a Node; "check --help" lists their flags.

Flags:
`

// AddFlags binds the options to fs. --kubeconfig is controller-runtime's own flag.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.ConfigFile, "config", o.ConfigFile, "Path of the XO config file (url, token or tokenFile, ...). Empty: XOA_URL, XOA_TOKEN, XOA_INSECURE from the environment.")
	fs.StringVar(&o.Controllers, "controllers", o.Controllers, "Comma-separated controllers to run: "+strings.Join(AllControllers, ",")+", or * for all. Empty runs none.")
	fs.BoolVar(&o.Webhook, "webhook", o.Webhook, "Serve the Node mutating admission webhook.")
	fs.IntVar(&o.WebhookPort, "webhook-port", o.WebhookPort, "Port of the webhook's HTTPS server.")
	fs.StringVar(&o.WebhookHost, "webhook-host", o.WebhookHost, "Address the webhook listens on; empty: all interfaces.")
	fs.StringVar(&o.WebhookCertDir, "webhook-cert-dir", o.WebhookCertDir, "Folder holding the webhook's tls.crt and tls.key; a rotated certificate is picked up without a restart.")
	fs.StringVar(&o.WebhookCerts, "webhook-certs", o.WebhookCerts, "Where the webhook's serving certificate comes from: "+CertsDir+" (--webhook-cert-dir, e.g. a cert-manager Secret) or "+CertsSelfManaged+" (a CA in --webhook-ca-secret, created and rotated by this controller, and copied into the caBundle of --webhook-configuration).")
	fs.StringVar(&o.WebhookCASecret, "webhook-ca-secret", o.WebhookCASecret, "With --webhook-certs="+CertsSelfManaged+": namespace/name of the Secret holding the webhook's CA (created if missing).")
	fs.StringVar(&o.WebhookDNSNames, "webhook-dns-names", o.WebhookDNSNames, "With --webhook-certs="+CertsSelfManaged+": comma-separated DNS names of the serving certificate (the webhook Service's names).")
	fs.StringVar(&o.WebhookConfiguration, "webhook-configuration", o.WebhookConfiguration, "With --webhook-certs="+CertsSelfManaged+": the MutatingWebhookConfiguration whose caBundle is kept equal to the CA.")
	fs.DurationVar(&o.WebhookCADuration, "webhook-ca-duration", o.WebhookCADuration, "With --webhook-certs="+CertsSelfManaged+": lifetime of the CA, renewed at two thirds of it.")
	fs.DurationVar(&o.WebhookCertDuration, "webhook-cert-duration", o.WebhookCertDuration, "With --webhook-certs="+CertsSelfManaged+": lifetime of a serving certificate, renewed at two thirds of it; shorter than the CA's.")
	fs.DurationVar(&o.WebhookLookupTimeout, "webhook-lookup-timeout", o.WebhookLookupTimeout, "Bound of the one XO read the webhook makes for a VM missing from the inventory; keep it well under the webhook's timeoutSeconds.")
	fs.BoolVar(&o.WebhookInitialize, "webhook-initialize", o.WebhookInitialize, "Lift the uninitialized taint at CREATE when the webhook describes a Node completely, by the rule cloud-node applies (providerID, region, instance type, the zone of a running VM, an IP address): the Node is born schedulable and cloud-node writes nothing. false leaves the taint to cloud-node alone.")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "Address of the Prometheus metrics endpoint, /metrics: HTTPS, each request authenticated (TokenReview) and authorized (SubjectAccessReview: get on the path, e.g. nonResourceURLs /metrics) by the API server, anonymous ones refused; 0 disables it.")
	fs.StringVar(&o.MetricsCerts, "metrics-certs", o.MetricsCerts, "Certificate of the metrics endpoint: "+MetricsCertsWebhook+" (the webhook's serving certificate, verifiable with the webhook's CA; a self-signed one until the webhook has it), "+MetricsCertsSelfSigned+" (made in memory at start, not verifiable), or "+MetricsCertsAuto+": "+MetricsCertsWebhook+" with --webhook, "+MetricsCertsSelfSigned+" without.")
	fs.BoolVar(&o.MetricsInsecureHTTP, "metrics-insecure-http", o.MetricsInsecureHTTP, "INSECURE: serve the metrics endpoint over plain HTTP, without authentication or authorization, to anyone who reaches the port. Refused with --profiling.")
	fs.BoolVar(&o.Profiling, "profiling", o.Profiling, "Serve Go's pprof profiles under /debug/pprof/ on the metrics endpoint, behind its authentication and authorization (get on nonResourceURLs /debug/pprof/*); keep it off unless investigating.")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress, "Address of /healthz and /readyz.")
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "Run the controllers only on the replica holding the Lease "+LeaseName+". The webhook serves on every replica.")
	fs.StringVar(&o.LeaderElectNamespace, "leader-elect-namespace", o.LeaderElectNamespace, "Namespace of the leader-election Lease; empty: the pod's namespace.")
	fs.DurationVar(&o.LeaderElectLeaseDuration, "leader-elect-lease-duration", o.LeaderElectLeaseDuration, "How long a non-leader waits after the last renewal before taking the Lease.")
	fs.DurationVar(&o.LeaderElectRenewDeadline, "leader-elect-renew-deadline", o.LeaderElectRenewDeadline, "How long the leader keeps trying to renew the Lease before it stops leading.")
	fs.DurationVar(&o.LeaderElectRetryPeriod, "leader-elect-retry-period", o.LeaderElectRetryPeriod, "Interval between attempts to take or renew the Lease.")
	fs.Float64Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS, "Queries per second to the Kubernetes API.")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "Burst of queries to the Kubernetes API.")
	fs.IntVar(&o.Workers, "workers", o.Workers, "Nodes each controller reconciles concurrently.")
	fs.DurationVar(&o.ShutdownDelay, "shutdown-delay", o.ShutdownDelay, "On SIGTERM or SIGINT, how long to keep serving the webhook and running the controllers while /readyz fails, so that the API server stops routing admissions here before the process stops; a second signal exits at once. 0 stops at once.")
	fs.BoolVar(&o.CheckConfig, "check-config", o.CheckConfig, "Load and validate the XO config (--config and the environment), print it with the token redacted, and exit; needs no cluster.")
	o.Zap.BindFlags(fs)
	// controller-runtime's help gives its own defaults, not the ones in effect here.
	fs.Lookup("zap-time-encoding").Usage = "Time encoding of the log lines: 'epoch', 'millis', 'nano', 'iso8601', 'rfc3339' or 'rfc3339nano'. Default 'rfc3339'."
	fs.Lookup("zap-stacktrace-level").Usage = "Level from which log lines carry a stack trace: 'info', 'error' or 'panic'. Default 'panic': an expected error (XO unreachable, a revoked token) is one line."
	fs.Usage = func() {
		_, _ = fmt.Fprint(fs.Output(), Description)
		fs.PrintDefaults()
	}
}

// Parse parses args with fs and refuses positional arguments. The flag package stops at the
// first argument that is not a flag, so "--webhook false --workers=8" would silently leave
// --workers at its default: a boolean takes its value with =.
func Parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (ignoring %q after it): this command takes flags only, each with its value after = (--webhook=false)",
			fs.Arg(0), fs.Args()[1:])
	}
	return nil
}

// Values of --webhook-certs.
const (
	CertsDir         = "dir"
	CertsSelfManaged = "self-managed"
)

// CertOptions returns the self-managed certificates' options from the flags.
func (o *Options) CertOptions() certs.Options {
	var secret types.NamespacedName
	if ns, name, ok := strings.Cut(o.WebhookCASecret, "/"); ok {
		secret = types.NamespacedName{Namespace: ns, Name: name}
	}
	var names []string
	for _, n := range strings.Split(o.WebhookDNSNames, ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	return certs.Options{
		Secret: secret, DNSNames: names, WebhookConfiguration: o.WebhookConfiguration,
		CADuration: o.WebhookCADuration, CertDuration: o.WebhookCertDuration,
	}
}

// EnabledControllers returns the selected controller names.
func (o *Options) EnabledControllers() []string {
	if strings.TrimSpace(o.Controllers) == "*" {
		return AllControllers
	}
	var out []string
	for _, c := range strings.Split(o.Controllers, ",") {
		if c = strings.TrimSpace(c); c != "" && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// Validate returns every problem with the options.
func (o *Options) Validate() error {
	var errs []error
	for _, c := range o.EnabledControllers() {
		if !slices.Contains(AllControllers, c) {
			errs = append(errs, fmt.Errorf("--controllers: unknown controller %q (known: %s, or *)", c, strings.Join(AllControllers, ", ")))
		}
	}
	if o.Webhook && (o.WebhookPort < 1 || o.WebhookPort > 65535) {
		errs = append(errs, fmt.Errorf("--webhook-port: %d is not a port", o.WebhookPort))
	}
	if o.Webhook {
		switch o.WebhookCerts {
		case CertsDir:
			if o.WebhookCertDir == "" {
				errs = append(errs, errors.New("--webhook-cert-dir: required with --webhook-certs="+CertsDir))
			}
		case CertsSelfManaged:
			co := o.CertOptions()
			if ns, name, ok := strings.Cut(o.WebhookCASecret, "/"); !ok || ns == "" || name == "" {
				errs = append(errs, fmt.Errorf("--webhook-ca-secret: %q: want namespace/name", o.WebhookCASecret))
				co.Secret = types.NamespacedName{Namespace: "-", Name: "-"} // reported with the value given
			}
			if err := co.Validate(); err != nil {
				errs = append(errs, fmt.Errorf("--webhook-certs=%s: %w", CertsSelfManaged, err))
			}
		default:
			errs = append(errs, fmt.Errorf("--webhook-certs: %q is neither %s nor %s", o.WebhookCerts, CertsDir, CertsSelfManaged))
		}
	}
	errs = append(errs, o.validateMetrics()...)
	if o.WebhookLookupTimeout <= 0 || o.WebhookLookupTimeout > 10*time.Second {
		errs = append(errs, fmt.Errorf("--webhook-lookup-timeout: %s must be in (0, 10s]", o.WebhookLookupTimeout))
	}
	if o.LeaderElect && (o.LeaderElectRetryPeriod <= 0 || o.LeaderElectRetryPeriod >= o.LeaderElectRenewDeadline || o.LeaderElectRenewDeadline >= o.LeaderElectLeaseDuration) {
		errs = append(errs, fmt.Errorf("--leader-elect-*: want 0 < retry-period (%s) < renew-deadline (%s) < lease-duration (%s)",
			o.LeaderElectRetryPeriod, o.LeaderElectRenewDeadline, o.LeaderElectLeaseDuration))
	}
	// !(x > 0) also catches NaN; the client takes a float32, so larger values are infinite.
	if !(o.KubeAPIQPS > 0) || o.KubeAPIQPS > math.MaxFloat32 {
		errs = append(errs, fmt.Errorf("--kube-api-qps: %g must be a positive finite number", o.KubeAPIQPS))
	}
	if o.KubeAPIBurst < 1 {
		errs = append(errs, fmt.Errorf("--kube-api-burst: %d must be positive", o.KubeAPIBurst))
	}
	if o.Workers < 1 || o.Workers > 1024 {
		errs = append(errs, fmt.Errorf("--workers: %d must be in [1, 1024]", o.Workers))
	}
	if o.ShutdownDelay < 0 {
		errs = append(errs, fmt.Errorf("--shutdown-delay: %s must not be negative (0 stops at once)", o.ShutdownDelay))
	}
	if len(o.EnabledControllers()) == 0 && !o.Webhook {
		errs = append(errs, errors.New("--controllers is empty and --webhook=false: nothing to run; select a controller or serve the webhook"))
	}
	if o.LeaderElect && o.LeaderElectNamespace == "" && o.OutOfCluster {
		errs = append(errs, errors.New("--leader-elect-namespace: required outside a cluster with --leader-elect (no pod namespace to put the Lease in); or pass --leader-elect=false"))
	}
	return errors.Join(errs...)
}

// LoadConfig loads and validates the XO config named by --config (and the environment, read
// with env) as the command does at start-up.
func (o *Options) LoadConfig(env func(string) string) (*config.Config, error) {
	return config.Load(o.ConfigFile, env)
}

// Check is --check-config: it validates the flags as a pod runs them (in a cluster, where
// the Lease's namespace defaults to the pod's) and the XO config, reports every problem of both,
// and, when there is none, prints the effective configuration to w.
func (o *Options) Check(env func(string) string, w io.Writer) error {
	inPod := *o
	inPod.OutOfCluster = false
	flagErr := inPod.Validate()
	cfg, err := o.LoadConfig(env)
	if err = errors.Join(flagErr, err); err != nil {
		return err
	}
	return PrintConfig(w, cfg)
}

// PrintConfig writes cfg's effective configuration to w as YAML, tokens redacted, then its
// warnings as comments.
func PrintConfig(w io.Writer, cfg *config.Config) error {
	b, err := cfg.Effective()
	if err != nil {
		return err
	}
	for _, warning := range cfg.Warnings() {
		b = fmt.Appendf(b, "# WARNING: %s\n", warning)
	}
	_, err = w.Write(b)
	return err
}
