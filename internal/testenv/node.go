package testenv

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Keys a kubelet started with --cloud-provider=external puts on its Node.
const (
	// TaintUninitialized is the taint the kubelet registers its Node with.
	TaintUninitialized = "node.cloudprovider.kubernetes.io/uninitialized"
	// AnnotationProvidedNodeIP carries the kubelet's --node-ip.
	AnnotationProvidedNodeIP = "alpha.kubernetes.io/provided-node-ip"
)

// NodeOption changes a Node built by KubeletNode.
type NodeOption func(*corev1.Node)

// KubeletNode returns a Node as a kubelet running with --cloud-provider=external registers it:
// labels kubernetes.io/hostname, kubernetes.io/os and kubernetes.io/arch (and their beta
// twins), the taint node.cloudprovider.kubernetes.io/uninitialized=true:NoSchedule, node info,
// capacity and a Ready condition. It has no addresses unless WithNodeIP gives the kubelet a
// --node-ip (the kubelet then also sets the alpha.kubernetes.io/provided-node-ip annotation);
// without one, the kubelet leaves the addresses to the cloud provider.
func KubeletNode(name string, opts ...NodeOption) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				corev1.LabelHostname:      name,
				corev1.LabelOSStable:      "linux",
				corev1.LabelArchStable:    "amd64",
				"beta.kubernetes.io/os":   "linux",
				"beta.kubernetes.io/arch": "amd64",
			},
			Annotations: map[string]string{
				"volumes.kubernetes.io/controller-managed-attach-detach": "true",
			},
		},
		Spec: corev1.NodeSpec{
			Taints: []corev1.Taint{{Key: TaintUninitialized, Value: "true", Effect: corev1.TaintEffectNoSchedule}},
		},
		Status: corev1.NodeStatus{
			Capacity: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("2"),
				corev1.ResourceMemory: resource.MustParse("2Gi"),
				corev1.ResourcePods:   resource.MustParse("110"),
			},
			Allocatable: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("2"),
				corev1.ResourceMemory: resource.MustParse("1900Mi"),
				corev1.ResourcePods:   resource.MustParse("110"),
			},
			NodeInfo: corev1.NodeSystemInfo{
				MachineID:               "0123456789abcdef0123456789abcdef",
				KernelVersion:           "6.12.0",
				OSImage:                 "Debian GNU/Linux 13 (trixie)",
				ContainerRuntimeVersion: "containerd://2.1.0",
				KubeletVersion:          "v1.37.2",
				OperatingSystem:         "linux",
				Architecture:            "amd64",
			},
		},
	}
	WithReady(true)(n)
	for _, o := range opts {
		o(n)
	}
	return n
}

// WithSystemUUID sets status.nodeInfo.systemUUID, the DMI system uuid the guest reports.
func WithSystemUUID(uuid string) NodeOption {
	return func(n *corev1.Node) { n.Status.NodeInfo.SystemUUID = uuid }
}

// WithNodeIP is the kubelet's --node-ip: the alpha.kubernetes.io/provided-node-ip annotation
// and the InternalIP addresses plus the Hostname address.
func WithNodeIP(ips ...string) NodeOption {
	return func(n *corev1.Node) {
		if len(ips) == 0 {
			return
		}
		n.Annotations[AnnotationProvidedNodeIP] = strings.Join(ips, ",")
		n.Status.Addresses = n.Status.Addresses[:0]
		for _, ip := range ips {
			n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
		}
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: n.Name})
	}
}

// WithAddresses replaces status.addresses.
func WithAddresses(addrs ...corev1.NodeAddress) NodeOption {
	return func(n *corev1.Node) { n.Status.Addresses = append([]corev1.NodeAddress(nil), addrs...) }
}

// WithProviderID is the kubelet's --provider-id.
func WithProviderID(id string) NodeOption {
	return func(n *corev1.Node) { n.Spec.ProviderID = id }
}

