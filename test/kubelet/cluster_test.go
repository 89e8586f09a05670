package kubelet_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
)

// A real single-node cluster on this host, for the chart's own Pods: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and the kubelet from hack/testbin.sh, Debian's
// containerd and runc, and the bridge and host-local CNI plugins. Every image is built here
// (make release, test/image) and pulled by containerd from a registry on 127.0.0.1
// (registry_test.go).
//
// The network is the test's own: the node's address is a /32 on lo (addLoopbackIP), where the
// API server and the XO simulator listen; Pods live on the bridge xoccm0 (podSubnet), and reach
// the node's address through the bridge's gateway. There is no kube-proxy: one DNAT rule, in a
// chain of the test's own, takes the kubernetes Service's address (what in-cluster clients
// dial) to the API server; webhook calls reach a Pod through --enable-aggregator-routing.
//
// Settings that exist only for this kind of machine (../shared/reference/real-pods.md): cgroup
// v1 (failCgroupV1: false, cgroupfs), containerd's restrict_oom_score_adj (root lacks
// CAP_SYS_RESOURCE here), no QoS cgroups.

const (
	podSubnet   = "10.254.0.0/24"
	serviceCIDR = "10.96.0.0/24"
	// serviceIP is the kubernetes Service's address: the first of serviceCIDR.
	serviceIP  = "10.96.0.1"
	bridgeName = "xoccm0"
	// natChain holds the test's DNAT rule; it is jumped to from PREROUTING.
	natChain    = "XOCCM-TEST-SVC"
	clusterNode = "xo-real-node-1"
)

// realCluster is a running single-node cluster.
type realCluster struct {
	// t is the test that started the cluster: it owns the cluster's processes, also those
	// started again from a subtest.
	t                   *testing.T
	dir, assets, nodeIP string
	ca                  *testenv.CA
	// kubeconfig is the admin's (system:masters), for helm and the test's clients.
	kubeconfig string
	cfg        *rest.Config
	cs         *kubernetes.Clientset
	// ctrSock is containerd's socket.
	ctrSock string
	// registry is the OCI registry's address (host:port); pause the sandbox image in it, by
	// digest; release this checkout's release, published to it.
	registry, pause string
	release         published
	kubelet         *process
	// kubeletArgs start the kubelet again (restartKubelet).
	kubeletArgs []string
}

// requireRealNode skips the test where it cannot run (not root, a binary missing), except
// where REQUIRE_KUBELET_TEST=1 (CI), which turns the skip into a failure, and fails it when a
// kubelet already runs on this host. It returns the folder of hack/testbin.sh's binaries; bins
// are looked for there, then on PATH (absolute paths as they are).
func requireRealNode(t *testing.T, bins ...string) string {
	t.Helper()
	skip := t.Skip
	if os.Getenv("REQUIRE_KUBELET_TEST") == "1" {
		skip = t.Fatal
	}
	if os.Geteuid() != 0 {
		skip("skipped: needs root (the kubelet and containerd set sysctls, mount, need an address on lo and create network namespaces); CI runs it as root")
	}
	assets, err := testenv.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bins {
		p := b
		if !filepath.IsAbs(b) {
			p = filepath.Join(assets, b)
			if _, err := os.Stat(p); err != nil {
				if lp, lerr := exec.LookPath(b); lerr == nil {
					p = lp
				}
			}
		}
		if _, err := os.Stat(p); err != nil {
			skip(fmt.Sprintf("skipped: %s missing (hack/testbin.sh builds the Kubernetes binaries; hack/realnode.sh installs containerd, runc and the CNI plugins): %v", b, err))
		}
	}
	if c, err := net.Dial("unix", deviceManagerSocket); err == nil {
		c.Close()
		t.Fatalf("a kubelet already serves %s on this host: this test would take its device-plugin socket", deviceManagerSocket)
	}
	return assets
}

