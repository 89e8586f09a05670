package common

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/inventory"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
)

// Indexes of the Node informer, registered once per manager by SetupIndexes.
const (
	// IndexVM maps a Node to the bucket (vmBucket) of its VM's uuid, from an xenorchestra
	// providerID.
	IndexVM = "xenorchestra.vm"
	// IndexPool maps a Node to its pool uuids: the providerID's, and the pool_id label's when
	// it differs (a VM moved to another pool keeps its providerID; label-sync follows it).
	IndexPool = "xenorchestra.pool"
	// IndexHost maps a Node to the host its VM runs on, from the host_id label.
	IndexHost = "xenorchestra.host"
	// IndexUnresolved holds "true" for Nodes without a providerID: any new VM may be theirs.
	IndexUnresolved = "xenorchestra.unresolved"
)

// vmBucket is IndexVM's value for a VM uuid: its first two characters, so 256 buckets of
// random uuids. An index keeps a set of Node names per value: one value per Node, as the
// uuid itself would be, costs some 300 bytes a Node (1.5 MB with 5,000 Nodes), a bucket some
// 20. A VM change then looks at the providerIDs of the bucket's few Nodes.
func vmBucket(vm string) string { return vm[:min(2, len(vm))] }

// SetupIndexes registers on the Node informer the indexes the change source reads.
func SetupIndexes(ctx context.Context, mgr ctrl.Manager) error {
	inf, err := nodeInformer(ctx, mgr)
	if err != nil {
		return err
	}
	if err := inf.AddIndexers(nodeIndexers()); err != nil {
		return fmt.Errorf("index nodes: %w", err)
	}
	return nil
}

// nodeIndexers are the indexes SetupIndexes registers.
func nodeIndexers() toolscache.Indexers {
	return toolscache.Indexers{
		IndexVM: nodeIndex(func(n *corev1.Node) string {
			if _, vm, err := node.ParseProviderID(n.Spec.ProviderID); err == nil {
				return vmBucket(vm)
			}
			return ""
		}),
		IndexPool: func(obj any) ([]string, error) {
			n, ok := obj.(*corev1.Node)
			if !ok {
				return nil, nil
			}
			var pools []string
			if pool, _, err := node.ParseProviderID(n.Spec.ProviderID); err == nil && pool != "" {
				pools = append(pools, pool)
			}
			if l := n.Labels[node.LabelPoolID]; l != "" && !slices.Contains(pools, l) {
				pools = append(pools, l)
			}
			return pools, nil
		},
		IndexHost: nodeIndex(func(n *corev1.Node) string { return n.Labels[node.LabelHostID] }),
		IndexUnresolved: nodeIndex(func(n *corev1.Node) string {
			if n.Spec.ProviderID == "" {
				return "true"
			}
			return ""
		}),
	}
}

// nodeIndex is an index function of Nodes with at most one value, none when value returns "".
func nodeIndex(value func(*corev1.Node) string) toolscache.IndexFunc {
	return func(obj any) ([]string, error) {
		if n, ok := obj.(*corev1.Node); ok {
			if v := value(n); v != "" {
				return []string{v}, nil
			}
		}
		return nil, nil
	}
}

// nodeInformer returns mgr's Node informer as client-go's, for its indexes and its store. The
// sources read the store in place: they need only names, and a List through the client copies
// every Node it returns (4 MB for the 5,000 Nodes of a pool or a periodic look).
func nodeInformer(ctx context.Context, mgr ctrl.Manager) (toolscache.SharedIndexInformer, error) {
	inf, err := mgr.GetCache().GetInformer(ctx, &corev1.Node{}, cache.BlockUntilSynced(false))
	if err != nil {
		return nil, fmt.Errorf("get the Node informer: %w", err)
	}
	sii, ok := inf.(toolscache.SharedIndexInformer)
	if !ok {
		return nil, fmt.Errorf("the Node informer is a %T, not a client-go SharedIndexInformer", inf)
	}
	return sii, nil
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
	// Clock times Resync; nil is the real clock.
	Clock clock.Clock
	// Created, when set, is told of every Node created while the controller runs (not of
	// those it finds at its start, after a restart or a change of leader), as the cache
	// shows it, whether the controller wants it or not: so cloud-node counts the Nodes the
	// webhook initialized at CREATE, which it never writes.
	Created func(*corev1.Node)
}