// WithLabels adds labels (the kubelet's --node-labels, or labels someone set).
func WithLabels(labels map[string]string) NodeOption {
	return func(n *corev1.Node) {
		for k, v := range labels {
			n.Labels[k] = v
		}
	}
}

// WithAnnotations adds annotations.
func WithAnnotations(annotations map[string]string) NodeOption {
	return func(n *corev1.Node) {
		for k, v := range annotations {
			n.Annotations[k] = v
		}
	}
}

// WithTaints appends taints.
func WithTaints(taints ...corev1.Taint) NodeOption {
	return func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, taints...) }
}

// Initialized removes the uninitialized taint: a Node a cloud controller already initialized
// (or a kubelet without --cloud-provider=external).
func Initialized() NodeOption {
	return func(n *corev1.Node) {
		out := n.Spec.Taints[:0]
		for _, t := range n.Spec.Taints {
			if t.Key != TaintUninitialized {
				out = append(out, t)
			}
		}
		n.Spec.Taints = out
	}
}

// WithReady sets the Ready condition to True or False (reason KubeletNotReady).
func WithReady(ready bool) NodeOption {
	return func(n *corev1.Node) {
		c := corev1.NodeCondition{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			Message:            "kubelet is posting ready status",
			LastHeartbeatTime:  metav1.Now(),
			LastTransitionTime: metav1.Now(),
		}
		if !ready {
			c.Status, c.Reason, c.Message = corev1.ConditionFalse, "KubeletNotReady", "container runtime network not ready"
		}
		for i := range n.Status.Conditions {
			if n.Status.Conditions[i].Type == corev1.NodeReady {
				n.Status.Conditions[i] = c
				return
			}
		}
		n.Status.Conditions = append(n.Status.Conditions, c)
	}
}

// CreateNode creates n the way a kubelet registers it, status included (the API server keeps
// a Node's status on create, as checked against kube-apiserver v1.37).
// n is updated with the stored object.
func CreateNode(ctx context.Context, c client.Client, n *corev1.Node) error {
	if err := c.Create(ctx, n); err != nil {
		return fmt.Errorf("create node %s: %w", n.Name, err)
	}
	return nil
}

// GetNode reads the Node named name.
func GetNode(ctx context.Context, c client.Client, name string) (*corev1.Node, error) {
	var n corev1.Node
	if err := c.Get(ctx, types.NamespacedName{Name: name}, &n); err != nil {
		return nil, fmt.Errorf("get node %s: %w", name, err)
	}
	return &n, nil
}

// SetReady plays the kubelet reporting the Node's Ready condition, through the status
// subresource.
func SetReady(ctx context.Context, c client.Client, name string, ready bool) error {
	n, err := GetNode(ctx, c, name)
	if err != nil {
		return err
	}
	before := n.DeepCopy()
	WithReady(ready)(n)
	if err := c.Status().Patch(ctx, n, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("set node %s ready=%v: %w", name, ready, err)
	}
	return nil
}

// AddNode creates n as CreateNode does and deletes it when the test ends.
func (e *Env) AddNode(t testing.TB, n *corev1.Node) {
	t.Helper()
	if err := CreateNode(context.Background(), e.Client, n); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.Client.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name}})
	})
}

