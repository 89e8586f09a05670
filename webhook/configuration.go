package webhook

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
)

// Name is the webhook's name in the MutatingWebhookConfiguration.
const Name = "nodes.k8s.xenorchestra"

// Configuration returns the MutatingWebhookConfiguration the Helm chart installs: nodes CREATE
// only (never nodes/status), not for Nodes labelled node.k8s.xenorchestra/ignore=true, no side
// effects, and a failure policy that by default admits the Node when the webhook is down, so
// registration never depends on it.
func Configuration(name string, svc *admissionregistrationv1.ServiceReference, failurePolicy admissionregistrationv1.FailurePolicyType, timeoutSeconds int32) *admissionregistrationv1.MutatingWebhookConfiguration {
	return &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    Name,
			AdmissionReviewVersions: []string{"v1"},
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{Service: svc},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{
					APIGroups:   []string{""},
					APIVersions: []string{"v1"},
					Resources:   []string{"nodes"},
					Scope:       ptr.To(admissionregistrationv1.ClusterScope),
				},
			}},
			ObjectSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: node.LabelIgnore, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"true"},
			}}},
			FailurePolicy:      ptr.To(failurePolicy),
			SideEffects:        ptr.To(admissionregistrationv1.SideEffectClassNone),
			TimeoutSeconds:     ptr.To(timeoutSeconds),
			MatchPolicy:        ptr.To(admissionregistrationv1.Equivalent),
			ReinvocationPolicy: ptr.To(admissionregistrationv1.NeverReinvocationPolicy),
		}},
	}
}
