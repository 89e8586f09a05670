package diagnose

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/cmd/app"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/controllers/nodestates"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/webhook"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
)

// annotationInjectCA is cert-manager's cainjector annotation: the chart's mode certManager.
const annotationInjectCA = "cert-manager.io/inject-ca-from"

// checkWebhook checks the admission path a Node CREATE takes: the MutatingWebhookConfiguration,
// its CA bundle against the certificate each ready endpoint of its Service serves, the Service's
// ready endpoints, and a dry-run Node CREATE through the API server that must come back
// described.
func (s *session) checkWebhook(ctx context.Context) {
	if !s.rel.Flags.Webhook {
		s.rep.info(secWebhook, "the webhook is off in this release (--webhook=false): the controllers alone initialize Nodes, after their registration")
		return
	}
	mwc, hook, err := s.findWebhook(ctx)
	switch {
	case err != nil:
		s.rep.fail(secWebhook, "cannot list the MutatingWebhookConfigurations: "+err.Error(), "run check as a user allowed to list them")
		return
	case hook == nil:
		s.rep.fail(secWebhook, fmt.Sprintf("no MutatingWebhookConfiguration holds the webhook %s for namespace %s: no Node is described at its creation", webhook.Name, s.rel.Namespace),
			"helm upgrade the release (webhook.enabled: true installs it)")
		return
	}
	policy := "Fail"
	if hook.FailurePolicy != nil {
		policy = string(*hook.FailurePolicy)
	}
	s.rep.ok(secWebhook, "MutatingWebhookConfiguration %s holds the webhook %s (failurePolicy %s)", mwc.Name, webhook.Name, policy)
	caFix := s.caFix(mwc)
	roots, err := caBundle(hook.ClientConfig.CABundle)
	if err != nil {
		s.rep.fail(secWebhook, fmt.Sprintf("MutatingWebhookConfiguration %s: %v: the API server cannot call the webhook, and admits every Node undescribed", mwc.Name, err), caFix)
	}
	targets, serverName, ok := s.webhookTargets(ctx, hook)
	if ok && roots != nil {
		for _, t := range targets {
			s.checkServedCertificate(ctx, t, serverName, roots, caFix)
		}
	}
	s.dryRunNode(ctx)
}

// findWebhook returns the configuration holding this project's webhook for the release's
// namespace (a URL webhook counts too: the controller then runs outside the cluster's Pods).
func (s *session) findWebhook(ctx context.Context) (*admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.MutatingWebhook, error) {
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	list, err := s.cs.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	for i := range list.Items {
		mwc := &list.Items[i]
		for j := range mwc.Webhooks {
			h := &mwc.Webhooks[j]
			if h.Name == webhook.Name && (h.ClientConfig.Service == nil || h.ClientConfig.Service.Namespace == s.rel.Namespace) {
				return mwc, h, nil
			}
		}
	}
	return nil, nil, nil
}

// caFix is the fix of a CA bundle that does not verify the served certificate, by where the
// bundle comes from.
func (s *session) caFix(mwc *admissionregistrationv1.MutatingWebhookConfiguration) string {
	switch {
	case s.rel.Flags.WebhookCerts == app.CertsSelfManaged:
		return "every replica keeps the caBundle equal to the CA in its Secret (self-managed certificates): look at the replicas' logs (webhook-ca-injector) and at their permission to patch " + mwc.Name + "; docs/troubleshooting.md#certificate-problems-cert-manager"
	case mwc.Annotations[annotationInjectCA] != "":
		return "cert-manager's cainjector fills the caBundle from the Certificate " + mwc.Annotations[annotationInjectCA] + ": check that cainjector runs (its logs) and that the issued Secret has ca.crt; docs/troubleshooting.md#certificate-problems-cert-manager"
	}
	return "set webhook.certificates.existingSecret.caBundle to the CA that signed the serving certificate's Secret (base64 -w0 ca.crt) and helm upgrade"
}

// caBundle parses a webhook's CA bundle.
func caBundle(b []byte) (*x509.CertPool, error) {
	if len(b) == 0 {
		return nil, errors.New("its caBundle is empty")
	}
	pool := x509.NewCertPool()
	n := 0
	for rest := b; ; {
		var blk *pem.Block
		if blk, rest = pem.Decode(rest); blk == nil {
			break
		}
		if c, err := x509.ParseCertificate(blk.Bytes); err == nil && blk.Type == "CERTIFICATE" {
			pool.AddCert(c)
			n++
		}
	}
	if n == 0 {
		return nil, errors.New("its caBundle holds no PEM certificate")
	}
	return pool, nil
}

