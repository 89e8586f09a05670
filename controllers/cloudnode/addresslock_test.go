package cloudnode

import (
	"context"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/controllers/common"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/controllers/labelsync"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/xosim"
)

// TestAddressPatchLocksAddressesOnly: the address patch of an initialized Node, computed from
// a version read before cloud-node-label-sync's label patch landed, is applied on top of it
// (no conflict, the labels kept); computed from a version whose addresses someone changed
// since, or from a Node deleted and created again since, it is refused as a Conflict and
// changes nothing.
func TestAddressPatchLocksAddressesOnly(t *testing.T) {
	f := newFixture(t, false)
	name := nodeName(t)
	vm := f.AddVM(xosim.VMSpec{NameLabel: name, IPs: []string{"10.0.20.5"}})
	// Upstream without --node-ip: ExternalIP only; the Node gains its InternalIP.
	upstream := testenv.KubeletNode(name, testenv.UpstreamInitialized(testenv.UpstreamVM{
		PoolID: f.Pool, PoolName: "Pool-A", HostID: f.Host1, HostName: hostName, VMID: vm, VMName: name,
		InstanceType: "2vCPU-4GB", MainIP: "10.0.20.5",
	}))
	f.createNode(upstream.DeepCopy())
	read := f.Get(name)
	xoVM := f.Estate.View().VM(vm)

	testenv.Reconcile(f.Ctx, t, labelsync.New(env.Client, f.Estate, f.Rec, clock.RealClock{}, labelsync.Options{}), name)
	labelled := f.Get(name)
	if labelled.ResourceVersion == read.ResourceVersion || labelled.Annotations[node.AnnotationManagedLabels] == "" {
		t.Fatal("label-sync did not patch the Node")
	}
	if _, changed, err := f.r.patchAddresses(f.Ctx, read, xoVM); err != nil || !changed {
		t.Fatalf("address patch from the version before the label patch: changed %v, error %v", changed, err)
	}
	got := f.Get(name)
	want := []corev1.NodeAddress{{Type: corev1.NodeExternalIP, Address: "10.0.20.5"}, {Type: corev1.NodeInternalIP, Address: "10.0.20.5"}, {Type: corev1.NodeHostName, Address: name}}
	if !node.AddressesEqual(got.Status.Addresses, want) {
		t.Errorf("addresses %v, want %v", got.Status.Addresses, want)
	}
	if got.Annotations[node.AnnotationManagedLabels] != labelled.Annotations[node.AnnotationManagedLabels] || got.Labels[node.LabelVMName] != name {
		t.Errorf("the label patch was undone: %v %v", got.Labels, got.Annotations)
	}

	// Someone else changes the addresses after cloud-node read them: cloud-node's patch,
	// computed from what it read, must not erase that change.
	stale := got.DeepCopy()
	stale.Status.Addresses = upstream.Status.Addresses
	changed := got.DeepCopy()
	changed.Status.Addresses = append(changed.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "203.0.113.7"})
	if err := env.Client.Status().Patch(f.Ctx, changed, client.MergeFrom(got)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.r.patchAddresses(f.Ctx, stale, xoVM); !apierrors.IsConflict(err) {
		t.Errorf("address patch over changed addresses: error %v, want a Conflict", err)
	}
	if now := f.Get(name).Status.Addresses; !node.AddressesEqual(now, changed.Status.Addresses) {
		t.Errorf("addresses %v after the refused patch, want %v", now, changed.Status.Addresses)
	}

	// The Node deleted and created again with the addresses cloud-node read.
	if err := env.Client.Delete(f.Ctx, f.Get(name)); err != nil {
		t.Fatal(err)
	}
	f.createNode(upstream.DeepCopy())
	stale = upstream.DeepCopy()
	stale.UID, stale.ResourceVersion = read.UID, read.ResourceVersion
	if _, _, err := f.r.patchAddresses(f.Ctx, stale, xoVM); !apierrors.IsConflict(err) {
		t.Errorf("address patch of a Node created again: error %v, want a Conflict", err)
	}
	if now := f.Get(name).Status.Addresses; !node.AddressesEqual(now, upstream.Status.Addresses) {
		t.Errorf("addresses %v of the new Node, want %v", now, upstream.Status.Addresses)
	}
}

// TestNoAddressWriteFromACacheBehind: after its address patch, a reconcile that reads a version
// older than that patch from the cache (the patch's own starting point, or the label patch it
// landed on) waits for the cache instead of writing the addresses again.
func TestNoAddressWriteFromACacheBehind(t *testing.T) {
	f := newFixture(t, false)
	name := nodeName(t)
	vm := f.AddVM(xosim.VMSpec{NameLabel: name, IPs: []string{"10.0.21.5"}})
	f.createNode(testenv.KubeletNode(name, testenv.UpstreamInitialized(testenv.UpstreamVM{
		PoolID: f.Pool, PoolName: "Pool-A", HostID: f.Host1, HostName: hostName, VMID: vm, VMName: name,
		InstanceType: "2vCPU-4GB", MainIP: "10.0.21.5",
	})))
	read := f.Get(name)
	testenv.Reconcile(f.Ctx, t, labelsync.New(env.Client, f.Estate, f.Rec, clock.RealClock{}, labelsync.Options{}), name)
	labelled := f.Get(name)

	// The cache: the version read before both patches, until the test moves it on.
	var cached atomic.Pointer[corev1.Node]
	cached.Store(read)
	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	c = interceptor.NewClient(c, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if n, ok := obj.(*corev1.Node); ok && key.Name == name && cached.Load() != nil {
				cached.Load().DeepCopyInto(n)
				return nil
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	r := New(c, f.Estate, f.Rec, clock.RealClock{}, Options{Workers: 1})
	testenv.Reconcile(f.Ctx, t, r, name)
	written := f.Get(name)
	if written.ResourceVersion == labelled.ResourceVersion {
		t.Fatal("the addresses were not written")
	}
	for _, stale := range []*corev1.Node{read, labelled} {
		cached.Store(stale)
		if res := testenv.Reconcile(f.Ctx, t, r, name); res.RequeueAfter != common.CacheCatchUp {
			t.Errorf("cache at %s, behind the address patch (%s): RequeueAfter %s, want %s",
				stale.ResourceVersion, written.ResourceVersion, res.RequeueAfter, common.CacheCatchUp)
		}
		if got := f.Get(name); got.ResourceVersion != written.ResourceVersion {
			t.Errorf("cache at %s: the Node was written again (%s → %s)", stale.ResourceVersion, written.ResourceVersion, got.ResourceVersion)
		}
	}
	cached.Store(nil) // caught up
	if res := testenv.Reconcile(f.Ctx, t, r, name); res.RequeueAfter != 0 {
		t.Errorf("cache caught up: RequeueAfter %s, want none", res.RequeueAfter)
	}
	if got := f.Get(name); got.ResourceVersion != written.ResourceVersion {
		t.Errorf("cache caught up: the Node was written again")
	}
}
