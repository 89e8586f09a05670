package diagnose

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// certManagerGroupVersion is the API cert-manager serves, which the chart's mode certManager
// uses (Issuer, Certificate) and whose cainjector fills the caBundle.
const certManagerGroupVersion = "cert-manager.io/v1"

// checkCertManager checks, before an install in the given certificate mode, that cert-manager
// is there when the mode needs it: its API served and its cainjector available.
func (s *session) checkCertManager(ctx context.Context, mode string) {
	if mode != certsCertManager {
		s.rep.ok(secCerts, "webhook certificates %s: cert-manager is not needed", mode)
		return
	}
	fix := "install cert-manager (README, \"Install in five lines\"), or install with --set webhook.certificates.mode=selfManaged: on a new cluster cert-manager cannot run before the Nodes are initialized, and the controller makes its certificates itself"
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	if _, err := s.cs.Discovery().ServerResourcesForGroupVersion(certManagerGroupVersion); err != nil {
		if apierrors.IsNotFound(err) {
			s.rep.fail(secCerts, "cert-manager is not installed (the API server serves no "+certManagerGroupVersion+"), and webhook certificates certManager (the chart's default) need it", fix)
			return
		}
		s.rep.fail(secCerts, "cannot tell whether cert-manager is installed: "+err.Error(), fix)
		return
	}
	s.rep.ok(secCerts, "cert-manager's API %s is served", certManagerGroupVersion)
	deps, err := s.cs.AppsV1().Deployments("").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=cainjector"})
	switch {
	case apierrors.IsForbidden(err):
		s.rep.warn(secCerts, "cannot see cert-manager's cainjector with your permissions (Deployments in every namespace)", "check it yourself: kubectl -n cert-manager get deploy")
	case err != nil:
		s.rep.warn(secCerts, "cannot list cert-manager's cainjector: "+err.Error(), "")
	case len(deps.Items) == 0:
		s.rep.fail(secCerts, "cert-manager's cainjector runs nowhere (no Deployment labelled app.kubernetes.io/component=cainjector): nothing would fill the webhook's caBundle", fix)
	default:
		d := deps.Items[0]
		if d.Status.AvailableReplicas == 0 {
			s.rep.fail(secCerts, fmt.Sprintf("cert-manager's cainjector %s/%s has no available replica: nothing fills the webhook's caBundle (on a new cluster, cert-manager's Pods wait for initialized Nodes)", d.Namespace, d.Name), fix)
			return
		}
		s.rep.ok(secCerts, "cert-manager's cainjector %s/%s is available", d.Namespace, d.Name)
	}
}
