package common

import (
	"context"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CacheCatchUp is how long a reconcile that found the cache behind its controller's own write
// waits before it looks again.
const CacheCatchUp = 50 * time.Millisecond

// OwnWrites remembers, per Node, the versions a controller's own writes replaced, until its
// cache shows a version that is none of them. A reconcile that reads a replaced version (a
// second trigger, an XO change or a re-check, came before the watch delivered the write) must
// not write from it: with a taint change, the patch carries that stale resourceVersion and
// meets a 409 Conflict; without one, it repeats a write already made. Such a reconcile waits
// CacheCatchUp instead (Behind). The zero value is ready to use.
type OwnWrites struct {
	mu       sync.Mutex
	replaced map[string][]string // Node name → resourceVersions replaced by our writes
}

// Behind reports whether n, read from the cache, is a version one of our writes replaced; when
// it is not, the Node's record is dropped: the cache has caught up.
func (w *OwnWrites) Behind(n *corev1.Node) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	rvs, ok := w.replaced[n.Name]
	if !ok {
		return false
	}
	if slices.Contains(rvs, n.ResourceVersion) {
		return true
	}
	delete(w.replaced, n.Name)
	return false
}

// wrote records a successful write of Node name that replaced version from by version to. A
// write that changed nothing keeps the resourceVersion and records nothing.
func (w *OwnWrites) wrote(name, from, to string) {
	if to == "" || to == from {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.replaced == nil {
		w.replaced = map[string][]string{}
	}
	w.replaced[name] = append(w.replaced[name], from)
}

// Forget drops the record of a Node (deleted, or no longer this controller's).
func (w *OwnWrites) Forget(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.replaced, name)
}

// Patch is the package's Patch, recorded when it succeeds.
func (w *OwnWrites) Patch(ctx context.Context, c client.Client, before, after *corev1.Node) error {
	return w.record(before, after, Patch(ctx, c, before, after))
}

// PatchStatus is the package's PatchStatus, recorded when it succeeds.
func (w *OwnWrites) PatchStatus(ctx context.Context, c client.Client, before, after *corev1.Node) error {
	return w.record(before, after, PatchStatus(ctx, c, before, after))
}

// record notes a write from before to after (after holds what the API server returned) unless
// it failed, and passes its error on.
func (w *OwnWrites) record(before, after *corev1.Node, err error) error {
	if err == nil {
		w.wrote(before.Name, before.ResourceVersion, after.ResourceVersion)
	}
	return err
}