// webhookTargets returns where the API server sends admissions: the ready endpoints of the
// webhook's Service (each Pod behind them reached by a port-forward; an endpoint without a Pod
// directly), or the webhook's URL; and the name the API server verifies the certificate for.
// ok is false when there is nowhere to send them (reported).
func (s *session) webhookTargets(ctx context.Context, hook *admissionregistrationv1.MutatingWebhook) ([]target, string, bool) {
	if u := hook.ClientConfig.URL; u != nil {
		p, err := url.Parse(*u)
		if err != nil {
			s.rep.fail(secWebhook, fmt.Sprintf("the webhook's URL %q does not parse: %v", *u, err), "helm upgrade the release")
			return nil, "", false
		}
		addr := p.Host
		if p.Port() == "" {
			addr = net.JoinHostPort(p.Hostname(), "443")
		}
		s.rep.info(secWebhook, "the API server calls the webhook at %s (a URL, no Service)", *u)
		return []target{{Name: addr, Addr: addr}}, p.Hostname(), true
	}
	ref := hook.ClientConfig.Service
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	svc, err := s.cs.CoreV1().Services(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		s.rep.fail(secWebhook, fmt.Sprintf("the webhook's Service %s/%s: %v: the API server admits every Node undescribed", ref.Namespace, ref.Name, err),
			"helm upgrade the release (webhook.enabled: true installs the Service)")
		return nil, "", false
	}
	want := int32(443)
	if ref.Port != nil {
		want = *ref.Port
	}
	portName := ""
	for _, p := range svc.Spec.Ports {
		if p.Port == want {
			portName = p.Name
		}
	}
	slices, err := s.cs.DiscoveryV1().EndpointSlices(ref.Namespace).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + ref.Name})
	if err != nil {
		s.rep.fail(secWebhook, fmt.Sprintf("cannot list the endpoints of Service %s/%s: %v", ref.Namespace, ref.Name, err), "run check as a user allowed to list EndpointSlices in "+ref.Namespace)
		return nil, "", false
	}
	var targets []target
	for _, sl := range slices.Items {
		var port int32
		for _, p := range sl.Ports {
			if p.Port != nil && (p.Name == nil && portName == "" || p.Name != nil && *p.Name == portName) {
				port = *p.Port
			}
		}
		for _, ep := range sl.Endpoints {
			if port == 0 || len(ep.Addresses) == 0 || ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			t := target{Name: ep.Addresses[0], Addr: net.JoinHostPort(ep.Addresses[0], strconv.Itoa(int(port)))}
			if r := ep.TargetRef; r != nil && r.Kind == "Pod" {
				t = target{Name: "Pod " + r.Name, Namespace: r.Namespace, Pod: r.Name, Port: port}
			}
			targets = append(targets, t)
		}
	}
	if len(targets) == 0 {
		s.rep.fail(secWebhook, fmt.Sprintf("Service %s/%s has no ready endpoint: the API server admits every Node undescribed (failurePolicy Ignore) or refuses it (Fail)", ref.Namespace, ref.Name),
			fmt.Sprintf("no replica is Ready (see Release above; a replica is Ready once XO is listed and the webhook serves): kubectl -n %s get pods,endpointslices -l %s=%s", ref.Namespace, labelInstance, s.rel.Name))
		return nil, "", false
	}
	s.rep.ok(secWebhook, "Service %s/%s has %d ready endpoint(s)", ref.Namespace, ref.Name, len(targets))
	return targets, ref.Name + "." + ref.Namespace + ".svc", true
}

// checkServedCertificate fetches the certificate a target serves and verifies it with the
// webhook's CA bundle for serverName, as the API server does.
func (s *session) checkServedCertificate(ctx context.Context, t target, serverName string, roots *x509.CertPool, fix string) {
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	chain, err := s.servedChain(ctx, t, serverName)
	switch {
	case errors.Is(err, errTunnel):
		s.rep.warn(secWebhook, fmt.Sprintf("cannot check the certificate served at %s: %v", t.Name, err),
			"a port-forward needs create on pods/portforward in "+t.Namespace+", and the API server's way to the kubelet (kubectl port-forward fails alike)")
		return
	case err != nil:
		s.rep.fail(secWebhook, fmt.Sprintf("cannot reach the webhook at %s: %v", t.Name, err),
			"the API server cannot either: look at the replica's log and readiness (kubectl -n "+s.rel.Namespace+" describe pod)")
		return
	}
	if err := verifyChain(chain, roots, serverName); err != nil {
		s.rep.fail(secWebhook, fmt.Sprintf("the caBundle does not verify the certificate served at %s for %s: %v: the API server's calls fail, and Nodes are admitted undescribed", t.Name, serverName, err), fix)
		return
	}
	s.rep.ok(secWebhook, "the caBundle verifies the certificate served at %s for %s (valid %s more)", t.Name, serverName, time.Until(chain[0].NotAfter).Round(time.Hour))
}

