package common

import (
	"context"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CacheCatchUp is how long a reconcile that found the cache behind its controller's own write
// waits before it looks again.
const CacheCatchUp = 50 * time.Millisecond

// OwnWrites remembers, per Node, the last write a controller made, until its cache shows it. A
// reconcile that reads a version older than that write (a second trigger, an XO change, a
// requeue or a re-check, came before the watch delivered the write) must not write from it:
// with a lock, the patch meets a conflict; without one, it repeats a write already made. Such a
// reconcile waits CacheCatchUp instead (Behind). The zero value is ready to use.
//
// Older means a smaller resourceVersion (the API server's versions of one resource compare as
// integers, k8s.io/apimachinery's resourceversion): a write without a resourceVersion lock
// (a label patch, PatchAddresses) may land on a version this controller never read, one that
// another writer made between its read and its write; the cache may show that version before
// ours. Where versions do not compare, the versions our writes replaced are matched instead.
type OwnWrites struct {
	mu     sync.Mutex
	writes map[string]*ownWrite // Node name → our writes the cache may not show yet
}

type ownWrite struct {
	last     string   // resourceVersion of our last write
	replaced []string // resourceVersions our writes were made from
}

// Behind reports whether n, read from the cache, is older than our last write of it; when it
// is not, the Node's record is dropped: the cache has caught up.
func (w *OwnWrites) Behind(n *corev1.Node) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	o, ok := w.writes[n.Name]
	if !ok {
		return false
	}
	behind := slices.Contains(o.replaced, n.ResourceVersion)
	if c, err := resourceversion.CompareResourceVersion(n.ResourceVersion, o.last); err == nil {
		behind = c < 0
	}
	if !behind {
		delete(w.writes, n.Name)
	}
	return behind
}

// wrote records a successful write of Node name made from version from and answered with
// version to. A write that changed nothing keeps the resourceVersion and records nothing.
func (w *OwnWrites) wrote(name, from, to string) {
	if to == "" || to == from {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.writes == nil {
		w.writes = map[string]*ownWrite{}
	}
	o := w.writes[name]
	if o == nil {
		o = &ownWrite{}
		w.writes[name] = o
	}
	o.last = to
	o.replaced = append(o.replaced, from)
}

// Forget drops the record of a Node (deleted, or no longer this controller's).
func (w *OwnWrites) Forget(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.writes, name)
}

// Patch is the package's Patch, recorded when it succeeds.
func (w *OwnWrites) Patch(ctx context.Context, c client.Client, before, after *corev1.Node) error {
	return w.record(before, after, Patch(ctx, c, before, after))
}

// PatchAddresses is the package's PatchAddresses, recorded when it succeeds.
func (w *OwnWrites) PatchAddresses(ctx context.Context, c client.Client, before, after *corev1.Node) error {
	return w.record(before, after, PatchAddresses(ctx, c, before, after))
}

// record notes a write from before to after (after holds what the API server returned) unless
// it failed, and passes its error on.
func (w *OwnWrites) record(before, after *corev1.Node, err error) error {
	if err == nil {
		w.wrote(before.Name, before.ResourceVersion, after.ResourceVersion)
	}
	return err
}
