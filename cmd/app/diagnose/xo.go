package diagnose

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"

	"github.com/go-logr/logr"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/cmd/app"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/config"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/inventory"
)

// watcher is the event stream of an XO client (*xo.Client).
type watcher interface {
	Watch(ctx context.Context, o xo.WatchOptions, fn func(xo.Event)) error
}

// checkXO builds the controller's estate from the config (app.NewEstate) and lists each XO
// server once, as a replica does at start-up: reachable, TLS as configured, token accepted,
// ndjson listings; then its event stream, and its pools' connections. The pools a listing shows
// up are trusted at once (inventory.Options.TrustListing): the answers are those of replicas
// that have run longer than the settle time.
func (s *session) checkXO(ctx context.Context) {
	if s.cfg == nil {
		return
	}
	estate, err := app.NewEstate(s.cfg, 0, inventory.Options{Log: logr.Discard(), TrustListing: true})
	if err != nil {
		s.rep.fail(secXO, err.Error(), "fix the config: docs/configuration.md#config-file")
		return
	}
	s.listErr = map[string]error{}
	for _, m := range estate.Members() {
		cl := s.cluster(m.Inventory.Name())
		label := cl.Name + " (" + cl.URL + ")"
		inv := m.Inventory
		inv.AddHandler(func(c inventory.Change) {
			// A listing announces every VM: the first running one is the dry run's probe.
			if vm := inv.Snapshot().VM(c.ID); c.Kind == inventory.VMChanged && vm != nil && s.probeVM == nil && vm.PowerState == xo.PowerStateRunning {
				s.probeVM = vm
			}
		})
		if err := inv.Relist(ctx); err != nil {
			s.listErr[cl.Name] = err
			msg, fix := xoProblem(err)
			s.rep.fail(secXO, label+": "+msg, fix)
			continue
		}
		snap := m.Inventory.Snapshot()
		s.rep.ok(secXO, "%s: reachable over %s, token accepted, %d VMs listed (ndjson)", label, transport(cl), snap.Len())
		if w, ok := m.XO.(watcher); ok {
			s.checkEventStream(ctx, label, w)
		}
		s.checkPools(ctx, label, cl, m)
	}
	s.estate = estate
}

// cluster returns the config's entry of the XO server of this name.
func (s *session) cluster(name string) *config.Cluster {
	for i := range s.cfg.Clusters {
		if s.cfg.Clusters[i].Name == name {
			return &s.cfg.Clusters[i]
		}
	}
	return &config.Cluster{Name: name}
}

// transport says how the controller talks to the XO server.
func transport(cl *config.Cluster) string {
	switch {
	case strings.HasPrefix(cl.URL, "http://"):
		return "plain HTTP"
	case cl.Insecure:
		return "TLS without verification (insecure: true)"
	case cl.CAFile != "" || cl.CABundle != "":
		return "TLS verified with the config's CA bundle"
	}
	return "TLS verified with the system's roots"
}

// checkEventStream subscribes to XO's event stream and leaves: the controller keeps its
// inventory current through it, or relists periodically without it.
func (s *session) checkEventStream(ctx context.Context, label string, w watcher) {
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	subscribed := false
	err := w.Watch(ctx, xo.WatchOptions{Ready: func() { subscribed = true; cancel() }}, func(xo.Event) {})
	switch {
	case subscribed:
		s.rep.ok(secXO, "%s: event stream subscribed: XO's changes reach the Nodes within seconds", label)
	case errors.Is(err, xo.ErrNoEventStream):
		s.rep.warn(secXO, fmt.Sprintf("%s: no event stream (XO older than 5.192): the controller relists every inventory.pollPeriod (%s), so XO's changes reach the Nodes that late", label, s.cfg.Inventory.PollPeriod),
			"upgrade XO to 5.192 or later")
	default:
		s.rep.warn(secXO, fmt.Sprintf("%s: the event stream failed: %v; the controller relists every inventory.pollPeriod (%s) meanwhile", label, err, s.cfg.Inventory.PollPeriod),
			"a proxy between the controller and XO may cut long-lived answers (server-sent events at /rest/v0/events)")
	}
}

