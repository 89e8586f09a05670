package cloudnode

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/controllers/labelsync"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/xosim"
)

// TestAddressesWaitForLabels: on an initialized Node whose labels are not yet what its VM
// implies, the address patch waits for cloud-node-label-sync's label patch, woken by its
// update event, and then carries the version that patch returned; without label-sync it is
// sent once labelsFirstWait has passed.
func TestAddressesWaitForLabels(t *testing.T) {
	for _, labelSync := range []bool{true, false} {
		t.Run(fmt.Sprintf("label-sync %v", labelSync), func(t *testing.T) {
			f := newFixture(t, false)
			name := nodeName(t)
			vm := f.AddVM(xosim.VMSpec{NameLabel: name, IPs: []string{"10.0.20.5"}})
			// Upstream without --node-ip: ExternalIP only; the Node gains its InternalIP.
			f.createNode(testenv.KubeletNode(name, testenv.UpstreamInitialized(testenv.UpstreamVM{
				PoolID: f.Pool, PoolName: "Pool-A", HostID: f.Host1, HostName: hostName, VMID: vm, VMName: name,
				InstanceType: "2vCPU-4GB", MainIP: "10.0.20.5",
			})))
			before := f.Get(name)
			clk := clocktesting.NewFakePassiveClock(time.Now())
			r := New(env.Client, f.Estate, f.Rec, clk, Options{Workers: 1})
			change := r.relevantChange()
			labelled := before.DeepCopy()
			labelled.Labels["example.com/team"] = "a"
			if change.Update(event.UpdateEvent{ObjectOld: before, ObjectNew: labelled}) {
				t.Error("a label change passes while no address patch waits")
			}

			if res := f.reconcileWith(r, name); res.RequeueAfter != labelsFirstWait {
				t.Errorf("first look: RequeueAfter %s, want %s", res.RequeueAfter, labelsFirstWait)
			}
			clk.SetTime(clk.Now().Add(labelsFirstWait / 2))
			if res := f.reconcileWith(r, name); res.RequeueAfter != labelsFirstWait/2 {
				t.Errorf("second look: RequeueAfter %s, want %s", res.RequeueAfter, labelsFirstWait/2)
			}
			if got := f.Get(name); got.ResourceVersion != before.ResourceVersion {
				t.Fatalf("the Node was written while its labels were pending: %v", got.Status.Addresses)
			}
			if !change.Update(event.UpdateEvent{ObjectOld: before, ObjectNew: labelled}) {
				t.Error("a label change does not wake the waiting address patch")
			}

			if labelSync {
				testenv.Reconcile(f.Ctx, t, labelsync.New(env.Client, f.Estate, f.Rec, labelsync.Options{}), name)
				if f.Get(name).Annotations[node.AnnotationManagedLabels] == "" {
					t.Fatal("label-sync did not write its ownership annotation")
				}
			} else {
				clk.SetTime(clk.Now().Add(labelsFirstWait / 2))
			}
			if res := f.reconcileWith(r, name); res.RequeueAfter != 0 {
				t.Errorf("last look: RequeueAfter %s, want none", res.RequeueAfter)
			}
			want := []corev1.NodeAddress{{Type: corev1.NodeExternalIP, Address: "10.0.20.5"}, {Type: corev1.NodeInternalIP, Address: "10.0.20.5"}, {Type: corev1.NodeHostName, Address: name}}
			if got := f.Get(name).Status.Addresses; !node.AddressesEqual(got, want) {
				t.Errorf("addresses %v, want %v", got, want)
			}
			if r.waitsForLabels(name) {
				t.Error("the Node still waits after its address patch")
			}
		})
	}
}

// reconcileWith runs one Reconcile of the Node with r.
func (f *fixture) reconcileWith(r *Reconciler, name string) ctrl.Result {
	f.T.Helper()
	return testenv.Reconcile(f.Ctx, f.T, r, name)
}
