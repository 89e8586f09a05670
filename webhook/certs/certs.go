// Package certs gives the webhook a serving certificate without cert-manager installed
// (--webhook-certs=self-managed): a CA kept in a Secret, a serving certificate per replica
// signed by it, both rotated before they expire, and the CA copied into the caBundle of the
// MutatingWebhookConfiguration.
//
// The CA and the serving certificates come from cert-manager's own library for the same job
// (github.com/cert-manager/cert-manager/pkg/server/tls: the code with which cert-manager's
// webhook bootstraps itself before cert-manager can issue anything), already a dependency of
// this project. Every replica runs it: the first to start creates the CA Secret, each replica
// signs its own serving certificate in memory with the current CA, renews it at two thirds of
// its lifetime and re-signs at once when the CA is rotated (at two thirds of the CA's
// lifetime). Nothing is written to disk, so a rotation is served without waiting for the
// kubelet to refresh a Secret volume. We chose it over open-policy-agent/cert-controller,
// which serves from a mounted Secret volume (up to a minute of kubelet delay per replica) and
// is a new dependency.
//
// What this package adds is the caBundle: an Injector on every replica keeps the caBundle of
// every webhook of one MutatingWebhookConfiguration equal to the CA in the Secret, when the CA
// changes and when the configuration is rewritten (a kubectl apply or a Helm rollback that
// clears it).
//
// One window is left, by design of any single-CA rotation: when the CA itself is rotated
// (CADuration, default 1 year: every 8 months), a replica serves a certificate of the new CA a
// few milliseconds before the API server sees the new caBundle. Admission calls in that window
// fail; with failurePolicy Ignore their Nodes are admitted unchanged, keep the uninitialized
// taint, and are initialized by the cloud-node controller within a second. Renewing the
// serving certificate, the routine rotation, has no window.
package certs

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"time"

	cmtls "github.com/cert-manager/cert-manager/pkg/server/tls"
	"github.com/cert-manager/cert-manager/pkg/server/tls/authority"
	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Defaults of the lifetimes: cert-manager's own for its webhook.
const (
	DefaultCADuration   = 365 * 24 * time.Hour
	DefaultCertDuration = 7 * 24 * time.Hour
)

// caKey is the Secret key holding the CA certificate (cert-manager's ca.crt).
const caKey = "ca.crt"

// Options name the Secret, the serving names and the webhook configuration.
type Options struct {
	// Secret holds the CA; created on the first start (its key ca.crt is the CA certificate).
	Secret types.NamespacedName
	// DNSNames are the names the API server dials: the webhook Service's.
	DNSNames []string
	// WebhookConfiguration is the MutatingWebhookConfiguration whose caBundle is kept.
	WebhookConfiguration string
	// CADuration and CertDuration are the lifetimes of the CA and of a serving certificate;
	// each is renewed at two thirds of it. CertDuration must be shorter than CADuration.
	CADuration, CertDuration time.Duration
	Log                      logr.Logger
}

// Validate returns every problem with o.
func (o Options) Validate() error {
	var errs []error
	if o.Secret.Namespace == "" || o.Secret.Name == "" {
		errs = append(errs, fmt.Errorf("CA Secret %q: want namespace/name", o.Secret.String()))
	}
	if len(o.DNSNames) == 0 {
		errs = append(errs, errors.New("no DNS name for the serving certificate"))
	}
	if o.WebhookConfiguration == "" {
		errs = append(errs, errors.New("no MutatingWebhookConfiguration to put the CA in"))
	}
	if o.CertDuration <= 0 || o.CertDuration >= o.CADuration {
		errs = append(errs, fmt.Errorf("want 0 < certificate lifetime (%s) < CA lifetime (%s)", o.CertDuration, o.CADuration))
	}
	return errors.Join(errs...)
}

// CacheOptions narrows the manager's cache of MutatingWebhookConfigurations to the one the
// Injector keeps; pass it in the manager's cache.Options.ByObject.
func CacheOptions(o Options) map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{
		&admissionregistrationv1.MutatingWebhookConfiguration{}: {Field: fields.OneTermEqualSelector("metadata.name", o.WebhookConfiguration)},
	}
}

// Source is this replica's serving certificate.
type Source struct {
	dynamic *cmtls.DynamicSource
	log     logr.Logger
}

// TLS sets the serving certificate on a webhook server's TLS config (its TLSOpts).
func (s *Source) TLS(c *tls.Config) { c.GetCertificate = s.dynamic.GetCertificate }

