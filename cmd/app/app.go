package app

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/config"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/controllers/cloudnode"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/controllers/common"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/controllers/labelsync"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/controllers/lifecycle"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/controllers/nodestates"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/nodeevents"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/webhook"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/webhook/certs"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/inventory"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
)

// version is stamped at build time (-ldflags -X .../cmd/app.version=...).
var version = "dev"

// Version returns the build's version.
func Version() string { return version }

var buildInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "xenorchestra_build_info",
	Help: "Build information; always 1.",
}, []string{"version", "goversion"})

func init() {
	metrics.Registry.MustRegister(buildInfo)
}

// Run validates the options, loads the XO config and runs RunConfig: the in-process entry of
// the demo and the tests. env reads environment variables (os.Getenv).
func Run(ctx context.Context, o *Options, restConfig *rest.Config, env func(string) string) error {
	if err := o.Validate(); err != nil {
		return err
	}
	cfg, err := o.LoadConfig(env)
	if err != nil {
		return err
	}
	return RunConfig(ctx, o, cfg, restConfig)
}

// ManagerShutdownTimeout bounds the manager's graceful stop once its context ends (after
// --shutdown-delay): in-flight reconciles and admissions end, the Lease is released. The
// chart's terminationGracePeriodSeconds must exceed the delay plus this.
const ManagerShutdownTimeout = 30 * time.Second

// skipControllerNameValidation turns off controller-runtime's check that a controller name is
// used once per process; the tests, which run the command several times in one process, set it
// (export_test.go).
var skipControllerNameValidation = false

// RunConfig builds the Manager with one inventory per XO server, the webhook and the selected
// controllers, and runs it until ctx ends and then, not Ready, for o.ShutdownDelay more (see
// gracefulStop). o must be valid and cfg loaded.
func RunConfig(ctx context.Context, o *Options, cfg *config.Config, restConfig *rest.Config) error {
	log := ctrl.Log.WithName("setup")
	stop := newGracefulStop(o.ShutdownDelay, o.ShutdownClock, ctrl.Log.WithName("shutdown"))
	ctx, cancel := stop.context(ctx)
	defer cancel()
	for _, w := range cfg.Warnings() {
		log.Info("WARNING: " + w)
	}
	ignore, err := node.NewIgnorer(cfg.Nodes.IgnoreSelector)
	if err != nil {
		return err
	}

	restConfig = rest.CopyConfig(restConfig)
	restConfig.QPS, restConfig.Burst = float32(o.KubeAPIQPS), o.KubeAPIBurst
	restConfig.UserAgent = "xenorchestra-cloud-controller-manager/" + version
	// The webhook's certificate, once it has one: the metrics endpoint may serve it, and its
	// validity is a metric.
	webhookCert := &webhookCertificate{}
	mgrOpts := ctrl.Options{
		Scheme:                        clientgoscheme.Scheme,
		Metrics:                       metricsOptions(o, webhookCert),
		HealthProbeBindAddress:        o.HealthProbeBindAddress,
		LeaderElection:                o.LeaderElect,
		LeaderElectionID:              LeaseName,
		LeaderElectionNamespace:       o.LeaderElectNamespace,
		LeaderElectionReleaseOnCancel: true,
		GracefulShutdownTimeout:       ptr.To(ManagerShutdownTimeout),
		LeaseDuration:                 &o.LeaderElectLeaseDuration,
		RenewDeadline:                 &o.LeaderElectRenewDeadline,
		RetryPeriod:                   &o.LeaderElectRetryPeriod,
		Cache:                         cache.Options{DefaultTransform: common.TrimNode(ignore)},
		Controller:                    ctrlconfig.Controller{SkipNameValidation: ptr.To(skipControllerNameValidation)},
	}
	selfManaged := o.Webhook && o.WebhookCerts == CertsSelfManaged
	if selfManaged {
		mgrOpts.Cache.ByObject = certs.CacheOptions(o.CertOptions())
	}
	mgr, err := ctrl.NewManager(restConfig, mgrOpts)
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	var webhookServer ctrlwebhook.Server
	certDir := o.WebhookCertDir // empty: the server has its own certificate source
	if o.Webhook {
		wo := ctrlwebhook.Options{
			Host:    o.WebhookHost,
			Port:    o.WebhookPort,
			CertDir: certDir,
			TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.MinVersion = tls.VersionTLS12 }},
		}
		if selfManaged {
			co := o.CertOptions()
			co.Log = ctrl.Log.WithName("webhook-certificates")
			src, err := certs.Setup(mgr, co)
			if err != nil {
				return fmt.Errorf("self-managed webhook certificates: %w", err)
			}
			if err := mgr.AddReadyzCheck("webhook-certificate", src.ReadyCheck); err != nil {
				return err
			}
			certDir = ""
			wo.CertDir, wo.TLSOpts = certDir, append(wo.TLSOpts, src.TLS)
			var c tls.Config
			src.TLS(&c)
			webhookCert.set(c.GetCertificate)
		} else if err := mgr.Add(webhookCert.watchDir(certDir)); err != nil {
			return err
		}
		webhookServer = observedServer{Server: ctrlwebhook.NewServer(wo), stop: stop}
		servedCertificate.Store(webhookCert)
		defer servedCertificate.CompareAndSwap(webhookCert, nil)
	}

	estate, err := NewEstate(cfg, o.WebhookLookupTimeout, inventory.Options{Log: ctrl.Log.WithName("inventory")})
	if err != nil {
		return err
	}
	// The inventories run on every replica: the webhook serves from them.
	for _, m := range estate.Members() {
		if err := mgr.Add(m.Inventory); err != nil {
			return err
		}
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("shutdown", stop.ReadyCheck); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("xo-inventory", func(*http.Request) error { return estate.ReadyCheck(nil) }); err != nil {
		return err
	}
	if err := mgr.Add(everyReplica(func(ctx context.Context) error {
		releaseHeap(ctx, ctrl.Log.WithName("memory"), releaseEvery)
		return nil
	})); err != nil {
		return err
	}

	labels, addresses := LabelOptions(cfg), AddressOptions(cfg)
	recorder := mgr.GetEventRecorder("xenorchestra-cloud-controller-manager")

	if o.Webhook {
		d := &webhook.NodeDefaulter{Estate: estate, Labels: labels, Addresses: addresses, Ignore: ignore, Events: nodeevents.New(recorder, "webhook", nil), Initialize: o.WebhookInitialize}
		if err := startWebhook(ctx, mgr, webhookServer, d, certDir); err != nil {
			return err
		}
	}

	enabled := o.EnabledControllers()
	if len(enabled) > 0 {
		if err := common.SetupIndexes(ctx, mgr); err != nil {
			return err
		}
		// The Node count by state: from the controllers' Node cache, on the leader.
		if err := nodestates.Setup(mgr, estate, ignore); err != nil {
			return err
		}
	}
	c, clk := mgr.GetClient(), clock.RealClock{}
	for _, name := range enabled {
		var setup interface{ SetupWithManager(ctrl.Manager) error }
		switch name {
		case cloudnode.Name:
			setup = cloudnode.New(c, estate, recorder, clk, cloudnode.Options{Labels: labels, Addresses: addresses, Ignore: ignore, Workers: o.Workers})
		case lifecycle.Name:
			setup = lifecycle.New(c, estate, recorder, clk, lifecycle.Options{OutOfServiceTaint: cfg.Lifecycle.OutOfServiceTaint, Ignore: ignore, Workers: o.Workers})
		case labelsync.Name:
			setup = labelsync.New(c, estate, recorder, clk, labelsync.Options{Labels: labels, Ignore: ignore, Workers: o.Workers})
		}
		if err := setup.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("set up controller %s: %w", name, err)
		}
	}

	buildInfo.WithLabelValues(version, runtime.Version()).Set(1)
	log.Info("Starting", "version", version, "controllers", enabled, "webhook", o.Webhook, "xo", serverNames(cfg))
	return mgr.Start(ctx)
}

