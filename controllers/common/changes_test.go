package common

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/inventory"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
)

// TestEnqueueChange maps XO changes to Nodes through a client-go store with the indexes of
// SetupIndexes: a VM change reaches its own Node and the unresolved ones, not the Node of
// another VM in the same IndexVM bucket; host and pool changes reach their Nodes (a pool's
// change both the Nodes whose providerID names it and those whose VM moved there); wants
// filters every one.
func TestEnqueueChange(t *testing.T) {
	const (
		pool  = "0a1b2c3d-0000-4000-8000-000000000001"
		other = "0a1b2c3d-0000-4000-8000-000000000002"
		vmA   = "ab000000-0000-4000-8000-00000000000a"
		vmB   = "ab000000-0000-4000-8000-00000000000b" // vmA's bucket
		vmC   = "cd000000-0000-4000-8000-00000000000c"
		host  = "11111111-0000-4000-8000-000000000001"
	)
	mk := func(name, providerID string, labels map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{ProviderID: providerID}}
	}
	store := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, nodeIndexers())
	for _, n := range []*corev1.Node{
		mk("a", node.FormatProviderID(pool, vmA), map[string]string{node.LabelHostID: host}),
		mk("b", node.FormatProviderID(pool, vmB), nil),
		mk("c", node.FormatProviderID(other, vmC), map[string]string{node.LabelHostID: host}),
		// Moved from pool to other: the providerID keeps pool, the label follows the VM.
		mk("moved", node.FormatProviderID(pool, "ef000000-0000-4000-8000-00000000000e"), map[string]string{node.LabelPoolID: other}),
		mk("unresolved", "", nil),
		mk("unwanted", node.FormatProviderID(pool, "ab000000-0000-4000-8000-0000000000ff"), map[string]string{node.LabelHostID: host}),
		mk("other-provider", "aws:///us-east-1a/i-0123", nil),
	} {
		if err := store.Add(n); err != nil {
			t.Fatal(err)
		}
	}
	wants := func(n *corev1.Node) bool { return n.Name != "unwanted" }
	for _, tc := range []struct {
		ch   inventory.Change
		want []string
	}{
		{inventory.Change{Kind: inventory.VMChanged, ID: vmA}, []string{"a", "unresolved"}},
		{inventory.Change{Kind: inventory.VMChanged, ID: vmC}, []string{"c", "unresolved"}},
		{inventory.Change{Kind: inventory.VMChanged, ID: "ab000000-0000-4000-8000-0000000000ff"}, []string{"unresolved"}},
		{inventory.Change{Kind: inventory.VMChanged, ID: "ef000000-0000-4000-8000-000000000000"}, []string{"unresolved"}},
		{inventory.Change{Kind: inventory.HostChanged, ID: host}, []string{"a", "c"}},
		{inventory.Change{Kind: inventory.PoolChanged, ID: pool}, []string{"a", "b", "moved", "unresolved"}},
		{inventory.Change{Kind: inventory.PoolChanged, ID: other}, []string{"c", "moved", "unresolved"}},
	} {
		q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
		if err := enqueueChange(q, store, tc.ch, wants); err != nil {
			t.Fatalf("%s %s: %v", tc.ch.Kind, tc.ch.ID, err)
		}
		var got []string
		for q.Len() > 0 {
			req, _ := q.Get()
			got = append(got, req.Name)
			q.Done(req)
		}
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s %s enqueued %v, want %v", tc.ch.Kind, tc.ch.ID, got, tc.want)
		}
		q.ShutDown()
	}
}
