package app_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/cmd/app"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/xosim"
)

// TestNotReadyWhileTheFirstListingSettles: until the pools of its first XO listing are trusted
// (inventory.settleTime after it), a replica cannot match a Node by name or address, so it is
// not Ready, and its xo-inventory check says why; it is Ready once they are.
func TestNotReadyWhileTheFirstListingSettles(t *testing.T) {
	t.Parallel()
	x := testenv.NewXO(t, testenv.XOOptions{Token: token})
	pool := x.AddPool(t, xosim.PoolSpec{NameLabel: "pool"})
	x.AddHost(t, xosim.HostSpec{PoolID: pool, NameLabel: "host"})
	x.AddVM(t, xosim.VMSpec{PoolID: pool, NameLabel: "vm", CPUs: 2, Memory: xosim.GiB})
	env := testenv.StartTest(t, testenv.Options{})

	const settle = 3 * time.Second
	o := app.NewOptions()
	o.ConfigFile = filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(o.ConfigFile, fmt.Appendf(nil, "url: %s\ntoken: %s\ninventory: {settleTime: %s}\n", x.URL, token, settle), 0o600); err != nil {
		t.Fatal(err)
	}
	probe := testenv.FreeAddr(t)
	o.Webhook, o.LeaderElect, o.MetricsBindAddress, o.HealthProbeBindAddress, o.ShutdownDelay = false, false, "0", probe, 0
	start := time.Now()
	runApp(t, o, env, x.URL)

	testenv.WaitFor(t, 30*time.Second, "the xo-inventory check saying the first listing's pool settles", func() error {
		code, body, err := probeStatus(probe, "/readyz/xo-inventory")
		if err != nil || code != http.StatusInternalServerError || !strings.Contains(body, "1 pool(s) of the first listing still settling") {
			return fmt.Errorf("/readyz/xo-inventory: %d %q %v", code, body, err)
		}
		return nil
	})
	if code, _, err := probeStatus(probe, "/readyz"); err != nil || code != http.StatusInternalServerError {
		t.Fatalf("/readyz while the first listing's pool settles: %d %v, want 500", code, err)
	}
	waitReady(t, probe, "ready once the first listing's pool is trusted")
	if d := time.Since(start); d < settle {
		t.Fatalf("ready %s after the start, before the settle time (%s) could pass", d, settle)
	}
}

// TestShutdownDelay: on termination (the command's context ends) the replica stops being
// Ready at once, while the webhook keeps describing Nodes at CREATE until --shutdown-delay
// has passed; then the command stops and the webhook with it.
func TestShutdownDelay(t *testing.T) {
	t.Parallel()
	x := testenv.NewXO(t, testenv.XOOptions{Token: token})
	pool := x.AddPool(t, xosim.PoolSpec{NameLabel: "pool"})
	x.AddHost(t, xosim.HostSpec{PoolID: pool, NameLabel: "host"})
	vm := x.AddVM(t, xosim.VMSpec{PoolID: pool, NameLabel: "vm", CPUs: 2, Memory: xosim.GiB})
	env := testenv.StartTest(t, testenv.Options{Webhook: true})
	c := env.Client

	const delay = 5 * time.Second
	clk := clocktesting.NewFakeClock(time.Now())
	o := app.NewOptions()
	wo := env.WebhookInstallOptions
	probe := testenv.FreeAddr(t)
	o.WebhookHost, o.WebhookPort, o.WebhookCertDir = wo.LocalServingHost, wo.LocalServingPort, wo.LocalServingCertDir
	o.Controllers = "" // the webhook alone: what describes a Node at CREATE is the webhook
	o.LeaderElect, o.MetricsBindAddress, o.HealthProbeBindAddress = false, "0", probe
	o.ShutdownDelay, o.ShutdownClock = delay, clk
	o.ConfigFile = filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(o.ConfigFile, fmt.Appendf(nil, "url: %s\ntoken: %s\ninventory: {settleTime: 1s}\n", x.URL, token), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, terminate := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, o, env.Config, func(string) string { return "" }) }()
	defer func() {
		terminate()
		for {
			clk.Step(delay) // whenever the delay's timer is set
			select {
			case err := <-done:
				if err != nil {
					t.Error(err)
				}
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	waitReady(t, probe, "ready")

	seq := 0
	describedAtCreate := func() error {
		seq++
		n := testenv.KubeletNode("shutdown-"+strconv.Itoa(seq), testenv.WithSystemUUID(vm))
		if err := c.Create(context.Background(), n); err != nil {
			t.Fatal(err)
		}
		if want := node.FormatProviderID(pool, vm); n.Spec.ProviderID != want {
			return fmt.Errorf("Node %s: providerID %q at CREATE, want %q", n.Name, n.Spec.ProviderID, want)
		}
		return nil
	}
	testenv.WaitFor(t, 30*time.Second, "a Node described at CREATE", describedAtCreate)

	terminate() // SIGTERM
	testenv.WaitFor(t, 10*time.Second, "not ready once termination is requested", func() error {
		code, body, err := probeStatus(probe, "/readyz/shutdown")
		if err != nil || code != http.StatusInternalServerError || !strings.Contains(body, "shutting down") {
			return fmt.Errorf("/readyz/shutdown: %d %q %v", code, body, err)
		}
		return nil
	})
	if code, _, err := probeStatus(probe, "/readyz"); err != nil || code != http.StatusInternalServerError {
		t.Fatalf("/readyz after termination was requested: %d %v, want 500", code, err)
	}
	// The delay runs on the fake clock: until it is stepped, the webhook serves on.
	testenv.Eventually(t, 10*time.Second, "the shutdown delay's timer", clk.HasWaiters)
	clk.Step(delay - time.Millisecond)
	for range 3 {
		if err := describedAtCreate(); err != nil {
			t.Fatalf("during the shutdown delay: %v", err)
		}
	}
	select {
	case err := <-done:
		t.Fatalf("the command returned before the shutdown delay ended: %v", err)
	default:
	}

	clk.Step(time.Millisecond)
	select {
	case err := <-done:
		done <- err // for the deferred check
	case <-time.After(30 * time.Second):
		t.Fatal("the command did not stop once the shutdown delay ended")
	}
	addr := net.JoinHostPort(wo.LocalServingHost, strconv.Itoa(wo.LocalServingPort))
	if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		conn.Close()
		t.Fatalf("the webhook still listens on %s after the command stopped", addr)
	}
}