// ReadyCheck fails until this replica has a serving certificate.
func (s *Source) ReadyCheck(*http.Request) error {
	if !s.dynamic.Healthy() {
		return errors.New("no serving certificate yet")
	}
	return nil
}

// Start runs the CA and the serving certificate until ctx ends.
func (s *Source) Start(ctx context.Context) error {
	return s.dynamic.Start(logr.NewContext(ctx, s.log))
}

// NeedLeaderElection: every replica serves the webhook, so every replica needs a certificate.
func (*Source) NeedLeaderElection() bool { return false }

// Setup adds to mgr this replica's certificate Source and the caBundle Injector, and returns
// the Source for the webhook server's TLS config and readiness. mgr's cache must have been
// built with CacheOptions(o).
func Setup(mgr manager.Manager, o Options) (*Source, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	auth := &authority.DynamicAuthority{
		SecretNamespace: o.Secret.Namespace,
		SecretName:      o.Secret.Name,
		SecretLabels:    map[string]string{"app.kubernetes.io/managed-by": "xenorchestra-cloud-controller-manager"},
		RESTConfig:      mgr.GetConfig(),
		CommonName:      "xenorchestra-cloud-controller-manager-webhook-ca",
		CADuration:      o.CADuration,
		LeafDuration:    o.CertDuration,
	}
	s := &Source{log: o.Log, dynamic: &cmtls.DynamicSource{DNSNames: o.DNSNames, Authority: auth}}
	if err := mgr.Add(s); err != nil {
		return nil, err
	}

	// The authority signals every change of the CA it holds (the first load included).
	rotated := make(chan struct{}, 1)
	auth.WatchRotation(rotated)
	events := make(chan event.GenericEvent)
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: o.WebhookConfiguration}}
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-rotated:
			}
			select {
			case events <- event.GenericEvent{Object: cfg}:
			case <-ctx.Done():
				return nil
			}
		}
	})); err != nil {
		return nil, err
	}
	inj := &Injector{Client: mgr.GetClient(), Secrets: mgr.GetAPIReader(), Secret: o.Secret}
	err := ctrl.NewControllerManagedBy(mgr).
		Named("webhook-ca-injector").
		For(&admissionregistrationv1.MutatingWebhookConfiguration{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(obj client.Object) bool {
			return obj.GetName() == o.WebhookConfiguration
		}))).
		WatchesRawSource(source.Channel(events, &handler.EnqueueRequestForObject{})).
		// Every replica runs it.
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false), MaxConcurrentReconciles: 1}).
		Complete(inj)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Injector keeps the caBundle of every webhook of the MutatingWebhookConfiguration it is asked
// to reconcile equal to the CA certificate in Secret. It writes only when they differ, so the
// replicas running it side by side write once between them.
type Injector struct {
	Client client.Client
	// Secrets reads the CA Secret uncached: one read per reconcile, which happens when the CA
	// or the configuration changes, instead of a cache of Secrets.
	Secrets client.Reader
	Secret  types.NamespacedName
}

// Reconcile implements reconcile.Reconciler.
func (i *Injector) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var s corev1.Secret
	if err := i.Secrets.Get(ctx, i.Secret, &s); err != nil {
		// Not found: the authority creates it, and its rotation signal brings us back.
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	ca := s.Data[caKey]
	if len(ca) == 0 {
		return reconcile.Result{}, nil
	}
	var cfg admissionregistrationv1.MutatingWebhookConfiguration
	if err := i.Client.Get(ctx, req.NamespacedName, &cfg); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	before := cfg.DeepCopy()
	changed := false
	for k := range cfg.Webhooks {
		if !bytes.Equal(cfg.Webhooks[k].ClientConfig.CABundle, ca) {
			cfg.Webhooks[k].ClientConfig.CABundle = ca
			changed = true
		}
	}
	if !changed {
		return reconcile.Result{}, nil
	}
	// The webhooks list is replaced as a whole by a merge patch: the optimistic lock makes a
	// concurrent edit of the configuration a conflict (retried) instead of a lost update.
	if err := i.Client.Patch(ctx, &cfg, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return reconcile.Result{}, err
	}
	ctrl.LoggerFrom(ctx).Info("Put the webhook CA in the MutatingWebhookConfiguration", "configuration", cfg.Name, "webhooks", len(cfg.Webhooks))
	return reconcile.Result{}, nil
}