// NewEstate builds a client and an inventory per enabled XO server of cfg, with the settings
// of cfg and base (its Log, TrustListing, ...), and returns them as one Estate; nothing is
// started. The controller adds the inventories to its manager; check and explain list them
// once.
func NewEstate(cfg *config.Config, lookupTimeout time.Duration, base inventory.Options) (*inventory.Estate, error) {
	members := make([]inventory.Member, 0, len(cfg.Clusters))
	for i := range cfg.Clusters {
		cl := &cfg.Clusters[i]
		if !cl.IsEnabled() {
			continue // switched off in the config: not connected, not counted (a warning says so)
		}
		tlsConfig, err := cl.TLSConfig()
		if err != nil {
			return nil, fmt.Errorf("XO server %s: %w", cl.Name, err)
		}
		xoClient, err := xo.New(xo.Options{
			Name:        cl.Name,
			URL:         cl.URL,
			Token:       cl.Token.Reveal(),
			TLSConfig:   tlsConfig,
			Timeout:     cl.RequestTimeout,
			ListTimeout: cl.ListTimeout,
			UserAgent:   "xenorchestra-cloud-controller-manager/" + version,
		})
		if err != nil {
			return nil, fmt.Errorf("XO server %s: %w", cl.Name, err)
		}
		o := base
		o.Name, o.Region, o.Pools = cl.Name, cl.Region, cl.Pools
		o.SettleTime, o.ResyncPeriod = cfg.Inventory.SettleTime, cfg.Inventory.ResyncPeriod
		o.PollPeriod, o.StaleAfter = cfg.Inventory.PollPeriod, cfg.Inventory.StaleAfter
		members = append(members, inventory.Member{Inventory: inventory.New(xoClient, o), XO: xoClient})
	}
	return inventory.NewEstate(lookupTimeout, members...), nil
}

// LabelOptions returns the labels' settings of cfg, as the webhook and the controllers use them.
func LabelOptions(cfg *config.Config) node.LabelOptions {
	return node.LabelOptions{
		Region: cfg.Topology.Region, Zone: cfg.Topology.Zone,
		TagLabelPrefixes: cfg.Labels.TagLabelPrefixes, TagTaintPrefixes: cfg.Labels.TagTaintPrefixes,
	}
}

// AddressOptions returns the addresses' settings of cfg, as the webhook and cloud-node use them.
func AddressOptions(cfg *config.Config) node.AddressOptions {
	return node.AddressOptions{InternalCIDRs: cfg.Addresses.InternalPrefixes(), ExternalCIDRs: cfg.Addresses.ExternalPrefixes()}
}

// serverNames lists the configured XO servers, for the start-up log line.
func serverNames(cfg *config.Config) []string {
	names := make([]string, len(cfg.Clusters))
	for i, c := range cfg.Clusters {
		names[i] = c.Name + "=" + c.URL
		if !c.IsEnabled() {
			names[i] += " (disabled)"
		}
	}
	return names
}