// servedChain returns the certificates a target serves for serverName, unverified: the caller
// verifies them against the bundle the API server uses, which is what is being checked.
func (s *session) servedChain(ctx context.Context, t target, serverName string) ([]*x509.Certificate, error) {
	tun, err := s.open(ctx, t)
	if err != nil {
		return nil, err
	}
	defer tun.Close()
	d := tls.Dialer{Config: &tls.Config{ServerName: serverName, InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}} //nolint:gosec // verified against the caBundle by the caller; nothing is sent
	conn, err := d.DialContext(ctx, "tcp", tun.Addr)
	if err != nil {
		return nil, tun.explain(err)
	}
	defer conn.Close()
	chain := conn.(*tls.Conn).ConnectionState().PeerCertificates
	if len(chain) == 0 {
		return nil, errors.New("no certificate served")
	}
	return chain, nil
}

// verifyChain verifies a served chain for dnsName (a host name or an IP address) with roots.
func verifyChain(chain []*x509.Certificate, roots *x509.CertPool, dnsName string) error {
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	_, err := chain[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, DNSName: dnsName})
	return err
}

// dryRunNode sends a Node CREATE in dry-run mode through the API server, with the admission
// chain and the webhook as for a kubelet's registration and nothing written, and checks that it
// comes back described. The probe names a VM the webhook knows: an initialized Node's
// providerID, else the system UUID of a VM of the XO listing.
func (s *session) dryRunNode(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	probe, want, err := s.probeNode(ctx)
	if err != nil {
		s.rep.warn(secWebhook, "no dry-run Node CREATE: "+err.Error(), "")
		return
	}
	got, err := s.cs.CoreV1().Nodes().Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	switch {
	case apierrors.IsForbidden(err):
		s.rep.warn(secWebhook, "no dry-run Node CREATE: your user may not create Nodes (a dry run writes nothing, but needs the permission)", "run check as a user allowed to create Nodes")
		return
	case err != nil:
		s.rep.fail(secWebhook, "a dry-run Node CREATE failed: "+err.Error(), "the API server refused the Node: with failurePolicy Fail, a webhook that cannot be called blocks every Node's registration")
		return
	}
	if got.Spec.ProviderID != want || got.Labels[node.LabelRegion] == "" || got.Labels[node.LabelInstanceType] == "" {
		s.rep.fail(secWebhook, "a dry-run Node CREATE came back undescribed (no providerID, region or instance type): the API server could not call the webhook, or the webhook could not resolve the probe's VM",
			"see the checks above; the API server's log says why (failed calling webhook \""+webhook.Name+"\"), and so does the replicas' metric xenorchestra_webhook_admissions_total")
		return
	}
	s.rep.ok(secWebhook, "a dry-run Node CREATE comes back described by the webhook (providerID %s, region %s, instance type %s)", got.Spec.ProviderID, got.Labels[node.LabelRegion], got.Labels[node.LabelInstanceType])
}

// probeNode returns the probe of dryRunNode and the providerID it must come back with.
func (s *session) probeNode(ctx context.Context) (*corev1.Node, string, error) {
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	probe := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "xenorchestra-check-" + hex.EncodeToString(suffix)},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: node.TaintUninitialized, Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
	}
	list, err := s.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err == nil {
		ignore := s.ignorer()
		for i := range list.Items {
			n := &list.Items[i]
			if nodestates.Classify(n, ignore) == nodestates.ClassInitialized && n.Labels[node.LabelRegion] != "" {
				probe.Spec.ProviderID = n.Spec.ProviderID
				return probe, n.Spec.ProviderID, nil
			}
		}
	}
	if s.probeVM != nil {
		probe.Status.NodeInfo.SystemUUID = s.probeVM.ID
		return probe, node.FormatProviderID(s.probeVM.PoolID, s.probeVM.ID), nil
	}
	return nil, "", errors.New("no initialized Node and no VM from XO to probe the webhook with")
}
