package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/webhook"
)

// certPollInterval is how often a replica without a serving certificate looks for one.
const certPollInterval = 5 * time.Second

// startWebhook registers the Node webhook on srv and adds srv to the manager — at once when
// certDir is empty (srv has its own certificate source) or holds the serving certificate,
// otherwise as soon as it appears.
//
// Why wait rather than fail: on a new cluster every Node carries the uninitialized taint until
// this controller runs, so cert-manager (which does not tolerate that taint) cannot issue the
// certificate before the controller has initialized the Nodes. The controllers therefore start
// without the webhook; the API server admits Nodes unchanged meanwhile (failurePolicy Ignore)
// and the cloud-node controller initializes them. The replica is not Ready meanwhile (the
// readiness check "webhook" names the folder and the missing files): the Service routes
// admissions to Ready replicas only, and one that cannot serve them must not receive any.
func startWebhook(ctx context.Context, mgr ctrl.Manager, srv ctrlwebhook.Server, d *webhook.NodeDefaulter, certDir string) error {
	if err := d.Register(srv); err != nil {
		return fmt.Errorf("set up webhook: %w", err)
	}
	var added atomic.Bool
	if err := mgr.AddReadyzCheck("webhook", func(r *http.Request) error {
		if !added.Load() {
			if err := certsMissing(certDir); err != nil {
				return fmt.Errorf("waiting for the serving certificate: %w", err)
			}
			return fmt.Errorf("waiting for the webhook to start: the serving certificate appeared in %s, looked for every %s", certDir, certPollInterval)
		}
		return srv.StartedChecker()(r)
	}); err != nil {
		return err
	}
	if certDir == "" || certsPresent(certDir) {
		added.Store(true)
		return mgr.Add(srv)
	}
	log := ctrl.Log.WithName("webhook")
	log.Info("No serving certificate yet; the webhook starts when it appears, the controllers run meanwhile", "certDir", certDir)
	return mgr.Add(everyReplica(func(ctx context.Context) error {
		if !waitForCerts(ctx, certDir) {
			return nil
		}
		log.Info("Serving certificate found; starting the webhook", "certDir", certDir)
		added.Store(true)
		if err := srv.Start(ctx); err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("webhook server: %w", err)
		}
		return nil
	}))
}

// everyReplica is a runnable that runs on every replica, leader or not, as the webhook must.
type everyReplica func(context.Context) error

func (f everyReplica) Start(ctx context.Context) error { return f(ctx) }

// NeedLeaderElection tells the manager to start it without waiting for leadership.
func (everyReplica) NeedLeaderElection() bool { return false }

var _ manager.LeaderElectionRunnable = everyReplica(nil)

// waitForCerts waits until dir holds a serving certificate (certsPresent), looking every
// certPollInterval; false when ctx ended first.
func waitForCerts(ctx context.Context, dir string) bool {
	t := time.NewTicker(certPollInterval)
	defer t.Stop()
	for !certsPresent(dir) {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
	return true
}

// certsPresent reports whether certDir holds a non-empty tls.crt and tls.key.
func certsPresent(dir string) bool { return certsMissing(dir) == nil }

// certsMissing returns an error naming the files of tls.crt and tls.key that dir lacks or
// holds empty, nil when it holds both.
func certsMissing(dir string) error {
	var missing []string
	for _, f := range []string{"tls.crt", "tls.key"} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil || st.Size() == 0 {
			missing = append(missing, f)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("no %s in %s", strings.Join(missing, "/"), dir)
}
