package diagnose

import (
	"context"
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/cmd/app"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/config"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/inventory"
)

// The report's sections, in the order check writes them.
const (
	secAPI      = "Kubernetes API"
	secRelease  = "Release"
	secConfig   = "Configuration"
	secXO       = "XO servers"
	secWebhook  = "Webhook"
	secCerts    = "Certificates"
	secLeader   = "Leader election"
	secReplicas = "Replicas' inventories"
	secNodes    = "Nodes"
)

// session is one run of a subcommand: its clients, what it found on the way, its report.
type session struct {
	o   *Options
	rep *Report
	// rest and cs reach the API server with the user's credentials.
	rest *rest.Config
	cs   kubernetes.Interface
	// rel is the installed release; nil when none was found.
	rel *release
	// cfg is the controller's XO config and estate its inventories, listed once; nil when the
	// config could not be read. listErr holds each listed server's error by name.
	cfg     *config.Config
	estate  *inventory.Estate
	listErr map[string]error
	// probeVM is a VM of the XO listing, for the dry-run Node CREATE.
	probeVM *xo.VM
}

// Check runs check (or check --pre) and returns its report.
func Check(ctx context.Context, o *Options) *Report {
	s := &session{o: o, rep: &Report{Command: "check"}}
	if o.Pre {
		s.rep.Command = "check --pre"
	}
	if !s.connect(ctx) {
		return s.rep
	}
	if !o.Pre {
		s.findRelease(ctx)
	}
	s.loadConfig(ctx)
	s.checkXO(ctx)
	if o.Pre {
		s.checkCertManager(ctx, o.WebhookCertificatesMode)
	} else if s.rel != nil {
		s.checkWebhook(ctx)
		s.checkLeader(ctx)
		s.checkReplicas(ctx)
	}
	s.checkNodes(ctx)
	return s.rep
}

// connect loads the kubeconfig with client-go's rules and checks that the API server answers.
func (s *session) connect(ctx context.Context) bool {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = s.o.Kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: s.o.Context})
	cfg, err := cc.ClientConfig()
	if err != nil {
		s.rep.fail(secAPI, "no usable kubeconfig: "+err.Error(), "set KUBECONFIG or pass --kubeconfig (and --context)")
		return false
	}
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "xenorchestra-cloud-controller-manager-diagnose/" + app.Version()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		s.rep.fail(secAPI, "kubeconfig: "+err.Error(), "fix the kubeconfig")
		return false
	}
	s.rest, s.cs = cfg, cs
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	body, err := cs.Discovery().RESTClient().Get().AbsPath("/version").Do(ctx).Raw()
	if err != nil {
		s.rep.fail(secAPI, fmt.Sprintf("API server %s does not answer: %v", cfg.Host, err),
			"check the kubeconfig's server and credentials: kubectl cluster-info")
		return false
	}
	s.rep.ok(secAPI, "API server %s answers (Kubernetes %s)", cfg.Host, gitVersion(body))
	return true
}
