package app_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/cmd/app"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/xosim"
)

// TestNotReadyWhileTheFirstListingSettles: until the pools of its first XO listing are trusted
// (inventory.settleTime after it), a replica cannot match a Node by name or address, so it is
// not Ready, and its xo-inventory check says why; it is Ready once they are.
func TestNotReadyWhileTheFirstListingSettles(t *testing.T) {
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