// startRealCluster starts the cluster and registers its teardown, which puts the host back
// as it was: processes, containers, mounts, network namespaces, cgroups, the bridge, the
// iptables chain, sysctls and the folders the daemons create.
func startRealCluster(t *testing.T) *realCluster {
	t.Helper()
	assets := requireRealNode(t, "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "helm", "kubectl", "registry", "crane", "cyclonedx-gomod",
		"containerd", "containerd-shim-runc-v2", "runc", "ctr", "iptables", "/usr/lib/cni/bridge", "/usr/lib/cni/host-local", "/usr/lib/cni/loopback")
	reclaimLeftovers(t)
	// A short path: unix socket paths are limited to 107 bytes.
	dir, err := os.MkdirTemp("", "xoccm-node-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("remove %s: %v", dir, err)
		}
	})
	start := time.Now()
	c := &realCluster{t: t, dir: dir, assets: assets}
	c.nodeIP = addLoopbackIP(t)

	// Host state, restored last (cleanups run last registered first).
	saveSysctls(t, "net/ipv4/ip_forward")
	removeCreatedHostPaths(t, hostPath{"/run/netns", false}, hostPath{"/run/containerd", true})
	unmountUnder(t, dir)
	removeNewNetns(t)
	removeNewCgroups(t)
	removeNewChains(t)
	t.Cleanup(func() { deleteLink(t, bridgeName) })

	c.writePKI(t)
	etcdURL := c.startEtcd(t)
	apiPort := testenv.FreePort(t)
	addDNAT(t, serviceIP, 443, c.nodeIP, apiPort)
	c.startAPIServer(t, etcdURL, apiPort)
	c.startControllers(t)
	c.startRegistry(t)
	c.pause = c.publishPause(t)
	c.release = c.publish(t, releaseVersion, c.buildRelease(t, releaseVersion, testenv.RepoRoot()))
	c.startContainerd(t)
	c.startKubelet(t)
	t.Logf("cluster up (control plane, registry, release built and published, containerd, the kubelet's Node Ready) in %s", time.Since(start).Round(time.Millisecond))
	return c
}

// path returns a path under the cluster's folder.
func (c *realCluster) path(elem ...string) string {
	return filepath.Join(append([]string{c.dir}, elem...)...)
}

// writePKI writes the cluster's CA, the API server's serving certificate, the clients'
// certificates and kubeconfigs, and the service-account signing key.
func (c *realCluster) writePKI(t *testing.T) {
	t.Helper()
	c.ca = testenv.NewCA(t, "xoccm-test-cluster-ca")
	pki := c.path("pki")
	if err := os.MkdirAll(pki, 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join(pki, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("ca.crt", c.ca.PEM)
	crt, key := c.ca.Issue(t, 2, serviceIP, c.nodeIP, "127.0.0.1", "localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local")
	write("apiserver.crt", crt)
	write("apiserver.key", key)
	crt, key = c.ca.IssueClient(t, 3, "kube-apiserver-kubelet-client", "system:masters")
	write("apiserver-kubelet-client.crt", crt)
	write("apiserver-kubelet-client.key", key)
	sa, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(sa)
	if err != nil {
		t.Fatal(err)
	}
	write("sa.key", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}))
	users := []struct {
		file, cn string
		orgs     []string
	}{
		{"admin", "kubernetes-admin", []string{"system:masters"}},
		{"controller-manager", "system:kube-controller-manager", nil},
		{"scheduler", "system:kube-scheduler", nil},
		{"kubelet", "system:node:" + clusterNode, []string{"system:nodes"}},
	}
	for i, u := range users {
		crt, key := c.ca.IssueClient(t, int64(10+i), u.cn, u.orgs...)
		c.writeKubeconfig(t, filepath.Join(pki, u.file+".kubeconfig"), crt, key)
	}
	c.kubeconfig = filepath.Join(pki, "admin.kubeconfig")
}

// apiURL is the API server's address as every client here dials it.
func (c *realCluster) apiURL(port int) string {
	return "https://" + net.JoinHostPort(c.nodeIP, fmt.Sprint(port))
}

