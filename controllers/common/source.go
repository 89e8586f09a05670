package common

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/inventory"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
)

// Field indexes on Nodes, registered once per manager by SetupIndexes.
const (
	// IndexVM maps a Node to the uuid of its VM, from an xenorchestra providerID.
	IndexVM = "xenorchestra.vm"
	// IndexPool maps a Node to its pool uuid, from the providerID (or the pool_id label).
	IndexPool = "xenorchestra.pool"
	// IndexHost maps a Node to the host its VM runs on, from the host_id label.
	IndexHost = "xenorchestra.host"
	// IndexUnresolved holds "true" for Nodes without a providerID: any new VM may be theirs.
	IndexUnresolved = "xenorchestra.unresolved"
)

// SetupIndexes registers the Node field indexes the change source uses.
func SetupIndexes(ctx context.Context, mgr ctrl.Manager) error {
	idx := mgr.GetFieldIndexer()
	for name, fn := range map[string]client.IndexerFunc{
		IndexVM: func(o client.Object) []string {
			if _, vm, err := node.ParseProviderID(o.(*corev1.Node).Spec.ProviderID); err == nil {
				return []string{vm}
			}
			return nil
		},
		IndexPool: func(o client.Object) []string {
			n := o.(*corev1.Node)
			if pool, _, err := node.ParseProviderID(n.Spec.ProviderID); err == nil && pool != "" {
				return []string{pool}
			}
			if p := n.Labels[node.LabelPoolID]; p != "" {
				return []string{p}
			}
			return nil
		},
		IndexHost: func(o client.Object) []string {
			if h := o.(*corev1.Node).Labels[node.LabelHostID]; h != "" {
				return []string{h}
			}
			return nil
		},
		IndexUnresolved: func(o client.Object) []string {
			if o.(*corev1.Node).Spec.ProviderID == "" {
				return []string{"true"}
			}
			return nil
		},
	} {
		if err := idx.IndexField(ctx, &corev1.Node{}, name, fn); err != nil {
			return fmt.Errorf("index nodes by %s: %w", name, err)
		}
	}
	return nil
}

// SetupNodeController registers a Node controller the way all three are: the Node events
// that pass pred, and the XO inventory changes (ChangeSource) of the Nodes that pass wants,
// with workers concurrent reconciles. wants is the controller's own filter (ours, not ignored,
// initialized...): Nodes it rejects are not enqueued at all.
func SetupNodeController(mgr ctrl.Manager, name string, wants func(*corev1.Node) bool, pred predicate.Predicate, estate *inventory.Estate, workers int, r reconcile.Reconciler) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(name).
		For(&corev1.Node{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			n, ok := o.(*corev1.Node)
			return !ok || wants(n)
		}), pred)).
		WatchesRawSource(ChangeSource(estate, mgr.GetClient(), wants)).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(workers, 1)}).
		Complete(r)
}

// changeBuffer bounds the changes waiting to be mapped to Nodes. When it is full (a relist
// after an outage can change every VM at once) further changes collapse into one resync of
// every Node, which is what they would amount to.
const changeBuffer = 4096

// ChangeSource returns a source that enqueues the Nodes an XO inventory change concerns and
// wants accepts: the Node of a changed VM (through IndexVM), the Nodes on a changed host or
// pool, and, for a VM change, the Nodes not yet tied to any VM. It lets an XO event reach the
// right Node in milliseconds without listing anything. A pool change also wakes the Nodes not
// yet tied to any VM: its settling may be what their name or address match waited for.
func ChangeSource(estate *inventory.Estate, c client.Reader, wants func(*corev1.Node) bool) source.Source {
	return source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		changes := make(chan inventory.Change, changeBuffer)
		overflow := make(chan struct{}, 1)
		estate.AddHandler(func(ch inventory.Change) {
			select {
			case changes <- ch:
			default:
				select {
				case overflow <- struct{}{}:
				default:
				}
			}
		})
		go func() {
			logger := log.FromContext(ctx).WithName("xo-changes")
			mapped := func(ch inventory.Change, sel client.ListOption) {
				if err := enqueue(ctx, c, q, sel, wants); err != nil {
					logger.Error(err, "Cannot map an XO change to Nodes", "kind", ch.Kind.String(), "id", ch.ID)
				}
			}
			for {
				select {
				case <-ctx.Done():
					return
				case <-overflow:
					mapped(inventory.Change{}, nil)
				case ch := <-changes:
					switch ch.Kind {
					case inventory.VMChanged:
						mapped(ch, client.MatchingFields{IndexVM: ch.ID})
						mapped(ch, client.MatchingFields{IndexUnresolved: "true"})
					case inventory.HostChanged:
						mapped(ch, client.MatchingFields{IndexHost: ch.ID})
					case inventory.PoolChanged:
						// A pool that settles can make a name or address match trusted.
						mapped(ch, client.MatchingFields{IndexPool: ch.ID})
						mapped(ch, client.MatchingFields{IndexUnresolved: "true"})
					}
				}
			}
		}()
		return nil
	})
}

func enqueue(ctx context.Context, c client.Reader, q workqueue.TypedRateLimitingInterface[reconcile.Request], sel client.ListOption, wants func(*corev1.Node) bool) error {
	var nodes corev1.NodeList
	// The cached objects are only read: they need no copy.
	opts := []client.ListOption{client.UnsafeDisableDeepCopy}
	if sel != nil {
		opts = append(opts, sel)
	}
	if err := c.List(ctx, &nodes, opts...); err != nil {
		return err
	}
	for i := range nodes.Items {
		if wants(&nodes.Items[i]) {
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: nodes.Items[i].Name}})
		}
	}
	return nil
}
