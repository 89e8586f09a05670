package common

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/handler"
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

// NodeController is what sets one Node controller apart from the others (SetupNodeController).
type NodeController struct {
	// Name is the controller's name, as --controllers selects it.
	Name string
	// Wants is the controller's own filter (ours, not ignored, initialized...): Nodes it
	// rejects are not enqueued at all.
	Wants func(*corev1.Node) bool
	// Predicate drops the Node updates the controller has nothing to do about.
	Predicate predicate.Predicate
	// Estate is the XO inventory whose changes enqueue Nodes.
	Estate *inventory.Estate
	// Workers is the number of Nodes reconciled at once.
	Workers int
	// Resync, when positive, is the period of the backstop look at every wanted Node
	// (ResyncSource).
	Resync time.Duration
}

// SetupNodeController registers a Node controller the way all three are: the Node events
// that pass o.Wants and o.Predicate, the XO inventory changes of the Nodes that pass o.Wants
// (ChangeSource), and, when o.Resync is set, the periodic look at every one of them
// (ResyncSource).
func SetupNodeController(mgr ctrl.Manager, o NodeController, r reconcile.Reconciler) error {
	b := ctrl.NewControllerManagedBy(mgr).
		Named(o.Name).
		For(&corev1.Node{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(obj client.Object) bool {
			n, ok := obj.(*corev1.Node)
			return !ok || o.Wants(n)
		}), o.Predicate)).
		WatchesRawSource(ChangeSource(o.Estate, mgr.GetClient(), o.Wants)).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(o.Workers, 1)}).
		WithLogConstructor(reconcileLogger(lazyLogger(mgr.GetLogger()).WithValues("controller", o.Name)))
	if o.Resync > 0 {
		b = b.WatchesRawSource(ResyncSource(mgr.GetClient(), o.Resync, o.Wants))
	}
	return b.Complete(r)
}

// reconcileLogger returns the logger of each reconcile: base with the Node's name. The
// builder's default adds the Node three times, once through reflection; with base a
// lazyLogger, the values are encoded only with a line that is written.
func reconcileLogger(base logr.Logger) func(*reconcile.Request) logr.Logger {
	return func(req *reconcile.Request) logr.Logger {
		if req == nil {
			return base
		}
		return base.WithValues("node", req.Name)
	}
}

// ResyncSource returns a source that enqueues every Node that wants accepts, at low priority,
// once per period plus up to a tenth of it at random: the backstop for a change the
// controller missed. One timer per controller rather than one requeue per Node: a waiting
// requeue costs a workqueue item per Node all the time, which with thousands of Nodes is
// megabytes of memory. Low priority keeps the Nodes an event or an XO change enqueues ahead
// of the sweep.
func ResyncSource(c client.Reader, period time.Duration, wants func(*corev1.Node) bool) source.Source {
	return source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		go func() {
			logger := log.FromContext(ctx).WithName("resync")
			t := time.NewTimer(jittered(period))
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				if err := enqueue(ctx, c, q, nil, wants, handler.LowPriority); err != nil {
					logger.Error(err, "Cannot list the Nodes to look at again")
				}
				t.Reset(jittered(period))
			}
		}()
		return nil
	})
}

// jittered is period plus up to a tenth of it at random, so that the replicas and the
// controllers do not sweep in step.
func jittered(period time.Duration) time.Duration {
	return period + rand.N(period/10+1)
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
				if err := enqueue(ctx, c, q, sel, wants, 0); err != nil {
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

// enqueue adds the Nodes that sel selects (all when nil) and wants accepts to q, with the given
// priority when q is controller-runtime's priority queue.
func enqueue(ctx context.Context, c client.Reader, q workqueue.TypedRateLimitingInterface[reconcile.Request], sel client.ListOption, wants func(*corev1.Node) bool, priority int) error {
	var nodes corev1.NodeList
	// The cached objects are only read: they need no copy.
	opts := []client.ListOption{client.UnsafeDisableDeepCopy}
	if sel != nil {
		opts = append(opts, sel)
	}
	if err := c.List(ctx, &nodes, opts...); err != nil {
		return err
	}
	pq, prioritized := q.(priorityqueue.PriorityQueue[reconcile.Request])
	for i := range nodes.Items {
		if !wants(&nodes.Items[i]) {
			continue
		}
		req := reconcile.Request{NamespacedName: types.NamespacedName{Name: nodes.Items[i].Name}}
		if prioritized && priority != 0 {
			pq.AddWithOpts(priorityqueue.AddOpts{Priority: &priority}, req)
		} else {
			q.Add(req)
		}
	}
	return nil
}
