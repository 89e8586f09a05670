package diagnose

import (
	"strings"
	"testing"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/xosim"
)

// TestCheckPreNodes: before the install, each Node is checked as the controller will see it,
// with the same resolution (inventory.Estate.Find on the estate of the config): a kubelet
// without --cloud-provider=external, a VM nobody reports, two VMs with the Node's name, a
// UEFI guest's byte-swapped system UUID (resolved), another provider's Node, an ignored one.
func TestCheckPreNodes(t *testing.T) {
	e := newEstate(t, testenv.XOOptions{})
	cfg := e.config(t, e.Token, "")
	named := e.vm(t, "pre-named")
	uefi := e.AddVM(t, xosim.VMSpec{PoolID: e.pool, HostID: e.host1, NameLabel: "pre-uefi-vm", CPUs: 2, Memory: xosim.GiB, Firmware: "uefi"})
	e.vm(t, "pre-twin")
	e.vm(t, "pre-twin")
	swapped, ok := e.Sim.GuestSystemUUID(uefi)
	if !ok || strings.EqualFold(swapped, uefi) {
		t.Fatalf("the simulator gives VM %s the system UUID %q, want its byte-swapped form", uefi, swapped)
	}

	addNode(t, testenv.KubeletNode("pre-named"))
	addNode(t, testenv.KubeletNode("pre-uefi", testenv.WithSystemUUID(swapped)))
	addNode(t, testenv.KubeletNode("pre-twin"))
	addNode(t, testenv.KubeletNode("pre-nobody", testenv.WithNodeIP("10.9.9.9")))
	addNode(t, testenv.KubeletNode("pre-no-flag", testenv.Initialized()))
	addNode(t, testenv.KubeletNode("pre-aws", testenv.Initialized(), testenv.WithProviderID("aws:///eu-west-1a/i-0123")))
	addNode(t, testenv.KubeletNode("pre-ignored", testenv.WithLabels(map[string]string{node.LabelIgnore: "true"})))

	r := run(t, nil, "check", "--pre", "--kubeconfig="+kubeconfig(t), "--config="+cfg, "--webhook-certificates-mode=selfManaged")
	if r.code != 1 {
		t.Errorf("exit status %d, want 1 (failures)", r.code)
	}
	r.line(t, "✔", "pre-named: resolves to VM "+named, "by its name")
	r.line(t, "✔", "pre-uefi: resolves to VM "+uefi, "byte-swapped (a UEFI guest")
	r.failure(t, "give the VMs distinct names in XO", "pre-twin: ambiguous", "several VMs have the node's name")
	r.failure(t, "--provider-id=xenorchestra://", "pre-nobody:", "no VM matches", "10.9.9.9")
	r.failure(t, "restart its kubelet with --cloud-provider=external, then delete the Node", "pre-no-flag: registered by a kubelet without --cloud-provider=external")
	r.line(t, "‼", "pre-aws: another provider's providerID")
	r.line(t, "·", "pre-ignored: ignored")
	r.line(t, "✔", "webhook certificates selfManaged: cert-manager is not needed")
	r.line(t, "✔", "reachable over plain HTTP, token accepted")
}

// TestCheckPreXO: each XO failure the controller would meet is found before the install, with
// its fix: the token refused, XO unreachable, its certificate untrusted, a pool disconnected.
// A healthy XO server passes, event stream included.
func TestCheckPreXO(t *testing.T) {
	kc := kubeconfig(t)
	noNodes := func(t *testing.T, args ...string) result {
		t.Helper()
		return run(t, nil, append([]string{"check", "--pre", "--kubeconfig=" + kc, "--webhook-certificates-mode=existingSecret"}, args...)...)
	}

	t.Run("Healthy", func(t *testing.T) {
		e := newEstate(t, testenv.XOOptions{TLS: true})
		e.vm(t, "xo-healthy")
		r := noNodes(t, "--config="+e.config(t, e.Token, ""))
		if r.code != 0 {
			t.Errorf("exit status %d, want 0", r.code)
		}
		r.line(t, "✔", "reachable over TLS verified with the config's CA bundle, token accepted, 1 VMs listed")
		r.line(t, "✔", "event stream subscribed")
		r.line(t, "✔", "1 pool connection(s) up")
	})
	t.Run("TokenRefused", func(t *testing.T) {
		e := newEstate(t, testenv.XOOptions{})
		const wrong = "wrongTokenWrongToken0123456789abcdefABCDEF"
		r := noNodes(t, "--config="+e.config(t, wrong, ""))
		if r.code != 1 {
			t.Errorf("exit status %d, want 1", r.code)
		}
		r.failure(t, "xo-cli create-token", "the token is refused (HTTP 401)")
		if strings.Contains(r.out, wrong) {
			t.Error("the output holds the token")
		}
	})
	t.Run("Unreachable", func(t *testing.T) {
		e := newEstate(t, testenv.XOOptions{})
		cfg := e.config(t, e.Token, "requestTimeout: 1s\n")
		e.Close()
		r := noNodes(t, "--config="+cfg)
		r.failure(t, "network path from the controller's Pods to XO", "unreachable", "connection refused")
	})
	t.Run("CertificateUntrusted", func(t *testing.T) {
		e := newEstate(t, testenv.XOOptions{TLS: true})
		ca := e.CA
		e.CA = nil // the config gets no caFile
		cfg := e.config(t, e.Token, "")
		e.CA = ca
		r := noNodes(t, "--config="+cfg)
		r.failure(t, "caFile or caBundle", "XO's TLS certificate is not trusted")
	})
	t.Run("PoolDisconnected", func(t *testing.T) {
		e := newEstate(t, testenv.XOOptions{})
		if err := e.Sim.DisconnectPool(e.pool); err != nil {
			t.Fatal(err)
		}
		r := noNodes(t, "--config="+e.config(t, e.Token, ""))
		r.failure(t, "reconnect the pool in XO", "the inventory is incomplete", "is down", "no Node of this XO server is deleted")
	})
}

// TestCheckPreCertManager: the chart's default certificate mode needs cert-manager, which the
// check finds missing (envtest serves no cert-manager API) and says what to do.
func TestCheckPreCertManager(t *testing.T) {
	r := run(t, nil, "check", "--pre", "--kubeconfig="+kubeconfig(t))
	r.failure(t, "webhook.certificates.mode=selfManaged", "cert-manager is not installed")
	r.line(t, "‼", "no XO config")
	if r.code != 1 {
		t.Errorf("exit status %d, want 1", r.code)
	}
}
