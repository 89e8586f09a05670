package diagnose

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/cmd/app"
)

// checkLeader checks that a replica holds the leader-election Lease, renewed within its
// duration: the controllers run on the leader only.
func (s *session) checkLeader(ctx context.Context) {
	f := s.rel.Flags
	switch {
	case len(f.EnabledControllers()) == 0:
		s.rep.info(secLeader, "no controller runs in this release (--controllers empty): no leader needed")
		return
	case !f.LeaderElect:
		s.rep.warn(secLeader, "leader election is off (--leader-elect=false): with several replicas, every one runs the controllers", "remove --leader-elect=false")
		return
	}
	ns := f.LeaderElectNamespace
	if ns == "" {
		ns = s.rel.Namespace
	}
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	logs := fmt.Sprintf("look at the replicas' logs for leader election errors (kubectl -n %s logs -l %s=%s): they need get and update on the Lease %s in %s (the chart's Role)", s.rel.Namespace, labelInstance, s.rel.Name, app.LeaseName, ns)
	lease, err := s.cs.CoordinationV1().Leases(ns).Get(ctx, app.LeaseName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		s.rep.fail(secLeader, fmt.Sprintf("no leader: there is no Lease %s/%s, so no replica has ever run the controllers", ns, app.LeaseName), logs)
		return
	case apierrors.IsForbidden(err):
		s.rep.warn(secLeader, "cannot read the Lease "+ns+"/"+app.LeaseName+" with your permissions", "run check as a user allowed to get Leases in "+ns)
		return
	case err != nil:
		s.rep.fail(secLeader, "cannot read the Lease: "+err.Error(), "")
		return
	}
	holder := ""
	if lease.Spec.HolderIdentity != nil {
		holder = *lease.Spec.HolderIdentity
	}
	duration := f.LeaderElectLeaseDuration
	if lease.Spec.LeaseDurationSeconds != nil {
		duration = time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second
	}
	var renewed time.Time
	if lease.Spec.RenewTime != nil {
		renewed = lease.Spec.RenewTime.Time
	}
	if holder == "" || time.Since(renewed) > duration {
		when := "was never renewed"
		if !renewed.IsZero() {
			when = fmt.Sprintf("was last renewed %s ago (by %q), more than its duration %s", since(renewed), holder, duration)
		}
		s.rep.fail(secLeader, fmt.Sprintf("no leader: the Lease %s/%s %s: the controllers run nowhere, and no Node is initialized, tainted or deleted", ns, app.LeaseName, when), logs)
		return
	}
	s.rep.ok(secLeader, "leader: %s (Lease renewed %s ago)", holder, since(renewed))
	// controller-runtime's identity is <hostname>_<uuid>; a Pod's hostname is its name.
	pod, _, _ := strings.Cut(holder, "_")
	if len(s.rel.Pods) > 0 && !hasRunningPod(s.rel.Pods, pod) {
		s.rep.warn(secLeader, fmt.Sprintf("the leader %s is not a running Pod of this release: another installation shares the Lease, or the holder is gone", pod),
			"one release per cluster: kubectl get deploy -A -l "+labelPartOf+"="+partOf)
	}
}

// hasRunningPod reports whether a Pod of this name runs.
func hasRunningPod(pods []corev1.Pod, name string) bool {
	for _, p := range pods {
		if p.Name == name && p.Status.Phase == corev1.PodRunning {
			return true
		}
	}
	return false
}

// since is the time since t, rounded for people ("never" for the zero time).
func since(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return time.Since(t).Round(time.Second).String()
}