// writeKubeconfig writes a kubeconfig for the API server (its URL is filled in once the port
// is known: the placeholder APISERVER) with a client certificate.
func (c *realCluster) writeKubeconfig(t *testing.T, path string, crt, key []byte) {
	t.Helper()
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: APISERVER
    certificate-authority-data: %s
users:
- name: user
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: test
  context: {cluster: test, user: user}
current-context: test
`, b64(c.ca.PEM), b64(crt), b64(key))
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
}

// setServer puts the API server's URL into every kubeconfig.
func (c *realCluster) setServer(t *testing.T, url string) {
	t.Helper()
	files, _ := filepath.Glob(c.path("pki", "*.kubeconfig"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, bytes.ReplaceAll(b, []byte("APISERVER"), []byte(url)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func (c *realCluster) startEtcd(t *testing.T) string {
	t.Helper()
	client, peer := "http://"+testenv.FreeAddr(t), "http://"+testenv.FreeAddr(t)
	p := startProcess(t, "etcd", filepath.Join(c.assets, "etcd"), c.path("etcd.log"),
		"--data-dir="+c.path("etcd"), "--name=default",
		"--listen-client-urls="+client, "--advertise-client-urls="+client,
		"--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer, "--initial-cluster=default="+peer,
		"--unsafe-no-fsync=true")
	waitHTTP(t, p, client+"/health", nil)
	return client
}

func (c *realCluster) startAPIServer(t *testing.T, etcdURL string, port int) {
	t.Helper()
	pki := c.path("pki")
	p := startProcess(t, "kube-apiserver", filepath.Join(c.assets, "kube-apiserver"), c.path("kube-apiserver.log"),
		"--etcd-servers="+etcdURL,
		"--bind-address="+c.nodeIP, fmt.Sprintf("--secure-port=%d", port), "--advertise-address="+c.nodeIP,
		"--cert-dir="+pki,
		"--tls-cert-file="+filepath.Join(pki, "apiserver.crt"), "--tls-private-key-file="+filepath.Join(pki, "apiserver.key"),
		"--client-ca-file="+filepath.Join(pki, "ca.crt"),
		"--service-cluster-ip-range="+serviceCIDR,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+filepath.Join(pki, "sa.key"),
		"--service-account-signing-key-file="+filepath.Join(pki, "sa.key"),
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--kubelet-client-certificate="+filepath.Join(pki, "apiserver-kubelet-client.crt"),
		"--kubelet-client-key="+filepath.Join(pki, "apiserver-kubelet-client.key"),
		"--kubelet-preferred-address-types=InternalIP",
		// Webhook calls go to a Pod of the Service's endpoints: there is no kube-proxy.
		"--enable-aggregator-routing=true",
		"--allow-privileged=true",
	)
	url := c.apiURL(port)
	c.setServer(t, url)
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	c.cfg = cfg
	if c.cs, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, 60*time.Second, "the API server ready", func(ctx context.Context) (bool, error) {
		b, err := c.cs.RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(b) == "ok", nil
	})
}

// startControllers starts kube-controller-manager (the not-ready taint, the kube-root-ca.crt
// ConfigMaps, Deployments and ReplicaSets, EndpointSlices, garbage collection) and
// kube-scheduler (Pods without a nodeName).
func (c *realCluster) startControllers(t *testing.T) {
	t.Helper()
	pki := c.path("pki")
	startProcess(t, "kube-controller-manager", filepath.Join(c.assets, "kube-controller-manager"), c.path("kube-controller-manager.log"),
		"--kubeconfig="+filepath.Join(pki, "controller-manager.kubeconfig"),
		"--authentication-kubeconfig="+filepath.Join(pki, "controller-manager.kubeconfig"),
		"--authorization-kubeconfig="+filepath.Join(pki, "controller-manager.kubeconfig"),
		"--root-ca-file="+filepath.Join(pki, "ca.crt"),
		"--service-account-private-key-file="+filepath.Join(pki, "sa.key"),
		"--use-service-account-credentials=true",
		"--leader-elect=false",
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", testenv.FreePort(t)),
		"--cert-dir="+c.path("kcm-certs"),
	)
	startProcess(t, "kube-scheduler", filepath.Join(c.assets, "kube-scheduler"), c.path("kube-scheduler.log"),
		"--kubeconfig="+filepath.Join(pki, "scheduler.kubeconfig"),
		"--authentication-kubeconfig="+filepath.Join(pki, "scheduler.kubeconfig"),
		"--authorization-kubeconfig="+filepath.Join(pki, "scheduler.kubeconfig"),
		"--leader-elect=false",
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", testenv.FreePort(t)),
		"--cert-dir="+c.path("scheduler-certs"),
	)
}

// containerdConfig keeps every folder and socket of containerd in the cluster's folder
// (but the shims' sockets, which containerd 1.6 puts under /run/containerd/s).
const containerdConfig = `version = 2
root = "%[1]s/containerd/root"
state = "%[1]s/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "%[2]s"
[ttrpc]
  address = "%[2]s.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "%[1]s/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "%[3]s"
  # Root lacks CAP_SYS_RESOURCE here: the kubelet's negative OOM scores are clamped.
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "%[1]s/cni/net.d"
`

// cniConfig is the Pod network: a bridge with the gateway's address on the host side, and
// host-local addresses whose state is kept in the cluster's folder. No masquerading: Pods
// only reach the node's own addresses.
const cniConfig = `{
  "cniVersion": "1.0.0",
  "name": "xoccm-test",
  "plugins": [{
    "type": "bridge",
    "bridge": "%s",
    "isGateway": true,
    "ipMasq": false,
    "hairpinMode": true,
    "ipam": {
      "type": "host-local",
      "ranges": [[{"subnet": "%s"}]],
      "routes": [{"dst": "0.0.0.0/0"}],
      "dataDir": "%s"
    }
  }]
}
`

func (c *realCluster) startContainerd(t *testing.T) {
	t.Helper()
	c.ctrSock = c.path("containerd.sock")
	for _, d := range []string{"containerd", "cni/net.d"} {
		if err := os.MkdirAll(c.path(d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		"containerd/config.toml":           fmt.Sprintf(containerdConfig, c.dir, c.ctrSock, c.pause),
		"cni/net.d/10-xoccm-test.conflist": fmt.Sprintf(cniConfig, bridgeName, podSubnet, c.path("cni", "ipam")),
	}
	for name, s := range files {
		if err := os.WriteFile(c.path(name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := startProcess(t, "containerd", "containerd", c.path("containerd.log"), "--config="+c.path("containerd", "config.toml"))
	// Before containerd is killed (cleanups run last registered first): its containers and
	// their shims, which live in process groups of their own.
	t.Cleanup(func() { c.killContainers(t) })
	waitFor(t, p, 30*time.Second, "containerd serving", func(context.Context) (bool, error) {
		_, err := c.ctr("version")
		return err == nil, nil
	})
}

// ctr runs containerd's client on the cluster's containerd, in the CRI's namespace.
func (c *realCluster) ctr(args ...string) (string, error) {
	out, err := exec.Command("ctr", append([]string{"--address", c.ctrSock, "--namespace", "k8s.io"}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// killContainers kills, before containerd, its containers and shims (and whatever else of the
// cluster still runs), so that mounts and cgroups can be removed.
func (c *realCluster) killContainers(t *testing.T) {
	if left := killProcessesOf(c.dir); len(left) > 0 {
		t.Errorf("processes of %s still running 10 s after SIGKILL: %v", c.dir, left)
	}
}

// killProcessesOf kills every process that belongs to a cluster folder and waits up to 10 s
// for them to go; it returns those still there. A process belongs to it when its command line
// names the folder (containerd, its shims, the control plane, the kubelet) or, in a mount
// namespace other than this process's, when its mounts do (a container: its root is an overlay
// of containerd's snapshots in the folder).
func killProcessesOf(dir string) []int {
	self, _ := os.Readlink("/proc/self/ns/mnt")
	find := func() []int {
		var pids []int
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			var pid int
			if _, err := fmt.Sscan(e.Name(), &pid); err != nil || pid == os.Getpid() {
				continue
			}
			proc := filepath.Join("/proc", e.Name())
			if b, err := os.ReadFile(filepath.Join(proc, "cmdline")); err == nil && bytes.Contains(b, []byte(dir)) {
				pids = append(pids, pid)
				continue
			}
			if ns, err := os.Readlink(filepath.Join(proc, "ns", "mnt")); err != nil || ns == self {
				continue
			}
			if b, err := os.ReadFile(filepath.Join(proc, "mountinfo")); err == nil && bytes.Contains(b, []byte(dir)) {
				pids = append(pids, pid)
			}
		}
		return pids
	}
	for _, pid := range find() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := find()
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// reclaimLeftovers removes what a test run killed before its teardown (a timeout, a crash)
// left on the host, as far as it is unmistakably this test's: the processes and mounts of its
// folders, the folders, its iptables chain and its bridge.
func reclaimLeftovers(t *testing.T) {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "xoccm-node-*"))
	for _, dir := range dirs {
		if left := killProcessesOf(dir); len(left) > 0 {
			t.Fatalf("processes of %s, left by an earlier run, survive SIGKILL: %v", dir, left)
		}
		mounts, err := mountsUnder(dir)
		if err != nil {
			t.Fatal(err)
		}
		for i := len(mounts) - 1; i >= 0; i-- {
			_ = syscall.Unmount(mounts[i], syscall.MNT_DETACH)
		}
		// The containers' cgroups, named after their ids (runc's under k8s.io).
		ids := dirNames(filepath.Join(dir, "containerd", "state", "io.containerd.runtime.v2.task", "k8s.io"))
		for _, id := range ids {
			cgs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", "k8s.io", id))
			for _, cg := range cgs {
				_ = syscall.Rmdir(cg)
			}
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Fatalf("remove %s, left by an earlier run: %v", dir, err)
		}
		t.Logf("removed %s, left by an earlier run, its processes and %d mounts", dir, len(mounts))
	}
	if exec.Command("iptables", "-w", "-t", "nat", "-n", "-L", natChain).Run() == nil {
		for _, args := range [][]string{{"-D", "PREROUTING", "-j", natChain}, {"-F", natChain}, {"-X", natChain}} {
			_ = exec.Command("iptables", append([]string{"-w", "-t", "nat"}, args...)...).Run()
		}
		t.Logf("removed the iptables chain %s, left by an earlier run", natChain)
	}
	// The Pods' network namespaces: containerd's, holding an address of podSubnet.
	_, pods, _ := net.ParseCIDR(podSubnet)
	for _, n := range dirNames("/run/netns") {
		out, err := exec.Command("ip", "-n", n, "-4", "-o", "addr").Output()
		if err != nil || !slices.ContainsFunc(strings.Fields(string(out)), func(f string) bool {
			ip, _, err := net.ParseCIDR(f)
			return err == nil && pods.Contains(ip)
		}) {
			continue
		}
		p := filepath.Join("/run/netns", n)
		_ = syscall.Unmount(p, syscall.MNT_DETACH)
		if err := os.Remove(p); err != nil {
			t.Fatalf("remove %s, left by an earlier run: %v", p, err)
		}
		t.Logf("removed the network namespace %s, left by an earlier run", n)
	}
	deleteLink(t, bridgeName)
}

func (c *realCluster) startKubelet(t *testing.T) {
	t.Helper()
	cfg := fmt.Sprintf(kubeletConfig, c.nodeIP, testenv.FreePort(t), c.path("pki", "ca.crt"), "unix://"+c.ctrSock, c.path("pod-logs"))
	if err := os.WriteFile(c.path("kubelet.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	root := c.path("kubelet")
	c.kubeletArgs = []string{
		"--config=" + c.path("kubelet.yaml"),
		"--kubeconfig=" + c.path("pki", "kubelet.kubeconfig"),
		"--root-dir=" + root,
		"--cert-dir=" + c.path("kubelet-pki"),
		"--cloud-provider=external",
		"--hostname-override=" + clusterNode,
		"--node-ip=" + c.nodeIP,
		"--v=1",
	}
	// Before the kubelet is killed, nothing; after it (cleanups run last registered first), the
	// containers.
	c.kubelet = startProcess(t, "kubelet", filepath.Join(c.assets, "kubelet"), c.path("kubelet.log"), c.kubeletArgs...)
	waitFor(t, c.kubelet, 90*time.Second, "the Node Ready", func(ctx context.Context) (bool, error) {
		n, err := c.cs.CoreV1().Nodes().Get(ctx, clusterNode, metav1.GetOptions{})
		return err == nil && nodeReady(n), nil
	})
}

// restartKubelet stops the kubelet, lets del run while it is down, and starts it again.
func (c *realCluster) restartKubelet(t *testing.T, del func()) {
	t.Helper()
	c.kubelet.kill(t)
	del()
	c.kubelet = startProcess(c.t, "kubelet", filepath.Join(c.assets, "kubelet"), c.path("kubelet-2.log"), c.kubeletArgs...)
}

func nodeReady(n *corev1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitHTTP waits for url to answer 200 while p runs.
func waitHTTP(t *testing.T, p *process, url string, client *http.Client) {
	t.Helper()
	if client == nil {
		client = &http.Client{Timeout: 2 * time.Second}
	}
	waitFor(t, p, 30*time.Second, url, func(context.Context) (bool, error) {
		resp, err := client.Get(url)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

// waitFor polls cond every 100 ms for up to timeout, failing the test when p (if any) exits
// first or the time is up.
func waitFor(t *testing.T, p *process, timeout time.Duration, what string, cond func(context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if p != nil && !p.running() {
			return false, fmt.Errorf("%s exited: %v", p.name, p.err)
		}
		return cond(ctx)
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// addDNAT sends TCP to ip:port arriving from the Pods to toIP:toPort, in a chain of the test's
// own, removed in t.Cleanup.
func addDNAT(t *testing.T, ip string, port int, toIP string, toPort int) {
	t.Helper()
	ipt := func(args ...string) error {
		out, err := exec.Command("iptables", append([]string{"-w", "-t", "nat"}, args...)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("iptables %s: %w: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := ipt("-N", natChain); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, args := range [][]string{{"-D", "PREROUTING", "-j", natChain}, {"-F", natChain}, {"-X", natChain}} {
			if err := ipt(args...); err != nil && args[0] != "-D" {
				t.Error(err)
			}
		}
	})
	if err := ipt("-A", natChain, "-d", ip+"/32", "-p", "tcp", "--dport", fmt.Sprint(port), "-j", "DNAT", "--to-destination", net.JoinHostPort(toIP, fmt.Sprint(toPort))); err != nil {
		t.Fatal(err)
	}
	if err := ipt("-I", "PREROUTING", "-j", natChain); err != nil {
		t.Fatal(err)
	}
}

// deleteLink deletes a network link when it exists.
func deleteLink(t *testing.T, name string) {
	if _, err := net.InterfaceByName(name); err != nil {
		return
	}
	if out, err := exec.Command("ip", "link", "del", name).CombinedOutput(); err != nil {
		t.Errorf("ip link del %s: %v: %s", name, err, out)
	}
}

// removeNewNetns unmounts and removes, in t.Cleanup, the network namespaces under /run/netns
// that were not there before (containerd's Pod sandboxes; their veth ends go with them).
func removeNewNetns(t *testing.T) {
	t.Helper()
	before := dirNames("/run/netns")
	t.Cleanup(func() {
		for _, n := range dirNames("/run/netns") {
			if slices.Contains(before, n) {
				continue
			}
			p := filepath.Join("/run/netns", n)
			if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && err != syscall.EINVAL {
				t.Errorf("unmount %s: %v", p, err)
			}
			if err := os.Remove(p); err != nil {
				t.Errorf("remove %s: %v", p, err)
			}
		}
	})
}

// removeNewCgroups removes, in t.Cleanup, the cgroups created during the test (runc's, for
// the containers), deepest first. Their processes must be gone by then.
func removeNewCgroups(t *testing.T) {
	t.Helper()
	before := map[string]bool{}
	for _, d := range cgroupDirs() {
		before[d] = true
	}
	t.Cleanup(func() {
		dirs := cgroupDirs()
		for i := len(dirs) - 1; i >= 0; i-- {
			if before[dirs[i]] {
				continue
			}
			if err := syscall.Rmdir(dirs[i]); err != nil && !os.IsNotExist(err) {
				t.Errorf("remove cgroup %s: %v", dirs[i], err)
			}
		}
	})
}

// cgroupDirs lists every cgroup of every hierarchy, parents before their children.
func cgroupDirs() []string {
	var dirs []string
	_ = filepath.WalkDir("/sys/fs/cgroup", func(path string, e os.DirEntry, err error) error {
		if err == nil && e.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	return dirs
}

// dirNames lists the names in a folder (nil when it does not exist).
func dirNames(dir string) []string {
	ents, _ := os.ReadDir(dir)
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// b64 is the standard base64 of b, as kubeconfigs and caBundles take it.
func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
