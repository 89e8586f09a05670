package e2e_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/xosim"
)

// distributionNode is a Node as one distribution's kubelet registers it, set up as
// docs/install.md says for that distribution, and the VM behind it.
type distributionNode struct {
	// name is the Node's name: what the distribution names it after.
	name string
	vm   xosim.VMSpec
	// nodeIP is the kubelet's --node-ip, as the distribution sets it ("" for none).
	nodeIP string
	// noSystemUUID: the guest has no SMBIOS (PV and PVH guests).
	noSystemUUID bool
	// labels and annotations are the distribution's own, which the controller leaves alone.
	labels, annotations map[string]string
}

// TestDistributions registers Nodes as the kubelets of the distributions docs/install.md
// covers do, with the settings it gives, against the binary with its webhook called by the API
// server: each is described in its CREATE (providerID, zone) by the identity the distribution
// gives it, and initialized, its addresses taken from the distribution's --node-ip.
//
// Then the case every distribution with a cloud controller of its own meets when it switches
// to this one: Nodes that k3s's or RKE2's built-in controller initialized carry its providerID
// (k3s://NAME, rke2://NAME), which the API server never lets change. The controller leaves them
// alone (another provider's), and once such a Node is deleted and its kubelet registers it
// again, as docs/install.md says to do, the new Node is described in its CREATE.
func TestDistributions(t *testing.T) {
	env := testenv.StartTest(t, testenv.Options{Webhook: true})
	c := env.Client
	ctx := context.Background()
	token := newToken(t)
	x := newXO(t, token, false)

	vm := func(name, ip, firmware string) xosim.VMSpec {
		return xosim.VMSpec{PoolID: x.poolA, HostID: x.hostA1, NameLabel: name, CPUs: 2, Memory: 2 * xosim.GiB, IPs: []string{ip}, Firmware: firmware}
	}
	cases := []distributionNode{
		// kubeadm: the Node is named after the host, which is often the VM's name too; a BIOS
		// guest reports the VM's uuid as its systemUUID.
		{name: "k8s-cp-1", vm: vm("k8s-cp-1", "10.0.1.10", "bios")},
		// kubeadm on a PVH guest: no SMBIOS, so no systemUUID; the unique VM name matches.
		{name: "k8s-pvh-1", vm: vm("k8s-pvh-1", "10.0.1.11", "bios"), noSystemUUID: true},
		// MicroK8s as Xen Orchestra's recipe deploys it: Nodes cp and worker-N on VMs named
		// "<cluster> - Control Plane" and "<cluster> - Worker N", a Debian cloud image booted
		// with UEFI (systemUUID byte-swapped), --node-ip set to the VM's static address.
		{name: "worker-1", vm: vm("k8s - Worker 1", "10.0.1.21", "uefi"), nodeIP: "10.0.1.21"},
		// Talos: a generated host name unrelated to the VM's; --node-ip from
		// machine.kubelet.nodeIP.validSubnets.
		{name: "talos-3ab-9fz", vm: vm("talos-worker-1", "10.0.1.31", "bios"), nodeIP: "10.0.1.31"},
		// RKE2 with cloud-provider-name: external: the host name; RKE2's node annotations.
		{name: "rke2-agent-1", vm: vm("rke2-agent-1", "10.0.1.41", "uefi"), nodeIP: "10.0.1.41",
			annotations: map[string]string{"rke2.io/node-args": `["agent","--cloud-provider-name","external"]`, "rke2.io/hostname": "rke2-agent-1"}},
		// k3s with --disable-cloud-controller: k3s sets --node-ip itself; its annotations.
		{name: "k3s-agent-1", vm: vm("k3s-agent-1", "10.0.1.51", "bios"), nodeIP: "10.0.1.51",
			annotations: map[string]string{"k3s.io/node-args": `["agent","--kubelet-arg","cloud-provider=external"]`, "k3s.io/internal-ip": "10.0.1.51"}},
	}
	vms := map[string]string{}
	for _, dc := range cases {
		vms[dc.name] = x.AddVM(t, dc.vm)
	}
	// Nodes that k3s's and RKE2's own cloud controller initialized before the switch: its
	// providerID, its instance-type, no uninitialized taint.
	switched := map[string]string{"k3s-old-1": "k3s", "rke2-old-1": "rke2"}
	for name, distro := range switched {
		vms[name] = x.AddVM(t, vm(name, "10.0.2."+fmt.Sprint(len(vms)), "bios"))
		n := testenv.KubeletNode(name, testenv.WithSystemUUID(x.systemUUID(t, vms[name])), testenv.WithProviderID(distro+"://"+name),
			testenv.WithLabels(map[string]string{node.LabelInstanceType: distro}), testenv.Initialized())
		if err := c.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	before := map[string]string{}
	for name := range switched {
		before[name] = env.Node(t, name).ResourceVersion
	}

	cfg := writeConfig(t, t.TempDir(), "config.yaml", fmt.Sprintf("url: %s\ntoken: %s\ninventory: {settleTime: 1s}\n", x.URL, token))
	wo := env.WebhookInstallOptions
	p := startCCM(t, "distributions", ccmArgs{kubeconfig: writeKubeconfig(t, env), config: cfg, webhookPort: wo.LocalServingPort, certDir: wo.LocalServingCertDir})
	p.waitReady(t, 30*time.Second)

	register := func(t *testing.T, dc distributionNode) {
		t.Helper()
		opts := []testenv.NodeOption{testenv.WithLabels(dc.labels), testenv.WithAnnotations(dc.annotations)}
		if dc.noSystemUUID {
			opts = append(opts, testenv.WithSystemUUID(""))
		} else {
			opts = append(opts, testenv.WithSystemUUID(x.systemUUID(t, vms[dc.name])))
		}
		if dc.nodeIP != "" {
			opts = append(opts, testenv.WithNodeIP(dc.nodeIP))
		}
		n := testenv.KubeletNode(dc.name, opts...)
		if err := c.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
		if want := node.FormatProviderID(x.poolA, vms[dc.name]); n.Spec.ProviderID != want || n.Labels[node.LabelZone] != x.hostA1 {
			t.Errorf("Node %s came back from CREATE with providerID %q and zone %q, want %q and %q", dc.name, n.Spec.ProviderID, n.Labels[node.LabelZone], want, x.hostA1)
		}
		testenv.WaitFor(t, 30*time.Second, dc.name+" initialized", func() error { return initialized(c, dc.name) })
		got := env.Node(t, dc.name)
		for k, v := range dc.annotations {
			if got.Annotations[k] != v {
				t.Errorf("Node %s: the distribution's annotation %s = %q, want %q", dc.name, k, got.Annotations[k], v)
			}
		}
		if dc.nodeIP != "" {
			var internal []string
			for _, a := range got.Status.Addresses {
				if a.Type == corev1.NodeInternalIP {
					internal = append(internal, a.Address)
				}
			}
			if !slices.Equal(internal, []string{dc.nodeIP}) {
				t.Errorf("Node %s: InternalIPs %v, want the kubelet's --node-ip %s", dc.name, internal, dc.nodeIP)
			}
		}
	}
	for _, dc := range cases {
		t.Run(dc.name, func(t *testing.T) { register(t, dc) })
	}

	// By now the controllers have listed every Node and initialized the others: the switched
	// Nodes were never written.
	for name, distro := range switched {
		n := env.Node(t, name)
		if n.ResourceVersion != before[name] || n.Spec.ProviderID != distro+"://"+name || n.Labels[node.LabelInstanceType] != distro {
			t.Errorf("Node %s, another provider's, was written: resourceVersion %s (was %s), providerID %q, labels %v", name, n.ResourceVersion, before[name], n.Spec.ProviderID, n.Labels)
		}
		if keys := slices.Collect(maps.Keys(n.Labels)); slices.ContainsFunc(keys, func(k string) bool { return k == node.LabelZone || k == node.LabelRegion }) {
			t.Errorf("Node %s, another provider's, got topology labels: %v", name, n.Labels)
		}
	}
	// docs/install.md: delete the Node; its kubelet, restarted with --cloud-provider=external,
	// registers it again, without a providerID: described in its CREATE.
	for name := range switched {
		if err := c.Delete(ctx, env.Node(t, name)); err != nil {
			t.Fatal(err)
		}
		testenv.WaitFor(t, 10*time.Second, name+" deleted", func() error {
			if env.NodeExists(t, name) {
				return errNotYet
			}
			return nil
		})
		t.Run("reregistered/"+name, func(t *testing.T) {
			register(t, distributionNode{name: name, annotations: map[string]string{}})
		})
	}
}