// checkPools reports XO's connections to its pools: an inventory that does not hold every pool
// that counts (its scope, or every enabled server entry's) holds name and address matches and
// every deletion of that XO server back.
func (s *session) checkPools(ctx context.Context, label string, cl *config.Cluster, m inventory.Member) {
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	var connected int
	var down, disabled []string
	err := m.XO.ListServers(ctx, func(sv *xo.Server) {
		name := sv.Label
		if name == "" {
			name = sv.ID
		}
		switch {
		case !sv.IsEnabled():
			disabled = append(disabled, name)
		case sv.Status == xo.ServerConnected:
			connected++
		default:
			down = append(down, fmt.Sprintf("%s (%s)", name, sv.Status))
		}
	})
	if err != nil {
		msg, fix := xoProblem(err)
		s.rep.fail(secXO, label+": cannot list XO's pool connections: "+msg, fix)
		return
	}
	scope := ""
	if len(cl.Pools) > 0 {
		scope = ", scope " + strings.Join(cl.Pools, ", ")
	}
	if len(disabled) > 0 {
		s.rep.info(secXO, "%s: server entries disabled in XO (not counted): %s", label, strings.Join(disabled, ", "))
	}
	fix := "reconnect the pool in XO (Settings, Servers), or disable its server entry there if the pool is gone for good; docs/troubleshooting.md#node-not-deleted-after-its-vm-was-deleted"
	switch snap := m.Inventory.Snapshot(); {
	case !snap.Complete():
		why := "a pool of its scope is not connected in XO"
		if len(down) > 0 {
			why = "XO's connection to " + strings.Join(down, ", ") + " is down"
		}
		s.rep.fail(secXO, fmt.Sprintf("%s: the inventory is incomplete: %s (%d connected%s): Nodes that match their VM only by name or address wait, and no Node of this XO server is deleted", label, why, connected, scope), fix)
	case len(down) > 0:
		s.rep.warn(secXO, fmt.Sprintf("%s: every pool of the scope is connected, but XO's connection to %s is down", label, strings.Join(down, ", ")), fix)
	default:
		s.rep.ok(secXO, "%s: %d pool connection(s) up%s", label, connected, scope)
	}
}

// xoProblem words an XO error and its fix.
func xoProblem(err error) (msg, fix string) {
	var xe *xo.Error
	errors.As(err, &xe)
	var (
		unknownCA  x509.UnknownAuthorityError
		hostname   x509.HostnameError
		invalid    x509.CertificateInvalidError
		verifyFail *tls.CertificateVerificationError
	)
	switch {
	case errors.As(err, &unknownCA), errors.As(err, &hostname), errors.As(err, &invalid), errors.As(err, &verifyFail):
		return "XO's TLS certificate is not trusted: " + err.Error(),
			"give the CA that signed it with caFile or caBundle, or fix url's host name (docs/configuration.md); insecure: true skips verification and is warned about"
	case xe == nil:
		return err.Error(), ""
	case xe.Kind == xo.KindUnauthorized:
		return "the token is refused (HTTP 401): missing, wrong, expired or revoked",
			"create a token (xo-cli create-token <url> <user>) and put it in the controller's Secret: docs/troubleshooting.md#xo-answers-401-token-expired-or-revoked"
	case xe.Kind == xo.KindForbidden:
		return "the token's user lacks a privilege (HTTP 403)", "use a token of an XO administrator"
	case xe.Kind == xo.KindUnavailable:
		return "unreachable: " + err.Error(),
			"check url, and the network path from the controller's Pods to XO (DNS, firewall, HTTPS_PROXY, hostAliases): docs/troubleshooting.md#xo-errors"
	case xe.Kind == xo.KindBadResponse:
		return "XO's answer is not usable: " + err.Error(),
			"url is XO's base URL (without /rest/v0) of an XO with the REST API and its ndjson listings (XO 5.x); a proxy must not buffer or cut long answers"
	}
	return err.Error(), "docs/troubleshooting.md#xo-errors"
}
