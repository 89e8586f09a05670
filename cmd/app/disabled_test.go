package app_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/cmd/app"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/xosim"
)

// TestDisabledServer: a clusters entry with enabled: false is neither connected nor waited
// for. Its XO holds a VM with the same name as the Node's: counted, it would make the name
// match ambiguous; switched off, the Node matches the other server's VM by name, the replica
// is Ready, and the switched-off XO receives no request.
func TestDisabledServer(t *testing.T) {
	t.Parallel()
	on := testenv.NewXO(t, testenv.XOOptions{Token: token})
	pool := on.AddPool(t, xosim.PoolSpec{NameLabel: "pool"})
	on.AddHost(t, xosim.HostSpec{PoolID: pool, NameLabel: "host"})
	vm := on.AddVM(t, xosim.VMSpec{PoolID: pool, NameLabel: "worker-1", CPUs: 2, Memory: xosim.GiB})
	off := testenv.NewXO(t, testenv.XOOptions{Token: token})
	offPool := off.AddPool(t, xosim.PoolSpec{NameLabel: "other"})
	off.AddHost(t, xosim.HostSpec{PoolID: offPool, NameLabel: "host"})
	off.AddVM(t, xosim.VMSpec{PoolID: offPool, NameLabel: "worker-1", CPUs: 2, Memory: xosim.GiB})
	env := testenv.StartTest(t, testenv.Options{})

	o := app.NewOptions()
	o.ConfigFile = filepath.Join(t.TempDir(), "config.yaml")
	config := fmt.Sprintf("inventory: {settleTime: 1s}\nclusters:\n- {url: %s, token: %s}\n- {url: %s, token: %s, enabled: false}\n", on.URL, token, off.URL, token)
	if err := os.WriteFile(o.ConfigFile, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	probe := testenv.FreeAddr(t)
	o.Webhook, o.Controllers, o.LeaderElect, o.MetricsBindAddress, o.HealthProbeBindAddress, o.ShutdownDelay = false, "cloud-node", false, "0", probe, 0
	runApp(t, o, env, "")
	waitReady(t, probe, "ready without the switched-off server")

	n := testenv.KubeletNode("worker-1")
	if err := env.Client.Create(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	want := node.FormatProviderID(pool, vm)
	testenv.WaitFor(t, 30*time.Second, "the Node matched by name on the enabled server", func() error {
		var got corev1.Node
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(n), &got); err != nil {
			return err
		}
		if got.Spec.ProviderID != want {
			return fmt.Errorf("providerID %q, want %q", got.Spec.ProviderID, want)
		}
		return nil
	})
	if got := off.Sim.RequestCounts(); len(got) > 0 {
		t.Errorf("the switched-off XO received requests: %v", got)
	}
}