// SetupNodeController registers a Node controller the way all three are: the Node events
// that pass o.Wants and o.Predicate, the XO inventory changes of the Nodes that pass o.Wants
// (ChangeSource), and, when o.Resync is set, the periodic look at every one of them
// (ResyncSource).
func SetupNodeController(mgr ctrl.Manager, o NodeController, r reconcile.Reconciler) error {
	inf, err := nodeInformer(context.Background(), mgr)
	if err != nil {
		return err
	}
	nodes := inf.GetIndexer()
	b := ctrl.NewControllerManagedBy(mgr).
		Named(o.Name).
		For(&corev1.Node{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(obj client.Object) bool {
			n, ok := obj.(*corev1.Node)
			return !ok || o.Wants(n)
		}), o.Predicate)).
		WatchesRawSource(ChangeSource(o.Estate, nodes, o.Wants)).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(o.Workers, 1)}).
		WithLogConstructor(reconcileLogger(lazyLogger(mgr.GetLogger()).WithValues("controller", o.Name)))
	if o.Created != nil {
		b = b.Watches(&corev1.Node{}, handler.Funcs{
			CreateFunc: func(_ context.Context, e event.CreateEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				if n, ok := e.Object.(*corev1.Node); ok && !e.IsInInitialList {
					o.Created(n)
				}
			},
		})
	}
	if o.Resync > 0 {
		clk := o.Clock
		if clk == nil {
			clk = clock.RealClock{}
		}
		b = b.WatchesRawSource(ResyncSource(nodes, o.Resync, o.Wants, clk))
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
func ResyncSource(nodes toolscache.Indexer, period time.Duration, wants func(*corev1.Node) bool, clk clock.Clock) source.Source {
	return source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		go func() {
			logger := log.FromContext(ctx).WithName("resync")
			t := clk.NewTimer(jittered(period))
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C():
				}
				if err := enqueue(q, nodes, "", "", wants, handler.LowPriority); err != nil {
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
// wants accepts (read from the Node informer's store nodes, with the indexes of SetupIndexes):
// the Node of a changed VM (through IndexVM), the Nodes on a changed host or
// pool, and, for a VM change, the Nodes not yet tied to any VM. It lets an XO event reach the
// right Node in milliseconds without listing anything. A pool change also wakes the Nodes not
// yet tied to any VM: its settling may be what their name or address match waited for.
func ChangeSource(estate *inventory.Estate, nodes toolscache.Indexer, wants func(*corev1.Node) bool) source.Source {
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
			for {
				select {
				case <-ctx.Done():
					return
				case <-overflow:
					if err := enqueue(q, nodes, "", "", wants, 0); err != nil {
						logger.Error(err, "Cannot list the Nodes to look at again")
					}
				case ch := <-changes:
					if err := enqueueChange(q, nodes, ch, wants); err != nil {
						logger.Error(err, "Cannot map an XO change to Nodes", "kind", ch.Kind.String(), "id", ch.ID)
					}
				}
			}
		}()
		return nil
	})
}

// enqueueChange adds to q the Nodes of nodes that ch concerns and wants accepts (see
// ChangeSource).
func enqueueChange(q workqueue.TypedRateLimitingInterface[reconcile.Request], nodes toolscache.Indexer, ch inventory.Change, wants func(*corev1.Node) bool) error {
	var errs []error
	add := func(index, value string, match func(*corev1.Node) bool) {
		errs = append(errs, enqueue(q, nodes, index, value, match, 0))
	}
	switch ch.Kind {
	case inventory.VMChanged:
		add(IndexVM, vmBucket(ch.ID), func(n *corev1.Node) bool {
			_, vm, err := node.ParseProviderID(n.Spec.ProviderID)
			return err == nil && vm == ch.ID && wants(n)
		})
		add(IndexUnresolved, "true", wants)
	case inventory.HostChanged:
		add(IndexHost, ch.ID, wants)
	case inventory.PoolChanged:
		// A pool that settles can make a name or address match trusted.
		add(IndexPool, ch.ID, wants)
		add(IndexUnresolved, "true", wants)
	}
	return errors.Join(errs...)
}

// enqueue adds to q the Nodes of nodes whose index holds value (all when index is "") and
// that match accepts, with the given priority when q is controller-runtime's priority queue.
// The Nodes are the informer's own: read, never changed.
func enqueue(q workqueue.TypedRateLimitingInterface[reconcile.Request], nodes toolscache.Indexer, index, value string, match func(*corev1.Node) bool, priority int) error {
	var objs []any
	if index == "" {
		objs = nodes.List()
	} else {
		var err error
		if objs, err = nodes.ByIndex(index, value); err != nil {
			return err
		}
	}
	pq, prioritized := q.(priorityqueue.PriorityQueue[reconcile.Request])
	for _, obj := range objs {
		n, ok := obj.(*corev1.Node)
		if !ok || !match(n) {
			continue
		}
		req := reconcile.Request{NamespacedName: types.NamespacedName{Name: n.Name}}
		if prioritized && priority != 0 {
			pq.AddWithOpts(priorityqueue.AddOpts{Priority: &priority}, req)
		} else {
			q.Add(req)
		}
	}
	return nil
}