// Node reads the Node named name; it fails the test when the Node is missing.
func (e *Env) Node(t testing.TB, name string) *corev1.Node {
	t.Helper()
	n, err := GetNode(context.Background(), e.Client, name)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// NodeExists reports whether the Node named name is there.
func (e *Env) NodeExists(t testing.TB, name string) bool {
	t.Helper()
	_, err := GetNode(context.Background(), e.Client, name)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

// UpstreamVM is what the upstream XO CCM v1.1.0 knew of a Node's VM when it initialized the
// Node: names as its sanitizeToLabel left them, and its instance type (CPUs.max and
// memory.size rounded to a whole GiB).
type UpstreamVM struct {
	PoolID, PoolName, HostID, HostName, VMID, VMName string
	InstanceType                                     string
	// MainIP is the VM's mainIpAddress, which upstream publishes as ExternalIP.
	MainIP string
	// NodeIP is the kubelet's --node-ip, upstream's only source of InternalIP; empty: none.
	NodeIP string
}

// UpstreamInitialized shapes a kubelet's Node as the upstream XO CCM v1.1.0 leaves it once it
// initialized it (docs/migration.md; anchors.md, "Measured: the upstream XO CCM v1.1.0"): no
// uninitialized taint; providerID xenorchestra://<pool>/<vm>; the GA and beta region, zone and
// instance-type labels and its XO labels; the TTL controller's annotation; and the addresses
// of k8s.io/cloud-provider's node controller, which orders upstream's [InternalIP <node-ip>,
// ExternalIP <mainIpAddress>, Hostname] by GetNodeAddressesFromNodeIP: every address equal to
// the node IP first, then those of the other types. With --node-ip equal to mainIpAddress
// (upstream's usual shape) that is InternalIP and ExternalIP of the same address, then
// Hostname; without --node-ip, ExternalIP and Hostname only.
func UpstreamInitialized(u UpstreamVM) NodeOption {
	return func(n *corev1.Node) {
		Initialized()(n)
		n.Spec.ProviderID = "xenorchestra://" + u.PoolID + "/" + u.VMID
		if n.Status.NodeInfo.SystemUUID == "" {
			n.Status.NodeInfo.SystemUUID = u.VMID
		}
		WithLabels(map[string]string{
			corev1.LabelTopologyRegion: u.PoolID, corev1.LabelFailureDomainBetaRegion: u.PoolID,
			corev1.LabelTopologyZone: u.HostID, corev1.LabelFailureDomainBetaZone: u.HostID,
			corev1.LabelInstanceTypeStable: u.InstanceType, corev1.LabelInstanceType: u.InstanceType,
			"topology.k8s.xenorchestra/pool_id": u.PoolID, "topology.k8s.xenorchestra/pool_name_label": u.PoolName,
			"topology.k8s.xenorchestra/host_id": u.HostID, "topology.k8s.xenorchestra/host_name_label": u.HostName,
			"vm.k8s.xenorchestra/name_label": u.VMName,
		})(n)
		WithAnnotations(map[string]string{"node.alpha.kubernetes.io/ttl": "0"})(n)
		cloud := []corev1.NodeAddress{}
		if u.NodeIP != "" {
			n.Annotations[AnnotationProvidedNodeIP] = u.NodeIP
			cloud = append(cloud, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: u.NodeIP})
		}
		if u.MainIP != "" {
			cloud = append(cloud, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: u.MainIP})
		}
		cloud = append(cloud, corev1.NodeAddress{Type: corev1.NodeHostName, Address: n.Name})
		n.Status.Addresses = cloud
		if u.NodeIP == "" {
			return
		}
		var first, rest []corev1.NodeAddress
		matched := map[corev1.NodeAddressType]bool{}
		for _, a := range cloud {
			if a.Address == u.NodeIP {
				first = append(first, a)
				matched[a.Type] = true
			}
		}
		for _, a := range cloud {
			if !matched[a.Type] {
				rest = append(rest, a)
			}
		}
		n.Status.Addresses = append(first, rest...)
	}
}

// KubeletStatus adds what a running kubelet reports besides Ready: the memory, disk and PID
// pressure conditions (False) and its daemon endpoint.
func KubeletStatus() NodeOption {
	return func(n *corev1.Node) {
		now := metav1.Now()
		for _, c := range []struct {
			t      corev1.NodeConditionType
			reason string
		}{
			{corev1.NodeMemoryPressure, "KubeletHasSufficientMemory"},
			{corev1.NodeDiskPressure, "KubeletHasNoDiskPressure"},
			{corev1.NodePIDPressure, "KubeletHasSufficientPID"},
		} {
			n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{
				Type: c.t, Status: corev1.ConditionFalse, Reason: c.reason,
				LastHeartbeatTime: now, LastTransitionTime: now,
			})
		}
		n.Status.DaemonEndpoints.KubeletEndpoint.Port = 10250
	}
}
